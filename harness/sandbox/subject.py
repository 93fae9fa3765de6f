"""Trusted side: the student's module as seen from outside, through a confined child process.

`Subject` claims a worker slot (and with it the child's uid), copies the submission into the slot's private
scratch folder, has the worker started confined by `harness.sandbox.policy`, sends requests and parses the replies
strictly, each under a wall-clock deadline (`harness.sandbox.channel`; what is copied where:
`harness.sandbox.placement`).  How the worker is started, reached, waited for and stopped is the one thing that
differs between children, and it is not the Subject's: a `Start` given to it does that (`Spawn` here: a fresh
interpreter, bubblewrap where it works, else our own namespaces, see `harness.sandbox.isolation`;
`harness.sandbox.pool.Fork`: forked from a warm zygote; `harness.child.inprocess.InProcess`: a thread, for tests of
our own code).  `Instance` (`harness.sandbox.instance`) is one built module in the child.  Nothing here imports
torch or the student's code; errors raised by student code come back as `TargetFailure`; a child that hangs, dies or
exceeds a limit becomes a `WorkerDied` whose `kind` says which.  Every trusted module is imported before the child
is given the submission (`harness.sandbox.trusted`), and `close()` leaves no process, slot or scratch folder behind.
"""
from __future__ import annotations

import compileall
import contextlib
import functools
import hashlib
import os
import signal
import subprocess
import tempfile
import time
from typing import BinaryIO, Callable, Protocol, runtime_checkable

from harness import OUTPUT_CUT_MARK

from harness.wire import messages as m
from harness.wire import names
from harness.wire import protocol
from harness.wire.budget import reply_budget
from harness.wire.errors import CannotDrive, HarnessFailure, TargetFailure, WorkerDied
from harness.sandbox import footprint, isolation, scratch, trusted
from harness.sandbox.channel import MEMORY_WATCH_SECONDS, WATCH_SECONDS, DeadlineReader, write_until
from harness.sandbox.instance import Instance
from harness.sandbox.placement import own_code, placement
from harness.sandbox.limits import MB, Limits
from harness.sandbox.policy import Policy, is_slot_uid, make_policy
from harness.sandbox import syscalls as linux
from harness.wire.config import Config
from harness.wire.target import Target

STARTUP_SECONDS = 120  # the worker's own start (importing torch), which the student's time limit does not include


# signals a process does not raise by running code (unlike SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT): they are sent,
# by the code to itself, or from outside (an operator, the OOM killer, a container runtime); SIGKILL once the CPU
# limit is ruled out
SENT_SIGNALS = frozenset({signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT,
                          signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM})


@runtime_checkable
class Start(Protocol):
    """How a Subject's child is started, reached, waited for and stopped: everything that differs between a single
    run's child (`Spawn`), a batch's (`harness.sandbox.pool.Fork`: forked from a warm zygote, its own or the
    grader's) and the one of our own tests (`harness.child.inprocess.InProcess`: a thread of this process).  The
    rest (frames, instances, limits, the start of the time limit, how the child ended) is the Subject's, the same
    for every child.  One object per Subject: it holds the child once started.  The Subject calls `lent_slot` and
    `start` once, in that order, and `close` once, after the child is killed and its scratch released."""

    announces_ready: bool  # its worker sends Ready after its own start-up (importing torch), which the limits exclude
    cpu: float | None  # the child's CPU seconds, once its exit reached us with them (None: not known)

    def lent_slot(self) -> scratch.Slot | None:
        """The worker slot the child runs in when the strategy holds one (a zygote's, kept for its next
        submission), else None: the Subject claims a slot of its own and releases it at close."""

    def start(self, policy: Policy, log: BinaryIO, limits: Limits, allow_unconfined: bool) -> tuple[int, int, dict]:
        """Start the worker confined by `policy` (its scratch folder: `policy.cwd`), its output to `log`: (the pid
        whose process group is the child, the fd its replies are read from, the isolation record: what confined
        it, measured inside it; {} for none).  Raises isolation.IsolationFailed when it cannot be confined (as
        root, `allow_unconfined` lets it run as root without capabilities instead); nothing of the submission has
        run then."""

    def send(self, data: bytes, deadline: float) -> None:
        """Write a frame to the worker by `deadline` (TimeoutError if it does not read it)."""

    def wait(self, timeout: float) -> int | None:
        """The worker's exit status (negative: killed by that signal), or None if it still runs after `timeout`."""

    def kill(self) -> None:
        """The child and everything it started, without asking it; returns once they are gone."""

    def protections(self, limits: Limits) -> list[str]:
        """The report's list of the limits and habits this child has (`isolation.protections`)."""

    def close(self) -> None:
        """What the strategy itself holds (a socket, a zygote of its own), after the child is gone."""


