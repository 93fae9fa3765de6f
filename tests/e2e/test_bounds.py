"""Shared resources stay bounded whatever one submission does (issue 27, item 5): the trusted side reads no more of
a reply than it asked for, whatever the child writes."""
from __future__ import annotations

import json
import subprocess
import sys
import time

from conftest import ROOT

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
