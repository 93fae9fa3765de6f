"""The pool of graders of `mha-check grade`: every submission through it, each report written as it comes back.

A grader's failure costs one row, never the batch: a grader killed from outside breaks the pool, and what it left
is graded again by a fresh pool (at most MAX_POOL_BREAKS times); Ctrl-C stops every grader, each unwinding its
submission.  The graders themselves are harness.frontends.grader.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from dataclasses import replace
from pathlib import Path

from harness.engine.records import ProcessEvent
from harness.engine.runner import not_run
from harness.frontends import grader, stopping
from harness.frontends.batch_files import BatchFiles
from harness.frontends.pick import spec_for
from harness.frontends.progress import Progress
from harness.sandbox import trusted
from harness.sandbox.template import Template

MAX_POOL_BREAKS = 3  # pools broken by a grader's death (killed from outside) before the batch gives up on the rest
STUCK_GRACE = 30.0  # seconds a grader may lie dead before its pool notices; then the pool is taken as stuck


def grade_all(folders: dict[str, Path], target: str | None, flat: set[str], options: dict, args,
              template: Template | None, scratch_parent: str, files: BatchFiles, seal=None,
              left_out: dict[str, tuple[str, ...]] | None = None) -> tuple[list, bool]:
    """Every submission through the pool of graders; a grader's failure costs one row, never the batch.  A grader
    that ends without finishing (killed from outside, or by the OOM killer) breaks the whole pool: every submission
    not graded yet is then graded again by a fresh pool, up to MAX_POOL_BREAKS times.  Returns the rows and whether
    Ctrl-C stopped it (the graders are then stopped, each submission in progress with its child and scratch, and
    the rows are those graded).  The summary is rewritten after every report (`files`), so that a batch killed
    outright keeps the summary of what it had graded.  `seal(name, result)`: the report's text as written (the
    stamp `grade --resume` reads, harness.frontends.stamps).  `left_out`: what staging left out of each
    submission's folder (harness.frontends.submissions.Staged), for its report."""
    rows: list = []
    trusted.preload()  # every trusted module, once here while the template imports torch, not in each grader
    left, breaks, pool = dict(folders), 0, None
    progress = Progress(len(folders), args.jobs)
    try:
        while left:
            # Graders are forked from this process: it has imported the engine, and runs no thread of its own (with
            # "fork" the pool starts every grader before its own manager thread; a broken pool's threads have
            # ended), and no submission has run here.  Spawned, each grader imported the engine again, 0.4 s of CPU
            # each while the template imports torch on the same cores (grade of 50 submissions, medians of
            # alternating rounds: 8.95 -> 8.52 s, and 10.5 -> 9.2 s in a slower hour).
            pool = ProcessPoolExecutor(max(1, min(args.jobs, len(left))), mp_context=get_context("fork"),
                                       initializer=grader.start,
                                       initargs=(options["run"].limits, template.socket if template else None,
                                                 scratch_parent, os.getpid()))
            lost = collect(pool, left, target, flat, options, args, rows, len(folders), files,
                           last_try=breaks >= MAX_POOL_BREAKS, progress=progress, seal=seal, left_out=left_out)
            if lost:
                _end_broken(pool)
            pool.shutdown()
            if lost:
                breaks += 1
                print(f"mha-check grade: a grading process ended before its submission was graded (killed from "
                      f"outside?); the {len(lost)} submission{'s' * (len(lost) != 1)} not graded yet "
                      f"{'are' if len(lost) != 1 else 'is'} graded again from the start", file=sys.stderr)
            left = {name: folders[name] for name in lost}
    except KeyboardInterrupt:  # wherever it lands, between pools too: the rows so far are returned
        if pool is not None:
            _stop_graders(pool)
        return rows, True
    except BaseException:  # our own failure: no grader outlives it either
        if pool is not None:
            _stop_graders(pool)
        raise
    return rows, False


def _end_broken(pool: ProcessPoolExecutor) -> None:
    """A broken pool's graders that are still alive stopped by us, within one deadline, then killed: the pool's own
    manager thread sends each a SIGTERM and then waits for it without a limit, and shutdown() waits for that thread.
    A fresh-clone rehearsal's batch, a grader killed from outside under load, waited there 240 s with nothing said."""
    alive = [p for p in (getattr(pool, "_processes", None) or {}).values() if p.exitcode is None]
    stopping.stop_processes(alive)


