"""`mha-check grade` on exports shaped like each platform's download (tests/fixtures/exports/, see its make.py and
harness/frontends/exports.py for the naming and its sources): one correct row per student, the latest attempt
graded, helper modules importable, targets found in sub-folders, what was not graded listed and the exit status
non-zero for a student's file that got no row (issue 29)."""
import csv
import json
import subprocess
import sys

import pytest

from conftest import ROOT

EXPORTS = ROOT / "tests" / "fixtures" / "exports"
TARGET = "attention.py:MultiHeadAttention"


def grade(folder, out, *args):
    run = subprocess.run([sys.executable, "-m", "harness.frontends.cli", "grade", str(folder), "--out", str(out),
                          "--jobs", "1", *args], capture_output=True, text=True, timeout=600, cwd=ROOT)
    rows = {r["submission"]: r for r in csv.DictReader(open(out / "summary.csv"))} if (out / "summary.csv").exists() \
        else {}
    return run, rows


# student -> (passed, target checked): buggy_attention.py fails, correct_attention.py (or it with helpers) passes
EXPECTED = {
    "canvas": {"smith_alice": ("True", "attention.py"), "smith_bob": ("False", "attention.py"),
               "joneskay": ("True", "attention.py"),  # attention-1.py, the resubmission: the earlier one is buggy
               "grace": ("True", "attention.py")},  # imports its own helpers.py (grace_1004_5005_helpers.py)
    "blackboard": {"alice_smith": ("True", "attention.py"),  # the attempt of 3 November; that of the 1st is buggy
                   "bob": ("False", "attention.py")},
    "gradescope": {"Alice Smith": ("True", "attention.py"),
                   "Bob Jones & Carol Wu": ("True", "hw3/attention.py")},  # zipped with its folder, with helpers
    "mixed": {"alice_smith": ("True", "attention.py"), "alice_jones": ("False", "attention.py"),
              "grace": ("True", "attention.py"), "dan": ("True", "attention.py"),
              "erin": ("True", "hw3/attention.py"),
              "hal": ("True", "attention.py")},  # hal_attention_v2.py; hal_attention.py (buggy) named, not graded
}


@pytest.mark.parametrize("layout", sorted(EXPECTED))
def test_each_export_gives_one_correct_row_per_student(tmp_path, layout):
    run, rows = grade(EXPORTS / layout, tmp_path / "out", "--target", TARGET)
    graded = {name: (r["passed"], r["target"].rpartition(":")[0]) for name, r in rows.items() if not r["not_graded"]}
    assert graded == EXPECTED[layout], run.stdout + run.stderr[-3000:]
    for name in EXPECTED[layout]:
        assert json.loads((tmp_path / "out" / f"{name}.json").read_text())["passed"] is (rows[name]["passed"] == "True")
    if layout == "mixed":  # frank.zip is a student's and got no row: listed, and the batch says so
        assert run.returncode == 3, run.stderr[-3000:]
        assert rows["frank.zip"]["needs_review"] == "True" and "no student" in rows["frank.zip"]["not_graded"]
        assert rows["notes.txt"]["needs_review"] == "False" and "frank.zip" in run.stderr
    else:
        assert run.returncode == 0, run.stderr[-3000:]
        assert not any(r["not_graded"] for r in rows.values())
    if layout == "canvas":
        assert rows["joneskay"]["other_attempts"] == ("joneskay_LATE_1003_5010_attention-1.py (late, graded); "
                                                      "joneskay_LATE_1003_5003_attention.py (late, not graded)")
    if layout == "mixed":
        assert rows["hal"]["other_attempts"] == "hal_attention.py (unnumbered, not graded)"
    if layout == "blackboard":
        assert "attempt 2026-11-01 09:00:00" in rows["alice_smith"]["other_attempts"]


def test_one_students_folder_is_named_by_the_student(tmp_path):
    """`grade class/dan` regrades one student: the row is dan's, not `attention`'s."""
    run, rows = grade(EXPORTS / "mixed" / "dan", tmp_path / "out")
    assert run.returncode == 0 and list(rows) == ["dan"], run.stdout + run.stderr[-3000:]
    assert rows["dan"]["passed"] == "True" and "one student's folder" in run.stdout


