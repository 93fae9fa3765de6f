"""Batch grading with one warm torch import: `Zygote` (a warm process per worker slot, forked from the batch's
`harness.sandbox.template.Template`, so that torch is imported once, not once per slot) and `Fork` (the `Start` of
a Subject whose worker is forked from a zygote instead of started from scratch, which saves the ~1.5 s torch import
per submission: `Subject(spec, start=Fork(zygote))`).  `single_run` gives a single run the same saving when a warm
template is listening at the path in $MHA_CHECK_TEMPLATE (how the test suite's hundreds of `mha-check` runs share
one torch import).

A zygote holds one worker slot for its life (one uid, one submission at a time): each child it forks confines
itself (`harness.sandbox.confine`, the builtin mechanism: bubblewrap cannot confine a process that already runs)
before anything of the submission runs, and reports what is in force on a pipe of its own.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import queue
import select
import signal
import socket
import subprocess
import threading
from typing import BinaryIO

from harness.sandbox import isolation, scratch
from harness.sandbox.limits import Limits
from harness.sandbox.channel import write_until
from harness.sandbox.policy import Policy
from harness.sandbox.subject import Subject, kill_tree, log_tail
from harness.sandbox.template import TEMPLATE_VARIABLE, Template, launch, template_at
from harness.wire.control import ZYGOTE


BYE_SECONDS = 5.0  # how long close() waits for a zygote's answer to goodbye
# How long a zygote may take to answer, beyond the time a request asks for itself (a wait's timeout): one stopped
# (SIGSTOP) or hung never answers, and its grader, which waited for ever, stalled the batch with it.  Its hello may
# come after the template's whole torch import (a template still warming up when asked), on a loaded machine.
HELLO_SECONDS = 300.0
ANSWER_SECONDS = 60.0


class ZygoteError(RuntimeError):
    """A zygote (the warm process a submission is forked from) failed: our problem, not a submission's."""


class Zygote:
    """A warm process that forks one confined child per submission, in its own slot.  Forked from `template` (a
    socket of a `Template`) when one is given and answers, else started on its own (one torch import), or, without
    `fallback`, not at all (ZygoteError)."""

    def __init__(self, limits: Limits | None = None, template: socket.socket | None = None, fallback: bool = True,
                 kind: bytes = ZYGOTE):
        self.limits = limits or Limits()
        self.kind = kind  # ZYGOTE, or META_ZYGOTE: one of the meta template's (see harness.child.zygote)
        self.slot = scratch.claim_slot()
        self.proc: subprocess.Popen | None = None
        self._pidfd: int | None = None
        self.root_only = False  # its children can run only as root (see Fork.start)
        self.silent = False  # it once did not answer in time: any answer now could be the late one, never trusted
        self._lock = threading.Lock()  # one request at a time on the control socket, whatever thread asks
        try:
            self.info = self._forked(template) if template is not None else None
            if self.info is None and not fallback:
                raise ZygoteError("mha-check's warm template did not answer")
            if self.info is None:
                self.control, self.proc = launch("main")
                self.info = self.request({"op": "hello"}, seconds=HELLO_SECONDS)
        except BaseException:
            self.slot.release()
            raise

    def _forked(self, template: socket.socket) -> dict | None:
        """Ask the template for a zygote on a fresh socket pair: its hello, or None if the template is gone or
        ended before forking (a zygote is then started on its own)."""
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with theirs:  # closed before the hello: a template that drops it must end our wait
                socket.send_fds(template, [self.kind], [theirs.fileno()])
            info = self.request({"op": "hello"}, seconds=HELLO_SECONDS)
        except (OSError, ZygoteError):
            self.control.close()
            return None
        self._pidfd = _pidfd(int(info["pid"]))
        return info

    def request(self, message: dict, fds=(), seconds: float | None = None) -> dict:
        """Its answer, within `seconds`; ZygoteError when it is gone or has not answered by then (stopped, hung),
        after which it is never asked again (its grader takes a fresh zygote, and close() kills this one)."""
        seconds = ANSWER_SECONDS if seconds is None else seconds
        if self.silent:
            raise ZygoteError("mha-check's grading process (zygote) stopped answering earlier")
        try:
            with self._lock:
                self.control.settimeout(seconds)
                socket.send_fds(self.control, [json.dumps(message).encode()], list(fds))
                data = self.control.recv(1 << 16)
        except TimeoutError:
            self.silent = True
            raise ZygoteError(f"mha-check's grading process (zygote) did not answer within {seconds:.0f} s "
                              "(stopped or hung)") from None
        except OSError as e:
            raise ZygoteError(f"mha-check's grading process (zygote) failed: {e}") from None
        if not data:
            status = self.proc.poll() if self.proc is not None else "unknown: forked from the batch's template"
            raise ZygoteError(f"mha-check's grading process (zygote) ended (status {status})")
        return json.loads(data)

    def spawn(self, channel_fd: int, log_fd: int, status_fd: int, policy) -> int:
        reply = self.request({"op": "spawn", "policy": policy.to_json()}, (channel_fd, log_fd, status_fd))
        if "pid" not in reply:
            raise ZygoteError(f"mha-check's grading process (zygote) could not start a child: {reply.get('error')}")
        return int(reply["pid"])

    def wait(self, pid: int, timeout: float) -> dict:
        """{"status": exit status (None: still running), "cpu": its CPU seconds}."""
        return self.request({"op": "wait", "pid": pid, "timeout": timeout}, seconds=timeout + ANSWER_SECONDS)

    def close(self) -> None:
        """Says goodbye, and waits at most BYE_SECONDS for the answer: a zygote that does not answer (stopped, hung)
        is killed, and close() returns once it is gone."""
        answered = False
        try:
            self.request({"op": "bye"}, seconds=BYE_SECONDS)
            answered = True
        except (ZygoteError, OSError):
            pass
        self.control.close()
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5 if answered else 0)  # one that did not answer is killed at once
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        elif self._pidfd is not None:  # not our child (the template's, reaped by it): watched by a pidfd
            if not select.select([self._pidfd], [], [], 5 if answered else 0)[0]:  # readable once it has exited
                with contextlib.suppress(OSError):
                    signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
                select.select([self._pidfd], [], [], 5)  # gone before its slot is released: a zygote still dying
                # in a slot that another one takes would share its uid
            os.close(self._pidfd)
        self.slot.release()


