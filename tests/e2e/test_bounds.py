"""Shared resources stay bounded whatever one submission does (issue 27, item 5): the trusted side reads no more of
a reply than it asked for, whatever the child writes; a full disk under the output folder loses no verdict."""
from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import ROOT, ZOO
from harness.engine.runner import Options, run_checks
from harness.sandbox import scratch
from harness.sandbox.limits import Limits

PADDED = ROOT / "tests" / "hostile" / "padded_frames.py"
MEASURE = """
import json, resource, sys, time
from harness.engine.runner import Options, run_checks
from harness.sandbox.limits import Limits
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.monotonic()
report = run_checks(sys.argv[1], Options(limits=Limits(call_seconds=30, total_seconds=60, memory_mb=1500)))
print(json.dumps({"grew_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before,
                  "seconds": time.monotonic() - started, "passed": report.passed,
                  "checks": [[c.id, c.status, c.message] for c in report.checks]}))
"""


def test_a_child_padding_its_replies_costs_the_grader_neither_memory_nor_time(tmp_path):
    """Found by an attacker's trial: a submission that patches the worker to pad every reply with 200 MB of zeros
    made the trusted parent hold about 0.5 GB per frame and a 4.6 s run take 90 s.  The parent now refuses the first
    padded frame from its header (nothing of its arrays read): its own peak memory (the child's is not counted) grows
    by a few MB at most, the run ends within seconds, and the verdict names the corrupted channel."""
    sub = tmp_path / "submission"
    sub.mkdir()
    (sub / "attention.py").write_text(PADDED.read_text())
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-c", MEASURE, f"{sub}/attention.py:MyAttn"], capture_output=True,
                         text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["grew_kb"] < 64 * 1024, got  # the old reader held every padded frame twice: 400 MB
    assert got["seconds"] < 30 and time.monotonic() - started < 60, got  # before: to the time limit (60 s)
    assert got["passed"] is False
    statuses = {cid: status for cid, status, _ in got["checks"]}
    assert statuses["construct"] == "pass"  # loading and building go through unpadded: the refusal is a forward's
    said = [msg for _, status, msg in got["checks"] if status == "fail"]
    assert said and all("corrupted the channel" in msg and "read none of it" in msg for msg in said), got["checks"]
    assert "pass" not in [s for cid, s in statuses.items() if cid != "construct"], statuses


