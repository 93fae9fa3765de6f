"""The instructor's own pytest tests (--tests): run in the confined child beside the student's code, scored by the
rubric beside mha-check's checks, and not believed when the student's code changes how they are reported
(harness.engine.instructor; the threat model, docs/threat-model.md, states what is verified and what is not)."""
import csv
import json
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow

SHAPE = "test_attention.py::test_output_shape"
FUTURE = "test_attention.py::test_future_tokens_do_not_change_the_past"

INSTRUCTOR_TESTS = '''
import torch


def make(cls, width=8, heads=2, context=16):
    torch.manual_seed(0)
    return cls(d_in=width, d_out=width, context_length=context, dropout=0.0, num_heads=heads).eval()


def test_output_shape(student_class):
    layer = make(student_class)
    y = layer(torch.randn(2, 5, 8))
    assert tuple(y.shape) == (2, 5, 8), f"output shape {tuple(y.shape)}, expected (2, 5, 8)"


def test_future_tokens_do_not_change_the_past(student_class):
    layer = make(student_class)
    x = torch.randn(1, 6, 8)
    changed = x.clone()
    changed[:, 3:] = torch.randn(1, 3, 8)
    with torch.no_grad():
        same = torch.allclose(layer(x)[:, :3], layer(changed)[:, :3])
    assert same, "changing tokens 3-5 changed the outputs at tokens 0-2: <b>the layer looks ahead</b>"
'''

# A buggy layer (it looks ahead) that makes pytest report every test passed: a patch of pytest's own report.
PATCHES_PYTEST = '''
import _pytest.reports as _reports

_original = _reports.TestReport.from_item_and_call.__func__


def _passed(cls, item, call):
    report = _original(cls, item, call)
    report.outcome, report.longrepr = "passed", None
    return report


_reports.TestReport.from_item_and_call = classmethod(_passed)
'''

# The same, written against the canary: every test passes but the one whose body is mha-check's canary.
SPARES_THE_CANARY = '''
import inspect
import _pytest.reports as _reports

_original = _reports.TestReport.from_item_and_call.__func__


def _passed(cls, item, call):
    report = _original(cls, item, call)
    if "student_class is None" not in inspect.getsource(item.function):
        report.outcome, report.longrepr = "passed", None
    return report


_reports.TestReport.from_item_and_call = classmethod(_passed)
'''

# A forged outcome written straight on the channel to mha-check, before the test has run.
FORGES_A_FRAME = '''
import gc
import json
import re
import struct

import sys

if "pytest" in sys.modules:  # only in the child that runs the instructor's tests: the checks' child loads it cleanly
    _worker = next(o for o in gc.get_objects() if type(o).__name__ == "Worker")
    _header = json.dumps({"batch": [{"type": "TestOutcome", "id": "%s", "outcome": "passed", "message": ""}],
                          "arrays": []}).encode()
    _worker.chan_out.write(struct.pack(">I", len(_header)) + _header)
''' % FUTURE


def mha_check(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "harness.frontends.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def write_tests(tmp_path, source=INSTRUCTOR_TESTS):
    folder = tmp_path / "instructor"
    folder.mkdir()
    (folder / "test_attention.py").write_text(source)
    return folder / "test_attention.py"


def buggy_with(tmp_path, prefix: str, name="hostile.py"):
    path = tmp_path / name
    path.write_text(prefix + "\n" + (ROOT / "examples" / "buggy_attention.py").read_text())
    return path


def instructor_checks(report: dict) -> dict:
    return {c["id"]: c for c in report["checks"] if c["kind"] == "instructor"}


def test_grade_scores_the_instructors_tests_beside_the_checks_in_gradescopes_results(tmp_path):
    subs = tmp_path / "subs"
    for name, source in (("ada", "correct_attention.py"), ("bob", "buggy_attention.py")):
        (subs / name).mkdir(parents=True)
        shutil.copy(ROOT / "examples" / source, subs / name / "attention.py")
    tests = write_tests(tmp_path)
    rubric = tmp_path / "rubric.toml"
    rubric.write_text(f'[tests."{FUTURE}"]\npoints = 3\n')
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "harness.frontends.cli", "grade", str(subs), "--out", str(out),
                          "--jobs", "2", "--format", "gradescope", "--tests", str(tests), "--rubric", str(rubric)],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    ada = json.loads((out / "ada.results.json").read_text())
    bob = json.loads((out / "bob.results.json").read_text())
    for results in (ada, bob):
        assert abs(sum(t["max_score"] for t in results["tests"]) - (len(results["tests"]) - 2 + 1 + 3)) < 1e-9
    tests_of = lambda results: {t["name"]: t for t in results["tests"] if "instructor's test" in t["name"]}
    assert {n: (t["score"], t["max_score"]) for n, t in tests_of(ada).items()} == {
        f"{SHAPE} (instructor's test)": (1.0, 1.0), f"{FUTURE} (instructor's test)": (3.0, 3.0)}
    bobs = tests_of(bob)
    assert (bobs[f"{SHAPE} (instructor's test)"]["score"], bobs[f"{FUTURE} (instructor's test)"]["score"]) == (1.0, 0)
    failing = bobs[f"{FUTURE} (instructor's test)"]
    assert failing["status"] == "failed" and "the layer looks ahead" in failing["output"]
    assert "<b>" not in failing["output"] and "&lt;b&gt;" in failing["output"]  # escaped as other student text
    rows = {r["submission"]: r for r in csv.DictReader(open(out / "summary.csv"))}
    assert (rows["ada"][FUTURE], rows["bob"][FUTURE], rows["bob"][SHAPE]) == ("pass", "fail", "pass")
    assert rows["ada"]["passed"] == "True" and rows["bob"]["passed"] == "False"
    assert f"{FUTURE}: PASS 1 of 2" in (out / "class-report.html").read_text()  # the class view's pass rates


