"""The batch's processes: one template imports torch for every zygote, a zygote forked from it serves a
submission as one started on its own does, a zygote still starts when the template cannot give one, and nothing of
either outlives the batch.  A single run forks from a template listening at $MHA_CHECK_TEMPLATE, reports what a
fresh run reports, and starts afresh when no template answers there."""
from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from conftest import ROOT
from harness.child.inprocess import InProcess
from harness.engine.runner import Options, run_checks
from harness.sandbox import pool as pool_module
from harness.sandbox.pool import Fork, Zygote, ZygotePool, single_run
from harness.frontends import grader as grader_module
from harness.frontends.pick import spec_for
from harness.sandbox.limits import Limits
from harness.sandbox.template import TEMPLATE_VARIABLE, Template
from harness.wire.control import META_ZYGOTE
from harness.wire.config import Config
from harness.wire.errors import TargetFailure
from harness.sandbox.subject import Instance, Spawn, Start, Subject

CORRECT = str(ROOT / "tests" / "zoo" / "correct" / "lesson.py")
BUGGY = str(ROOT / "examples" / "buggy_attention.py")


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):  # reaped between the open and the read (ESRCH): the template
        return True  # reaps its zygotes since it no longer ignores SIGCHLD


def _sockets(pid: int) -> set[str]:
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        if target.startswith("socket:"):
            found.add(target)
    return found


def _shared_sockets(pids: list[int], seconds: float = 10) -> list[tuple[int, int, set[str]]]:
    """The pairs of `pids` that hold one socket between them, once each is done with the request it served (at
    most `seconds`).  A template (or the meta template) drops its copy of a new zygote's control socket just after
    the fork, and the zygote may say hello first: on a loaded machine the test looked in that moment (the template
    still descheduled between fork and close: a zygote in 100 to 200 on the meta template, even idle).  What must not
    be is a copy kept: a zygote's death would then never reach its grader, and this wait times out."""
    def shared() -> list[tuple[int, int, set[str]]]:
        held = {pid: _sockets(pid) for pid in pids}
        return [(a, b, held[a] & held[b]) for i, a in enumerate(pids) for b in pids[i + 1:] if held[a] & held[b]]

    deadline = time.monotonic() + seconds
    while shared() and time.monotonic() < deadline:
        time.sleep(0.01)
    return shared()


def _huge_pages_allowed() -> bool:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return "[never]" not in f.read()
    except OSError:
        return False


def _anon_huge_kb(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("AnonHugePages:"))


def test_zygotes_share_one_template_serve_and_leave_nothing_behind():
    pool = ZygotePool(2)
    template = pool.template.proc.pid
    zygotes = [z.info["pid"] for z in pool.all]
    try:
        assert len(set(zygotes)) == 2 and all(_parent(pid) == template for pid in zygotes)
        if _huge_pages_allowed():  # the warm heap in 2 MB pages: a fork copies one entry per 2 MB, not per 4 kB
            assert _anon_huge_kb(template) >= 32 << 10 and _anon_huge_kb(zygotes[0]) >= 32 << 10
        assert all(z.proc is None for z in pool.all)  # no torch import of their own
        # a zygote keeps only its own control socket: not the template's, not a sibling's
        assert all(len(_sockets(pid)) == 1 for pid in zygotes) and not _shared_sockets([template, *zygotes])
        for zygote in pool.all:
            subject = Subject(CORRECT, start=Fork(zygote))
            try:
                assert subject.load().name == "CausalMHA"
                if os.geteuid() == 0:  # confined as the children of a zygote started on its own are
                    assert subject.isolation["uid"] != 0 and subject.isolation["capabilities_dropped"]
            finally:
                subject.close()
    finally:
        pool.close()
    assert all(_gone(pid) for pid in [template, *zygotes])