def test_allow_missing_keeps_the_listing_and_ends_with_status_0(tmp_path):
    (tmp_path / "subs" / "ann").mkdir(parents=True)
    (tmp_path / "subs" / "ann" / "notes.txt").write_text("no code\n")
    (tmp_path / "subs" / "bob.zip").write_bytes(b"PK\x05\x06" + bytes(18))
    run, rows = grade(tmp_path / "subs", tmp_path / "out", "--allow-missing")
    assert run.returncode == 0, run.stderr[-3000:]
    assert rows["ann"]["passed"] == "False" and rows["bob.zip"]["not_graded"] and "warning" in run.stderr


def test_only_regrades_some_students_into_the_existing_summary(tmp_path):
    """`--only NAME...`: those students graded again, their rows replaced; every other row kept as it was."""
    out = tmp_path / "out"
    out.mkdir()
    old = ("submission,target,passed,needs_review,score,max_score,not_graded\n"
           "smith_alice,attention.py:MultiHeadAttention,True,False,17.0,17.0,\n"
           "smith_bob,attention.py:MultiHeadAttention,True,False,-1.0,17.0,\n"  # a stale row, to be replaced
           "left.zip,,,True,,,not a .py or .ipynb file\n")  # the export's listing is made again
    (out / "summary.csv").write_text(old)
    run, rows = grade(EXPORTS / "canvas", out, "--target", TARGET, "--only", "smith_bob")
    assert run.returncode == 0, run.stderr[-3000:]
    assert sorted(rows) == ["smith_alice", "smith_bob"] and "1 of them graded again" in run.stdout
    assert rows["smith_bob"]["passed"] == "False" and rows["smith_bob"]["diagnosis"] == "split-view-order"
    assert rows["smith_alice"]["score"] == "17.0" and not (out / "only-summary.csv").exists()
    assert not (out / "smith_alice.json").exists()  # not graded again
    run, _ = grade(EXPORTS / "canvas", out, "--only", "smith_rob")
    assert run.returncode == 2 and "no submission named 'smith_rob'" in run.stderr and "'smith_bob'" in run.stderr


def test_resume_grades_only_what_changed_and_trusts_only_mha_checks_own_sealed_reports(tmp_path, monkeypatch):
    """A rerun into a folder of results refuses in one line and names the options; `--resume` keeps the sealed
    reports of unchanged submissions (their rows in a summary that stays whole) and grades again a student whose
    helper module changed and one whose report was forged (its row made passing by someone without the key)."""
    import shutil

    monkeypatch.setenv("MHA_CHECK_STAMP_KEY", str(tmp_path / "key" / "stamp.key"))
    export, out = tmp_path / "canvas", tmp_path / "out"
    shutil.copytree(EXPORTS / "canvas", export)
    run, first = grade(export, out, "--target", TARGET)
    assert run.returncode == 0 and first["smith_bob"]["passed"] == "False", run.stderr[-3000:]
    before = (out / "summary.csv").read_text()

    run, _ = grade(export, out, "--target", TARGET)
    assert run.returncode == 2 and (out / "summary.csv").read_text() == before
    assert len(run.stderr.strip().splitlines()) == 1 and "already holds summary.csv and 4 reports" in run.stderr
    assert "--resume" in run.stderr and "--overwrite" in run.stderr

    helper = export / "grace_1004_5005_helpers.py"
    helper.write_text(helper.read_text() + "\n# edited after the first batch\n")
    forged = json.loads((out / "smith_bob.json").read_text())  # bob's failing row swapped for alice's passing one
    forged["mha_check_stamp"]["row"] = json.loads((out / "smith_alice.json").read_text())["mha_check_stamp"]["row"]
    (out / "smith_bob.json").write_text(json.dumps(forged))
    run, rows = grade(export, out, "--target", TARGET, "--resume")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "--resume: 2 of 4 kept" in run.stdout and "its files changed since (1)" in run.stdout, run.stdout
    assert "not made by mha-check with this account's key (1)" in run.stdout
    assert "graded 2 submissions" in run.stdout and "kept 2 from their reports" in run.stdout
    assert sorted(rows) == sorted(first) and rows["smith_bob"]["passed"] == "False"
    assert rows["joneskay"] == first["joneskay"] and rows["smith_alice"] == first["smith_alice"]
    assert rows["grace"]["passed"] == "True"
    assert (out / "summary.csv").read_text().splitlines()[0] == before.splitlines()[0]  # the same columns, in order


