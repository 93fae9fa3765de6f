"""The seed of a grade (issue 27): every path that produces a grade draws its seed from the OS's randomness unless
--seed says otherwise, records it only where staff look, and a student checking their own code keeps seed 0.

The attack it closes: mha-check is public, and at a seed everyone knows it sends every run the same weights and
inputs, so a table of the answers a correct layer gave, recorded at home, is full marks for a wrong layer
(tests/hostile/recorded/replay_recorded.py).  The table is recorded here, at test time, at the public seed."""
from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, ZOO

REPLAYER = ROOT / "tests" / "hostile" / "recorded" / "replay_recorded.py"
RECORDER = '''
"""At home: mha-check's own exchange with its child recorded on a correct layer, at the public seed, as a table of
(key, answer) for the replayer (whose `Keys` computes the same keys in the child)."""
import importlib.util
import io
import pickle
import sys
import zlib

replayer_path, correct, table_path = sys.argv[1:4]
spec = importlib.util.spec_from_file_location("replayer_keys", replayer_path)
replayer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(replayer)

from harness.frontends import cli
from harness.sandbox import subject
from harness.wire import messages as m, protocol

real, keys, table = subject.Subject._exchange, {}, {}


def exchange(self, requests, rounds=1):
    replies = real(self, requests, rounds)
    as_seen = m.decode_requests(*protocol.decode(io.BytesIO(m.encode_batch(requests))))  # the child's view of them
    for request, reply in zip(as_seen, replies):
        key = keys.setdefault(id(self), replayer.Keys()).key(request, reply)
        if key is not None:
            table[key] = reply
    return replies


subject.Subject._exchange = exchange
status = cli.main([f"{correct}:MyAttn", "--seed", "0", "--format", "json", "-o", table_path + ".report"])
with open(table_path, "wb") as f:
    f.write(zlib.compress(pickle.dumps(table)))
print(f"recorded {len(table)} answers; the correct layer's run ended with status {status}")
'''


