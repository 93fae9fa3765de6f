"""`mha-check autograder`: the zip Gradescope gets, its run script run as Gradescope runs it, and the dry run.

The run script is run for real, from the unpacked zip, in folders laid out like Gradescope's /autograder (through
its path variables), with the mha-check installed here in place of the one setup.sh would install (installing
torch again would prove nothing about the checks).  setup.sh is checked for what it installs and from where.
"""
import json
import os
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from checks import all_checks
from conftest import ROOT

pytestmark = pytest.mark.usefixtures("warm_single_runs")  # see conftest

CORRECT = ROOT / "examples" / "correct_attention.py"
BUGGY = ROOT / "examples" / "buggy_attention.py"
TARGET = "attention.py:MultiHeadAttention"
RUBRIC = f'target = "{TARGET}"\n[checks.causal-leakage]\npoints = 3\n[checks.gradient-match]\nhidden = true\n' \
         '[checks.view-order]\npoints = 2.5\nvisibility = "after_due_date"\n'
TOTAL = len(all_checks()) - 2 + 3 + 2.5  # one point a check, two of them re-weighted
# Gradescope's autograder specification (https://gradescope-autograders.readthedocs.io/en/latest/specs/)
TOP_LEVEL = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
             "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
TEST_FIELDS = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format", "tags",
               "visibility", "extra_data"}
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
MHA_CHECK = Path(sys.executable).parent / "mha-check"  # the installed console script, as an instructor has it


