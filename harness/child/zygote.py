"""The warm template for batch grading: torch imported once, a fresh child forked for every submission.

Runs our code only (never a submission's) in its own process; `harness.sandbox.pool.Zygote` talks to it over a
SOCK_SEQPACKET control socket.  For each submission it forks a child that drops into its own session, writes its
prints to the submission's log, confines itself with the policy it was sent (`harness.sandbox.confine`: the slot's
uid, no capabilities, hard limits, its own PID, network and mount namespaces with a read-only view of nothing but
the interpreter, mha-check and its scratch copy of the submission), reports what is in force on the status pipe
it was handed, and only then serves the protocol on its socket (`harness.child.worker.serve_forked`).  The
zygote is also a child subreaper: whatever a submission leaves behind (possible only without a PID namespace)
becomes the zygote's child and is killed when the submission is over.  It holds no expected value and no reference
result: there is nothing in its memory for a forked submission to read, and the child cannot see it anyway.

A zygote is started on its own (`main`: one torch import each), or forked from the batch's template (`template`:
one torch import for every zygote of a `grade` run or a `ZygotePool`), which is the same code, warmed the same way.

Nothing of it outlives its grader, stopped or not (a stopped process reads no end of its socket, but SIGKILL reaches
it): a zygote started on its own dies with its grader, one forked from the template dies with the template and is
ended by it soon after its grader (`_Forked`), and each child dies with its zygote (PR_SET_PDEATHSIG).
"""
from __future__ import annotations

import array
import contextlib
import ctypes
import gc
import json
import os
import select
import signal
import socket
import struct
import sys
import tempfile
import time

from harness.child import worker  # imports torch (one thread) once, for every forked child to inherit
from harness.sandbox.confine import confine
from harness.sandbox.policy import Policy
from harness.sandbox.syscalls import (children, die_with_parent, forget_parent, fork_dying_with_parent, parent_watch,
                                      status_fields, until_exited)
from harness.wire.control import META_ZYGOTE, ZYGOTE

PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _reap_leftovers(seconds: float = 2.0) -> int:
    """Kill and reap every remaining child: they can only be leftovers of the submission just finished."""
    killed, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        kids = children()
        if not kids:
            break
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        for pid in kids:
            until_exited(pid, end, fallback=0.01)
        _reap_all()
    return killed


def _reap_all() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _status(raw: int) -> int:
    return -os.WTERMSIG(raw) if os.WIFSIGNALED(raw) else os.WEXITSTATUS(raw)


def _wait(pid: int, timeout: float):
    """Its status and CPU seconds (the relay waits for the namespace's pid 1, which waits for the worker: the
    worker's CPU time adds up to here), then every leftover of the submission killed."""
    end = time.monotonic() + timeout
    while True:
        try:
            done, raw, usage = os.wait4(pid, os.WNOHANG)
        except ChildProcessError:
            return {"status": None, "gone": True}
        if done:
            return {"status": _status(raw), "cpu": usage.ru_utime + usage.ru_stime,
                    "leftovers_killed": _reap_leftovers()}
        if time.monotonic() >= end:
            return {"status": None}
        until_exited(pid, end)


def _child(channel: int, log: int, status: int, request: dict, control: socket.socket) -> None:
    """In the forked child: cut loose from the zygote, confine itself, then serve one submission.  It dies with the
    zygote (SIGKILL from the kernel): a zygote killed while stopped (see `_Forked`) cannot kill it, and with a PID
    namespace this process is the relay, whose death ends the namespace and the submission in it."""
    try:
        os.setsid()
        control.close()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        keep = {0, 1, 2, channel, status, parent_watch()}  # the zygote's watch, until confinement ends
        for fd in map(int, os.listdir("/proc/self/fd")):
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
        sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
        sys.stdin = open(os.devnull)
        confine(Policy.from_json(request["policy"]), status)  # returns in the confined process (pid 2 inside)
    except BaseException as e:  # noqa: BLE001 - never return into the zygote's loop, never run the submission
        os.write(2, f"mha-check: confinement failed: {type(e).__name__}: {e}\n".encode(errors="replace"))
        os._exit(126)
    worker.serve_forked(channel)