def _pidfd(pid: int) -> int | None:
    """A handle on a process that is not our child, immune to pid reuse (None where the kernel has no pidfd)."""
    try:
        return os.pidfd_open(pid)
    except (OSError, AttributeError):
        return None


class ZygotePool:
    """Several zygotes for several threads.  A zygote serves one submission at a time: when a submission's child
    ends it kills every other child it has (the submission's leftovers), and its slot's uid is that child's, so
    two threads must never share one."""

    def __init__(self, count: int, limits: Limits | None = None):
        self.free: queue.Queue = queue.Queue()
        self.template = Template() if count > 1 else None
        self.all: list[Zygote] = []
        try:
            for _ in range(count):
                self.all.append(Zygote(limits, self.template.socket if self.template else None))
        except BaseException:
            self.close()
            raise
        for z in self.all:
            self.free.put(z)

    @contextlib.contextmanager
    def take(self):
        zygote = self.free.get()
        try:
            yield zygote
        finally:
            self.free.put(zygote)

    def close(self) -> None:
        for z in self.all:
            z.close()
        if self.template is not None:
            self.template.close()


class Fork:
    """`Start` (harness.sandbox.subject): the worker forked from a warm `Zygote`, in the zygote's slot, confining
    itself (`harness.sandbox.confine`) before anything of the submission runs and reporting what is in force on a
    pipe of its own.  With `allow_unconfined` False (batch grading as root) a child that cannot be dropped to the
    slot's uid does not run: IsolationFailed.  `own`: the zygote serves this child alone (a single run's) and is
    closed with it; else it is the grader's, for its next submission."""

    announces_ready = False  # forked from a process that has imported torch already

    def __init__(self, zygote: Zygote, own: bool = False):
        self.zygote, self.own = zygote, own
        self.pid = 0
        self.sock: socket.socket | None = None
        self.record: dict = {}
        self.cpu: float | None = None
        self._status: int | None = None

    def lent_slot(self) -> scratch.Slot | None:
        return self.zygote.slot  # the zygote's, for its next submission

    def start(self, policy: Policy, log: BinaryIO, limits: Limits, allow_unconfined: bool) -> tuple[int, int, dict]:
        """Fork and confine the child.  With `allow_unconfined`, as root, where the slot's uid cannot be used (no
        CAP_SETUID, or a Python it cannot read without a mount namespace), the child runs as root without
        capabilities instead, as a single run would; the zygote remembers it, and the report says ROOT."""
        policy = isolation.self_applied(policy)
        if not (allow_unconfined and os.geteuid() == 0):
            return self._fork(policy, log, limits)
        if not self.zygote.root_only:
            mark = log.tell()
            try:
                return self._fork(policy, log, limits)
            except isolation.IsolationFailed:
                self.zygote.root_only = True
                log.seek(mark)
                log.truncate()
        scratch.give(policy.cwd, 0, 0)  # it runs as root: its scratch is root's
        return self._fork(dataclasses.replace(policy, uid=0, gid=0, require_drop=False), log, limits)

    def _fork(self, policy: Policy, log: BinaryIO, limits: Limits) -> tuple[int, int, dict]:
        self._status = None
        ours, theirs = socket.socketpair()
        status_r, status_w = os.pipe()
        try:
            self.pid = self.zygote.spawn(theirs.fileno(), log.fileno(), status_w, policy)
        except BaseException:
            os.close(status_r)
            ours.close()
            raise
        finally:
            theirs.close()
            os.close(status_w)
        self.sock = ours
        self.record = isolation.read_record(status_r, limits.call_seconds + 30) or {}
        if not self.record:
            zygote_gone = self._zygote_gone()
            self.kill()
            self.sock.close()
            if zygote_gone:  # the child died with it: the zygote's failure (the grader takes a fresh one and grades
                # the submission again), not the child's (IsolationFailed: it would ask the dead zygote once more)
                raise ZygoteError("mha-check's grading process (zygote) ended while its child was being confined")
            raise isolation.IsolationFailed(f"the child could not be confined: {log_tail(log, 300).strip()}")
        return self.pid, ours.fileno(), self.record

    def _zygote_gone(self) -> bool:
        """Whether the zygote has ended, asked on its control socket: a zygote's descriptors close before the kernel
        kills its child (PR_SET_PDEATHSIG), so a child that died with its zygote always finds it gone here."""
        try:
            self.zygote.wait(self.pid, 0)
        except ZygoteError:
            return True
        return False

    def send(self, data: bytes, deadline: float) -> None:
        write_until(self.sock.fileno(), data, deadline)

    def wait(self, timeout: float) -> int | None:
        """Asked of the zygote, whose child it is (with its CPU time)."""
        if self._status is None:
            reply = self.zygote.wait(self.pid, timeout)
            self._status, self.cpu = reply.get("status"), reply.get("cpu")
        return self._status

    def kill(self) -> None:
        """A zygote that has gone took its child with it (the child dies with its zygote, harness.child.zygote): the
        child is gone, and there is nobody left to ask (a grader stopped as `grade` is killed, whose template and
        zygotes the kernel kills meanwhile, must unwind its submission, not fail on the way)."""
        with contextlib.suppress(ZygoteError):
            kill_tree(self.pid, self.record, self.wait)

    def protections(self, limits: Limits) -> list[str]:
        out = isolation.protections(limits)
        if self.zygote.info.get("subreaper"):
            out.append("leftover processes killed after the submission (child subreaper)")
        return out

    def close(self) -> None:
        try:
            self.sock.close()
        finally:
            if self.own:
                self.zygote.close()


