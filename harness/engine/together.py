"""Configurations asked together: each one's property as straight-line code, their round trips in one frame.

A check states a property of one configuration (`prop(cfg)`: build it, call it, judge the answer) and
`search.find_failure` asks it about nine or so.  Asked one after another, that is a round trip to the child per
configuration and per call, and a round trip costs about a forward pass of these small layers.  Here each
configuration's property runs in a thread of its own (threads are kept for the next search), but never two at
once: a baton goes from one to the next in configuration order.  A property that asks for a round trip
(`Subject.frame`, which `Instance.calls`, `Instance.info` and `Context.frame` all go through) hands over its
requests and waits; once every property still running waits or is done, their requests go to the child in one
frame, in configuration order, and each gets its own replies back and runs on, in order, to its next round trip or
its verdict: one frame per step that every configuration takes (a check that reads the layout before it
transplants weights takes two: the builds, then the calls), however many configurations there are.

The verdict is that of asking one at a time, in order (`run`):
- the first configuration whose property fails or raises decides: none after it is started, and those waiting are
  abandoned (an `Abandoned` raised where they wait, which no property catches);
- a request that fails ends the frame where it would have ended the calls (`Subject.frame`): its configuration
  gets the failure, the configurations after it get nothing and send their requests again in the next frame;
- weights transplanted on an instance go with the configuration that wrote them, bound when it asks for its round
  trip: two configurations with the same constructor arguments share one instance;
- a child that dies in a frame: every configuration in that frame gets the WorkerDied (the first in order raises it).
What differs, by design: a configuration after one whose values fail may have had its requests run too, unread
(should one of them kill the child, the check reports that crash instead).

The properties run one at a time, so they may share what the check keeps (a list, a set) and the context's caches
without a lock; a property must not start a lazy computation of the context that takes round trips of its own
(`Context.mapping`, `Context.recorded`) that another configuration might start too: a check reads those before
asking, or after the verdict.
"""
from __future__ import annotations

import os
import threading

_here = threading.local()  # .run: the configuration whose property this thread runs


class Abandoned(BaseException):
    """Raised where an abandoned property waits: an earlier configuration has decided the verdict.  A
    BaseException, so that no property's `except Exception` keeps it alive."""


class _Signal:
    """One thread tells another to go on: a lock held until `release` (half the cost of a Semaphore, which is
    written in Python; a configuration takes a few such hand-overs per step)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._lock.acquire()

    def release(self) -> None:
        try:
            self._lock.release()
        except RuntimeError:  # told twice before it was heard (an interruption abandoning a run): once is enough
            pass

    def acquire(self) -> None:
        self._lock.acquire()


class _Worker:
    """A thread that runs properties, one after another: kept for the next search once its property is done
    (starting a thread costs about as much as the hand-overs of a whole search)."""

    _idle: list[_Worker] = []
    _lock = threading.Lock()
    started = 0  # how many were ever started (tests: none is lost)

    def __init__(self):
        self.job, self.run = _Signal(), None
        _Worker.started += 1
        threading.Thread(target=self._loop, daemon=True, name="mha-check configuration").start()

    @classmethod
    def take(cls) -> _Worker:
        with cls._lock:
            if cls._idle:
                return cls._idle.pop()
        return cls()

    @classmethod
    def idle(cls) -> int:
        return len(cls._idle)

    def _loop(self) -> None:
        while True:
            self.job.acquire()
            run, self.run = self.run, None
            run.main(self)

    def free(self) -> None:
        with _Worker._lock:
            _Worker._idle.append(self)


def _forget_workers_after_fork() -> None:
    """A forked process has only the thread that forked: the idle workers listed are threads it does not have, and
    a search handed to one would wait forever (mutmut forks a process per mutant from one that ran the checks: the
    mutation run's mutants of the reference all timed out)."""
    _Worker._idle = []
    _Worker._lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_workers_after_fork)