def test_resume_never_keeps_a_verdict_for_other_files_than_those_graded(tmp_path, monkeypatch):
    """A student who can write their folder during the batch (a shared hand-in folder, a synced drive) hands in a
    wrong layer, puts a correct one in its place after the batch began and the wrong one back once graded: the
    report, sealed with the digest of the wrong files, passed, and --resume kept that pass for the wrong files."""
    import shutil
    import time

    monkeypatch.setenv("MHA_CHECK_STAMP_KEY", str(tmp_path / "key" / "stamp.key"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    right = (ROOT / "examples" / "correct_attention.py").read_text()
    wrong = (ROOT / "examples" / "buggy_attention.py").read_text()
    subs, out = tmp_path / "subs", tmp_path / "out"
    (subs / "aaa").mkdir(parents=True)
    (subs / "zed").mkdir()
    (subs / "aaa" / "attention.py").write_text("import time\ntime.sleep(12)\n" + right)  # graded first (--jobs 1)
    (subs / "zed" / "attention.py").write_text(wrong)
    first = subprocess.Popen([sys.executable, "-m", "harness.frontends.cli", "grade", str(subs), "--out", str(out),
                              "--jobs", "1", "--target", TARGET], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list((tmp_path / "tmp").glob("*grade-*/scratch/*")) and time.monotonic() < deadline:
        time.sleep(0.05)  # the batch has digested every folder and begun grading aaa
    (subs / "zed" / "attention.py").write_text(right)
    first.communicate(timeout=300)
    (subs / "zed" / "attention.py").write_text(wrong)
    shutil.rmtree(tmp_path / "tmp")
    (tmp_path / "tmp").mkdir()
    run, rows = grade(subs, out, "--target", TARGET, "--resume")
    assert run.returncode == 0, run.stderr[-2000:]
    assert rows["zed"]["passed"] == "False", rows["zed"]  # the files in the folder, graded


def test_resume_never_keeps_a_time_out_which_says_more_of_the_moment_than_of_the_files(tmp_path, monkeypatch):
    """Red team 14: a wall-clock time-out is the moment's as much as the code's (a classmate spinning on every core,
    a loaded grader), yet its report was sealed and every later --resume kept the zero.  The hostile layer
    tests/hostile/resume/slow_while_loaded.py sleeps at import until the time in its hang_until.txt, then is right:
    graded before that time it times out, and --resume after it must grade it again (and it passes)."""
    import shutil
    import time

    monkeypatch.setenv("MHA_CHECK_STAMP_KEY", str(tmp_path / "key" / "stamp.key"))
    subs, out = tmp_path / "subs", tmp_path / "out"
    (subs / "loaded").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "hostile" / "resume" / "slow_while_loaded.py", subs / "loaded" / "attention.py")
    until = time.time() + 60
    (subs / "loaded" / "hang_until.txt").write_text(f"{until}\n")
    run, rows = grade(subs, out, "--target", "attention.py:MyAttn", "--time-limit", "4")
    assert time.time() < until, "the first batch took longer than the layer's hang: nothing was tested"
    assert rows["loaded"]["passed"] == "False" and "time" in rows["loaded"]["process"], (rows, run.stderr[-2000:])
    time.sleep(max(0.0, until - time.time()) + 1)
    run, rows = grade(subs, out, "--target", "attention.py:MyAttn", "--time-limit", "4", "--resume")
    assert run.returncode == 0, run.stderr[-2000:]
    assert "--resume: 0 of 1 kept" in run.stdout and "the machine's moment" in run.stdout, run.stdout
    assert rows["loaded"]["passed"] == "True", rows["loaded"]