def _warm_up() -> None:
    """Pay the lazy first-use costs once, here, instead of in every forked child: vectorised backward passes (for
    Jacobians), then a rehearsal of every kind of request on a causal layer (`harness.warmup.rehearsal`).  (Not the
    meta device: its 0.7 s of imports is needed only by the few submissions that build tensors without device=,
    and would delay every grader's start.)  Last, the warm heap is frozen out of the garbage collector's reach
    (`_freeze_heap`), once the rehearsal's layer is gone (`_forget_rehearsal`)."""
    worker.warm_batched_jacobian()
    _forget_rehearsal(lambda rehearsal: rehearsal.rehearse())
    _freeze_heap()
    _huge_pages()


def _forget_rehearsal(rehearse) -> None:
    """Import the rehearsal, run `rehearse(module)` and leave nothing of it for a forked submission to find: its
    module (a layer a token from right, in a package hidden from the child's view: `harness.warmup`) is imported
    here and nowhere else, so no name of ours holds it, and it leaves sys.modules and its package's namespace;
    its layer class, made anew for each rehearsal, is collected with it (a class is part of reference cycles, and
    a frozen heap would keep it, listed by nn.Module.__subclasses__(), in every child).  The collector is off
    while the rehearsal runs, so everything it made is still in the youngest generation, and collecting that one
    alone finds the class and the module: a full collection would walk torch's whole heap (2.4 s on a loaded
    machine).  The meta template imports it once more for its own rehearsal (from the page cache: milliseconds)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        from harness.warmup import rehearsal  # noqa: PLC0415 - start-up: for the rehearsal alone, forgotten below
        rehearse(rehearsal)
        del rehearsal
    finally:
        for name in [n for n in sys.modules if n == "harness.warmup" or n.startswith("harness.warmup.")]:
            del sys.modules[name]
        sys.modules["harness"].__dict__.pop("warmup", None)
        gc.collect(0)
        if was_enabled:
            gc.enable()


def _freeze_heap() -> None:
    """Every object alive now moves to the collector's permanent generation, so that no child's collection walks
    them.  A walk touches each object's header, and in a forked child every touched page is copied.  Ordinary
    children rarely run a full collection, but a submission that needs the meta device imports torch._dynamo,
    whose 100,000 new objects trigger several: measured on a child forked from the warm template, the first meta
    forward 0.75 -> 0.55 s of CPU and 28,900 -> 21,500 page faults.  No collection first: the warm-up leaves
    about 700 unreachable objects, and finding them would take 0.1 s of every batch's start."""
    gc.freeze()


MADV_HUGEPAGE, MADV_COLLAPSE = 14, 25
HUGE_PAGE = 2 << 20


