"""The pool of graders of `mha-check grade`: every submission through it, each report written as it comes back.

A grader's failure costs one row, never the batch: a grader killed from outside breaks the pool, and what it left
is graded again by a fresh pool (at most MAX_POOL_BREAKS times); Ctrl-C stops every grader, each unwinding its
submission.  The graders themselves are harness.frontends.grader.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from pathlib import Path

from harness.engine.runner import Options, not_run
from harness.frontends import grader
from harness.frontends.batch_files import BatchFiles
from harness.frontends.pick import spec_for
from harness.render.view import clean
from harness.sandbox import trusted
from harness.sandbox.template import Template

MAX_POOL_BREAKS = 3  # pools broken by a grader's death (killed from outside) before the batch gives up on the rest


def grade_all(folders: dict[str, Path], target: str | None, flat: set[str], options: dict, args,
               template: Template | None, scratch_parent: str, files: BatchFiles) -> tuple[list, bool]:
    """Every submission through the pool of graders; a grader's failure costs one row, never the batch.  A grader
    that ends without finishing (killed from outside, or by the OOM killer) breaks the whole pool: every submission
    not graded yet is then graded again by a fresh pool, up to MAX_POOL_BREAKS times.  Returns the rows and whether
    Ctrl-C stopped it (the graders are then stopped, each submission in progress with its child and scratch, and
    the rows are those graded).  The summary is rewritten after every report (`files`), so that a batch killed
    outright keeps the summary of what it had graded."""
    rows: list = []
    trusted.preload()  # every trusted module, once here while the template imports torch, not in each grader
    left, breaks = dict(folders), 0
    while left:
        # Graders are forked from this process: it has imported the engine, and runs no thread of its own (with
        # "fork" the pool starts every grader before its own manager thread; a broken pool's threads have ended),
        # and no submission has run here.  Spawned, each grader imported the engine again, 0.4 s of CPU each while
        # the template imports torch on the same cores (grade of 50 submissions, medians of alternating rounds:
        # 8.95 -> 8.52 s, and 10.5 -> 9.2 s in a slower hour).
        pool = ProcessPoolExecutor(max(1, min(args.jobs, len(left))), mp_context=get_context("fork"),
                                   initializer=grader.start,
                                   initargs=(options["limits"], template.socket if template else None, scratch_parent))
        try:
            lost = collect(pool, left, target, flat, options, args, rows, len(folders), files,
                            last_try=breaks >= MAX_POOL_BREAKS)
        except KeyboardInterrupt:
            _stop_graders(pool)
            return rows, True
        except BaseException:  # our own failure: no grader outlives it either
            _stop_graders(pool)
            raise
        pool.shutdown()
        if lost:
            breaks += 1
            print(f"mha-check grade: a grading process ended before its submission was graded (killed from "
                  f"outside?); the {len(lost)} submission{'s' * (len(lost) != 1)} not graded yet "
                  f"{'are' if len(lost) != 1 else 'is'} graded again from the start", file=sys.stderr)
        left = {name: folders[name] for name in lost}
    return rows, False


def _stop_graders(pool: ProcessPoolExecutor) -> None:
    """Ctrl-C: nothing more is started, and each grader unwinds its submission (SIGTERM) and ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not leave the graders behind
    graders = multiprocessing.active_children()
    pool.shutdown(wait=False, cancel_futures=True)
    for process in graders:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGTERM)
    for process in graders:
        process.join(10)
        if process.is_alive():
            process.kill()
            process.join()


def collect(pool, folders: dict[str, Path], target, flat: set[str], options: dict, args, rows: list,
             total: int, files: BatchFiles, last_try: bool) -> list[str]:
    """Submit every submission and write each report as it comes back (rows gets each summary row, and the
    summary is rewritten; what cannot be written is kept for `files.finish`).  Returns the submissions a broken
    pool left ungraded, to be graded again; on the last try, or for any other failure of ours, each gets a row that
    says mha-check could not grade it (construct cannot tell: never the student's failure)."""
    futures, lost = {}, []
    for name, folder in folders.items():
        futures[pool.submit(grader.grade_one, str(folder), spec_for(folder, target, name in flat), options)] = name
    for future in _as_completed(futures):
        name = futures[future]
        try:
            result = future.result()
        except Exception as e:  # noqa: BLE001 - a grader failure costs one row, never the batch
            if isinstance(e, BrokenProcessPool) and not last_try:
                lost.append(name)
                continue
            why = f"its grading process ended {MAX_POOL_BREAKS + 1} times (killed from outside?)" if isinstance(
                e, BrokenProcessPool) else str(e)
            report = not_run(f"{name}/?", f"mha-check could not grade this submission: {why}",
                             Options(seed=options["seed"]), fix="grade this submission again", ours=True)
            report.adapter["process"] = [{"kind": "grader error", "message": why, "ours": True}]
            result = grader.graded(name, None, report, options, 0.0)
        result["name"] = result["row"]["submission"] = name  # the student, not the folder's name (Moodle's, ...)
        rows.append(result["row"])  # first: an interrupt once its report exists still keeps its row in the summary
        files.report(result["name"], result["text"])
        files.summary(rows)
        _progress(len(rows), total, name)
    return lost


def _as_completed(futures):
    return as_completed(futures)


def _progress(done: int, total: int, name: str) -> None:
    if sys.stderr.isatty():
        width = 30
        filled = width * done // max(1, total)
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {clean(name)[:30]:<30}")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()