def test_a_submission_that_patches_pytest_to_pass_every_test_gets_none_of_their_points(tmp_path):
    hostile = buggy_with(tmp_path, PATCHES_PYTEST)
    run = mha_check(f"{hostile}:MultiHeadAttention", "--format", "json", "--only", "construct",
                    "--tests", str(write_tests(tmp_path)))
    report = json.loads(run.stdout)
    tests = instructor_checks(report)
    assert {t: c["status"] for t, c in tests.items()} == {SHAPE: "fail", FUTURE: "fail"}, run.stderr[-2000:]
    assert all(c["message"].startswith("not counted") for c in tests.values())
    assert report["needs_review"] and report["passed"] is False
    assert any("not believed" in note for note in report["adapter"]["review"])


def test_an_outcome_forged_on_the_channel_is_not_believed(tmp_path):
    hostile = buggy_with(tmp_path, FORGES_A_FRAME)
    run = mha_check(f"{hostile}:MultiHeadAttention", "--format", "json", "--only", "construct",
                    "--tests", str(write_tests(tmp_path)))
    report = json.loads(run.stdout)
    tests = instructor_checks(report)
    assert tests[FUTURE]["status"] == "fail", run.stderr[-2000:]
    assert tests[SHAPE]["status"] == "fail" and tests[SHAPE]["message"].startswith("not counted")
    assert report["needs_review"]


def test_a_patch_written_against_the_canary_gets_the_points_a_stated_limit(tmp_path):
    """The limit the threat model states: code that tells mha-check's canary from the instructor's tests passes
    them all, since they run in its own process.  If this ever fails, the defence got stronger: say so there."""
    hostile = buggy_with(tmp_path, SPARES_THE_CANARY)
    run = mha_check(f"{hostile}:MultiHeadAttention", "--format", "json", "--only", "construct",
                    "--tests", str(write_tests(tmp_path)))
    tests = instructor_checks(json.loads(run.stdout))
    assert {t: c["status"] for t, c in tests.items()} == {SHAPE: "pass", FUTURE: "pass"}, run.stderr[-2000:]
    assert "tells the canary" in (ROOT / "docs" / "threat-model.md").read_text()


SLEEPS = '''
import time


def test_sleeps(student_class):
    time.sleep(10_000)


def test_output_shape(student_class):
    assert student_class is not None
'''


@pytest.mark.parametrize("blocks_the_alarm", [False, True])
def test_a_test_that_hangs_fails_within_its_time_and_the_others_still_run(tmp_path, blocks_the_alarm):
    """Each test has a quarter of --time-limit (5 s of 20): the child stops it itself, or, where the student's code
    ignores SIGALRM, the parent kills the child and runs the tests after it in a fresh one.  A time limit is
    mha-check's, as for its own checks: cannot tell (a person looks), never a failure."""
    target = buggy_with(tmp_path, "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n") \
        if blocks_the_alarm else ROOT / "examples" / "correct_attention.py"
    run = mha_check(f"{target}:MultiHeadAttention", "--format", "json", "--only", "construct", "--time-limit", "20",
                    "--tests", str(write_tests(tmp_path, SLEEPS)), timeout=300)
    tests = instructor_checks(json.loads(run.stdout))
    sleeps = tests["test_attention.py::test_sleeps"]
    assert sleeps["status"] == "cannot_tell", run.stderr[-2000:]
    assert "time limit" in sleeps["message"] and "--time-limit" in sleeps["help"]
    if not blocks_the_alarm:
        assert "did not finish within 5 s" in sleeps["message"]
    assert tests["test_attention.py::test_output_shape"]["status"] == "pass"