def _stop_graders(pool: ProcessPoolExecutor) -> None:
    """Ctrl-C: nothing more is started, and each grader unwinds its submission (SIGTERM) and ends, within one
    shared deadline (then killed).  The pool's result pipe is then released (harness.frontends.stopping), so that
    its manager thread ends and the interpreter's exit does not wait for it forever."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not leave the graders behind
    graders = multiprocessing.active_children()
    result_queue = getattr(pool, "_result_queue", None)  # dropped by shutdown: taken first
    pool.shutdown(wait=False, cancel_futures=True)
    stopping.stop_processes(graders)
    stopping.release_pool(result_queue)


def _submit(pool, name: str, folder: Path, target, flat: set[str], options: dict,
            left_out: tuple[str, ...] = ()) -> Future:
    """One submission handed to a grader; a pool already broken gives a future that says so (graded again)."""
    try:
        pick = spec_for(folder, target, name in flat, left_out)
        return pool.submit(grader.grade_one, str(folder), pick, options)
    except BrokenProcessPool as e:
        future = Future()
        future.set_exception(e)
        return future


def collect(pool, folders: dict[str, Path], target, flat: set[str], options: dict, args, rows: list,
            total: int, files: BatchFiles, last_try: bool, progress: Progress | None = None,
            seal=None, left_out: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    """Hand each submission to a grader, with one more waiting for each grader in the pool's queue, and write each
    report as it comes back (rows gets each summary row, and the summary is rewritten; what cannot be written is
    kept for `files.finish`).  A grader takes the waiting one the moment it has sent a result: with only as many
    handed over as there are graders, each grader sat idle until this process had woken, sealed and written the
    report, rewritten the summary and handed over the next (between two submissions a grader waited a median of
    3 ms at 1a3b394, which handed over the whole batch at once, and 6 to 18 ms with that limit, more the busier
    the machine).  The progress line counts a waiting submission as running only once a grader is free for it (a
    result came back: the pool's queue is first in, first out), so that its "running longest" stays true.
    Returns the submissions a broken pool left ungraded, to be graded again; on the last try, or for any other
    failure of ours, each gets a row that says mha-check could not grade it (construct cannot tell: never the
    student's failure)."""
    progress = progress or Progress(total, getattr(args, "jobs", 1), stream=_Quiet())
    waiting, futures, lost = list(folders.items()), {}, []
    graders = max(1, getattr(args, "jobs", 1) or 1)
    queued: list[str] = []  # handed over, waiting for a free grader, oldest first (as the pool takes them)

    def hand_over() -> None:
        while waiting and len(futures) < 2 * graders:
            name, folder = waiting.pop(0)
            futures[_submit(pool, name, folder, target, flat, options, (left_out or {}).get(name, ()))] = name
            if len(progress.running) < graders and not queued:
                progress.started(name)
            else:
                queued.append(name)

    def came_back(name: str) -> None:
        """`name` is back from its grader (graded, or lost to a broken pool): that grader has taken the oldest
        waiting submission.  One that comes back while still waiting (a broken pool's) frees no grader."""
        if name in queued:
            queued.remove(name)
        elif queued:
            progress.started(queued.pop(0))

    hand_over()
    dead_since = None
    while futures:
        done, _ = wait(futures, timeout=1.0, return_when=FIRST_COMPLETED)
        stopping.raise_if_absorbed()  # a Ctrl-C or SIGTERM whose interrupt was swallowed on the way (a fork handler)
        progress.show()
        dead_since = _unstick_if_stuck(pool, dead_since)
        for future in [f for f in futures if f in done]:  # in the order handed over: each began before the next
            name = futures.pop(future)
            try:
                result = future.result()
            except Exception as e:  # noqa: BLE001 - a grader failure costs one row, never the batch
                if isinstance(e, BrokenProcessPool) and not last_try:
                    lost.append(name)
                    progress.running.pop(name, None)
                    came_back(name)
                    continue
                why = f"its grading process ended {MAX_POOL_BREAKS + 1} times (killed from outside?)" if isinstance(
                    e, BrokenProcessPool) else str(e)
                report = not_run(f"{name}/?", f"mha-check could not grade this submission: {why}",
                                 options["run"], fix="grade this submission again", ours=True)
                report.adapter = replace(report.adapter, process=(ProcessEvent.grader_error(why),))
                result = grader.graded(name, None, report, options, 0.0)
            result["name"] = result["row"]["submission"] = name  # the student, not the folder's name (Moodle's)
            text = seal(name, result) if seal else result["text"]
            rows.append(result["row"])  # first: an interrupt once its report exists still keeps its row
            files.report(result["name"], text)
            if "feedback" in result:
                files.feedback(result["name"], result["feedback"])
            files.summary(rows)
            if name in queued:  # not expected (results are taken in the order handed over): counted as begun
                queued.remove(name)
                progress.started(name)
            progress.finished(name)
            came_back(name)
        hand_over()
    return lost + [name for name, _ in waiting]


def _unstick_if_stuck(pool, dead_since: float | None) -> float | None:
    """A grader killed from outside while it sent a result leaves half of it in the result pipe: the pool's
    manager thread then waits for the rest forever and never marks the pool broken, and the batch would wait with
    it.  A grader dead for STUCK_GRACE seconds in a pool not marked broken (the pool notices a death within
    milliseconds otherwise) is that case: the other graders are stopped and the pipe released
    (harness.frontends.stopping), the pool then breaks as for any grader's death, and what it held is graded
    again by a fresh one.  Returns since when a dead grader has been seen (None: none)."""
    processes = dict(getattr(pool, "_processes", None) or {})
    if getattr(pool, "_broken", False) or all(p.exitcode is None for p in processes.values()):
        return None
    now = time.monotonic()
    if dead_since is None or now - dead_since < STUCK_GRACE:
        return dead_since or now
    print("mha-check grade: a grading process died while it sent a result; its pool is restarted",
          file=sys.stderr)
    result_queue = getattr(pool, "_result_queue", None)
    stopping.stop_processes([p for p in processes.values() if p.exitcode is None])
    stopping.release_pool(result_queue)
    return None


class _Quiet:
    """A stream for a Progress nobody reads (collect called on its own, as the unit tests do)."""

    def isatty(self) -> bool:
        return False