def _huge_pages() -> None:
    """Move the warm heap (about 180 MB of anonymous memory once torch is imported) into transparent huge pages.
    Every submission costs three forks of this process and three exits, and each copies or drops one page-table
    entry per 4 kB page: about 7 ms of kernel time each.  With 2 MB pages a fork copies one entry where it copied
    512; a child that writes to one splits only that huge page.  Measured on this machine: a fork and exit of the
    warm process 17.6 -> 4.2 ms, with a small forward and backward in the child 27.9 -> 11.1 ms; a batch of 50
    submissions 11.4 -> 10.5 s (8 alternating rounds), for about 0.17 s here, once.  glibc's malloc already asked
    for huge pages (HUGE_PAGE_MALLOC in harness.sandbox.template); MADV_COLLAPSE (Linux 6.1) converts the rest, Python's
    own arenas included.  Best effort: an older kernel, or THP switched off, refuses and nothing changes."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        with open("/proc/self/maps") as f:
            regions = [line.split() for line in f]
    except (OSError, AttributeError):
        return
    for fields in regions:
        start, end = (int(x, 16) for x in fields[0].split("-"))
        anonymous = len(fields) < 6 or fields[5] == "[heap]"
        if fields[1] == "rw-p" and anonymous and end - start >= HUGE_PAGE:
            libc.madvise(start, end - start, MADV_HUGEPAGE)
            libc.madvise(start, end - start, MADV_COLLAPSE)


def main(control_fd: int) -> None:
    """A zygote started on its own: torch imported and warmed here, then the zygote's loop.  It ends as a forked one
    does (os._exit), without the interpreter's shutdown: tearing torch's modules down took the zygote 0.1 to 0.3 s
    after its grader had gone, and nothing of ours needs it.  It dies with the thread that started it (its grader's),
    stopped or not: a stopped zygote never reads the end of its control socket."""
    die_with_parent(signal.SIGKILL)
    _warm_up()
    try:
        _serve(control_fd)
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(0)


def template(control_fd: int) -> None:
    """One warm torch import for several zygotes (`harness.sandbox.template.Template`): every message on the control
    socket carries one end of a fresh socket pair, and a zygote forked from this process serves it.  It reads
    requests, never replies (several graders share the socket; SOCK_SEQPACKET keeps their messages whole), and it
    ends when every holder of the other end has closed it.  It runs only our code.  Its zygotes die with it, and each
    ends soon after the process that asked for it (`_Forked`, which reaps them; where the kernel has no pidfds they
    are not watched, and the kernel reaps them: SIGCHLD ignored).

    A request for a META_ZYGOTE is passed on to the meta template, a fork of this process made at the first such
    request (`_meta_template`): its zygotes' children have the meta device warm."""
    die_with_parent(signal.SIGKILL)  # it ends with the process that started it
    control = socket.socket(fileno=control_fd)
    control.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # each request carries who sent it (set by the
    # launcher too, for requests sent before this line runs)
    _warm_up()
    if not _Forked.possible():
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    _serve_templates(control, meta_allowed=True)


ASKER_GONE_SECONDS = 5.0  # a zygote whose asker (its grader) has ended: time to end on its own, as it does once it
# reads the end of its control socket (killing what its submission left), before the template kills it


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (OSError, AttributeError):  # gone, or a kernel without pidfds (before Linux 5.3)
        return None


def _send(pidfd: int, sig: int) -> None:
    with contextlib.suppress(OSError):  # ended meanwhile
        signal.pidfd_send_signal(pidfd, sig)


class _Forked:
    """The zygotes a template has forked, each watched with the process that asked for it (its grader, or a single
    run), so that no zygote outlives its asker: a zygote ends once it reads the end of its control socket, but a
    stopped one (SIGSTOP: a test, an operator, a submission that could reach it) reads nothing, and it stayed, with
    its child, for as long as the template lived.  Once the asker has ended the zygote is woken (SIGCONT), to end as
    it does, and killed if it is still there ASKER_GONE_SECONDS later; its child dies with it.  Every process is
    held by a pidfd (a zygote's opened before anything reaps it: SIGCHLD is not ignored where this watches), so
    that no signal can reach a process that took a pid after ours had ended; a zygote is reaped once it has ended.
    The asker's pidfd is opened from the pid the kernel stamped on its request; the meta template gets it from the
    template, beside the request it passes on."""

    def __init__(self) -> None:
        self.askers: dict[int, int | None] = {}  # pidfd of a zygote -> pidfd of its asker (None: ended, or unknown)
        self.deadlines: dict[int, float] = {}  # pidfd of a zygote whose asker has ended -> when it is killed

    @staticmethod
    def possible() -> bool:
        probe = _pidfd(os.getpid())
        if probe is None:
            return False
        os.close(probe)
        return True

    def add(self, pid: int, asker: int | None) -> None:
        """A zygote just forked (not reaped yet: its pid is still its own), and its asker's pidfd, now ours."""
        zygote = _pidfd(pid)
        if zygote is None:
            if asker is not None:
                os.close(asker)
            return
        self.askers[zygote] = asker

    def descriptors(self) -> list[int]:
        """Every descriptor held here: a fork of the template (a zygote, the meta template) closes them."""
        return [*self.askers, *(a for a in self.askers.values() if a is not None)]

    def wait(self, control: socket.socket) -> None:
        """Until `control` has a request, or has ended, tending the zygotes meanwhile."""
        while True:
            askers = [a for a in self.askers.values() if a is not None]
            timeout = max(0.0, min(self.deadlines.values()) - time.monotonic()) if self.deadlines else None
            ready = set(select.select([control, *self.askers, *askers], [], [], timeout)[0])
            for zygote, asker in list(self.askers.items()):
                if zygote in ready:  # ended
                    self._forget(zygote)
                elif asker is not None and asker in ready:
                    os.close(asker)
                    self.askers[zygote] = None
                    _send(zygote, signal.SIGCONT)
                    self.deadlines[zygote] = time.monotonic() + ASKER_GONE_SECONDS
                elif self.deadlines.get(zygote, float("inf")) <= time.monotonic():
                    _send(zygote, signal.SIGKILL)
                    del self.deadlines[zygote]
            _reap_all()
            if control in ready:
                return

    def _forget(self, zygote: int) -> None:
        asker = self.askers.pop(zygote)
        if asker is not None:
            os.close(asker)
        self.deadlines.pop(zygote, None)
        os.close(zygote)


def _serve_templates(control: socket.socket, meta_allowed: bool) -> None:
    """The template's loop: a zygote forked for each request (or the request passed on to the meta template).  A
    request carries the zygote's end of its control socket; one that the template passes on to the meta template
    carries its asker's pidfd too (`_Forked`)."""
    meta: socket.socket | None = None
    forked = _Forked()
    while True:
        try:
            forked.wait(control)
            data, fds, sender = _request(control)
        except OSError:
            return
        if not data:
            return
        passed_on = len(fds) == 2 and not meta_allowed  # only the template talks to the meta template
        if (len(fds) == 1 or passed_on) and data in (ZYGOTE, META_ZYGOTE) and _may_ask(sender):
            asker = os.dup(fds[1]) if passed_on else _pidfd(sender[0])
            held = [*fds[1:], *forked.descriptors(), *([asker] if asker is not None else [])]  # not a fork's
            if data == ZYGOTE:
                forked.add(_fork_zygote(fds[0], [control, meta], held), asker)
            elif meta_allowed:
                meta = meta or _meta_template(control, fds + held)
                with contextlib.suppress(OSError):  # the meta template is gone: the asker's hello gets EOF
                    socket.send_fds(meta, [ZYGOTE], [fds[0]] + ([asker] if asker is not None else []))
                if asker is not None:
                    os.close(asker)
        for fd in fds:
            os.close(fd)


def _fork_zygote(fd: int, sockets: list[socket.socket | None], descriptors: list[int]) -> int:
    """A zygote serving the control socket `fd`, in a session of its own; it dies with this process.  `sockets`
    and `descriptors`: the template's, which it closes."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = fork_dying_with_parent(signal.SIGKILL)
    if pid == 0:
        try:
            for held in sockets:
                if held is not None:
                    held.close()
            for held in descriptors:
                os.close(held)
            forget_parent()  # it never changes its uid: the death signal stays armed
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.setsid()
            _serve(fd)
        finally:
            os._exit(0)
    return pid


def _meta_template(control: socket.socket, pending: list[int]) -> socket.socket:
    """A fork of the template that has run a module on the meta device once (`rehearsal.rehearse_meta`: 0.7 s of
    torch._dynamo imports), then forks zygotes as the template does.  Made at the first request for one, so that a
    batch in which no submission needs the meta device never pays for it, and one in which many do pays once
    instead of once per submission (each such child imported it for itself: 0.55 s of CPU).  The template itself
    stays lean: every fork of a larger process costs more.  Its requests come from the template, which has already
    checked who asked; it checks its sender as the template does.  `pending`: the descriptors of the request being
    served and the template's pidfds, which it must not keep (a zygote's control socket held open here would hide
    that zygote's death from its grader)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # before the fork: the first request may come
    # before the meta template has finished warming up
    sys.stdout.flush()
    sys.stderr.flush()
    if fork_dying_with_parent(signal.SIGKILL) == 0:
        try:
            control.close()
            ours.close()
            for fd in pending:
                os.close(fd)
            forget_parent()
            _forget_rehearsal(_rehearse_meta)
            _freeze_heap()
            _serve_templates(theirs, meta_allowed=False)
        finally:
            os._exit(0)
    theirs.close()
    return ours


def _rehearse_meta(rehearsal) -> None:
    """`rehearsal.rehearse_meta`, without the empty cache folder that torch's imports for the meta device make in the
    temp dir (torchinductor_<user>), which would outlive every batch; one that was there before is left alone."""
    temp = tempfile.gettempdir()
    before = set(os.listdir(temp))
    rehearsal.rehearse_meta()
    for name in set(os.listdir(temp)) - before:
        if name.startswith("torchinductor_"):
            with contextlib.suppress(OSError):  # not empty: something uses it, leave it
                os.rmdir(os.path.join(temp, name))


_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid
SPAWN_FDS = 3  # a spawn request carries the child's channel, its log and its status pipe


def _request(control: socket.socket, size: int = 1024,
             max_fds: int = 4) -> tuple[bytes, list[int], tuple[int, int, int] | None]:
    """One request: its bytes, the descriptors it carries and the sender's (pid, uid, gid) as the kernel saw them.
    Room is made for both: on a socket that asks for credentials (SO_PASSCRED, which `launch` sets for every process
    it starts) they come first, and a buffer sized for the descriptors alone loses the descriptors."""
    data, ancillary, _, _ = control.recvmsg(size, socket.CMSG_SPACE(max_fds * 4) +
                                            socket.CMSG_SPACE(_CREDENTIALS.size))
    fds, sender = [], None
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += array.array("i", payload[:len(payload) - len(payload) % 4])
        elif level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            sender = _CREDENTIALS.unpack(payload[:_CREDENTIALS.size])
    return data, fds, sender


def _may_ask(sender: tuple[int, int, int] | None) -> bool:
    """Only an unconfined process of our own user may have a zygote: never a submission's child, which always runs
    under seccomp and no_new_privs.  Where the kernel lets a child reach a listening template's socket (our uid and
    no mount namespace, or a root child that may enter any root-owned folder), the template itself refuses it, or it
    would get a process outside its walls.  (The kernel vouches for the sender's pid and uid; its status is read at
    once, while the sender waits for the answer.)  "Unconfined" is measured against the template's own confinement:
    in a container whose profile filters every process (Docker's default seccomp), the graders are as filtered as
    the template, and a child always has one filter more (a filter, once installed, is never removed), so the
    count of filters tells them apart; refusing every filtered sender had left the template unused there, each
    grader importing torch itself.  A kernel that does not count filters (before 5.9) keeps the old rule."""
    if sender is None or sender[1] != os.geteuid():
        return False
    try:
        status, own = status_fields(sender[0]), status_fields()
    except OSError:
        return False
    fields = ("Seccomp", "NoNewPrivs", "Seccomp_filters")
    if own.get("Seccomp", "0").strip() != "0" and "Seccomp_filters" not in own:
        return False  # confined from the start (a container's profile), on a kernel that cannot count filters
    return all(status.get(f, "0").strip() == own.get(f, "0").strip() for f in fields)


def _serve(control_fd: int) -> None:
    """The zygote's loop: fork a confined child per "spawn", wait for it, say hello, end at "bye" or EOF."""
    subreaper = _become_subreaper()
    control = socket.socket(fileno=control_fd)
    while True:
        try:
            data, fds, _ = _request(control, 1 << 20, SPAWN_FDS)
        except OSError:
            data = b""
        if not data:  # its grader is gone (stopped, killed): so is the submission it was grading
            _reap_leftovers()
            return
        request = json.loads(data)
        op = request.get("op")
        if op == "spawn" and len(fds) != SPAWN_FDS:  # never a child without its channel, log and status
            for fd in fds:
                os.close(fd)
            reply = {"error": f"a spawn request needs {SPAWN_FDS} descriptors, it brought {len(fds)}"}
        elif op == "spawn":
            sys.stdout.flush()
            sys.stderr.flush()
            pid = fork_dying_with_parent(signal.SIGKILL)
            if pid == 0:
                _child(fds[0], fds[1], fds[2], request, control)
            for fd in fds:
                os.close(fd)
            reply = {"pid": pid}
        elif op == "wait":
            reply = _wait(int(request["pid"]), float(request.get("timeout", 0)))
        elif op == "hello":
            reply = {"subreaper": subreaper, "pid": os.getpid()}
        else:
            reply = {"bye": True}
        control.send(json.dumps(reply).encode())
        if op == "bye":
            return