class Spawn:
    """`Start`: a fresh interpreter running `worker_code()`, confined from outside by the strongest mechanism that
    works here (`isolation.start`: bubblewrap, else our own namespaces through a launcher).  A single run's child."""

    announces_ready = True  # it imports torch first, which is not the student's time

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.record: dict = {}
        self.cpu: float | None = None

    def lent_slot(self) -> scratch.Slot | None:
        return None

    def start(self, policy: Policy, log: BinaryIO, limits: Limits, allow_unconfined: bool) -> tuple[int, int, dict]:
        _child_bytecode()
        self.proc, self.record = isolation.start(policy, worker_code(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                 stderr=log, unconfined_fallback=allow_unconfined)
        return self.proc.pid, self.proc.stdout.fileno(), self.record

    def send(self, data: bytes, deadline: float) -> None:
        write_until(self.proc.stdin.fileno(), data, deadline)

    def wait(self, timeout: float) -> int | None:
        """wait4 also gives the worker's CPU time (through the launcher's relay; bubblewrap does not pass it on)."""
        if self.proc.returncode is not None:
            return self.proc.returncode
        end = time.monotonic() + timeout
        while True:
            try:
                pid, raw, usage = os.wait4(self.proc.pid, os.WNOHANG)
            except ChildProcessError:
                return self.proc.poll()
            if pid:
                self.proc.returncode = -os.WTERMSIG(raw) if os.WIFSIGNALED(raw) else os.WEXITSTATUS(raw)
                if self.record.get("mechanism") != "bwrap":
                    self.cpu = usage.ru_utime + usage.ru_stime
                return self.proc.returncode
            if time.monotonic() >= end:
                return None
            linux.until_exited(self.proc.pid, end)

    def kill(self) -> None:
        kill_tree(self.proc.pid, self.record, self.wait)

    def protections(self, limits: Limits) -> list[str]:
        return isolation.protections(limits)

    def close(self) -> None:
        pass  # its pipes go with the Popen


class Subject:
    """One confined child process running one target.  `submission`: the folder to copy into the child's scratch
    (batch grading: the student's folder); by default the folder holding the target file (or, for a module
    target, `cwd`).  `allow_unconfined`: as root, run the child as root when no mechanism can drop it to the slot's
    uid (the report says so) instead of failing.  `grading`: a grade will come from this child, so it must be fit
    for it (`isolation.unfit_to_grade`): unless `allow_unconfined` accepts it (the isolation block then says so),
    a child that is not raises IsolationFailed before any of the submission's code runs.  `start`: how the child
    is started (`Start`; by default `Spawn()`, a fresh interpreter), kept as `child`.  `left_out`: what the
    trusted side left out of `submission` before (a batch's staged copy), listed with what its own copy leaves out
    (the compiled files among them are said in the report: `compiled`)."""

    gather = None  # harness.engine.together.Together, while configurations are asked together

    def __init__(self, spec: str, overrides: dict | None = None, seed: int = 0, cwd: str | None = None,
                 weight_map: dict | None = None, limits: Limits | None = None, submission: str | None = None,
                 allow_unconfined: bool = True, grading: bool = False, start: Start | None = None,
                 left_out: tuple[str, ...] = ()):
        self.spec, self.overrides, self.seed = spec, overrides or {}, seed
        self.weight_map = weight_map or {}
        self.limits = limits or Limits()
        self.search_dir = os.path.abspath(cwd or submission or os.getcwd())
        self.allow_unconfined = allow_unconfined
        self.grading = grading
        self.accepted = ""  # "--allow-unconfined": a grading child unfit to grade, accepted knowingly
        self._builds: dict[tuple, Instance] = {}
        self.loaded: m.Loaded | None = None
        self.notes: list[str] = []  # what loading left out (a notebook's cells), known even when loading failed
        self.dead: WorkerDied | None = None
        self.record: dict = {}
        self.child: Start = start or Spawn()
        self.log = tempfile.TemporaryFile()
        lent = self.child.lent_slot()
        self._own_slot = lent is None  # released at close; a lent one is its lender's
        self.slot = lent or scratch.claim_slot()
        self.room = None
        self._measured = 0.0  # when the child was last measured (see _watch)
        self.used = 0.0  # seconds of the time in all (limits.total_seconds) the child has had: only while it had a
        # request (`_resume`), never the parent's own work between requests (red team 16: 57-62% of a correct
        # layer's run, 84% of a patched worker's offering 2,048 readings and call styles)
        self._our_processes: set[int] | None = None  # see _ours
        try:
            target = Target.parse(spec)
            copy_root, rel, path = placement(target, self.search_dir, submission)
            self.room = scratch.Scratch.with_copy(self.slot.number, copy_root, self.limits.file_mb * MB,
                                                  self.limits.scratch_mb * MB, self.limits.scratch_files, left_out)
            copied = os.path.join(self.room.path, rel) if rel and not os.path.isabs(rel) else None
            # a missing file whose folder was copied is named in the copy, so that the child lists what is there
            seen = copied is not None and (os.path.lexists(copied) or os.path.isdir(os.path.dirname(copied))
                                           and os.path.isdir(copy_root))
            self.child_spec = spec if path is None else str(target.at(rel if seen else path))  # not copied: as given
            self.submission_code = not own_code(target.where, path)  # a submission's: our packages hidden from it
            self.policy = make_policy(self.room.path, self.slot.number, self.limits, own_code=not self.submission_code)
            self.started = self.spawned = time.monotonic()
            self.pid, self._out_fd, self.record = self.child.start(self.policy, self.log, self.limits,
                                                                   self.allow_unconfined)
            self._awaiting_ready = self.child.announces_ready
            self._fit_or_refuse()
        except BaseException:
            self._release()
            raise

    def _fit_or_refuse(self) -> None:
        """A grading child that is not fit to grade: killed before the submission is handed over (nothing of it has
        run yet), unless allowed; allowed, its isolation block says it was accepted."""
        unfit = isolation.unfit_to_grade(self.record) if self.grading else ""
        if unfit and not self.allow_unconfined:
            self.child.kill()
            raise isolation.IsolationFailed(unfit)
        self.accepted = "--allow-unconfined" if unfit else ""

    @property
    def cpu(self) -> float | None:
        """The worker's CPU seconds, when its exit reached us with them."""
        return self.child.cpu

    def _alive(self) -> bool:
        return self.child.wait(0) is None

    def calls(self, requests: list[m.Request]) -> list[m.Reply]:
        """Send requests in one frame and return their replies; the first failure raises (TargetFailure for the
        student's code, HarnessFailure for ours), a dead or silent child raises WorkerDied."""
        replies = self._exchange(list(requests))
        if replies and isinstance(replies[-1], m.Failed):
            raise self._failure(replies[-1])
        return replies

    def frame(self, groups: list[tuple[Instance, list[m.Request]]]) -> list[list[m.Reply] | BaseException]:
        """`frame_now`; or, asked from a thread whose frames are gathered (`gather`, set by the engine while it
        runs a property for several configurations together, harness.engine.together), those groups sent with
        the other configurations' in one frame, with the same answer."""
        if self.gather is not None and self.gather.holds():
            return self.gather.frame(groups)
        return self.frame_now(groups)

    def frame_now(self, groups: list[tuple[Instance, list[m.Request]]]) -> list[list[m.Reply] | BaseException]:
        """Requests on several instances in one round trip, each group behind its instance's Build and weights
        (`Instance.before_next`), in the order given, as if each group were sent on its own one after another.
        One entry per group that ran: its replies, or what sending it alone would have raised (the first failure
        ends the frame there, as it would have ended the calls; the exception's `answered` holds the group's
        replies before it).  Groups after a failure are not run and get no entry; a dead or silent child raises
        WorkerDied, as `calls` does.  Every request keeps the wall-clock time it would have had on its own
        (`call_seconds`), pooled over the frame, within what is left of the target's (`total_seconds`)."""
        flat, spans, building = [], [], set()
        for inst, requests in groups:
            prefix = inst.before_next(build=id(inst) not in building)  # one Build per instance, in its first group
            building.add(id(inst))
            spans.append((inst, prefix, len(flat), len(prefix) + len(requests)))
            flat += prefix + list(requests)
        if not flat:
            return [[] for _ in groups]
        try:
            replies = self._exchange(flat, rounds=len(flat))
        except BaseException:
            for inst, prefix, _, _ in spans:
                inst.answered(prefix, [])
            raise
        entries = []
        for inst, prefix, start, size in spans:
            got = replies[start:start + size]
            failure = self._failure(got[-1]) if got and isinstance(got[-1], m.Failed) else None
            inst.answered(prefix, got)
            if failure is not None:
                failure.answered = got[len(prefix):-1]  # the group's replies before the request that failed
                entries.append(failure)
            elif got:
                entries.append(got[len(prefix):])
        return entries

    def frame_or_raise(self, groups: list[tuple[Instance, list[m.Request]]]) -> list[list[m.Reply]]:
        """`frame`, raising what the first failing group raised: for groups that are judged only all together."""
        entries = self.frame(groups)
        for entry in entries:
            if isinstance(entry, BaseException):
                raise entry
        return entries

    def build_ahead(self, instances: list[Instance]) -> None:
        """Send the Builds of these instances (those not built yet) in one round trip, up to the first that the
        constructor refuses; that refusal is raised at its instance's next use (`Instance.info` or a request), so
        that the constructor runs once, as if it had been sent then."""
        waiting = list({id(inst): inst for inst in instances if inst.unbuilt}.values())
        for inst, entry in zip(waiting, self.frame([(inst, []) for inst in waiting])):
            if isinstance(entry, Exception) and inst.unbuilt:
                inst.refused(entry)

    def _exchange(self, requests: list[m.Request], rounds: int = 1) -> list[m.Reply]:
        """One frame out, its replies back: all of them, or up to and including the first `Failed`.  A dead or
        silent child raises WorkerDied.  The frame may take `rounds` times one request's time (`frame`)."""
        if self.dead:
            raise self.dead
        if self._awaiting_ready:
            self._until_ready()
        op = "+".join(dict.fromkeys(r.op for r in requests))  # what it was doing, each kind once
        now = self._resume()
        seconds = self.limits.call_seconds * max(1, rounds)
        deadline = min(now + seconds, self.started + self.limits.total_seconds)
        try:
            self.child.send(m.encode_batch(requests), deadline)
            builds = sum(isinstance(r, m.Build) for r in requests)  # each answer lists a module's names: its own room
            configs = {inst.handle: inst.cfg for inst in self._builds.values()}
            replies = m.decode_replies(*protocol.decode(DeadlineReader(self._out_fd, deadline, self._watch()),
                                                        max_header=protocol.MAX_HEADER * max(1, builds),
                                                        max_payload=reply_budget(requests, configs)))
            if len(replies) > len(requests) or (len(replies) < len(requests) and not isinstance(replies[-1], m.Failed)):
                raise protocol.ProtocolError(f"{len(replies)} replies to {len(requests)} requests")
            if any(isinstance(reply, m.Failed) for reply in replies[:-1]):  # a failure ends a frame
                raise protocol.ProtocolError("a failure before the end of the replies")
            for request, reply in zip(requests, replies):
                m.check_answer(request, reply)
            if time.monotonic() - max(self._measured, self.started) >= self._between_frames():
                self._watch()()  # also between quick frames: a child may fill its folder and answer at once
        except scratch.ScratchFull as e:
            self.child.kill()
            self.dead = WorkerDied("disk", f"disk limit: your code wrote {e} in the folder it runs in, during {op} "
                                           "(it holds the copy of your submission and what your code writes)")
            raise self.dead from None
        except footprint.TooMuch as e:
            raise self._too_much(e, op) from None
        except TimeoutError:
            stopped = linux.stopped_in_tree(self.pid)
            self.child.kill()
            total = deadline >= self.started + self.limits.total_seconds
            limit = f"{self.limits.total_seconds:g} s in all" if total else f"{seconds:g} s"
            if stopped:
                self.dead = WorkerDied("killed", f"the process running your code was stopped (SIGSTOP) during {op} "
                                                 f"and did not answer within {limit}")
            elif op == "load" and total and now + seconds > deadline + 1:  # the run's budget, nearly spent before
                # this import began (a fresh child after a check ended the last one): no sign of a loop at import
                self.dead = WorkerDied("time", f"time limit: the time for all checks ({limit}) ran out while your file "
                                               "was imported again in a fresh process: the checks before it had used "
                                               "nearly all of it")
            elif op == "load":  # a hang at import is said as one: the loop is at module level, not in forward
                self.dead = WorkerDied("time", f"time limit: your file did not finish importing within {limit}: look "
                                               "for a loop at module level (code outside functions and classes runs "
                                               "on import)", op)
            else:
                self.dead = WorkerDied("time", f"time limit: your code did not finish {op} within {limit} (an endless "
                                               "loop, a sleep, or far too much work)", op)
            raise self.dead from None
        except (EOFError, BrokenPipeError, OSError, protocol.ProtocolError) as e:
            self.dead = self._classify_death(op, e)
            raise self.dead from None
        except BaseException:  # interrupted (Ctrl-C, a grader stopped): the child is stopped where it is, so that
            self.child.kill()       # closing needs no answer from it (it may be deep in the student's loop)
            self.dead = WorkerDied("interrupted", f"mha-check was stopped during {op}")
            raise
        finally:
            self.used = time.monotonic() - self.started
        return replies

    def _resume(self) -> float:
        """Start the child's clock again where it stopped (`used`), at a request: the time in all counts from
        `started`, moved on by the time the parent computed since the last answer.  Returns now."""
        now = time.monotonic()
        self.started = now - self.used
        return now

    def call(self, request: m.Request) -> m.Reply:
        return self.calls([request])[0]

    def stream(self, request: m.Request, more: tuple[type, ...], seconds_each: float):
        """Send one request that is answered in several frames (RunTests): yield each reply as it comes, `more`
        (the kinds that may come before the answer) and then the answer itself (or Failed), which ends it.  Each
        frame must come within `seconds_each` of the one before (and within the target's `total_seconds`); a
        silent, dead or garbling child raises WorkerDied as `calls` does, so the caller knows which replies came
        before it.  Frames are headers only: one that declares an array is refused unread."""
        if self.dead:
            raise self.dead
        if self._awaiting_ready:
            self._until_ready()
        op = request.op
        self._resume()
        deadline = lambda: min(time.monotonic() + seconds_each, self.started + self.limits.total_seconds)
        try:
            self.child.send(m.encode_batch([request]), deadline())
            while True:
                end = deadline()
                replies = m.decode_replies(*protocol.decode(DeadlineReader(self._out_fd, end, self._watch()),
                                                            max_payload=0))
                if len(replies) != 1:
                    raise protocol.ProtocolError(f"{len(replies)} replies in one frame of a {op}")
                reply = replies[0]
                if not isinstance(reply, more):
                    reply = m.check_answer(request, reply)
                yield reply
                if not isinstance(reply, more):
                    return
        except scratch.ScratchFull as e:
            self.child.kill()
            self.dead = WorkerDied("disk", f"disk limit: your code wrote {e} in the folder it runs in, during {op}")
            raise self.dead from None
        except footprint.TooMuch as e:
            raise self._too_much(e, op) from None
        except TimeoutError:
            self.child.kill()
            total = time.monotonic() + 1 >= self.started + self.limits.total_seconds
            limit = f"{self.limits.total_seconds:g} s in all" if total else f"{seconds_each:g} s"
            self.dead = WorkerDied("time", f"time limit: your code did not let the test finish within {limit} (an "
                                           "endless loop, a sleep, or far too much work)", op)
            raise self.dead from None
        except (EOFError, BrokenPipeError, OSError, protocol.ProtocolError) as e:
            self.dead = self._classify_death(op, e)
            raise self.dead from None
        except GeneratorExit:
            self.child.kill()  # the caller stopped listening: what the child still sends is nobody's
            self.dead = WorkerDied("interrupted", f"mha-check stopped reading during {op}")
            raise
        except BaseException:
            self.child.kill()
            self.dead = WorkerDied("interrupted", f"mha-check was stopped during {op}")
            raise
        finally:
            self.used = time.monotonic() - self.started

    def _watch(self):
        """What the trusted side measures while it waits for the child: an unbounded scratch (see
        scratch.Scratch.overflow) and the memory of its processes together (`harness.sandbox.footprint`: the
        kernel's limits are per process)."""
        room = self._measured_room()

        def measure() -> None:
            self._measured = time.monotonic()
            uid = self.record.get("uid") if self.record else None
            owner = (uid, self.record.get("gid", uid)) if uid is not None and is_slot_uid(uid) else None
            pids = [p for p in self._processes() if p not in self._ours()]
            many = footprint.crowded(pids, owner)  # first: the scratch's measure reads each mapping's line
            if many is not None:
                raise footprint.TooMuch("", whole=f"process {many[0]} of your code held more than "
                                                  f"{footprint.MAX_MAPPINGS} memory mappings (mmap), whose cost to "
                                                  "the machine's kernel no limit counts")
            over = room.overflow(pids, owner) if room is not None else None
            if over is not None:
                raise scratch.ScratchFull(over)
            if len(pids) > 1:  # one process is held by its own limits
                taken, hidden = footprint.proportional_memory(pids, owner)
                if hidden or taken > self.limits.in_all_mb * MB:
                    raise footprint.TooMuch(f"{len(pids)} processes" + (
                        f" (process {hidden[0]} hides its memory from mha-check)" if hidden else
                        f" that took {taken // MB} MB together"))
        return measure

    def _between_frames(self) -> float:
        """How often the measures run between frames that come back quickly: an unbounded scratch every
        WATCH_SECONDS (a child may fill it and answer at once), the memory alone less often (each measure reads the
        status of every process on the machine, and a correct layer's run, a second or two of quick frames, should
        not pay for it; a child whose processes hold memory longer, or answer slowly, is measured)."""
        return WATCH_SECONDS if self._measured_room() is not None else MEMORY_WATCH_SECONDS

    def _measured_room(self):
        """The scratch when no filesystem of its own bounds it (its budget is measured), else None."""
        return self.room if self.room is not None and self.room.budget is not None else None

    def _too_much(self, e: footprint.TooMuch, op: str) -> WorkerDied:
        self.child.kill()
        if e.whole:
            self.dead = WorkerDied("memory", f"memory limit: {e.whole}, during {op}")
            return self.dead
        self.dead = WorkerDied("memory", f"memory limit: your code ran {e}, during {op}; all of them together may "
                                         f"take what one may ({self.limits.in_all_mb} MB)")
        return self.dead

    def _processes(self) -> list[int]:
        """The child's processes now: every process of the slot's uid (none but the child's), else the tree below
        the process we started (the user's own uid is also the grader's)."""
        uid = self.record.get("uid") if self.record else None
        if uid is not None and is_slot_uid(uid):
            return scratch.processes_of(uid)
        return linux.process_tree(self.pid) if self.pid else []

    def _ours(self) -> set[int]:
        """Our own processes among the child's: the relay or keeper we started and, in a PID namespace, its pid 1.
        They run none of the student's code, hold no file (each closed them all) and are non-dumpable on purpose
        (the student's code may not write into them), so their /proc/PID/fd is closed to an ordinary user.  Found
        once: they live as long as the child."""
        if self._our_processes is None and self.pid and self.record:
            ours = set()
            if self.record.get("keeper") or "pid" in self.record.get("namespaces", ()):
                ours.add(self.pid)
            if "pid" in self.record.get("namespaces", ()):
                ours.update(linux.children_of(self.pid))
            self._our_processes = ours
        return self._our_processes or set()

    def _until_ready(self) -> None:
        """Wait for the worker's `Ready` (its imports done, no code of the student's run yet): the time limit counts
        only from there (`_resume` counts only the child's requests): importing torch takes 1.5 s on a quiet machine
        and many times that on a loaded grader, and none of it is the student's.  Waited for at the first request, so
        that the trusted side's own imports overlap the child's.  A worker that never gets ready is ours to answer
        for (kind "startup": cannot tell)."""
        self._awaiting_ready = False
        deadline = self.spawned + STARTUP_SECONDS
        try:
            replies = m.decode_replies(*protocol.decode(DeadlineReader(self._out_fd, deadline), max_payload=0))
            if [type(r) for r in replies] != [m.Ready]:
                raise protocol.ProtocolError(f"{type(replies[0]).__name__} instead of Ready")
        except TimeoutError:
            self.child.kill()
            self.dead = WorkerDied("startup", f"mha-check's worker did not finish its own start (importing torch) "
                                              f"within {STARTUP_SECONDS} s: the machine is overloaded")
            raise self.dead from None
        except (EOFError, OSError, protocol.ProtocolError) as e:
            code = self.child.wait(5)
            self.child.kill()
            self.dead = WorkerDied("startup", f"mha-check's worker ended before any of your code ran ({e}; status "
                                              f"{code}; last output: {self._last_line()!r}): its Python cannot "
                                              f"import torch under these limits?")
            raise self.dead from None
        self.started += time.monotonic() - self.spawned  # a restart keeps the budget it inherited, less our start

    def _failure(self, failed: m.Failed) -> Exception:
        """What a failed request raises: the student's code raised (TargetFailure, or a memory-limit death when it
        ran out of memory), or our own code in the child did (HarnessFailure: never the student's fault)."""
        self.notes = self.notes or list(failed.notes)
        if failed.stage == "harness":
            return HarnessFailure(failed.message[:4000])
        if failed.stage == "adapter":
            return CannotDrive(failed.message[:4000])
        failure = TargetFailure(failed.stage[:40], failed.message[:4000])
        if failure.out_of_memory:
            self.child.kill()
            self.dead = WorkerDied("memory", f"memory limit: your code tried to use more than "
                                             f"{self.limits.memory_mb} MB ({failure.message[:300]})")
            return self.dead
        if failure.over_output_limit:
            self.child.kill()
            self.dead = WorkerDied("output", f"output limit: your code wrote more than {self.limits.file_mb} MB "
                                             f"(printing, most likely; mha-check keeps what it writes up to that "
                                             f"size): {failure.message[:200]}")
            return self.dead
        if failure.disk_full:  # the machine's disk, never the student's failure: cannot tell, as the disk limit is
            self.child.kill()
            self.dead = WorkerDied("disk", f"disk full: the disk your code runs on had no room left, which mha-check "
                                           f"cannot tell from a mistake ({failure.message[:300]})")
            return self.dead
        return failure

    def _classify_death(self, op: str, error: Exception) -> WorkerDied:
        if isinstance(error, protocol.FrameTooLarge):  # refused unread: our worker never sends more than was asked
            self.child.kill()
            room = f"at most {error.allowed / MB:.1f} MB" if error.allowed else "none"
            return WorkerDied("channel", f"your code corrupted the channel to mha-check during {op}: its answer "
                                         f"declared {error.declared / MB:.1f} MB of arrays where {room} can be "
                                         "needed (mha-check's worker patched to pad its replies?); mha-check read "
                                         "none of it")
        if isinstance(error, protocol.ProtocolError):  # garbage on the channel: no answer can be trusted now
            self.child.kill()
            return WorkerDied("channel", f"your code corrupted the channel to mha-check during {op} ({error}): "
                                         "it writes to file descriptors it does not own")
        code = self.child.wait(5)
        if code is None:  # the channel closed but the process lives on
            self.child.kill()
            return WorkerDied("crash", f"your code closed its channel to mha-check during {op} ({error})")
        self.child.kill()
        sig = -code if code < 0 else code - 128 if code > 128 else 0
        if sig == signal.SIGXCPU or sig == signal.SIGKILL and self._cpu_limit_reached():
            return WorkerDied("cpu", f"CPU time limit ({self.limits.cpu_seconds} s) exceeded during {op}")
        if sig == signal.SIGXFSZ:
            return WorkerDied("output", f"your code wrote more than {self.limits.file_mb} MB (to a file or to "
                                        f"stdout/stderr) during {op}")
        name = signal.Signals(sig).name if sig in signal.Signals.__members__.values() else str(sig)
        if sig in SENT_SIGNALS:
            return WorkerDied("killed", f"the process running your code was killed by signal {name} during {op}"
                                        f" (last output: {self._last_line()!r})")
        if sig:
            return WorkerDied("crash", f"the process running your code crashed with signal {name} during {op}"
                                       f" (last output: {self._last_line()!r})")
        return WorkerDied("exit", f"the process running your code exited (status {code}) during {op} without "
                                  f"answering: sys.exit / os._exit in your code? (last output: {self._last_line()!r})")

    def _last_line(self) -> str:
        """The last line the child wrote to its log (for a message about how it ended)."""
        return (self.stderr_tail(300).strip().splitlines()[-1:] or [""])[0][:200]

    def _cpu_limit_reached(self) -> bool:
        """A SIGKILL we did not send: the CPU limit (hard == soft kills outright), if the worker's CPU time says so
        or, where it is unknown (bubblewrap), if enough time has passed for the limit to be reached at all."""
        if self.child.cpu is not None:
            return self.child.cpu >= self.limits.cpu_seconds - 1
        return (time.monotonic() - self.spawned) * (os.cpu_count() or 1) >= self.limits.cpu_seconds - 1

    def load(self) -> m.Loaded:
        """Give the child the submission (its copy in the scratch folder): from here on, code of the student's runs
        there, so every module the trusted side will ever run is imported first."""
        if self.loaded is None:
            trusted.preload()
            self.loaded = self.call(m.Load(self.child_spec, self.room.path, self.overrides, self.weight_map,
                                           submission=self.submission_code))
            self.notes = list(self.loaded.notes)
        return self.loaded

    def build(self, cfg: Config, force_dropout: float | None = None, fresh: str = "") -> Instance:
        """The student's module for this constructor configuration, built once in the child: its Build goes with
        the first request on it (see `Instance`).  `fresh`: another module of the same configuration, built once
        under that name, which no other request has run (what a layer makes at its first forward shows in it)."""
        key = cfg.ctor_key() + (force_dropout,) + ((fresh,) if fresh else ())
        self.load()  # the child builds only a target it has loaded
        if key not in self._builds:
            handle = len(self._builds)
            self._builds[key] = Instance(self, cfg, handle, m.Build(cfg.to_dict(), child_seed(self.seed), force_dropout,
                                                                     handle))
        return self._builds[key]

    def stderr_tail(self, n: int = 2000) -> str:
        return log_tail(self.log, n)

    def output_mark(self) -> int:
        """Where the child's output ends now (see output_after)."""
        try:
            return self.log.seek(0, os.SEEK_END)
        except (ValueError, OSError):
            return 0

    def output_after(self, mark: int, n: int = 8000) -> bytes:
        """The last `n` bytes the child printed after `mark`."""
        try:
            end = self.log.seek(0, os.SEEK_END)
            self.log.seek(max(mark, end - n))
            return self.log.read(n)
        except (ValueError, OSError):
            return b""

    def add_output(self, data: bytes) -> None:
        """Output printed for this submission by another of its children (Context.meta_forward's twin), appended
        to this child's while it waits for a request."""
        try:
            self.log.seek(0, os.SEEK_END)
            self.log.write(data)
            self.log.flush()
        except (ValueError, OSError):
            pass

    def protections(self) -> list[str]:
        return self.child.protections(self.limits)

    @property
    def compiled(self) -> list[str]:
        """The submission's files left out as compiled code: never in the child's folder, so never run."""
        return self.room.compiled if self.room is not None else []

    @property
    def isolation(self) -> dict:
        """The report's isolation block: what confined the child, measured inside it, and its scratch copy."""
        if not self.record:
            return {}
        accepted = {"accepted": f"graded although unfit, as {self.accepted} asked"} if self.accepted else {}
        return {**isolation.describe(self.record), **accepted, "submission_copy": self.room.describe()}

    def close(self) -> None:
        """The child ended and everything of it released, even when an interruption arrives while closing."""
        try:
            if self._alive() and not self.dead:
                try:
                    self.call(m.Bye())
                except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied):
                    pass
        finally:
            try:
                self.child.kill()
            finally:
                try:
                    self._release()
                finally:
                    self.child.close()

    def _release(self) -> None:
        """Nothing of the child survives: leftover processes of its uid (only possible without a PID namespace),
        its scratch folder, its slot, its log."""
        uid = self.record.get("uid") if self.record else None
        if uid is not None and "pid" not in self.record.get("namespaces", ()) and is_slot_uid(uid):
            scratch.kill_leftovers(uid)
        if self.room is not None:
            self.room.remove()
            self.room = None
        if self._own_slot:
            self.slot.release()
        self.log.close()


