"""Batch grading: target discovery, per-submission reports, the summary, and forked children that stay sound."""
import csv
import json
import shutil
import subprocess
import sys

from conftest import ROOT, ZOO

THREADS_PROBE = '''
import torch
import torch.nn as nn


class Probe(nn.Module):
    """Checks, from inside a forked child, that torch runs with one thread and that a large matmul completes
    (an OpenMP pool inherited across fork() would deadlock here)."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert torch.get_num_threads() == 1, torch.get_num_threads()
        big = torch.randn(512, 512)
        assert torch.isfinite(big @ big).all()
        self.inner = nn.MultiheadAttention(d_out, num_heads, batch_first=True)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def forward(self, x):
        n = x.shape[1]
        return self.inner(x, x, x, attn_mask=self.mask[:n, :n], need_weights=False)[0]
'''


def grade(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "harness.frontends.cli", "grade", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def test_grade_finds_the_single_class_file_and_writes_reports(tmp_path):
    subs = tmp_path / "subs"
    for name, source in [("ada", ZOO / "correct" / "book_style.py"), ("bob", ROOT / "examples" / "buggy_attention.py"),
                         ("cyd", ZOO / "correct" / "lesson.py")]:
        (subs / name).mkdir(parents=True)
        shutil.copy(source, subs / name / "my_attention.py")
    (subs / "dee").mkdir()
    (subs / "dee" / "notes.txt").write_text("no code here")
    (subs / "eve").mkdir()
    (subs / "eve" / "probe.py").write_text(THREADS_PROBE)
    out = tmp_path / "out"
    run = grade(str(subs), "--out", str(out), "--jobs", "2")
    assert run.returncode == 0, run.stderr[-2000:]
    rows = {r["submission"]: r for r in csv.DictReader(open(out / "summary.csv"))}
    assert set(rows) == {"ada", "bob", "cyd", "dee", "eve"}
    assert rows["ada"]["passed"] == rows["cyd"]["passed"] == "True"
    assert rows["bob"]["passed"] == "False" and rows["bob"]["diagnosis"] == "split-view-order"
    assert rows["dee"]["passed"] == "False"  # no code: a failing row, not a crash of the batch
    assert rows["eve"]["construct"] == "pass", rows["eve"]  # one thread, no deadlock in a forked child
    report = json.loads((out / "bob.json").read_text())
    assert report["target"] == "my_attention.py" and report["passed"] is False
    assert "could not tell which file" in json.loads((out / "dee.json").read_text())["checks"][0]["message"]


def test_shards_cover_the_batch_once(tmp_path):
    subs = tmp_path / "subs"
    for i in range(6):
        (subs / f"s{i}").mkdir(parents=True)
        shutil.copy(ZOO / "correct" / "lesson.py", subs / f"s{i}" / "attention.py")
    out = tmp_path / "out"
    seen = []
    for shard in ("1/2", "2/2"):
        run = grade(str(subs), "--target", "attention.py:CausalMHA", "--out", str(out), "--shard", shard,
                    "--jobs", "1")
        assert run.returncode == 0, run.stderr[-2000:]
        seen += [r["submission"] for r in csv.DictReader(open(out / f"summary-{shard.replace('/', '-of-')}.csv"))]
    assert sorted(seen) == [f"s{i}" for i in range(6)]
    merged = grade("--merge", str(out / "summary-1-of-2.csv"), str(out / "summary-2-of-2.csv"))
    assert merged.returncode == 0 and len(merged.stdout.strip().splitlines()) == 7