def test_a_zygote_that_does_not_say_goodbye_is_gone_before_its_slot_is_given_back():
    """A zygote forked from the template (not our child) that does not answer "bye" (stopped, here) is killed by
    close(), which returns only once it is gone: its slot, given back, may go to the next zygote, which must not
    share a uid with one still dying."""
    template = Template()
    zygote = Zygote(template=template.socket)
    pid = zygote.info["pid"]
    try:
        os.kill(pid, signal.SIGSTOP)
        zygote.close()
        assert _gone(pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        template.close()


ASKS_AND_WAITS = """
import socket, sys, time
from harness.sandbox.pool import Fork, Zygote
from harness.sandbox.subject import Subject
from harness.wire.control import META_ZYGOTE, ZYGOTE
template = socket.socket(fileno=int(sys.argv[1]))
zygote = Zygote(template=template, fallback=False, kind=META_ZYGOTE) if sys.argv[3] == "meta" else \
    Zygote(template=template if sys.argv[3] == "template" else None, kind=ZYGOTE)
subject = Subject(sys.argv[2], start=Fork(zygote))
subject.load()
print(zygote.info["pid"], flush=True)
time.sleep(600)
"""


def _stopped_tree(root: int) -> dict[int, int]:
    """SIGSTOP `root` and every process below it, each watched by a pidfd (its pid may be reused once it is gone):
    {pid: pidfd}."""
    from harness.sandbox.syscalls import process_tree

    watched = {}
    for pid in process_tree(root):
        with contextlib.suppress(OSError):
            watched[pid] = os.pidfd_open(pid)
            signal.pidfd_send_signal(watched[pid], signal.SIGSTOP)
    return watched


def _alive_after(watched: dict[int, int], seconds: float) -> list[int]:
    """The pids of `watched` still running after up to `seconds` (a pidfd is readable once its process has ended)."""
    deadline = time.monotonic() + seconds
    while True:
        alive = [pid for pid, fd in watched.items() if not select.select([fd], [], [], 0)[0]]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def _kill_and_forget(watched: dict[int, int]) -> None:
    for fd in watched.values():
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        os.close(fd)


@pytest.mark.parametrize("kind", ["template", "meta", "own"])
def test_a_stopped_zygote_and_its_child_end_soon_after_the_process_that_asked_for_them(kind):
    """A grader killed (the OOM killer, an operator) while its zygote is stopped (SIGSTOP: by a test, an operator, a
    submission that could reach it): the zygote never read the end of its grader's socket, so it and the child it
    had forked stayed, stopped, for as long as the template lived (a whole batch, a test session), or for good (a
    zygote started on its own).  The template (or the meta template, told by the template who asked), which forked
    the zygote for that grader, ends it soon after the grader is gone; one started on its own dies with its grader;
    the child goes with its zygote."""
    template = Template()
    asker = subprocess.Popen([sys.executable, "-c", ASKS_AND_WAITS, str(template.socket.fileno()), CORRECT, kind],
                             pass_fds=[template.socket.fileno()], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    watched = {}
    try:
        zygote = int(asker.stdout.readline())
        watched = _stopped_tree(zygote)
        assert len(watched) >= 2  # the zygote and its child (with a PID namespace: the relay, pid 1, the worker)
        asker.kill()
        asker.wait()
        assert _alive_after(watched, 30) == []
        assert template.proc.poll() is None  # it serves on
    finally:
        asker.kill()
        asker.wait()
        _kill_and_forget(watched)
        template.close()


def test_a_stopped_zygote_and_its_child_end_with_their_template():
    """`grade` killed outright: the kernel kills its template (PR_SET_PDEATHSIG); a zygote of that template that is
    stopped then stayed on the machine for good, with its child, nobody's children any more."""
    template = Template()
    zygote = Zygote(template=template.socket)
    subject = Subject(CORRECT, start=Fork(zygote))
    watched = {}
    try:
        assert subject.load().name == "CausalMHA"
        watched = _stopped_tree(zygote.info["pid"])
        assert len(watched) >= 2
        template.proc.kill()
        template.proc.wait()
        assert _alive_after(watched, 30) == []
    finally:
        _kill_and_forget(watched)
        with contextlib.suppress(Exception):
            subject.close()
        zygote.close()
        template.close()


def test_every_start_is_a_whole_start():
    """Each way of starting a child has every hook of the one protocol the Subject calls (a missing one would show
    only on the path that calls it: a time-out, a kill, a close), and nothing of the session."""
    for start in (Spawn(), Fork(zygote=None), InProcess()):
        assert isinstance(start, Start), type(start).__name__
        assert not {"calls", "frame", "load", "build"} & set(dir(start))


def _serves(zygote: Zygote) -> None:
    """The zygote forks a confined child that loads the target."""
    subject = Subject(CORRECT, start=Fork(zygote))
    try:
        assert subject.load().name == "CausalMHA"
    finally:
        subject.close()


def test_a_zygote_starts_on_its_own_when_the_template_is_gone():
    """And serves: a zygote started on its own once received its spawn requests without their descriptors (the
    kernel's credentials filled the room made for them) and could fork no child, so that a batch whose template had
    died graded nothing more."""
    template = Template()
    template.proc.kill()
    template.proc.wait()
    zygote = Zygote(template=template.socket)
    try:
        assert zygote.proc is not None and zygote.info["pid"] == zygote.proc.pid
        _serves(zygote)
    finally:
        zygote.close()
        template.socket.close()


def test_a_zygote_starts_on_its_own_when_the_template_drops_the_request():
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)

    def drop():  # a template that ends between reading the request and forking
        _, fds, _, _ = socket.recv_fds(theirs, 1024, 1)
        for fd in fds:
            os.close(fd)

    dropper = threading.Thread(target=drop)
    dropper.start()
    zygote = Zygote(template=ours)
    try:
        dropper.join(5)
        assert zygote.proc is not None and zygote.info["pid"] == zygote.proc.pid
        _serves(zygote)
    finally:
        zygote.close()
        ours.close()
        theirs.close()


MASK_ON_CPU = str(ROOT / "tests" / "zoo" / "buggy" / "mask_plain_attr.py")


def test_meta_zygotes_come_from_one_meta_template_made_at_the_first_request_for_one():
    """The meta template (the meta device warm) is a child of the template, made once, only when asked for; the
    template's own zygotes are not its; its zygotes' children are confined like the others and run the meta device;
    nothing of it outlives the batch."""
    template = Template()
    zygotes = []
    try:
        zygotes.append(Zygote(template=template.socket))
        assert len(_children(template.proc.pid)) == 1  # no meta template until one is asked for
        zygotes += [Zygote(template=template.socket, fallback=False, kind=META_ZYGOTE) for _ in range(2)]
        meta = _parent(zygotes[1].info["pid"])
        assert _parent(zygotes[0].info["pid"]) == template.proc.pid == _parent(meta)
        assert _parent(zygotes[2].info["pid"]) == meta and len(_children(template.proc.pid)) == 2
        pids = [template.proc.pid, meta] + [z.info["pid"] for z in zygotes]
        assert not _shared_sockets(pids)  # no socket held by two of them: each zygote's death reaches its grader
        subject = Subject(MASK_ON_CPU, start=Fork(zygotes[1]))
        try:
            with pytest.raises(TargetFailure, match="expected device"):
                subject.build(Config(d_in=6, d_out=6, heads=2, context_length=7, batch=2, n=4)).meta_forward((2, 4, 6))
            if os.geteuid() == 0:
                assert subject.isolation["uid"] != 0 and subject.isolation["capabilities_dropped"]
        finally:
            subject.close()
    finally:
        for zygote in zygotes:
            zygote.close()
        template.close()
    deadline = time.monotonic() + 10  # the meta template is killed by the kernel as the template ends: soon after
    while not _gone(meta) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(pid) for pid in [template.proc.pid, meta] + [z.info["pid"] for z in zygotes])


