"""`mha-check autograder --github-classroom` and `mha-check result`: the workflow GitHub Classroom runs.

The workflow is parsed as YAML and held to the shape Classroom's reporter requires (workflow "Autograding Tests",
one job "run-autograding-tests", the reporter last with every step's result); its steps are then run here as
Actions runs them: `${{ runner.temp }}` filled in, the "Run mha-check" step with bash, each command-grader step's
command through /bin/sh with only PATH and HOME (what classroom-resources/autograding-command-grader passes), with
this machine's mha-check in place of the one the install step puts in the venv.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from checks import all_checks
from conftest import ROOT
from harness.engine.report import Report
from harness.frontends import classroom
from harness.render.rubric import Rubric, load_rubric, score

CORRECT = ROOT / "examples" / "correct_attention.py"
BUGGY = ROOT / "examples" / "buggy_attention.py"
TARGET = "attention.py:MultiHeadAttention"
RUBRIC = f'target = "{TARGET}"\nrules = false\n[checks.causal-leakage]\npoints = 3\n[checks.view-order]\npoints = 2\n'
CHECK_IDS = {c.id for c in all_checks()}
GRADED = [c.id for c in all_checks() if c.kind == "correctness"]  # rules = false: the lesson's rules earn nothing
TOTAL = len(GRADED) - 2 + 3 + 2
MHA_CHECK = Path(sys.executable).parent / "mha-check"


def mha(*args, cwd, timeout=300):
    return subprocess.run([sys.executable, "-m", "harness.frontends.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A template repository with the workflow written into it."""
    repo = tmp_path_factory.mktemp("template")
    (repo / "rubric.toml").write_text(RUBRIC)
    run = mha("autograder", "--github-classroom", "--rubric", "rubric.toml", cwd=repo)
    assert run.returncode == 0, run.stderr
    assert f"{len(GRADED)} graded steps" in run.stdout and f"worth {TOTAL} points" in run.stdout, run.stdout
    return repo


def steps_of(repo: Path) -> list[dict]:
    data = yaml.safe_load((repo / ".github" / "workflows" / "classroom.yml").read_text())
    assert data["name"] == "Autograding Tests" and list(data["jobs"]) == ["run-autograding-tests"]
    assert set(data["on"]) == {"push", "repository_dispatch", "workflow_dispatch"}
    return data["jobs"]["run-autograding-tests"]["steps"]


def graders(steps: list[dict]) -> list[dict]:
    return [s for s in steps if s.get("uses", "").startswith("classroom-resources/autograding-command-grader@")]


def test_the_workflow_has_one_step_per_counted_check_and_the_points_add_up(template):
    steps = steps_of(template)
    assert [s["name"] for s in steps[:4]] == ["Checkout code", "Set up Python", "Install mha-check with a CPU-only "
                                              "torch", "Run mha-check"]
    assert "--index-url https://download.pytorch.org/whl/cpu" in steps[2]["run"]
    wheel = next((template / ".github" / "mha-check").glob("mha_check-*.whl"))
    assert f".github/mha-check/{wheel.name}" in steps[2]["run"]
    grading = graders(steps)
    assert [s["id"] for s in grading] == GRADED
    assert sum(s["with"]["max-score"] for s in grading) == TOTAL
    assert all(isinstance(s["with"]["max-score"], int) for s in grading)  # the grader reads it with parseInt
    reporter = steps[-1]
    assert reporter["uses"].startswith("classroom-resources/autograding-grading-reporter@")
    assert reporter["with"]["runners"].split(",") == GRADED
    assert reporter["env"] == {f"{i.upper()}_RESULTS": f"${{{{steps.{i}.outputs.result}}}}" for i in GRADED}
    assert (template / ".github" / "mha-check" / "rubric.toml").read_text() == RUBRIC


