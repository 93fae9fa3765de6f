"""The worker's own start (importing torch) is never the student's time: the time limit counts from the worker's
`Ready`, and a worker that dies or stalls before it is mha-check's problem (cannot tell), never the student's."""
from __future__ import annotations

import time

import pytest

from conftest import ROOT
from harness.engine.runner import Options, run_checks
from harness.sandbox import subject as subject_module
from harness.sandbox.limits import Limits
from harness.sandbox.subject import Subject
from harness.wire.errors import WorkerDied

TARGET = f"{ROOT}/examples/correct_attention.py:MultiHeadAttention"


def _worker_starting_with(monkeypatch, code: str) -> None:
    original = subject_module.worker_code
    monkeypatch.setattr(subject_module, "worker_code", lambda: f"{code}; {original()}")


def test_a_slow_start_of_ours_is_not_counted_in_the_time_limit(monkeypatch):
    """A start of 2 s (a loaded grader importing torch) under a time limit of 1.5 s: the code still gets its 1.5 s."""
    _worker_starting_with(monkeypatch, "import time; time.sleep(2)")
    limits = Limits(call_seconds=1.5, total_seconds=1.5)
    subject = Subject(TARGET, limits=limits)
    try:
        spawned = time.monotonic()
        loaded = subject.load()
        assert loaded.name == "MultiHeadAttention" and time.monotonic() - spawned >= 2
        assert subject.started - subject.spawned >= 2  # the limit starts after the worker's own start
    finally:
        subject.close()


def test_a_worker_that_ends_before_it_is_ready_is_ours_not_the_students(monkeypatch):
    _worker_starting_with(monkeypatch, "import os; os._exit(3)")
    report = run_checks(TARGET, Options(only=["construct"]))
    construct = report.checks[0]
    assert construct.status == "cannot_tell", construct.message
    assert "before any of your code ran" in construct.message and "status 3" in construct.message
    assert [(p.kind, p.ours) for p in report.adapter.process] == [("startup", True)]
    assert report.needs_review and not report.passed


def test_a_worker_that_never_gets_ready_is_stopped_at_the_start_up_deadline(monkeypatch):
    _worker_starting_with(monkeypatch, "import time; time.sleep(60)")
    monkeypatch.setattr(subject_module, "STARTUP_SECONDS", 1)
    subject = Subject(TARGET, limits=Limits(total_seconds=100))
    try:
        spawned = time.monotonic()
        with pytest.raises(WorkerDied) as died:
            subject.load()
        assert died.value.kind == "startup" and died.value.ours and "within 1 s" in died.value.message
        assert time.monotonic() - spawned < 10 and not subject._alive()
    finally:
        subject.close()


def test_a_fresh_child_finds_bytecode_of_our_packages_it_imports():
    """The child runs with -B and the trusted side never imports harness.child: a fresh start compiles our packages'
    bytecode first (once per process), else every single run's child compiled them from source (about 25 ms)."""
    import importlib.util

    subject_module._child_bytecode.cache_clear()
    subject = Subject(str(ROOT / "examples" / "correct_attention.py"))
    try:
        subject.load()
    finally:
        subject.close()
    for package in ("child", "wire"):
        for source in (ROOT / "harness" / package).glob("*.py"):
            compiled = importlib.util.cache_from_source(str(source))
            with open(compiled, "rb") as f:
                header = f.read(16)
            assert int.from_bytes(header[8:12], "little") == int(source.stat().st_mtime), source