def test_a_grader_without_a_meta_template_runs_the_meta_device_in_the_submissions_own_child(monkeypatch):
    """A template that cannot give a meta zygote (gone, or dropping the request) costs the batch its saving, never a
    verdict: the grader asks no more, and Context.meta_forward runs in the submission's own child."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    dropper = threading.Thread(target=lambda: [os.close(fd) for fd in socket.recv_fds(theirs, 1024, 1)[1]])
    dropper.start()
    grader = grader_module.Grader(None, ours)
    options = {"seed": 0, "allow_unconfined": True}
    try:
        assert grader.meta_subject(MASK_ON_CPU, os.path.dirname(MASK_ON_CPU), options, Limits()) is None
        dropper.join(5)
        assert grader.no_meta and grader.meta_zygote is None
        asked = []
        report = run_checks(MASK_ON_CPU, Options(only=["mask-buffer"]),
                            make_meta_subject=lambda: asked.append(1) or grader.meta_subject(
                                MASK_ON_CPU, os.path.dirname(MASK_ON_CPU), options, Limits()))
    finally:
        ours.close()
        theirs.close()
    assert asked == [1] and report.checks[-1].status == "fail" and "expected device" in report.checks[-1].message


def _children(pid: int) -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and not _gone(int(p)) and _parent_or_none(int(p)) == pid]


def _parent_or_none(pid: int) -> int | None:
    try:
        return _parent(pid)
    except (FileNotFoundError, ProcessLookupError):
        return None


def _verdicts(report) -> list[tuple[str, str, str]]:
    return [(c.id, c.status, c.message) for c in report.checks]


def test_a_single_run_forks_from_a_listening_template_and_reports_what_a_fresh_run_does(tmp_path, monkeypatch):
    template = Template(address=str(tmp_path / "template"))
    try:
        monkeypatch.setenv(TEMPLATE_VARIABLE, template.address)
        subject = single_run(CORRECT)
        zygote = subject.child.zygote.info["pid"]
        try:
            assert isinstance(subject.child, Fork) and subject.child.own and _parent(zygote) == template.proc.pid
            assert subject.load().name == "CausalMHA"
            if os.geteuid() == 0:
                assert subject.isolation["uid"] != 0 and subject.isolation["capabilities_dropped"]
        finally:
            subject.close()
        assert _gone(zygote)  # its zygote was its own, closed with it
        options = Options(only=["construct", "output-shape", "causal-leakage", "view-order"])
        warm = run_checks(BUGGY, options)
        monkeypatch.delenv(TEMPLATE_VARIABLE)
        fresh = run_checks(BUGGY, options)
    finally:
        template.close()
    assert _verdicts(warm) == _verdicts(fresh) and not warm.passed
    assert "fail" in {c.status for c in warm.checks}


def test_a_single_run_starts_afresh_when_no_template_answers(tmp_path, monkeypatch):
    monkeypatch.setenv(TEMPLATE_VARIABLE, str(tmp_path / "nobody-listens-here"))
    subject = single_run(CORRECT)
    try:
        assert isinstance(subject.child, Spawn)
    finally:
        subject.close()
    if os.geteuid() == 0:  # a socket of another user's is never asked (whoever serves it would fork our children)
        foreign = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        foreign.bind(str(tmp_path / "foreign"))
        os.chown(tmp_path / "foreign", 12345, 12345)
        monkeypatch.setenv(TEMPLATE_VARIABLE, str(tmp_path / "foreign"))
        try:
            subject = single_run(CORRECT)
            try:
                assert isinstance(subject.child, Spawn)
            finally:
                subject.close()
            foreign.setblocking(False)
            with pytest.raises(BlockingIOError):
                foreign.recv(1024)  # it was not even asked
        finally:
            foreign.close()
    dropping = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)  # a "template" that drops every request
    dropping.bind(str(tmp_path / "dropping"))

    def drop():
        _, fds, _, _ = socket.recv_fds(dropping, 1024, 1)
        for fd in fds:
            os.close(fd)

    dropper = threading.Thread(target=drop)
    dropper.start()
    monkeypatch.setenv(TEMPLATE_VARIABLE, str(tmp_path / "dropping"))
    try:
        subject = single_run(CORRECT)
        try:
            assert isinstance(subject.child, Spawn) and subject.load().name == "CausalMHA"
        finally:
            subject.close()
    finally:
        dropper.join(5)
        dropping.close()


def test_a_template_listens_only_in_a_folder_of_its_own_users(tmp_path):
    os.chmod(tmp_path, 0o755)
    with pytest.raises(ValueError, match="only its own user"):
        Template(address=str(tmp_path / "template"))


def test_a_single_run_does_not_use_a_template_its_child_could_reach(tmp_path, monkeypatch):
    """A child with our own uid and no mount namespace (an ordinary user without user namespaces) could send the
    template a request of its own: such a run starts afresh instead, before anything of the submission runs."""
    template = Template(address=str(tmp_path / "template"))
    reachable = {"mechanism": "none", "uid": os.geteuid(), "namespaces": []}
    forked = []
    real = pool_module.isolation.read_record

    def read_record(fd, timeout):  # the forked child's record, as if it were confined no further
        record = real(fd, timeout)
        if forked:
            return record  # the fresh start's own
        forked.append(record)
        return reachable

    monkeypatch.setattr(pool_module.isolation, "read_record", read_record)
    monkeypatch.setenv(TEMPLATE_VARIABLE, template.address)
    try:
        subject = single_run(CORRECT)
        try:
            assert forked and isinstance(subject.child, Spawn)  # asked the template, then started afresh
            assert subject.load().name == "CausalMHA"
        finally:
            subject.close()
    finally:
        template.close()


ASK = """
import ctypes, sys
sys.path.insert(0, {root!r})
if {confined}:
    ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS, as every submission's child has it