@pytest.fixture
def full_disk(tmp_path):
    """A folder on a filesystem with no room left: a 1 MB tmpfs filled to the last byte (root only: it mounts)."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounts a small tmpfs: needs root")
    folder = tmp_path / "full"
    folder.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,nr_inodes=64", "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
        os.close(fd)
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "harness.frontends.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def test_grade_on_a_full_disk_loses_no_verdict_and_says_so_in_one_line(tmp_path, full_disk):
    """Found by an attacker's trial: with --out on a full filesystem `grade` died with a traceback and wrote no
    report and no summary.  Now every verdict reaches stdout (the summary, when it cannot be written), the batch
    ends with exit status 3 and one line that says what could not be written and why."""
    subs = tmp_path / "subs"
    for name, source in [("ada", ZOO / "correct" / "book_style.py"), ("bob", ROOT / "examples" / "buggy_attention.py")]:
        (subs / name).mkdir(parents=True)
        shutil.copy(source, subs / name / "attention.py")
    run = _cli("grade", str(subs), "--out", str(full_disk), "--jobs", "2")
    assert run.returncode == 3, run.stderr[-2000:]
    assert "Traceback" not in run.stderr
    said = [ln for ln in run.stderr.splitlines() if "error" in ln]
    assert len(said) == 1 and "could not write" in said[0] and "No space left on device" in said[0], run.stderr
    assert "drawn at random, not recorded" in run.stdout  # the seed's record had no room either: said for staff
    rows = {r["submission"]: r for r in csv.DictReader(io.StringIO(run.stdout[run.stdout.index("submission,"):]))}
    assert rows["ada"]["passed"] == "True" and rows["bob"]["passed"] == "False", run.stdout
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler"]  # nothing half-written left behind


def test_a_single_run_on_a_full_disk_prints_its_results_and_fails_visibly(full_disk):
    """Gradescope's run script reads results.json, and takes an exit status above 1 as mha-check's own failure: a
    results.json that cannot be written is printed on stdout (Gradescope keeps it) with exit status 3."""
    results = full_disk / "results.json"
    run = _cli(str(ZOO / "correct" / "book_style.py"), "--format", "gradescope", "-o", str(results))
    assert run.returncode == 3, run.stderr[-2000:]
    assert "Traceback" not in run.stderr and not results.exists()
    assert json.loads(run.stdout)["tests"], run.stdout[:500]
    assert run.stderr.strip().splitlines()[-1].startswith(f"mha-check: error: could not write {results}")


@pytest.fixture
def small_disk(tmp_path):
    """A 256 MB filesystem of the test's own (a tmpfs), standing for the disk a grading machine's scratch, staging
    and output folders share: a disk filler then fills this, never the machine's (root only: it mounts)."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounts a small tmpfs: needs root")
    folder = tmp_path / "disk"
    folder.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m,nr_inodes=16384", "tmpfs", str(folder)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_disk_filler_beside_its_classmates_costs_them_nothing(tmp_path, small_disk):
    """Found by an attacker's trial: one submission filling the disk and inodes of the shared scratch made 15 of 20
    classmates get 0 or cannot-tell (their copies, children and reports had no room left).  Each child's folder is
    now a tmpfs of its own, limited in size and inodes: the filler fills that, its classmates graded beside it
    (--jobs 2, the scratch, staging and output folders on one small disk) keep their grades.  (Before, measured by
    hand on this batch: the classmates copied while the filler held the disk got 0, "attention.py has no 'MyAttn'",
    from a copy cut short by ENOSPC.)"""
    subs = tmp_path / "subs"
    (subs / "aaa_filler").mkdir(parents=True)
    (subs / "aaa_filler" / "attention.py").write_text((ROOT / "tests" / "hostile" / "disk_filler.py").read_text())
    (subs / "aaa_filler" / "hold.txt").write_text("25")  # held while the classmates are graded beside it
    classmates = ("bob", "cat", "dan", "eve", "fay", "gus", "hal")  # one grader's work for longer than the hold
    for name in classmates:
        (subs / name).mkdir()
        (subs / name / "attention.py").write_text(
            (ZOO / "correct" / "book_style.py").read_text().replace("class MultiHeadAttention", "class MyAttn"))
    out = small_disk / "out"
    run = subprocess.run([sys.executable, "-m", "harness.frontends.cli", "grade", str(subs), "--out", str(out),
                          "--jobs", "2", "--target", "attention.py:MyAttn", "--time-limit", "60"],
                         capture_output=True, text=True, timeout=400, cwd=ROOT, env=dict(os.environ,
                                                                                         TMPDIR=str(small_disk)))
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Traceback" not in run.stderr
    rows = {r["submission"]: r for r in csv.DictReader(open(out / "summary.csv", newline=""))}
    assert all(rows[name]["passed"] == "True" for name in classmates), {n: rows[n] for n in classmates}
    assert rows["aaa_filler"]["passed"] == "False"
    report = json.loads((out / "aaa_filler.json").read_text())
    assert report["isolation"]["submission_copy"]["bounded"].startswith("tmpfs of its own")
    assert sorted(p.name for p in small_disk.iterdir()) == ["out"]  # the batch's folders gone, and the filler's


def test_where_no_filesystem_can_be_mounted_the_scratch_is_measured_and_a_filler_stopped(small_disk, monkeypatch):
    """A container without CAP_SYS_ADMIN cannot mount a tmpfs for the scratch: it stays a folder of the shared disk,
    and the trusted side measures it while the child works.  The disk filler is stopped within a fraction of a
    second of passing its budget (the copy plus 64 MB, or 2048 more files): a limit of ours, so cannot tell, never
    a failure of the student's; and its folder is gone with it."""
    monkeypatch.setattr(scratch, "_mount_bounded", lambda *args: "")  # as where mount() is refused
    monkeypatch.setattr(tempfile, "tempdir", str(small_disk))  # the scratch on the test's own small disk
    sub = small_disk / "submission"
    sub.mkdir()
    (sub / "attention.py").write_text((ROOT / "tests" / "hostile" / "disk_filler.py").read_text())
    (sub / "hold.txt").write_text("20")
    started = time.monotonic()
    report = run_checks(f"{sub}/attention.py:MyAttn", Options(limits=Limits(call_seconds=30, total_seconds=60)))
    assert time.monotonic() - started < 30  # stopped while it held the disk, not at the time limit
    assert report.isolation.submission_copy["bounded"].startswith("no:")
    statuses = {c.id: (c.status, c.message) for c in report.checks}
    assert statuses["construct"][0] == "cannot_tell" and "disk limit" in statuses["construct"][1], statuses
    assert report.adapter.process[0].kind == "disk" and report.adapter.process[0].ours
    assert sorted(p.name for p in small_disk.iterdir()) == ["submission"]  # its scratch removed with it