def _run_steps(template: Path, student: Path, work: Path) -> dict[str, int]:
    """The workflow's steps run here on one student's file: {check id: the step's exit status}."""
    repo = work / "repo"
    shutil.copytree(template / ".github", repo / ".github")
    shutil.copy(student, repo / "attention.py")
    temp = work / "runner-temp"
    (temp / "mha-venv" / "bin").mkdir(parents=True)
    (temp / "mha-venv" / "bin" / "mha-check").symlink_to(MHA_CHECK)
    steps = steps_of(repo)
    fill = lambda text: text.replace("${{ runner.temp }}", str(temp))
    run = subprocess.run(["bash", "-e", "-c", fill(steps[3]["run"])], cwd=repo, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Root cause" in run.stdout or "passed, 0 failed" in run.stdout, run.stdout  # the report, in the log
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp")}
    return {s["id"]: subprocess.run(["/bin/sh", "-c", fill(s["with"]["command"])], cwd=repo, env=env,
                                    capture_output=True, text=True, timeout=60).returncode
            for s in graders(steps)}


@pytest.mark.parametrize("student", [CORRECT, BUGGY], ids=["correct", "buggy"])
def test_the_steps_score_as_the_report_does(template, tmp_path, student):
    statuses = _run_steps(template, student, tmp_path)
    saved = json.loads((tmp_path / "runner-temp" / "mha-check.json").read_text())
    assert saved["seed"] is None  # a grade (--grading): its seed drawn at random, said in the log only
    report = Report.from_dict(saved)
    assert statuses == {i: 0 if report[i].status == "pass" else 1 for i in GRADED}
    points = {s["id"]: s["with"]["max-score"] for s in graders(steps_of(template))}
    earned = sum(points[i] for i, status in statuses.items() if status == 0)
    assert (earned, sum(points.values())) == score(report, load_rubric(str(template / "rubric.toml"), CHECK_IDS))
    assert (earned == TOTAL) == (student == CORRECT)


def refused(run, words: str) -> None:
    """A usage error, as for any other rubric mistake: exit status 2, the reason on one line, no traceback."""
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("mha-check autograder: error: ") and words in last, run.stderr


def test_checks_worth_nothing_get_no_step():
    rubric = Rubric(points={"causal-leakage": 3.0, "view-order": 2.0}, default_points=0.0)
    text = classroom.workflow(TARGET, rubric, all_checks(), "2.13.0", "https://example.org/cpu", "w.whl", [])
    steps = yaml.safe_load(text)["jobs"]["run-autograding-tests"]["steps"]
    order = [c.id for c in all_checks() if c.id in ("causal-leakage", "view-order")]
    assert [(s["id"], s["with"]["max-score"]) for s in graders(steps)] == [(i, rubric.points_for(i)) for i in order]
    assert steps[-1]["with"]["runners"].split(",") == order


def test_refusals_say_why(tmp_path):
    (tmp_path / "hidden.toml").write_text('[checks.gradient-match]\nhidden = true\n')
    (tmp_path / "half.toml").write_text('[checks.view-order]\npoints = 2.5\n')
    (tmp_path / "nothing.toml").write_text('default_points = 0\n')
    (tmp_path / "later.toml").write_text('score_visibility = "after_published"\n')
    for rubric, words in [("hidden.toml", "the rubric hides gradient-match"), ("half.toml", "view-order (2.5)"),
                          ("nothing.toml", "no check is worth any points"),
                          ("later.toml", "the rubric shows the total after_published")]:
        run = mha("autograder", "--github-classroom", "--target", TARGET, "--rubric", rubric, cwd=tmp_path)
        refused(run, words)
    assert not (tmp_path / ".github").exists()  # nothing half-written
    first = mha("autograder", "--github-classroom", "--target", TARGET, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    again = mha("autograder", "--github-classroom", "--target", "lab.ipynb:CausalMHA", cwd=tmp_path)
    refused(again, "exists already: pass --force")
    forced = mha("autograder", "--github-classroom", "--target", "lab.ipynb:CausalMHA", "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert '"lab.ipynb:CausalMHA"' in (tmp_path / ".github" / "workflows" / "classroom.yml").read_text()
    assert len(list((tmp_path / ".github" / "mha-check").glob("*.whl"))) == 1


def test_result_reads_a_saved_report(tmp_path):
    run = mha(str(BUGGY), "--format", "json", "-o", "report.json", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    whole = mha("result", "report.json", cwd=tmp_path)
    assert whole.returncode == 1 and "Root cause" in whole.stdout, whole.stdout
    leak = mha("result", "report.json", "causal-leakage", cwd=tmp_path)
    assert leak.returncode == 1 and leak.stdout.startswith("FAIL causal-leakage"), leak.stdout
    assert "root cause" in leak.stdout.lower() and "Fix:" in leak.stdout, leak.stdout
    shape = mha("result", "report.json", "output-shape", cwd=tmp_path)
    assert shape.returncode == 0 and shape.stdout.startswith("PASS output-shape"), shape.stdout
    (tmp_path / "junk.json").write_text("[1, 2]")
    for args, words in [(("report.json", "no-such-check"), "the report has no check 'no-such-check'"),
                        (("missing.json", "construct"), "cannot read missing.json"),
                        (("junk.json",), "junk.json is not an mha-check JSON report")]:
        bad = mha("result", *args, cwd=tmp_path)
        assert bad.returncode == 2 and words in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


def test_the_docs_say_what_runs_and_that_classroom_autograding_is_deprecated():
    """Where the docs describe the notebook target (docs/usage.md, docs/where-users-are.md) they do not say
    definitions' code never runs (a class body and a default argument do, in the child); where the Classroom workflow
    is described (docs/grading.md, the module), GitHub's deprecation is said."""
    grading, usage, notebook_doc, module_doc = (" ".join(text.split()) for text in (
        (ROOT / "docs" / "grading.md").read_text(), (ROOT / "docs" / "usage.md").read_text(),
        (ROOT / "docs" / "where-users-are.md").read_text(), classroom.__doc__))
    deprecated = ("GitHub Classroom's autograding actions are marked deprecated by GitHub; the workflow uses them as "
                  "they are today")
    assert deprecated in grading and deprecated in module_doc
    for flat in (usage, notebook_doc):
        assert "never runs" not in flat and "class bodies and default arguments" in flat
        assert "only inside the confined child, never in the trusted parent" in flat
