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
import time

import pytest

from conftest import ROOT, ZOO

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