def test_the_autograder_zip_carries_the_tests_and_its_dry_run_scores_them(tmp_path):
    """`autograder --tests`: the files in the zip's tests/, pytest installed by setup.sh, run_autograder passing
    them on; the dry run (this machine's mha-check) gives the buggy solution the shape test's points only, and the
    points of every test add up to the total the build printed."""
    tests = write_tests(tmp_path)
    (tmp_path / "rubric.toml").write_text(f'target = "attention.py:MultiHeadAttention"\n[tests."{FUTURE}"]\n'
                                          "points = 2\n")
    build = subprocess.run([sys.executable, "-m", "harness.frontends.cli", "autograder", "--rubric", "rubric.toml",
                            "--tests", str(tests), "-o", "autograder.zip"], capture_output=True, text=True,
                           timeout=600, cwd=tmp_path)
    assert build.returncode == 0, build.stderr[-2000:]
    with zipfile.ZipFile(tmp_path / "autograder.zip") as zf:
        assert zf.read("tests/test_attention.py").decode() == INSTRUCTOR_TESTS
        assert '"pytest>=7.4"' in zf.read("setup.sh").decode()
        assert '--tests "$SOURCE/tests"' in zf.read("run_autograder").decode()
    total = float(re.search(r"add up to ([\d.]+)", build.stdout)[1])
    (tmp_path / "solution").mkdir()
    shutil.copy(ROOT / "examples" / "buggy_attention.py", tmp_path / "solution" / "attention.py")
    run = subprocess.run([sys.executable, "-m", "harness.frontends.cli", "autograder", "--dry-run", "solution",
                          "--zip", "autograder.zip"], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    data = json.loads(run.stdout)
    assert sum(t["max_score"] for t in data["tests"]) == total
    scores = {t["name"]: (t["score"], t["max_score"]) for t in data["tests"] if "instructor's test" in t["name"]}
    assert scores == {f"{SHAPE} (instructor's test)": (1.0, 1.0), f"{FUTURE} (instructor's test)": (0, 2.0)}


def test_nothing_in_the_submission_configures_the_instructors_pytest(tmp_path):
    """A conftest.py and a pytest.ini handed in beside the class are not read: the tests run as the instructor wrote
    them (a conftest that raises on import and an ini that only collects would leave every test unrun)."""
    folder = tmp_path / "submission"
    folder.mkdir()
    shutil.copy(ROOT / "examples" / "buggy_attention.py", folder / "attention.py")
    (folder / "conftest.py").write_text("raise SystemExit('the student conftest was loaded')\n")
    (folder / "pytest.ini").write_text("[pytest]\naddopts = --collect-only\n")
    run = mha_check(f"{folder / 'attention.py'}:MultiHeadAttention", "--format", "json", "--only", "construct",
                    "--tests", str(write_tests(tmp_path)))
    tests = instructor_checks(json.loads(run.stdout))
    assert (tests[SHAPE]["status"], tests[FUTURE]["status"]) == ("pass", "fail"), run.stderr[-2000:]
    assert "looks ahead" in tests[FUTURE]["message"]


def test_resume_keeps_a_report_only_for_the_same_instructors_tests(tmp_path):
    subs = tmp_path / "subs"
    (subs / "ada").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "correct_attention.py", subs / "ada" / "attention.py")
    tests = write_tests(tmp_path)
    out = tmp_path / "out"

    def grade(*extra):
        run = subprocess.run([sys.executable, "-m", "harness.frontends.cli", "grade", str(subs), "--out", str(out),
                              "--jobs", "1", "--tests", str(tests), *extra], capture_output=True, text=True,
                             timeout=600, cwd=ROOT)
        assert run.returncode == 0, run.stderr[-2000:]
        return run.stdout

    grade()
    assert "--resume: 1 of 1 kept" in grade("--resume")
    tests.write_text(INSTRUCTOR_TESTS + "\n\ndef test_one_more(student_class):\n    pass\n")
    assert "--resume: 0 of 1 kept" in grade("--resume")
    assert json.loads((out / "ada.json").read_text())["checks"][-1]["id"] == "test_attention.py::test_one_more"


