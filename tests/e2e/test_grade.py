"""Batch grading: target discovery, per-submission reports, the summary, and forked children that stay sound."""
import contextlib
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from checks import all_checks
from harness.engine.runner import Options, run_checks
from conftest import ROOT, ZOO, described, processes_left
from harness.sandbox.syscalls import process_tree

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


def grade(*args, timeout=300, tmpdir=None):
    env = dict(os.environ, TMPDIR=str(tmpdir)) if tmpdir else None
    return subprocess.run([sys.executable, "-m", "harness.frontends.cli", "grade", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=env)


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
    assert "found 5 submissions" in run.stdout and "(one folder per student)" in run.stdout
    assert out.stat().st_mode & 0o777 == 0o700  # made by grade: closed to every child (red team 6, without Landlock)
    rows = {r["submission"]: r for r in csv.DictReader(open(out / "summary.csv"))}
    assert set(rows) == {"ada", "bob", "cyd", "dee", "eve"}
    assert rows["ada"]["passed"] == rows["cyd"]["passed"] == "True"
    assert rows["bob"]["passed"] == "False" and rows["bob"]["diagnosis"] == "split-view-order"
    assert rows["dee"]["passed"] == "False"  # no code: a failing row, not a crash of the batch
    assert rows["eve"]["construct"] == "pass", rows["eve"]  # one thread, no deadlock in a forked child
    report = json.loads((out / "bob.json").read_text())
    assert report["target"] == "my_attention.py" and report["passed"] is False
    assert report["adapter"]["class"] == "MultiHeadAttention"  # the class found in the file, named in the summary
    assert rows["bob"]["target"] == "my_attention.py:MultiHeadAttention" and rows["dee"]["target"] == ""
    dee = json.loads((out / "dee.json").read_text())
    assert "has no .py or .ipynb file (it has notes.txt)" in dee["checks"][0]["message"]
    assert rows["dee"]["max_score"] == rows["ada"]["max_score"] == str(float(len(all_checks())))  # also with nothing
    assert rows["dee"]["needs_review"] == rows["bob"]["needs_review"] == "False"  # a verdict, nothing to look at


def test_the_meta_device_runs_in_a_child_of_the_meta_template_with_the_verdict_of_a_single_run(tmp_path):
    """In a batch the run on the meta device (mask-buffer) is made in a second child of the submission, forked from
    the meta template, where torch's imports for it are done once for the batch: every verdict must be the one a
    single run gives, where that run happens in the submission's own child.  A mask cached on the CPU by the first
    forward (a plain attribute set in forward) must stay behind in both."""
    lazy = (ZOO / "correct" / "lesson.py").read_text().replace(
        'self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())',
        "self.context_length = context_length").replace(
        "self.mask[:n, :n]", "self._mask(x)[:n, :n]").replace(
        "    def forward(self, x):",
        "    def _mask(self, x):  # made on the input's device, but only once: left behind by .to()\n"
        "        if not hasattr(self, 'cached'):\n"
        "            self.cached = torch.triu(torch.ones(self.context_length, self.context_length, device=x.device), "
        "1).bool()\n"
        "        return self.cached\n\n"
        "    def forward(self, x):")
    assert "self.cached" in lazy
    attr = (ZOO / "buggy" / "mask_plain_attr.py").read_text()
    subs = tmp_path / "subs"
    sources = {"attr": attr, "nodevice": (ZOO / "buggy" / "mask_no_device.py").read_text(), "lazy": lazy,
               "right": (ZOO / "correct" / "lesson.py").read_text(),
               # its import takes 3 s: the twin's second import must not count against its time limit
               "slow": "import time\ntime.sleep(3)\n" + attr,
               # its twin dies at import (the meta template has torch._dynamo): the run is made in its own child
               "twin_dies": "import os, sys\nif 'torch._dynamo' in sys.modules:\n    os._exit(3)\n" + attr,
               # what the run on the meta device prints is in the report, as in a single run's
               "prints": attr.replace("        b, t, _ = x.shape\n", "        b, t, _ = x.shape\n        if "
                                      "x.device.type == 'meta':\n            print('ON THE META DEVICE')\n")}
    assert "ON THE META DEVICE" in sources["prints"]
    for name, text in sources.items():
        (subs / name).mkdir(parents=True)
        (subs / name / "attention.py").write_text(text)
    out = tmp_path / "out"
    (tmp_path / "tmp").mkdir()
    run = grade(str(subs), "--out", str(out), "--jobs", "2", "--time-limit", "8", tmpdir=tmp_path / "tmp")
    assert run.returncode == 0, run.stderr[-2000:]
    assert list((tmp_path / "tmp").iterdir()) == []  # torch's imports for the meta device left torchinductor_<user>
    statuses = {}
    for name in sources:
        batch = json.loads((out / f"{name}.json").read_text())
        single_report = run_checks(str(subs / name / "attention.py"), Options(only=["mask-buffer"]))
        single = single_report.checks
        graded = [c for c in batch["checks"] if c["id"] == "mask-buffer"][0]
        assert ("ON THE META DEVICE" in batch["student_output"]) == ("ON THE META DEVICE" in
                                                                     single_report.student_output) == (name == "prints")
        assert (graded["status"], graded["message"]) == (single[-1].status, single[-1].message), name
        assert "skip" not in {c["status"] for c in batch["checks"]} and not batch["adapter"].get("process"), name
        statuses[name] = graded["status"]
    assert statuses == {"attr": "fail", "nodevice": "fail", "lazy": "fail", "right": "pass", "slow": "fail",
                        "twin_dies": "fail", "prints": "fail"}


def test_the_merged_class_view_names_a_quoted_student_as_themselves(tmp_path):
    """A name the summary quotes for spreadsheets ('=alice, as csv_cell writes =alice) is the student =alice in the
    merged class view, linked to their report =alice.json: the view showed the quote and linked no report (red team
    5); the merged summary keeps the quoted cell."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "=alice.json").write_text("{}")
    (out / "bob.json").write_text("{}")
    shard = tmp_path / "summary-1-of-1.csv"
    shard.write_text("submission,target,passed,needs_review,score,max_score,pass,fail\n"
                     "'=alice,attention.py:A,True,False,1.0,1.0,1,0\nbob,attention.py:A,True,False,1.0,1.0,1,0\n")
    run = grade("--merge", str(shard), "--out", str(out))
    assert run.returncode == 0, run.stderr[-2000:]
    page = (out / "class-report.html").read_text()
    assert 'href="./%3Dalice.json"' in page and 'href="./bob.json"' in page and "&#x27;=alice" not in page
    assert "'=alice," in (out / "summary.csv").read_text()


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
    shards = [str(out / "summary-1-of-2.csv"), str(out / "summary-2-of-2.csv")]
    merged = grade("--merge", *shards)
    assert merged.returncode == 0 and len(merged.stdout.strip().splitlines()) == 7
    # with --out: the merged summary and the class view of the whole course, its links to every shard's reports
    written = grade("--merge", *shards, "--out", str(out))
    assert written.returncode == 0, written.stderr
    assert "merged 2 summaries: 6 submissions graded" in written.stdout and "class view:" in written.stdout
    assert (out / "summary.csv").read_text() == merged.stdout
    page = (out / "class-report.html").read_text()
    assert all(f'href="./s{i}.json"' in page for i in range(6)) and "merged from summary-1-of-2.csv" in page
    again = grade("--merge", *shards, "--out", str(out))  # an earlier merged summary is replaced only when asked
    assert again.returncode == 2 and "add --overwrite" in again.stderr
    assert grade("--merge", *shards, "--out", str(out), "--overwrite").returncode == 0


CORRECT, BUGGY = ROOT / "examples" / "correct_attention.py", ROOT / "examples" / "buggy_attention.py"
RUBRIC = '[checks.causal-leakage]\npoints = 3\n'
TOTAL = len(all_checks()) + 2  # one point a check, causal-leakage three


def _broken_report_says_what_and_how(report: dict, words: str) -> None:
    """A submission that cannot be checked: every check is in its report (so the total is the rubric's), the
    construct check says what is broken, why it matters and what to do, and the rest are skipped, not failed."""
    construct, *others = report["checks"]
    assert construct["id"] == "construct" and construct["status"] == "fail" and words in construct["message"]
    assert construct["fix"].strip() and construct["explanation"].strip()
    assert len(report["checks"]) == len(all_checks()) and {c["status"] for c in others} == {"skip"}


@pytest.mark.slow
def test_flat_files_named_by_student(tmp_path):
    subs = tmp_path / "export"
    subs.mkdir()
    shutil.copy(CORRECT, subs / "alice_attention.py")
    shutil.copy(BUGGY, subs / "HW3_bob_attempt_2024-05-01-10-00-00_attention.py")  # Blackboard
    (subs / "carol_attention.py").write_text("import torch\nclass MultiHeadAttention(torch.nn.Module:\n")
    (subs / "dan_attention.py").write_text("import torch.nn as nn\nclass Attention(nn.Module):\n    pass\n")
    (subs / "grades.csv").write_text("student,grade\n")
    (tmp_path / "rubric.toml").write_text(RUBRIC)
    out = tmp_path / "out"
    run = grade(str(subs), "--target", "attention.py:MultiHeadAttention", "--rubric", str(tmp_path / "rubric.toml"),
                "--out", str(out), "--jobs", "2")
    assert run.returncode == 0, run.stderr[-2000:]
    assert "found 4 submissions" in run.stdout and "files named by student" in run.stdout
    assert "left out: files that are not .py or .ipynb (1 .csv)" in run.stdout
    rows = {r["submission"]: r for r in csv.DictReader(open(out / "summary.csv"))}
    assert rows.pop("grades.csv")["not_graded"]  # listed with its reason, not a student's: exit status 0
    assert set(rows) == {"alice", "bob", "carol", "dan"}
    assert {r["max_score"] for r in rows.values()} == {str(float(TOTAL))}
    assert rows["alice"]["passed"] == "True" and rows["alice"]["score"] == str(float(TOTAL))
    assert rows["alice"]["target"] == "attention.py:MultiHeadAttention"  # the name alice gave it
    assert rows["bob"]["diagnosis"] == "split-view-order" and 0 < float(rows["bob"]["score"]) < TOTAL
    assert rows["carol"]["score"] == rows["dan"]["score"] == "0.0"
    # dan's file holds a layer of another name: a person should look (carol's does not import: hers to fix)
    assert (rows["dan"]["needs_review"], rows["carol"]["needs_review"]) == ("True", "False")
    _broken_report_says_what_and_how(json.loads((out / "carol.json").read_text()), "SyntaxError")
    _broken_report_says_what_and_how(json.loads((out / "dan.json").read_text()), "has no 'MultiHeadAttention'")


@pytest.mark.slow
def test_broken_and_undecided_submissions_in_folders(tmp_path):
    subs = tmp_path / "subs"
    for name, files in {"syntax": {"attention.py": "def broken(:\n"},
                        "empty": {},
                        "two": {"a.py": CORRECT.read_text(), "b.py": CORRECT.read_text()},
                        "sleeper": {"attention.py": (ROOT / "tests" / "hostile" / "sleep_forever.py").read_text()},
                        }.items():
        (subs / name).mkdir(parents=True)
        for file, text in files.items():
            (subs / name / file).write_text(text)
    (tmp_path / "rubric.toml").write_text(RUBRIC)
    out = tmp_path / "out"
    run = grade(str(subs), "--rubric", str(tmp_path / "rubric.toml"), "--out", str(out), "--time-limit", "3",
                "--jobs", "2")
    assert run.returncode == 0, run.stderr[-2000:]
    rows = {r["submission"]: r for r in csv.DictReader(open(out / "summary.csv"))}
    assert {r["max_score"] for r in rows.values()} == {str(float(TOTAL))}
    assert {rows[n]["score"] for n in ("syntax", "empty", "two")} == {"0.0"}
    assert float(rows["sleeper"]["score"]) < TOTAL  # built (construct passes), then ran out of time
    report = {name: json.loads((out / f"{name}.json").read_text()) for name in rows}
    _broken_report_says_what_and_how(report["syntax"], "SyntaxError")
    _broken_report_says_what_and_how(report["empty"], "has no .py or .ipynb file (it is empty)")
    _broken_report_says_what_and_how(report["two"], "2 code files (a.py, b.py)")
    assert "Hand in one .py file" in report["empty"]["checks"][0]["fix"]
    # a time-out is not a verdict on the code: the row says a person should look; broken files are verdicts
    assert rows["sleeper"]["needs_review"] == "True" and "time" in rows["sleeper"]["process"]
    assert {rows[n]["needs_review"] for n in ("syntax", "empty")} == {"False"}  # the student's to fix
    assert rows["two"]["needs_review"] == "True"  # which file to check is a person's call, not a zero to trust
    assert "2 need a person to look" in run.stdout


@pytest.mark.parametrize("make, words", [
    (lambda d: None, "the folder is empty"),
    (lambda d: (d / "export.zip").write_bytes(b"PK"), "unzip an export first"),
    (lambda d: (d / "_x.py").write_text(""), "whose name gives no student (_x.py)"),
])
def test_no_submissions_found_is_an_error_that_says_what_is_there(tmp_path, make, words):
    (tmp_path / "subs").mkdir()
    make(tmp_path / "subs")
    run = grade(str(tmp_path / "subs"), "--out", str(tmp_path / "out"))
    assert run.returncode == 2 and "nothing to grade" in run.stderr, run.stderr
    assert "found no submissions" in run.stdout and words in run.stdout


def test_zip_or_bad_pattern_is_a_usage_error(tmp_path):
    (tmp_path / "export.zip").write_bytes(b"PK")
    run = grade(str(tmp_path / "export.zip"))
    assert run.returncode == 2 and "unzip it first" in run.stderr
    run = grade(str(tmp_path), "--pattern", "(?P<name>\\w+)_")
    assert run.returncode == 2 and "named group (?P<student>...)" in run.stderr


HANGS_IN_FORWARD = (ZOO / "correct" / "book_style.py").read_text().replace(
    "    def forward(self, x):\n", "    def forward(self, x):\n        import time\n        time.sleep(3600)\n", 1)


def _interruptible_batch(tmp_path, wait: bool = True):
    """Three correct submissions and one whose forward hangs; the batch is started in a session of its own, with
    Ctrl-C's default meaning, and returned once a first report is written (`wait`), else at once."""
    subs = tmp_path / "subs"
    for name, text in [("a", None), ("b", None), ("c", None), ("hangs", HANGS_IN_FORWARD)]:
        (subs / name).mkdir(parents=True)
        target = subs / name / "attention.py"
        target.write_text(text) if text else shutil.copy(ZOO / "correct" / "book_style.py", target)
    (tmp_path / "tmp").mkdir()
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"))
    run = subprocess.Popen([sys.executable, "-m", "harness.frontends.cli", "grade", str(subs), "--out",
                            str(tmp_path / "out"), "--jobs", "2", "--time-limit", "600"], cwd=ROOT, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while wait and not list((tmp_path / "out").glob("*.json")) and time.monotonic() < deadline:
        time.sleep(0.1)
    return run


def test_ctrl_c_stops_the_batch_and_keeps_what_was_graded(tmp_path):
    """Ctrl-C (SIGINT to the terminal's process group) mid-batch: no traceback, exit status 130, the reports and a
    summary of the submissions graded so far, and nothing left: no process, no scratch or staging folder."""
    run = _interruptible_batch(tmp_path)
    os.killpg(run.pid, signal.SIGINT)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 130, err[-2000:]
    assert "Traceback" not in err and "interrupted:" in err, err[-2000:]
    rows = list(csv.DictReader(open(tmp_path / "out" / "summary.csv")))
    assert 1 <= len(rows) < 4 and "hangs" not in {r["submission"] for r in rows}
    assert all(r["passed"] == "True" for r in rows)
    view = (tmp_path / "out" / "class-report.html").read_text()  # the class view of what was graded, saying so
    assert f"interrupted: only the {len(rows)} of 4 submissions graded" in view
    assert processes_left(tmp_path) == []
    assert list((tmp_path / "tmp").iterdir()) == []


@pytest.mark.parametrize("when", ["at once", "after half a second", "after a second", "after a first report"])
def test_sigterm_at_any_moment_ends_the_batch_within_the_bound(tmp_path, when):
    """SIGTERM to `grade` alone (a scheduler's stop), wherever it lands: during start-up, while the template
    imports torch and the submissions are staged, or with graders mid-submission.  Only the outcome is asserted,
    never when the signal landed (that depends on the machine's load): the process ends (well within
    stopping.STOP_BOUND plus start-up; a deadlock at exit once kept it forever), with the status of an interrupt
    (or SIGTERM's own, when it lands before Python has a handler), and leaves no process behind."""
    run = _interruptible_batch(tmp_path, wait=when == "after a first report")
    time.sleep({"after half a second": 0.5, "after a second": 1.0}.get(when, 0.0))  # while starting: see cli._Deferred
    run.send_signal(signal.SIGTERM)
    try:
        out, err = run.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        run.communicate()
        raise AssertionError("grade did not end after SIGTERM") from None
    assert run.returncode in (130, -signal.SIGTERM), (run.returncode, out[-2000:], err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    assert processes_left(tmp_path) == []


def test_a_killed_grader_leaves_no_process_behind(tmp_path):
    """SIGKILL to the grading command itself: its graders are stopped by the kernel (they clean up their
    submission's child and scratch), the template dies with it, and the zygotes end with their graders.  Only the
    staging copy of the submissions, which the killed process itself made, can remain."""
    run = _interruptible_batch(tmp_path)
    run.kill()
    run.communicate(timeout=60)
    left = processes_left(tmp_path)
    assert left == [], described(left)
    assert all(p.name.startswith("mha-check-grade-") for p in (tmp_path / "tmp").iterdir())


def test_a_killed_grader_leaves_no_process_behind_even_with_its_zygotes_stopped(tmp_path):
    """The same kill while every zygote and the child it forked are stopped (SIGSTOP: a test, an operator): a
    stopped zygote never reads the end of its grader's socket, and its template died with `grade`, so it stayed on
    the machine for good, with its child, nobody's children any more."""
    run = _interruptible_batch(tmp_path)
    templates = [pid for pid in _children(run.pid) if b"z.template(" in _cmdline(pid)]
    assert len(templates) == 1
    zygotes, watched = _children(templates[0]), {}
    try:
        for zygote in zygotes:
            for pid in process_tree(zygote):  # each watched by a pidfd: its pid may be reused once it is gone
                with contextlib.suppress(OSError):
                    watched[pid] = os.pidfd_open(pid)
                    signal.pidfd_send_signal(watched[pid], signal.SIGSTOP)
        assert len(zygotes) == 2 and len(watched) > 2  # a zygote per grader, and a child of one at least
        run.kill()
        run.communicate(timeout=60)
        left = processes_left(tmp_path)
        assert left == [], described(left)
    finally:  # what a failure leaves: the graders (in grade's process group), the stopped processes
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)
        for fd in watched.values():
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            os.close(fd)


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                if entry.isdigit() and int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _batch_with_a_report(tmp_path):
    """Six correct submissions and a buggy one, graded with TMPDIR inside tmp_path; returned once a first report is
    written, with the submissions' names."""
    subs = tmp_path / "subs"
    names = [f"s{i}" for i in range(6)]
    for name in names:
        (subs / name).mkdir(parents=True)
        shutil.copy(ZOO / "correct" / "book_style.py", subs / name / "attention.py")
    (subs / "zbug").mkdir()
    shutil.copy(ROOT / "examples" / "buggy_attention.py", subs / "zbug" / "attention.py")
    (tmp_path / "tmp").mkdir()
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"))
    run = subprocess.Popen([sys.executable, "-m", "harness.frontends.cli", "grade", str(subs), "--out",
                            str(tmp_path / "out"), "--jobs", "2"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list((tmp_path / "out").glob("*.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    return run, names


def _every_verdict(tmp_path, names) -> None:
    rows = {r["submission"]: r for r in csv.DictReader(open(tmp_path / "out" / "summary.csv"))}
    assert set(rows) == {*names, "zbug"}
    assert all(rows[n]["passed"] == "True" for n in names), [rows[n] for n in names if rows[n]["passed"] != "True"]
    assert rows["zbug"]["diagnosis"] == "split-view-order" and not any(r["process"] for r in rows.values())
    assert processes_left(tmp_path) == []
    assert list((tmp_path / "tmp").iterdir()) == []  # no scratch (a copy of a student's code), no cache folder


@pytest.mark.parametrize("signal_", [signal.SIGKILL, signal.SIGTERM])
def test_a_grader_killed_from_outside_costs_no_verdict(tmp_path, signal_):
    """A grader process killed mid-batch (the OOM killer, an operator) broke the whole pool: every submission not
    yet graded became a row that failed construct ("a process in the process pool was terminated abruptly"), the
    batch exited 0 without a word, and the killed grader's scratch, with a student's code in it, stayed behind.
    Now a fresh pool grades what was left, stderr says so, and nothing remains."""
    run, names = _batch_with_a_report(tmp_path)
    graders = [pid for pid in _children(run.pid) if b"cli" in open(f"/proc/{pid}/cmdline", "rb").read()]
    assert len(graders) == 2
    os.kill(graders[0], signal_)
    out, err = run.communicate(timeout=240)
    assert run.returncode == 0 and "Traceback" not in err, err[-3000:]
    assert "graded again from the start" in err
    _every_verdict(tmp_path, names)


def test_a_batch_whose_template_and_zygotes_are_killed_grades_every_submission(tmp_path):
    """The template and every zygote killed (SIGKILL: the OOM killer, an operator) once a first report is written:
    each grader starts a zygote of its own and the batch goes on, with every verdict it would have had, no
    traceback and no process left.  (Such a zygote could once fork no child: the rest of the batch was "grader
    error" rows.)"""
    run, names = _batch_with_a_report(tmp_path)
    templates = [pid for pid in _children(run.pid) if b"z.template(" in open(f"/proc/{pid}/cmdline", "rb").read()]
    assert len(templates) == 1
    victims = [templates[0], *_children(templates[0])]
    assert len(victims) >= 3  # the template and a zygote per grader
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    out, err = run.communicate(timeout=240)
    assert run.returncode == 0 and "Traceback" not in err, err[-3000:]
    _every_verdict(tmp_path, names)


def test_grade_binds_the_constructor_and_the_parameters_as_a_single_run_does(tmp_path):
    """A course's class with its own constructor parameter (`widget`) and parameters no name tells apart: --arg and
    --map reach every submission's build and reading, as they do a single run's (grade had neither)."""
    source = CORRECT.read_text().replace("def __init__(self, d_in, d_out, context_length, dropout, num_heads,",
                                         "def __init__(self, d_in, d_out, context_length, dropout, num_heads, widget,")
    assert "widget" in source
    for student in ("ada", "bo"):
        (tmp_path / "subs" / student).mkdir(parents=True)
        (tmp_path / "subs" / student / "attention.py").write_text(source)
    unbound = grade(str(tmp_path / "subs"), "--target", "attention.py:MultiHeadAttention", "--out",
                    str(tmp_path / "unbound"), "--format", "json")
    bound = grade(str(tmp_path / "subs"), "--target", "attention.py:MultiHeadAttention", "--out",
                  str(tmp_path / "bound"), "--format", "json", "--arg", "widget=3", "--examples", "2")
    assert unbound.returncode == bound.returncode == 0, unbound.stderr[-2000:] + bound.stderr[-2000:]
    for student in ("ada", "bo"):
        before = json.loads((tmp_path / "unbound" / f"{student}.json").read_text())
        after = json.loads((tmp_path / "bound" / f"{student}.json").read_text())
        construct = next(c for c in before["checks"] if c["id"] == "construct")
        assert construct["status"] == "cannot_tell" and "widget" in construct["message"], construct
        assert after["passed"], [(c["id"], c["status"]) for c in after["checks"] if c["status"] != "pass"]
    assert "--arg" in grade("--help").stdout and "--map" in grade("--help").stdout


def test_files_and_folders_named_like_our_packages_are_graded_as_the_students(tmp_path):
    """A correct layer handed in as checks.py, reference.py, mutants.py or harness.py, or beside its own helper
    package reference/, and students whose folder is named harness or checks: every row has the verdicts of the same
    class handed in as attention.py, and a buggy layer in a checks.py gets the diagnosis it gets as attention.py
    (harness.wire.names: the student's files are theirs, ours stay ours)."""
    subs = tmp_path / "subs"
    files = {"alice/checks.py": CORRECT, "bob/reference.py": CORRECT, "carol/mutants.py": CORRECT,
             "dave/harness.py": CORRECT, "frank/attention.py": CORRECT, "harness/attention.py": CORRECT,
             "checks/attention.py": CORRECT, "gina/checks.py": BUGGY, "hank/attention.py": BUGGY}
    for where, source in files.items():
        (subs / where).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, subs / where)
    (subs / "erin" / "reference").mkdir(parents=True)
    (subs / "erin" / "reference" / "__init__.py").write_text(
        "import torch\n\n\ndef causal_mask(n):\n    return torch.triu(torch.ones(n, n, dtype=torch.bool), 1)\n")
    helped = CORRECT.read_text().replace("import torch\n", "import torch\nfrom reference import causal_mask\n", 1)
    (subs / "erin" / "student.py").write_text(helped.replace(
        "torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), diagonal=1)",
        "causal_mask(context_length)"))
    assert "causal_mask(context_length)" in (subs / "erin" / "student.py").read_text()
    out = tmp_path / "out"
    run = grade(str(subs), "--out", str(out), "--jobs", "2")
    assert run.returncode == 0, run.stderr[-2000:]
    rows = {r["submission"]: r for r in csv.DictReader(open(out / "summary.csv"))}
    ids = [c.id for c in all_checks()]
    verdicts = {name: ({i: r[i] for i in ids}, r["diagnosis"]) for name, r in rows.items()}
    for name in ("alice", "bob", "carol", "dave", "erin", "harness", "checks"):
        assert verdicts[name] == verdicts["frank"], (name, json.loads((out / f"{name}.json").read_text())["checks"])
    assert rows["frank"]["passed"] == "True" and rows["alice"]["target"] == "checks.py:MultiHeadAttention"
    assert verdicts["gina"] == verdicts["hank"] and rows["gina"]["diagnosis"] == "split-view-order"


def test_grade_checks_a_file_named_with_a_colon_and_says_in_one_line_why_a_link_is_not(tmp_path):
    """`my:attn.py` is a legal file name: it was read as the module `my` and the student failed construct on our
    own parse of FILE:Class.  A submission whose file is a link to a classmate's got "attention.py not read (a code
    file must be a regular file, ...)" as a plain failure; a student's folder that is a link to a classmate's, "not
    a regular file".  Now the colon's file is checked, and each link is one line that says where it leads, never
    followed, for a person to look at."""
    subs = tmp_path / "subs"
    for name in ("ann", "bob", "carl"):
        (subs / name).mkdir(parents=True)
    shutil.copy(ZOO / "correct" / "book_style.py", subs / "ann" / "my:attn.py")
    shutil.copy(ZOO / "correct" / "book_style.py", subs / "bob" / "attention.py")
    os.symlink("../bob/attention.py", subs / "carl" / "attention.py")
    os.symlink("bob", subs / "dan")
    out = tmp_path / "out"
    run = grade(str(subs), "--out", str(out), "--jobs", "2")
    assert run.returncode == 3 and "Traceback" not in run.stderr, run.stderr[-2000:]  # dan's folder got no row
    rows = {r["submission"]: r for r in csv.DictReader(open(out / "summary.csv"))}
    assert rows["ann"]["passed"] == "True" and rows["ann"]["target"] == "my:attn.py:MultiHeadAttention", rows["ann"]
    assert rows["carl"]["needs_review"] == "True" and rows["dan"]["needs_review"] == "True"
    carl = json.loads((out / "carl.json").read_text())["checks"][0]["message"]
    assert carl.startswith("attention.py is a symbolic link to ../bob/attention.py, outside this submission"), carl
    assert rows["dan"]["not_graded"].startswith("a symbolic link to bob, which leads to bob's submission")
    said = [ln for ln in run.stderr.splitlines() if "dan" in ln]
    assert len(said) == 1 and "never follows a link" in said[0], run.stderr


def test_a_report_that_cannot_be_written_costs_its_class_no_class_view(tmp_path):
    """Red team 4: one report the output folder could not take (a name too long for the file system, then) left
    every classmate without the class view.  The view is written whenever the summary is, linking the reports on
    disk; the batch still ends with the write failure's status and says which report is missing."""
    subs = tmp_path / "subs"
    for name in ("ada", "bob"):
        (subs / name).mkdir(parents=True)
        shutil.copy(ZOO / "correct" / "lesson.py", subs / name / "attention.py")
    out = tmp_path / "out"
    (out / "ada.json").mkdir(parents=True)  # a folder where ada's report goes: replacing it fails
    run = grade(str(subs), "--out", str(out), "--jobs", "2", "--overwrite")
    assert run.returncode == 3 and "1 of 2 reports could not be written" in run.stderr, run.stderr[-2000:]
    page = (out / "class-report.html").read_text()
    assert 'href="./bob.json"' in page and 'href="./ada.json"' not in page and "<td>ada</td>" in page
    assert "class view:" in run.stdout


def test_a_class_named_otherwise_says_in_its_report_and_the_class_view_why_a_person_should_look(tmp_path):
    """Instructor trial 9: a Canvas student who named the lesson's class MultiHeadAttention where the rubric asks
    for CausalMHA got 0 and needs_review, and the text report ended "marked for review (the notes above say why)"
    with no note above, the class view "its notes say why": nothing said why.  The reason is now in the report's
    closing lines and in the class view's review table."""
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(ZOO / "correct" / "book_style.py", subs / "patelriya_1016_5016_attention.py")
    out = tmp_path / "out"
    run = grade(str(subs), "--out", str(out), "--jobs", "1", "--format", "text",
                "--target", "attention.py:CausalMHA")
    assert run.returncode == 0, run.stderr[-2000:]
    row = next(csv.DictReader(open(out / "summary.csv", encoding="utf-8")))
    assert row["needs_review"] == "True" and row["construct"] == "fail", row
    text = (out / "patelriya.txt").read_text(encoding="utf-8")
    assert "no class of the name the batch asks for" in " ".join(text.split()), text
    page = (out / "class-report.html").read_text(encoding="utf-8")
    assert "no class of the name the batch asks for" in page and "its notes say why" not in page, page[-3000:]


def test_feedback_holds_each_students_view_without_the_hidden_checks(tmp_path):
    """grade --feedback: beside the staff's reports, feedback/NAME.txt for each student graded, which names no
    check the rubric hides (bob's split mistake is proven by view-order, hidden here, and by visible checks: its
    root cause stays) and says how many are not shown; the staff's report keeps them all."""
    subs = tmp_path / "subs"
    for name, source in [("ada", ZOO / "correct" / "book_style.py"), ("bob", ROOT / "examples" / "buggy_attention.py")]:
        (subs / name).mkdir(parents=True)
        shutil.copy(source, subs / name / "my_attention.py")
    (tmp_path / "rubric.toml").write_text('[checks.view-order]\nhidden = true\n')
    out = tmp_path / "out"
    run = grade(str(subs), "--rubric", str(tmp_path / "rubric.toml"), "--out", str(out), "--jobs", "2",
                "--format", "text", "--feedback")
    assert run.returncode == 0, run.stderr[-2000:]
    ada, bob = ((out / "feedback" / f"{n}.txt").read_text() for n in ("ada", "bob"))
    assert "view-order" not in ada and "view-order" not in bob.replace("split-view-order", ""), bob
    assert "1 check that counts toward the score is not shown here." in bob and "Root cause:" in bob
    assert "score:" not in bob  # the rubric shows the total no earlier than its hidden check
    assert re.search(r"FAIL +view-order", (out / "bob.txt").read_text())  # the staff's view keeps it


def test_two_students_one_case_apart_get_two_reports_and_two_feedback_files(tmp_path):
    """Red team 17: "Alice Smith" and "alice smith" would share NAME.json and feedback/NAME.txt on an output folder
    that ignores case (not reproducible on this file system: the names must differ once case is set aside)."""
    subs = tmp_path / "subs"
    for name, source in (("Alice Smith", ZOO / "correct" / "lesson.py"), ("alice smith", ROOT / "examples" /
                                                                           "buggy_attention.py")):
        (subs / name).mkdir(parents=True)
        shutil.copy(source, subs / name / "attention.py")
    out = tmp_path / "out"
    run = grade(str(subs), "--out", str(out), "--jobs", "1", "--feedback")
    assert run.returncode in (0, 1), run.stderr[-2000:]
    reports = sorted(p.name for p in out.glob("*.json"))
    feedback = sorted(p.name for p in (out / "feedback").glob("*.txt"))
    for written in (reports, feedback):
        assert len(written) == 2 and len({w.casefold() for w in written}) == 2, written
    assert {json.loads((out / r).read_text())["passed"] for r in reports} == {True, False}