class _Run:
    """One configuration's property, run by a worker thread, and what it waits for."""

    def __init__(self, cfg, prop, together: Together):
        self.cfg, self.prop, self.together = cfg, prop, together
        self.go, self.back = _Signal(), _Signal()
        self.started = False
        self.asking: list | None = None  # [(instance, weights bound to it, requests)] while it waits for a frame
        self.reply: tuple | None = None  # ("entries", [...]) or ("raise", exception): what the frame gave it
        self.abandoned = False
        self.done, self.outcome, self.raised = False, None, None

    def main(self, worker: _Worker) -> None:
        """In the worker's thread: the property, from the first `step` to its verdict."""
        self.go.acquire()
        _here.run = self
        try:
            self.outcome = self.prop(self.cfg)
        except Abandoned:
            pass
        except BaseException as e:  # noqa: BLE001 - raised in its turn, by the caller (`run`)
            self.raised = e
        finally:
            _here.run = None
            self.done = True
            worker.free()  # before the hand-over: whoever asks next finds it idle
            self.back.release()

    def step(self) -> None:
        """Let the property run until it waits for a frame or is done."""
        if not self.started:
            self.started = True
            worker = _Worker.take()
            worker.run = self
            worker.job.release()
        self.go.release()
        self.back.acquire()

    @property
    def waiting(self) -> bool:
        return not self.done and self.asking is not None

    @property
    def decided(self) -> bool:
        """Done with a verdict that ends the search: a failure, or an exception."""
        return self.done and (self.outcome is not None or self.raised is not None)


class Together:
    """While `run` runs, the subject's frames asked from its properties' threads come here (`Subject.gather`)."""

    def __init__(self, subject):
        self.subject = subject

    def holds(self) -> bool:
        """This thread runs a property of ours: its frames wait for the others'."""
        run = getattr(_here, "run", None)
        return run is not None and run.together is self

    def frame(self, groups: list) -> list:
        """In a property's thread: wait for the frame that carries these groups, and give back what
        `Subject.frame` alone would have."""
        run = _here.run
        bound = [(inst, inst.take_weights(), list(requests)) for inst, requests in groups]
        run.asking, run.reply = bound, None
        while run.reply is None:  # a failure earlier in the frame: sent again in the next one
            run.back.release()
            run.go.acquire()
            if run.abandoned:
                raise Abandoned
        kind, got = run.reply
        run.asking = run.reply = None
        if kind == "raise":
            raise got
        entries = []
        for (inst, weights, _), entry in zip(bound, got):
            written = entry.answered[:len(weights)] if isinstance(entry, BaseException) else entry[:len(weights)]
            inst.answered(weights, written)  # weights the failure kept from being written wait for the next request
            if isinstance(entry, BaseException):
                entry.answered = entry.answered[len(weights):]
                entries.append(entry)
            else:
                entries.append(entry[len(weights):])
        return entries

    def run(self, prop, configs: list) -> dict:
        """{configuration: its outcome (None: fine) or the exception its property raised}: in configuration order
        up to the first that failed or raised (included), as asking one at a time would have found them, and any
        after it that finished with the frames already sent."""
        runs = [_Run(cfg, prop, self) for cfg in configs]
        try:
            live = self._phases(runs)
        finally:
            self._abandon([r for r in runs if r.started and not r.done])
        return {r.cfg: r.raised if r.raised is not None else r.outcome for r in live}

    def _phases(self, runs: list[_Run]) -> list[_Run]:
        """Step every property in order until all are done: those given replies run on, the first configuration
        that fails or raises decides.  After it, nothing new is started or sent: a property that had its replies
        in the frame that decided still judges them (the search may want that answer while shrinking, as asking
        one at a time would have had to ask for it), one that wants more is abandoned."""
        while True:
            decider = None
            for r in runs:
                if not r.done and (r.reply is not None or not r.started and decider is None):
                    r.step()
                    if decider is not None and not r.done:
                        self._abandon([r])
                if decider is None and r.decided:
                    decider = r
            if decider is not None:
                after = runs[runs.index(decider) + 1:]
                self._abandon([r for r in after if r.started and not r.done])
                runs = runs[:runs.index(decider) + 1] + [r for r in after if r.done and not r.abandoned]
            waiting = [r for r in runs if r.waiting]
            if not waiting:
                return [r for r in runs if r.done and not r.abandoned]
            self._send(waiting)

    def _send(self, waiting: list[_Run]) -> None:
        groups = [(inst, weights + requests) for r in waiting for inst, weights, requests in r.asking]
        try:
            entries = self.subject.frame_now(groups)
        except BaseException as e:  # noqa: BLE001 - a dead child, or an interruption: each property raises it
            for r in waiting:
                r.reply = ("raise", e)
            return
        start = 0
        for r in waiting:
            mine = entries[start:start + len(r.asking)]
            start += len(r.asking)
            if len(mine) == len(r.asking) or (mine and isinstance(mine[-1], BaseException)):
                r.reply = ("entries", mine)  # all its groups ran, or its own failure ended the frame

    @staticmethod
    def _abandon(runs: list[_Run]) -> None:
        for r in runs:
            r.abandoned = True
            r.step()