def mha(*args, cwd, timeout=300):
    return subprocess.run([sys.executable, "-m", "harness.frontends.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The zip, built as an instructor builds it; (its path, what the build printed)."""
    folder = tmp_path_factory.mktemp("course")
    (folder / "rubric.toml").write_text(RUBRIC)
    run = mha("autograder", "--rubric", "rubric.toml", "-o", "autograder.zip", "--time-limit", "90", cwd=folder)
    assert run.returncode == 0, run.stderr
    return folder / "autograder.zip", run.stdout


def test_zip_holds_setup_run_script_rubric_and_wheel(built):
    path, printed = built
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        version = metadata.version("mha-check")
        wheel = f"mha_check-{version}-py3-none-any.whl"
        assert names == {"setup.sh", "run_autograder", "rubric.toml", wheel}  # at the root, as Gradescope wants
        for script in ("setup.sh", "run_autograder"):
            assert zf.getinfo(script).external_attr >> 16 & 0o111 == 0o111, script
        setup, run = zf.read("setup.sh").decode(), zf.read("run_autograder").decode()
        assert zf.read("rubric.toml").decode() == RUBRIC
    torch = metadata.version("torch").split("+")[0]
    assert "https://download.pytorch.org/whl/cpu" in setup and f'"torch=={torch}"' in setup
    assert f'"$SOURCE/{wheel}"' in setup  # mha-check from the zip: Gradescope has no copy of this repository
    assert f'TARGET="$SUBMISSION/{TARGET}"' in run  # or the one attention.py in a sub-folder, when not at the top
    assert '"$MHA_CHECK" "$TARGET" --format gradescope --rubric "$SOURCE/rubric.toml"' in run
    assert run.rstrip().endswith("exit 0") and "--time-limit 90" in run  # the option given at build time
    for script in (setup, run):
        syntax = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
        assert syntax.returncode == 0, syntax.stderr
    assert f"add up to {TOTAL:g}" in printed


def test_bundled_wheel_installs_with_its_data(built, tmp_path):
    with zipfile.ZipFile(built[0]) as zf:
        wheel = next(n for n in zf.namelist() if n.endswith(".whl"))
        zf.extract(wheel, tmp_path)
    target = tmp_path / "site"
    run = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                          str(target), str(tmp_path / wheel)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert (target / "mutants" / "catalogue.json").is_file() and (target / "bin" / "mha-check").is_file()
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import harness, mutants; "
             "print(harness.__file__); print(len(mutants.catalogue()))")
    run = subprocess.run([sys.executable, "-I", "-c", probe, str(target)], capture_output=True, text=True)
    where, mistakes = run.stdout.split()
    assert where.startswith(str(target)) and int(mistakes) > 30, run.stderr


def _gradescope(built, tmp_path, files: dict) -> dict:
    """Unpack the zip as Gradescope does, put `files` in the submission, run run_autograder; its results.json."""
    root = tmp_path / "autograder"
    with zipfile.ZipFile(built[0]) as zf:
        zf.extractall(root / "source")
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    (root / "run_autograder").chmod(0o755)
    (root / "submission").mkdir()
    for name, source in files.items():
        (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / name).write_text(source)
    env = {**os.environ, "AUTOGRADER_DIR": str(root), "MHA_CHECK": str(MHA_CHECK)}
    run = subprocess.run([str(root / "run_autograder")], cwd=root, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    data = json.loads((root / "results" / "results.json").read_text())
    assert set(data) <= TOP_LEVEL and data["output_format"] == "md" and isinstance(data["score"], float)
    for test in data["tests"]:
        assert set(test) <= TEST_FIELDS and {"name", "score", "max_score", "status", "output", "visibility"} <= \
            set(test)
        assert test["status"] in ("passed", "failed") and test["visibility"] in VISIBILITY
        assert test["output_format"] == "md" and test["output"].strip()
        assert test["score"] == (test["max_score"] if test["status"] == "passed" else 0.0)
    assert sum(t["max_score"] for t in data["tests"]) == TOTAL  # the rubric's total, whatever the submission
    assert data["score"] == sum(t["score"] for t in data["tests"])
    assert data["extra_data"]["seed"] >= 2 ** 32  # no --seed in run_autograder: drawn for this grade, staff-only
    return data


def _tests(data: dict) -> dict:
    return {t["name"].split()[0]: t for t in data["tests"]}


@pytest.mark.slow
def test_run_autograder_grades_a_correct_and_a_buggy_submission(built, tmp_path):
    good = _gradescope(built, tmp_path / "good", {"attention.py": CORRECT.read_text()})
    assert good["score"] == TOTAL and all(t["status"] == "passed" for t in good["tests"])
    bad = _gradescope(built, tmp_path / "bad", {"attention.py": BUGGY.read_text()})
    tests = _tests(bad)
    assert 0 < bad["score"] < TOTAL and tests["view-order"]["status"] == "failed"
    assert tests["view-order"]["max_score"] == 2.5 and tests["view-order"]["visibility"] == "after_due_date"
    assert tests["causal-leakage"]["max_score"] == 3.0 and tests["gradient-match"]["visibility"] == "hidden"
    assert "Fix:" in tests["view-order"]["output"] and "gradient-match" not in bad["output"]


@pytest.mark.slow
def test_run_autograder_finds_the_file_in_the_folder_it_was_zipped_with(built, tmp_path):
    """Issue 29: a submission uploaded as a zip of its folder (hw3/attention.py) got 0 with "that folder has no .py
    file"; the file is found there, and its own helpers.py imports."""
    helped = "from helpers import head_width\n" + CORRECT.read_text().replace(
        "self.head_dim = d_out // num_heads", "self.head_dim = head_width(d_out, num_heads)")
    data = _gradescope(built, tmp_path / "zipped", {"hw3/attention.py": helped,
                                                    "hw3/helpers.py": "def head_width(d, h):\n    return d // h\n"})
    assert data["score"] == TOTAL, _tests(data)["construct"]["output"]


@pytest.mark.slow
def test_run_autograder_on_broken_submissions_keeps_the_total_and_says_what_is_broken(built, tmp_path):
    broken = _gradescope(built, tmp_path / "syntax", {"attention.py": "import torch\nclass MultiHeadAttention(\n"})
    construct = _tests(broken)["construct"]
    assert broken["score"] == 0.0 and "SyntaxError" in construct["output"] and "run `python" in construct["output"]
    renamed = _gradescope(built, tmp_path / "renamed", {"Attention.py": CORRECT.read_text()})
    construct = _tests(renamed)["construct"]
    assert "no such file" in construct["output"] and "Attention.py" in construct["output"]
    assert "file name the assignment asks for" in construct["output"]
    wrong_class = _gradescope(built, tmp_path / "class", {"attention.py": CORRECT.read_text().replace(
        "class MultiHeadAttention(", "class MHA(")})
    construct = _tests(wrong_class)["construct"]
    assert "MHA" in construct["output"] and "spelt exactly as asked" in construct["output"]
    for data in (broken, renamed, wrong_class):  # a student on Gradescope cannot pass command-line options
        assert "--arg" not in _tests(data)["construct"]["output"]


@pytest.mark.slow
def test_dry_run_prints_the_results_json_the_student_gets(built, tmp_path):
    (tmp_path / "solution").mkdir()
    shutil.copy(CORRECT, tmp_path / "solution" / "attention.py")
    run = mha("autograder", "--dry-run", "solution", "--zip", str(built[0]), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["score"] == TOTAL and f"score {TOTAL:g} of {TOTAL:g}" in run.stderr
    assert "gradient-match" in run.stderr  # named as not shown to the student now


def test_dry_run_on_one_file_named_otherwise_says_what_gradescope_will_check(built, tmp_path):
    shutil.copy(CORRECT, tmp_path / "alice_123_attention.py")  # a file from a flat export
    run = mha("autograder", "--dry-run", "alice_123_attention.py", "--zip", str(built[0]), cwd=tmp_path)
    assert run.returncode == 0 and "this autograder checks attention.py" in run.stderr, run.stderr


@pytest.mark.parametrize("args, words", [
    (["-o", "a.zip"], "--target"),
    (["--target", "/etc/attention.py:A"], "relative path"),
    (["--target", "../attention.py:A"], "relative path"),
    (["--target", "attention.py:A", "--arg", "1x=2"], "--arg expects NAME=VALUE"),
    (["--target", "attention.py:A", "--rubric", "missing.toml"], "cannot read rubric"),
    (["--target", "attention.py:A", "--torch", "latest"], "--torch"),
    (["--dry-run", "solution", "--zip", "missing.zip"], "no such file"),
])
def test_usage_errors(tmp_path, args, words):
    run = mha("autograder", *args, cwd=tmp_path)
    assert run.returncode == 2 and words in run.stderr, run.stderr