def test_a_full_disk_met_by_a_submission_is_never_its_failure():
    """ENOSPC raised in the student's code (a disk a classmate filled, where no scratch can be mounted) is a
    limit of the machine: cannot tell with the disk named, marked for review, no check failed."""
    report = run_checks(f"{ROOT}/tests/bad/disk_full.py:MultiHeadAttention", Options())
    assert [c.id for c in report.checks if c.status == "fail"] == []
    undecided = [c for c in report.checks if c.status == "cannot_tell"]
    assert undecided and "disk full" in undecided[0].message and report.needs_review


def test_where_no_filesystem_can_be_mounted_files_deleted_but_held_are_measured_too(small_disk, monkeypatch):
    """Found by an attacker's trial: a child that deletes each file it writes and keeps it open (or mapped) held
    1.6 GB of the shared disk against a 64 MB budget, unseen by a walk of its folder.  The measure adds what the
    child's processes hold that has no name left: tests/hostile/hidden_disk.py (180 MB so held, half of it by
    mappings alone) is stopped while it holds the disk, as a disk limit (cannot tell, ours), and its space is freed
    with it.  (Before: it held the space to the end of its sleep and got a plain fail.)"""
    monkeypatch.setattr(scratch, "_mount_bounded", lambda *args: "")  # as where mount() is refused
    monkeypatch.setattr(tempfile, "tempdir", str(small_disk))
    sub = small_disk / "submission"
    sub.mkdir()
    (sub / "attention.py").write_text((ROOT / "tests" / "hostile" / "hidden_disk.py").read_text())
    (sub / "hold.txt").write_text("40")
    started = time.monotonic()
    report = run_checks(f"{sub}/attention.py:MyAttn", Options(limits=Limits(call_seconds=60, total_seconds=90)))
    assert time.monotonic() - started < 35  # stopped while it held the disk, not at the end of its 40 s hold
    statuses = {c.id: (c.status, c.message) for c in report.checks}
    assert statuses["construct"][0] == "cannot_tell" and "disk limit" in statuses["construct"][1], statuses
    assert "deleted but kept open" in statuses["construct"][1]
    assert report.adapter.process[0].kind == "disk" and report.adapter.process[0].ours and report.needs_review
    assert sorted(p.name for p in small_disk.iterdir()) == ["submission"]
    end = time.monotonic() + 10  # the held files die with their processes (a PID namespace's take a moment)
    while shutil.disk_usage(small_disk).used >= 16 << 20 and time.monotonic() < end:
        time.sleep(0.1)
    assert shutil.disk_usage(small_disk).used < 16 << 20


def test_a_module_too_large_to_describe_is_cannot_tell_never_a_corrupted_channel():
    """The fourth red team: a correct layer with 20,000 one-element parameters (their names and shapes over the 1 MB
    the trusted side reads of one module's description) failed construct as "your code corrupted the channel", an
    accusation for a limit of ours.  Our worker now says it cannot describe such a module: cannot tell, with the
    number of parameters, and no process event held against the code."""
    report = run_checks(f"{ROOT / 'tests' / 'bad' / 'many_tiny_parameters.py'}:MyAttn",
                        Options(only=["construct"], diagnose=False))
    construct = report["construct"]
    assert construct.status == "cannot_tell", (construct.status, construct.message)
    assert "20,00" in construct.message and "corrupted" not in construct.message
    assert not report.passed and report.needs_review