def child_seed(seed: int) -> int:
    """The seed the child builds its modules with (their own initial weights, before ours are written): the run's
    seed where anyone may know it (below 2**32: --seed as typed, 0 by default), else a digest of it, so that the
    code graded never learns a seed drawn for a grade (harness.frontends.seeds) and cannot print it into its
    report, from which a student would read it."""
    if seed < 2 ** 32:
        return seed
    return int.from_bytes(hashlib.sha256(b"mha-check child seed %d" % seed).digest()[:4], "big")


def kill_tree(pid: int, record: dict, wait: Callable[[float], int | None]) -> None:
    """The whole process group of `pid`, and with it (PID namespace) everything the child started; `wait` as in
    `Start.wait`.  Without a PID namespace a single run's child has a keeper (confine._fork_keeper), asked first: it
    kills the child and every process the child left, and exits only then."""
    if record.get("keeper") and wait(0) is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
        if wait(10) is not None:
            return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    wait(5)


def log_tail(log: BinaryIO, n: int = 2000) -> str:
    """The last `n` bytes a child wrote to its log, marked as cut when there was more."""
    try:
        log.seek(0, os.SEEK_END)
        size = log.tell()
        log.seek(max(0, size - n))
        kept = log.read().decode("utf-8", "replace")
        return kept if size <= n else f"{OUTPUT_CUT_MARK}{n} of {size} bytes]\n{kept}"
    except (ValueError, OSError):
        return ""


def worker_code() -> str:
    """The worker's bootstrap: the folder our own packages came from first on sys.path (run with `python -I`: no
    cwd, no PYTHONPATH on it, so a student's harness.py cannot shadow ours)."""
    return names.boot("import harness.child.worker as w; w.main()")


def worker_command() -> list[str]:
    return isolation.python_command(worker_code())


@functools.lru_cache(maxsize=1)
def _child_bytecode() -> None:
    """Bytecode for the packages a fresh child imports of ours (harness.child, harness.wire), written once per
    process where our own files may be written.  The child runs with -B and the trusted side never imports
    harness.child, so a checkout had none: every single run's child compiled them from source, about 25 ms of its
    start.  An installed wheel has it already; a tree we may not write is left as it is.  Our source compiled by us,
    never run here."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for package in ("child", "wire"):
        with contextlib.suppress(OSError):
            compileall.compile_dir(os.path.join(root, package), maxlevels=0, quiet=2)