from harness.sandbox.pool import Zygote, ZygoteError
from harness.sandbox.template import template_at
try:
    Zygote(template=template_at({address!r}), fallback=False).close()
except ZygoteError:
    print("refused")
else:
    print("served")
"""


def test_a_template_serves_no_confined_process(tmp_path):
    """Found by an attacker: where a child could reach a listening template's socket (an ordinary user without user
    namespaces, or a root child without a mount namespace, which may enter any root-owned folder), it asked for a
    zygote and got a process with no limits and no seccomp.  The template now refuses any sender under no_new_privs
    or seccomp, which every child of ours has, whatever else the kernel allowed."""
    template = Template(address=str(tmp_path / "template"))
    try:
        answers = [subprocess.run([sys.executable, "-c", ASK.format(root=str(ROOT), confined=confined,
                                                                    address=template.address)],
                                  capture_output=True, text=True, timeout=60).stdout.strip()
                   for confined in (False, True)]
    finally:
        template.close()
    assert answers == ["served", "refused"]


def _disturbed_at_first_forward(zygote: Zygote, options: Options, disturb):
    """make_subject for run_checks: children of `zygote`, the first of which gets `disturb(subject)` (a signal from
    outside) just before its first forward is asked for."""
    done = []

    def make():
        subject = Subject(CORRECT, limits=options.limits, start=Fork(zygote))
        calls = subject._exchange

        def disturbed(requests, **how):
            if not done and any(r.op == "forward" for r in requests):
                done.append(subject.pid)
                disturb(subject)
            return calls(requests, **how)
        subject._exchange = disturbed  # every round trip passes here
        return subject
    return make


KILLS_ITSELF = """
import os, signal
from lesson import CausalMHA as _Right