def cli(*args, cwd=ROOT, timeout=300):
    return subprocess.run([sys.executable, "-m", "harness.frontends.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)


@pytest.fixture(scope="module")
def replaying(tmp_path_factory) -> Path:
    """A folder of submissions: alice's attention.py is the replayer, with the table recorded at seed 0 beside it."""
    home = tmp_path_factory.mktemp("home")
    correct = home / "correct.py"
    correct.write_text((ZOO / "correct" / "book_style.py").read_text().replace("class MultiHeadAttention",
                                                                                 "class MyAttn"))
    (home / "recorder.py").write_text(RECORDER)
    subs = home / "subs"
    (subs / "alice").mkdir(parents=True)
    shutil.copy(REPLAYER, subs / "alice" / "attention.py")
    table = subs / "alice" / "replay_table.bin"
    run = subprocess.run([sys.executable, str(home / "recorder.py"), str(REPLAYER), str(correct), str(home / "table")],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0 and "status 0" in run.stdout, run.stdout + run.stderr[-2000:]
    shutil.copy(home / "table", table)
    return subs


def gradescope_run(subs: Path, *extra) -> dict:
    run = cli(f"{subs}/alice/attention.py:MyAttn", "--format", "gradescope", *extra)
    assert run.returncode in (0, 1), run.stderr[-2000:]
    return json.loads(run.stdout)


def full_marks(results: dict) -> bool:
    return results["score"] == sum(t["max_score"] for t in results["tests"])


def test_the_recorded_table_is_full_marks_at_the_seed_it_was_recorded_with(replaying):
    """The attack is real: at an explicit --seed 0 (always honoured) the replayer gets every point."""
    results = gradescope_run(replaying, "--seed", "0")
    assert full_marks(results), [t["name"] for t in results["tests"] if t["status"] != "passed"]
    assert results["extra_data"]["seed"] == 0


def test_a_gradescope_run_without_seed_draws_one_and_the_replayer_fails(replaying):
    results = gradescope_run(replaying)
    assert not full_marks(results)
    statuses = {t["name"].split()[0]: t["status"] for t in results["tests"]}
    assert statuses["reference-match"] == "failed"
    seed = results["extra_data"]["seed"]  # staff-only (extra_data): what repeats this very grade
    assert isinstance(seed, int) and seed >= 2 ** 32
    assert str(seed) not in json.dumps({k: v for k, v in results.items() if k != "extra_data"})
    again = gradescope_run(replaying, "--seed", str(seed))  # the same grade, repeated by staff
    assert [(t["name"], t["status"]) for t in again["tests"]] == [(t["name"], t["status"]) for t in results["tests"]]


def test_grade_without_seed_draws_one_and_the_replayer_fails(replaying, tmp_path):
    out = tmp_path / "out"
    run = cli("grade", str(replaying), "--out", str(out), "--target", "attention.py:MyAttn", "--jobs", "1")
    assert run.returncode == 0, run.stderr[-2000:]
    row = next(csv.DictReader((out / "summary.csv").open()))
    assert row["passed"] == "False" and row["reference-match"] == "fail", row
    seed = int((out / "mha-check-seed").read_text().split()[0])
    assert seed >= 2 ** 32
    report = (out / "alice.json").read_text()  # handed to the student: no seed, not even in the stamp
    assert json.loads(report)["seed"] is None and str(seed) not in report
    assert str(seed) in (out / "class-report.html").read_text()  # the staff's view


def test_grade_at_the_public_seed_is_the_hole(replaying, tmp_path):
    """An explicit --seed is honoured, in grade too: the replayer passes there (why grade no longer defaults to it)."""
    out = tmp_path / "out"
    run = cli("grade", str(replaying), "--out", str(out), "--target", "attention.py:MyAttn", "--jobs", "1",
              "--seed", "0")
    assert run.returncode == 0, run.stderr[-2000:]
    assert next(csv.DictReader((out / "summary.csv").open()))["passed"] == "True"
    assert not (out / "mha-check-seed").exists()  # nothing drawn, nothing recorded


def test_grade_into_the_same_folder_reuses_its_seed_and_a_fresh_folder_draws_anew(tmp_path):
    subs = tmp_path / "subs"
    for name in ("ada", "bob"):
        (subs / name).mkdir(parents=True)
        shutil.copy(ZOO / "correct" / "book_style.py", subs / name / "attention.py")
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    first = cli("grade", str(subs), "--out", str(out), "--jobs", "2")
    assert first.returncode == 0, first.stderr[-2000:]
    record = out / "mha-check-seed"
    seed = record.read_text().split()[0]
    assert record.stat().st_mode & 0o777 == 0o600
    assert f"seed {seed}" in first.stdout
    again = cli("grade", str(subs), "--out", str(out), "--jobs", "2", "--resume")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "--resume: 2 of 2 kept" in again.stdout, again.stdout  # the stamps name the same seed: nothing regraded
    assert record.read_text().split()[0] == seed
    other = cli("grade", str(subs), "--out", str(fresh), "--jobs", "2")
    assert other.returncode == 0, other.stderr[-2000:]
    assert (fresh / "mha-check-seed").read_text().split()[0] != seed
    replaced = cli("grade", str(subs), "--out", str(out), "--jobs", "2", "--overwrite")  # a new round: a new seed
    assert replaced.returncode == 0, replaced.stderr[-2000:]
    assert record.read_text().split()[0] != seed


def test_a_record_mha_check_did_not_write_is_refused(tmp_path):
    subs = tmp_path / "subs"
    (subs / "ada").mkdir(parents=True)
    shutil.copy(ZOO / "correct" / "book_style.py", subs / "ada" / "attention.py")
    out = tmp_path / "out"
    out.mkdir()
    (out / "mha-check-seed").write_text("not a seed\n")
    run = cli("grade", str(subs), "--out", str(out), "--jobs", "1")
    assert run.returncode == 2 and "mha-check-seed" in run.stderr, run.stderr[-2000:]


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_checking_your_own_code_keeps_seed_0(fmt, tmp_path):
    run = cli(str(ZOO / "correct" / "book_style.py"), "--format", fmt, "--only", "construct")
    assert run.returncode == 0, run.stderr[-2000:]
    if fmt == "json":
        assert json.loads(run.stdout)["seed"] == 0
    assert "seed" not in run.stderr


def test_a_grading_json_run_draws_a_seed_and_says_it_on_stderr_only(tmp_path):
    """--grading (GitHub Classroom's run) has no field only staff see: the seed is on stderr, for the log."""
    run = cli(str(ZOO / "correct" / "book_style.py"), "--grading", "--allow-unconfined", "--format", "json",
              "--only", "construct")
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout)["seed"] is None
    assert "drawn at random for this grade" in run.stderr, run.stderr


def test_prairielearn_keeps_the_seed_in_a_staff_field(tmp_path):
    run = cli(str(ZOO / "correct" / "book_style.py"), "--format", "prairielearn", "--only", "construct")
    data = json.loads(run.stdout)
    assert data["mha_check_seed"] >= 2 ** 32
    assert str(data["mha_check_seed"]) not in json.dumps({k: v for k, v in data.items() if k != "mha_check_seed"})


def test_help_says_when_a_seed_is_drawn():
    for args in (["--help"], ["grade", "--help"]):
        text = " ".join(cli(*args).stdout.split())
        assert "drawn at random" in text, args
    grade_help = " ".join(cli("grade", "--help").stdout.split())
    assert "recorded in OUT/mha-check-seed" in grade_help and "uses it again" in grade_help