def single_run(spec: str, **kwargs) -> Subject:
    """The child of a single run (keyword arguments: Subject's).  Started afresh (a new interpreter, bubblewrap
    where installed), unless a warm template listens at $MHA_CHECK_TEMPLATE: then it is forked from a zygote of its
    own, as in batch grading (the built-in confinement, the same walls), which saves the child's torch import.
    A template that is gone or drops the request is passed over (one that is still importing torch is waited for);
    so is one whose child could reach its socket (our own uid and no mount namespace: an ordinary user where the
    kernel allows no user namespace), since a submission there could ask it for a process outside its limits."""
    address = os.environ.get(TEMPLATE_VARIABLE)
    template = template_at(address) if address else None
    if template is None:
        return Subject(spec, **kwargs)
    with template:
        try:
            zygote = Zygote(kwargs.get("limits"), template, fallback=False)
        except ZygoteError:
            return Subject(spec, **kwargs)
    try:
        subject = Subject(spec, start=Fork(zygote, own=True), **kwargs)
    except isolation.IsolationFailed:  # unfit to grade as forked here: a fresh start says why, or does better
        zygote.close()
        return Subject(spec, **kwargs)
    except BaseException:
        zygote.close()
        raise
    if "mount" not in subject.record.get("namespaces", ()) and subject.record.get("uid") == os.geteuid():
        subject.close()  # nothing of the submission has run yet: it is read only after this
        return Subject(spec, **kwargs)
    return subject