class CausalMHA(_Right):
    def forward(self, x):
        os.kill(os.getpid(), signal.SIGTERM)  # every time: its own doing
        return super().forward(x)
"""


def test_a_child_killed_from_outside_costs_no_verdict_but_one_that_kills_itself_fails(tmp_path):
    """A child killed by a signal that is sent, not raised by running code (SIGTERM, SIGKILL beyond the CPU limit):
    the check once failed with "crashed with signal SIGTERM" and that check's fix, also when an operator or the OOM
    killer had sent it.  Now the check runs once more in a fresh child: a kill from outside leaves the verdict of a
    run without it (the event is kept, "killed-outside", not held against the code); a kill the code sends itself
    happens again and fails the check."""
    options = Options(only=["construct", "output-shape", "batch-independence"])
    killed = []

    def kill(subject):  # an outside kill
        killed.append(subject.pid)
        os.kill(subject.pid, signal.SIGTERM)
        while not _gone(subject.pid):
            time.sleep(0.01)

    zygote = Zygote()
    try:
        make = _disturbed_at_first_forward(zygote, options, kill)
        report = run_checks(CORRECT, options, subject=make(), make_subject=make)
        clean = run_checks(CORRECT, options, subject=Subject(CORRECT, start=Fork(zygote)),
                           make_subject=lambda: Subject(CORRECT, start=Fork(zygote)))
    finally:
        zygote.close()
    assert killed and [(c.id, c.status, c.message) for c in report.checks] == \
        [(c.id, c.status, c.message) for c in clean.checks]
    assert report.passed and report.diagnosis is None
    (event,) = report.adapter.process
    assert event.kind == "killed-outside" and event.ours and "SIGTERM" in event.message

    (tmp_path / "lesson.py").write_text((ROOT / "tests" / "zoo" / "correct" / "lesson.py").read_text())
    (tmp_path / "suicide.py").write_text(KILLS_ITSELF)
    report = run_checks(str(tmp_path / "suicide.py"), options)
    failing = [c for c in report.checks if c.status == "fail"]
    assert failing and "killed by signal SIGTERM" in failing[0].message and "again" in failing[0].message
    assert [p.kind for p in report.adapter.process][:2] == ["killed", "killed"]
    assert not any(p.ours for p in report.adapter.process) and not report.passed


def test_a_meta_zygote_killed_during_the_twins_run_costs_no_verdict(monkeypatch):
    """The meta zygote killed from outside while its child (the twin) runs the module on the meta device: the twin's
    close then raised ZygoteError, which reached the check as an internal error (mask-buffer cannot tell, "please
    report it") and cost the student the failure and its fix.  Now the run is made in the submission's own child,
    as when the twin dies."""
    template = Template()
    killed = []
    zygote = Zygote(template=template.socket, fallback=False, kind=META_ZYGOTE)
    meta_forward = Instance.meta_forward

    def killing(self, shape):  # the twin's run, with its zygote killed from outside first
        if getattr(self.subject.child, "zygote", None) is zygote and not killed:
            killed.append(zygote.info["pid"])
            os.kill(zygote.info["pid"], signal.SIGKILL)
            while not _gone(zygote.info["pid"]):
                time.sleep(0.01)
        return meta_forward(self, shape)

    monkeypatch.setattr(Instance, "meta_forward", killing)
    try:
        report = run_checks(MASK_ON_CPU, Options(only=["mask-buffer"]),
                            make_meta_subject=lambda: Subject(MASK_ON_CPU, start=Fork(zygote)))
    finally:
        with contextlib.suppress(Exception):
            zygote.close()
        template.close()
    assert killed and report.checks[-1].status == "fail" and "expected device" in report.checks[-1].message


def test_a_child_killed_before_it_is_confined_is_started_again(tmp_path, monkeypatch):
    """A child killed from outside before it sent its isolation record (IsolationFailed, with no reason) once cost
    its submission every check ("grader error", "grade it again"); the submission is now graded once more."""
    from pathlib import Path

    from harness.sandbox import isolation

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "attention.py").write_text(Path(CORRECT).read_text())
    zygote = Zygote()
    real, made = grader_module.Subject, []

    def flaky(*args, **kwargs):  # the first child dies before its confinement is done
        made.append(1)
        if len(made) == 1:
            raise isolation.IsolationFailed("the child could not be confined: ")
        return real(*args, **kwargs)

    monkeypatch.setattr(grader_module, "Subject", flaky)
    options = {"run": Options(), "format": "json", "rubric": None, "missing_fix": "", "allow_unconfined": True}
    try:
        folder = str(tmp_path / "sub")
        result = grader_module.Grader(zygote, None).grade_submission(folder, spec_for(Path(folder), None, False),
                                                                     options)
    finally:
        zygote.close()
    assert len(made) >= 2 and result["row"]["passed"] is True and result["row"]["process"] == ""


def test_a_child_stopped_from_outside_is_not_a_time_out_of_the_code():
    """SIGSTOP sent to the process running the student's code (an operator, a paused container) made the check a
    time-out of the code ("an endless loop, a sleep...") and skipped every later check.  A child found stopped at
    the time limit is treated as killed: the check runs once more in a fresh child and its result stands."""
    from harness.sandbox.limits import Limits as Walls

    options = Options(only=["construct", "output-shape"], limits=Walls(call_seconds=3, total_seconds=120))
    stopped = []

    def stop(subject):  # every process below the one the zygote forked, the worker included
        frontier = [subject.pid]
        while frontier:
            frontier = [c for pid in frontier for c in _children(pid)]
            stopped.extend(frontier)
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)

    zygote = Zygote()
    try:
        make = _disturbed_at_first_forward(zygote, options, stop)
        report = run_checks(CORRECT, options, subject=make(), make_subject=make)
    finally:
        zygote.close()
    assert stopped and report.passed, _verdicts(report)
    (event,) = report.adapter.process
    assert event.kind == "killed-outside" and "stopped (SIGSTOP)" in event.message


def _kill_the_zygote(zygote: Zygote, killed: list[int], child: int) -> None:
    """SIGKILL from outside (the OOM killer, an operator), and the child gone with it (PR_SET_PDEATHSIG): every
    process of it, the one running the submission included (the zygote's own child can be gone a moment before
    the worker in the PID namespace it left behind, which answered the grader meanwhile)."""
    tree, found = [], [child]
    while found:  # before the kill: the processes of the child's tree, however deep (relay, pid 1, worker)
        tree += found
        found = [p for parent in found for p in _children(parent)]
    killed.append(zygote.info["pid"])
    os.kill(zygote.info["pid"], signal.SIGKILL)
    end = time.monotonic() + 60
    while not all(map(_gone, tree)):
        assert time.monotonic() < end, f"a process of the child {child} outlived its killed zygote"
        time.sleep(0.01)


def _record_lost_with_its_zygote(monkeypatch, zygote: Zygote, killed: list[int], late: list[str]) -> None:
    """The zygote killed while its first child confines itself: confinement takes milliseconds, so a record the child
    sent before the kill is dropped, as if the child had died first."""
    read_record = pool_module.isolation.read_record

    def record_lost(fd, timeout):
        if killed:
            return read_record(fd, timeout)
        _kill_the_zygote(zygote, killed, max(_children(zygote.info["pid"])))
        read_record(fd, timeout)
        return {}
    monkeypatch.setattr(pool_module.isolation, "read_record", record_lost)


def _killed_in_a_check(monkeypatch, zygote: Zygote, killed: list[int], late: list[str]) -> None:
    """The zygote killed while its child runs a check (before the child's fifth forward); nothing more is asked of
    that child (each later check was asked of it and became "internal error in mha-check ... please report it", and
    only the ZygoteError of its close had the submission graded again)."""
    real, forwards = grader_module.Subject, []

    def killing_its_zygote(*args, **kwargs):
        subject = real(*args, **kwargs)
        exchange = subject._exchange

        def disturbed(requests, **how):
            forwards.extend(r for r in requests if r.op == "forward")
            if killed and subject.child.zygote is zygote:
                late.extend(r.op for r in requests)
            if not killed and len(forwards) >= 5:
                _kill_the_zygote(zygote, killed, subject.pid)
            return exchange(requests, **how)
        subject._exchange = disturbed
        return subject
    monkeypatch.setattr(grader_module, "Subject", killing_its_zygote)


def _killed_before_the_close(monkeypatch, zygote: Zygote, killed: list[int], late: list[str]) -> None:
    """The zygote killed once its child has answered every check, before the child is closed."""
    real = grader_module.Subject

    def killing_its_zygote(*args, **kwargs):
        subject = real(*args, **kwargs)
        close = subject.close

        def disturbed():
            if not killed and subject.child.zygote is zygote:
                _kill_the_zygote(zygote, killed, subject.pid)
            close()
        subject.close = disturbed
        return subject
    monkeypatch.setattr(grader_module, "Subject", killing_its_zygote)


@pytest.mark.parametrize("when", [_record_lost_with_its_zygote, _killed_in_a_check, _killed_before_the_close],
                         ids=["confining", "checking", "closing"])
def test_a_submission_whose_zygote_dies_under_it_is_graded_again(tmp_path, monkeypatch, when):
    """A grader's zygote killed from outside (the OOM killer, an operator, `grade`'s template and zygotes killed)
    while a submission is graded: its child dies with it (PR_SET_PDEATHSIG), and the submission is graded again
    from a fresh zygote, with the verdicts it would have had.  Killed while the child confined itself, the lost
    record was the child's failure (IsolationFailed): the grader asked the dead zygote once more and the row was
    "grader error", needs review."""
    from pathlib import Path

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "attention.py").write_text(Path(CORRECT).read_text())
    template = Template()
    zygote, killed, late = Zygote(template=template.socket), [], []
    when(monkeypatch, zygote, killed, late)
    options = {"run": Options(), "format": "json", "rubric": None, "missing_fix": "", "allow_unconfined": False}
    grader = grader_module.Grader(zygote, template.socket)
    try:
        folder = str(tmp_path / "sub")
        result = grader.grade_submission(folder, spec_for(Path(folder), None, False), options)
    finally:
        grader.zygote.close()  # the first one, or the one that replaced it (the grader closed the first)
        template.close()
    assert killed and grader.zygote is not zygote
    assert late == [], late  # asked of a child gone with its zygote, after the request in flight
    row = result["row"]
    assert row["passed"] is True and row["process"] == "" and not row["needs_review"], row


def test_a_zygote_stopped_under_a_submission_is_replaced_not_waited_for(tmp_path, monkeypatch):
    """A grader's zygote stopped from outside (SIGSTOP, by an operator or a debugger) while its child runs the
    checks: the grader's next question to it (the child's exit, at its close) went unanswered for ever, and the
    batch stalled with that grader.  Now an answer late by more than ANSWER_SECONDS is the zygote's failure: the
    stopped zygote is killed (its child with it) and the submission graded again from a fresh one."""
    from pathlib import Path

    monkeypatch.setattr(pool_module, "ANSWER_SECONDS", 2.0, raising=False)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "attention.py").write_text(Path(CORRECT).read_text())
    template = Template()
    zygote, stopped = Zygote(template=template.socket), []
    real = grader_module.Subject

    def stopping_its_zygote(*args, **kwargs):
        subject = real(*args, **kwargs)
        close = subject.close

        def disturbed():
            if not stopped and subject.child.zygote is zygote:
                stopped.append(zygote.info["pid"])
                os.kill(zygote.info["pid"], signal.SIGSTOP)
            close()
        subject.close = disturbed
        return subject
    monkeypatch.setattr(grader_module, "Subject", stopping_its_zygote)
    options = {"run": Options(), "format": "json", "rubric": None, "missing_fix": "", "allow_unconfined": False}
    grader = grader_module.Grader(zygote, template.socket)
    try:
        folder = str(tmp_path / "sub")
        started = time.monotonic()
        result = grader.grade_submission(folder, spec_for(Path(folder), None, False), options)
        took = time.monotonic() - started
    finally:
        grader.zygote.close()
        template.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(zygote.info["pid"], signal.SIGKILL)
    assert stopped and grader.zygote is not zygote and zygote.silent
    assert _gone(stopped[0]), "the stopped zygote was left behind"
    row = result["row"]
    assert row["passed"] is True and row["process"] == "" and not row["needs_review"], row
    assert took < 120, took


INSTRUCTOR_TESTS = '''
import torch


def test_output_shape(student_class):
    torch.manual_seed(0)
    layer = student_class(d=8, nheads=2, context_length=16).eval()
    assert tuple(layer(torch.randn(2, 5, 8)).shape) == (2, 5, 8)
'''


def test_instructor_tests_whose_zygote_dies_under_them_are_run_again(tmp_path, monkeypatch):
    """The grader's zygote killed from outside while the instructor's tests (--tests) run in its child: the child
    dies with it, and the tests are run again from a fresh zygote, as the checks are (they were "not run: mha-check's
    grading process broke", cannot tell: the row needed review)."""
    from pathlib import Path

    from harness.engine import instructor

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "attention.py").write_text(Path(CORRECT).read_text())
    (tmp_path / "test_attention.py").write_text(INSTRUCTOR_TESTS)
    template = Template()
    zygote, killed = Zygote(template=template.socket), []
    listen = instructor._listen

    def killed_while_listening(subject, request, test_seconds):
        if not killed:
            _kill_the_zygote(zygote, killed, subject.pid)
        return listen(subject, request, test_seconds)

    monkeypatch.setattr(instructor, "_listen", killed_while_listening)
    options = {"run": Options(), "format": "json", "rubric": None, "missing_fix": "", "allow_unconfined": False,
               "tests": instructor.find([str(tmp_path / "test_attention.py")])}
    grader = grader_module.Grader(zygote, template.socket)
    try:
        folder = str(tmp_path / "sub")
        result = grader.grade_submission(folder, spec_for(Path(folder), None, False), options)
    finally:
        grader.zygote.close()
        template.close()
    row = result["row"]
    assert killed and grader.zygote is not zygote
    assert row["test_attention.py::test_output_shape"] == "pass", result["text"][-3000:]
    assert row["passed"] is True and row["process"] == "" and not row["needs_review"], row
