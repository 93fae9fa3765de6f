"""Ctrl-C and SIGTERM end `mha-check grade` within a bound, whatever they interrupt.

The first SIGINT or SIGTERM raises KeyboardInterrupt in the main thread (the batch then stops its graders, writes
the summary of what was graded and says so) and arms a timer: should anything on the way out block (a grader that
does not end, a full disk's write, the interpreter's exit handlers), the process ends STOP_BOUND seconds after the
signal with status 130 and one line on stderr.  Signals after the first are ignored: the way out is already taken,
and a second KeyboardInterrupt in the middle of writing the summary would lose it.

One block was found on a loaded machine: concurrent.futures' exit handler joins the pool's manager thread, which
waited for the rest of a result a grader had begun to send when it was stopped (a grader between submissions ends
at once on SIGTERM).  The main process holds the write end of that pipe too, so the read never saw an end of file.
`release_pool` closes that write end once the graders are gone (the read then ends, the manager thread finishes the
pool), and `exit_now_if_stuck` ends the process without the exit handlers when a thread is still running anyway.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

STOP_BOUND = 60.0  # seconds from the first signal to the end of the process, at most
GRADERS_STOP = 20.0  # of which, for the graders to unwind their submissions (then they are killed)
THREADS_STOP = 5.0  # for the pool's own threads to end once the graders are gone


class StopBound:
    """The handlers of one batch: `install()` at its start, `restore()` at its end (which leaves the timer armed
    when a signal came: the process is on its way out and must still end within the bound)."""

    def __init__(self, bound: float = STOP_BOUND) -> None:
        self.bound = bound
        self.signalled: float | None = None  # time.monotonic() of the first signal
        self.previous: dict = {}
        self.threads: set = set()  # those running before the batch: not the batch's to wait for
        self.previous_hook = sys.unraisablehook
        self.raised_again = False  # raise_if_absorbed did, once
        self.pid = os.getpid()  # the process whose handler this is: a grader forked from it inherits the handler

    def install(self) -> StopBound:
        global _ACTIVE
        self.threads = set(threading.enumerate())
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self.previous[signum] = signal.signal(signum, self.on_signal)
            self.previous_hook, sys.unraisablehook = sys.unraisablehook, self.on_unraisable
            _ACTIVE = self
        return self

    def on_unraisable(self, unraisable) -> None:
        """The interrupt raised where Python cannot raise (a fork handler such as logging's, a finaliser): Python
        swallows it and prints a traceback.  Quiet here; `raise_if_absorbed` raises it again where it can land."""
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and self.signalled is not None:
            return
        self.previous_hook(unraisable)

    def on_signal(self, signum, frame) -> None:
        if os.getpid() != self.pid:  # a grader forked from `grade` that has not installed its own handler yet
            # (harness.frontends.grader.start): nothing of its own to clean up.  Raising here had put an "Exception
            # in initializer" traceback on the terminal when SIGTERM landed half a second into a batch (a rehearsal)
            os._exit(0)
        if self.signalled is not None:
            return
        self.signalled = time.monotonic()
        signal.signal(signal.SIGALRM, self.expire)
        signal.setitimer(signal.ITIMER_REAL, self.bound)
        raise KeyboardInterrupt

    def expire(self, signum, frame) -> None:
        """The bound is reached: end now, without the exit handlers that may be what blocks."""
        with contextlib.suppress(OSError):
            os.write(2, f"\nmha-check grade: still ending {self.bound:g} s after the interrupt; stopped now\n".encode())
        os._exit(130)

    def restore(self) -> None:
        global _ACTIVE
        if self.signalled is None:  # the batch ended on its own: the caller's handlers are back
            for signum, handler in self.previous.items():
                signal.signal(signum, handler)
            if self.previous:
                sys.unraisablehook = self.previous_hook
        self.previous, _ACTIVE = {}, None

    def exit_now_if_stuck(self, status: int, wait: float = THREADS_STOP) -> None:
        """After an interrupt, once everything is written: if a thread the batch started (a pool's manager thread)
        is still running after `wait` seconds, the interpreter's exit would join it, maybe forever; end the process
        now instead.  Threads that ran before the batch (an embedding program's) are not waited for."""
        deadline = time.monotonic() + wait
        ours = [t for t in threading.enumerate() if t not in self.threads and not t.daemon
                and t is not threading.current_thread()]
        for thread in ours:
            thread.join(max(0.0, deadline - time.monotonic()))
        if any(t.is_alive() for t in ours):
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(status)


_ACTIVE: StopBound | None = None  # the batch's handlers while installed


def raise_if_absorbed() -> None:
    """Where the batch waits (its loop over the graders): a signal came, yet its KeyboardInterrupt never got here,
    swallowed on the way (`StopBound.on_unraisable`, or a library's own `except`); raise it now, once."""
    if _ACTIVE is not None and _ACTIVE.signalled is not None and not _ACTIVE.raised_again:
        _ACTIVE.raised_again = True
        raise KeyboardInterrupt


def stop_processes(processes, grace: float = GRADERS_STOP) -> None:
    """SIGTERM to each process, one shared deadline for all of them to end (not one per process: 256 graders
    must not take 256 times as long), then SIGKILL for those still running."""
    for process in processes:
        with contextlib.suppress(ProcessLookupError, OSError):
            os.kill(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    for process in processes:
        if process.is_alive():
            with contextlib.suppress(ProcessLookupError, OSError):
                process.kill()
            process.join(5)


def release_pool(result_queue) -> None:
    """Once no grader is left: close this process's copy of the write end of the pool's result pipe, so that a read
    a grader left half-done ends (EOFError: the pool marks itself broken and its manager thread ends) instead of
    waiting forever for bytes nobody will send.  `result_queue`: the pool's, taken before its shutdown (which
    drops it)."""
    writer = getattr(result_queue, "_writer", None)
    if writer is not None:
        with contextlib.suppress(OSError):
            writer.close()