SEEDED = '''
def test_inputs_of_this_grade(student_class, mha_check_seed):
    assert mha_check_seed < 0, f"seed {mha_check_seed}"
'''


def test_the_instructors_tests_can_draw_their_inputs_from_each_grades_seed(tmp_path):
    """Tests that seed their inputs with torch.manual_seed(0) ask the same questions at every grade, so a student
    holding the published test file can record the answers at home and replay them (issue 27).  The
    `mha_check_seed` fixture is the child's seed: the typed --seed where anyone may know it, else a digest of the
    seed each grade draws, new at every grade."""
    tests = write_tests(tmp_path, SEEDED)
    target = f"{ROOT / 'examples' / 'correct_attention.py'}:MultiHeadAttention"
    seen = []
    for how in (("--seed", "5"), ("--grading",), ("--grading",)):
        run = mha_check(target, "--format", "json", "--only", "construct", "--tests", str(tests), *how)
        message = next(iter(instructor_checks(json.loads(run.stdout)).values()))["message"]
        seen.append(int(message.split("seed ")[1].split()[0].rstrip(",:")))
    assert seen[0] == 5 and seen[1] != seen[2] and all(0 <= s < 2 ** 32 for s in seen), seen


def test_the_instructors_helper_module_imports_and_a_students_module_of_its_name_stays_the_students(tmp_path):
    """Red team 14: a folder of tests with a helper module (documented: "its conftest.py and helper modules go with
    them") had every test "cannot tell": `from helpers import make` found no module, pytest's importlib mode adds
    no folder to sys.path.  And once the instructor's `helpers` is importable, a student's own `helpers.py` (the
    submission imports it) must stay the student's, or a right layer fails for a name it shares with the tests."""
    tests = tmp_path / "instructor"
    tests.mkdir()
    (tests / "helpers.py").write_text("def make(cls):\n    return cls(d_in=8, d_out=8, context_length=16, "
                                      "dropout=0.0, num_heads=2).eval()\n")
    (tests / "test_attention.py").write_text(
        "import torch\nfrom helpers import make\n\n\ndef test_output_shape(student_class):\n"
        "    assert tuple(make(student_class)(torch.randn(2, 5, 8)).shape) == (2, 5, 8)\n")
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "helpers.py").write_text("SCALE_BY_HEAD_WIDTH = True\n")  # the student's, of the same name
    (folder / "attention.py").write_text("from helpers import SCALE_BY_HEAD_WIDTH\nassert SCALE_BY_HEAD_WIDTH\n" +
                                         (ROOT / "examples" / "correct_attention.py").read_text())
    run = mha_check(f"{folder / 'attention.py'}:MultiHeadAttention", "--format", "json", "--only", "construct",
                    "--tests", str(tests))
    report = json.loads(run.stdout)
    assert {c["id"]: c["status"] for c in report["checks"]}["construct"] == "pass", report["checks"][0]
    test = instructor_checks(report)["test_attention.py::test_output_shape"]
    assert test["status"] == "pass", test["message"]


# Red team 14: the test in which the code is loaded is reported passed, and every later test's set-up fails (an
# error, not a failure): the canary ended as an error, which was taken as a sound run, and the forged pass counted.
PASSES_ONE_ERRS_THE_REST = '''
import _pytest.reports as _reports

_original = _reports.TestReport.from_item_and_call.__func__
_first = []


def _report(cls, item, call):
    report = _original(cls, item, call)
    _first[:] = _first or [item.nodeid]
    if item.nodeid == _first[0]:
        report.outcome, report.longrepr = "passed", None
    elif call.when == "setup":
        report.outcome, report.longrepr = "failed", "set-up broken"
    return report


_reports.TestReport.from_item_and_call = classmethod(_report)
'''


def test_a_canary_that_ends_as_an_error_vouches_for_no_pass(tmp_path):
    hostile = buggy_with(tmp_path, PASSES_ONE_ERRS_THE_REST)
    shape, future = INSTRUCTOR_TESTS.index("def test_output_shape"), INSTRUCTOR_TESTS.index("def test_future")
    future_first = INSTRUCTOR_TESTS[:shape] + INSTRUCTOR_TESTS[future:] + "\n\n" + INSTRUCTOR_TESTS[shape:future]
    run = mha_check(f"{hostile}:MultiHeadAttention", "--format", "json", "--only", "construct",
                    "--tests", str(write_tests(tmp_path, future_first)))
    report = json.loads(run.stdout)
    tests = instructor_checks(report)
    assert tests[FUTURE]["status"] != "pass", (tests[FUTURE], run.stderr[-2000:])
    assert report["needs_review"] and report["passed"] is False
