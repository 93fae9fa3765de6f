"""The pool's hand-over (harness.frontends.grade_pool.collect): a submission waits for each grader, and the progress
line still counts as running only what a grader has begun."""
import os
import signal
import time
from concurrent.futures import Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from types import SimpleNamespace

from harness.frontends import grade_pool, stopping
from harness.frontends.batch_files import BatchFiles
from harness.frontends.progress import Progress


class Pool:
    """Grades at once; records the most submissions handed over and not yet taken back (a row) by collect."""

    def __init__(self, rows: list):
        self.rows, self.submitted, self.most = rows, 0, 0

    def submit(self, fn, folder, pick, options):
        self.submitted += 1
        self.most = max(self.most, self.submitted - len(self.rows))
        name = folder.rsplit("/", 1)[-1]
        future = Future()
        future.set_result({"name": name, "text": "{}", "row": {"submission": name}})
        return future


class Screen:
    def isatty(self) -> bool:
        return False


class Watched(Progress):
    """Fails if more submissions are running than there are graders."""

    def started(self, name: str) -> None:
        super().started(name)
        assert len(self.running) <= self.jobs, self.running


def test_each_grader_has_the_next_submission_waiting_and_the_progress_line_counts_only_those_begun(tmp_path):
    """With only as many handed over as there are graders, a grader sat idle between submissions until the main
    process had written the report and handed it the next (issue 27): now one more waits for each grader."""
    folders = {f"s{i}": tmp_path / f"s{i}" for i in range(7)}
    for folder in folders.values():
        folder.mkdir()
    (tmp_path / "out").mkdir()
    rows: list = []
    pool = Pool(rows)
    progress = Watched(len(folders), 2, stream=Screen())
    lost = grade_pool.collect(pool, folders, None, set(), {"seed": 0}, SimpleNamespace(jobs=2), rows, len(folders),
                              BatchFiles(tmp_path / "out", tmp_path / "out" / "summary.csv", "json"), last_try=False,
                              progress=progress)
    assert lost == [] and pool.most == 4  # two graders, each with one waiting
    assert [r["submission"] for r in rows] == list(folders)  # taken back in the order handed over
    assert len(progress.times) == len(folders) and not progress.running  # every one counted begun, then graded


class _DyingGrader:
    """A grader whose submission's child died in a way run_checks let through (found by a red team: a child that
    stops itself with SIGSTOP in every process)."""

    def grade(self, folder, pick, options):
        from harness.wire.errors import ChildEnd, WorkerDied
        raise WorkerDied(ChildEnd.TIME, "time limit", op="load")


def test_a_failure_in_one_grader_costs_one_row_never_the_pool(monkeypatch):
    """An exception the pool cannot carry back (WorkerDied takes two arguments: unpickling it failed in the main
    process) broke the whole pool: every classmate in flight was graded again, and after four breaks given a row
    that says mha-check could not grade them.  It must come back as an ordinary exception of that submission."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from harness.frontends import grader
    monkeypatch.setattr(grader, "_GRADER", _DyingGrader())
    with ProcessPoolExecutor(1, mp_context=get_context("fork")) as pool:
        failed = pool.submit(grader.grade_one, "/nowhere/mallory", None, {})
        error = failed.exception(timeout=60)
        assert type(error).__name__ != "BrokenProcessPool", error
        assert "time limit" in str(error)
        assert pool.submit(pow, 2, 3).result(timeout=60) == 8  # the pool still grades the classmates


def _deaf() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _sleep() -> None:
    time.sleep(120)


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_broken_pools_graders_are_ended_within_the_stop_deadline_though_they_ignore_sigterm():
    """The pool's manager thread, once a grader died, sends the others a SIGTERM and waits for each without a limit,
    and shutdown() waits for it: a fresh-clone rehearsal's batch waited 240 s with nothing said.  A grader deaf to
    SIGTERM (busy in a submission, under load) is now killed at the stop's deadline."""
    pool = ProcessPoolExecutor(2, mp_context=get_context("fork"), initializer=_deaf)
    slow = pool.submit(_sleep)
    time.sleep(1.0)  # the sleeper is in its task: the other grader takes the next
    dead = pool.submit(_die)
    wait([slow, dead], timeout=60)
    assert isinstance(dead.exception(timeout=0), BrokenProcessPool)
    began = time.monotonic()
    grade_pool._end_broken(pool)
    pool.shutdown()
    assert time.monotonic() - began < stopping.GRADERS_STOP + 10
