"""`mha-check autograder --github-classroom`: the workflow GitHub Classroom runs, one step per check.

    mha-check autograder --github-classroom --target attention.py:MyAttn [--rubric rubric.toml] [-o TEMPLATE_REPO]

writes into the assignment's template repository (default: the current folder):

    .github/workflows/classroom.yml     the workflow, in the shape Classroom requires (workflow "Autograding Tests",
                                        one job "run-autograding-tests", the grading reporter last)
    .github/mha-check/rubric.toml       the rubric the run uses
    .github/mha-check/<wheel>           mha-check itself, so the workflow needs nothing but PyPI and PyTorch's index

The workflow installs a CPU-only torch and that wheel, runs mha-check ONCE into a JSON report (and prints the text
report in the log), then gives every counted check a step of the standard command grader
(classroom-resources/autograding-command-grader) worth the rubric's points (a check worth 0 gets no step):
`mha-check result REPORT CHECK` exits 0 only when the check passed, so a failed, skipped or undecided check earns
nothing, as everywhere else.  The steps' points add up to the rubric's total (whole points: the command grader reads
them as integers).  If mha-check itself cannot run (exit status 2 or more) the job fails before any step is scored: our
failure never becomes the student's zero.  The run is a grade (`--grading`): its seed is drawn at random for each
run (said in the log: harness.frontends.seeds), and it runs as root where the runner allows (`sudo`, as on GitHub's
own runners), so that every child gets its own uid and namespaces, and mha-check refuses in one line where the
student's code could not be confined well enough to grade it.

What Classroom cannot do, said rather than papered over: the workflow, its log and the report live in the student's
own repository, so nothing can be hidden there (a rubric with hidden or later-visibility checks is refused) and a
student can edit the workflow (for grades that count, grade the collected repositories with `mha-check grade`).
GitHub Classroom's autograding actions are marked deprecated by GitHub; the workflow uses them as they are today.
A refusal (ClassroomError) is a usage error: `mha-check autograder` exits with status 2 and the reason on one line.
"""
from __future__ import annotations

import json
from pathlib import Path

from harness.engine.report import VERSION
from harness.render import rubric as rubrics

WORKFLOW = Path(".github") / "workflows" / "classroom.yml"
FILES = Path(".github") / "mha-check"
COMMAND_GRADER = "classroom-resources/autograding-command-grader@v1"
REPORTER = "classroom-resources/autograding-grading-reporter@v1"
PYTHON = "3.11"
MHA = "${{ runner.temp }}/mha-venv/bin/mha-check"
REPORT = "${{ runner.temp }}/mha-check.json"


class ClassroomError(ValueError):
    """The workflow cannot be written as asked: the message says why and what to do."""


def _q(value: str) -> str:
    """A YAML scalar: JSON's double-quoted strings are YAML's, so every value is quoted the same safe way."""
    return json.dumps(value)


def _sh(word: str) -> str:
    """A shell word in double quotes (the ${{ }} expressions are filled in by Actions before the shell runs)."""
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("\\${{", "${{") + '"'


def counted_checks(rubric: rubrics.Rubric, checks) -> list:
    """The checks that earn points under this rubric, in mha-check's order."""
    return [c for c in checks if c.kind == "correctness" or rubric.rules]


def graded_checks(rubric: rubrics.Rubric, checks) -> list:
    """The checks that get a step: those counted and worth something (a max-score 0 step would only add noise)."""
    return [c for c in counted_checks(rubric, checks) if rubric.points_for(c.id) > 0]


def steps_for(rubric: rubrics.Rubric, checks) -> list:
    """The graded checks, or ClassroomError when the workflow cannot be written for this rubric (checked before
    anything is built or written)."""
    hidden = sorted(rubric.hidden([c.id for c in checks]))
    if hidden:
        raise ClassroomError(f"the rubric hides {', '.join(hidden)} (hidden or a later visibility), but GitHub "
                             "Classroom runs in the student's own repository, where the workflow and its log are "
                             "visible: make those checks visible in the rubric, or grade on Gradescope")
    if rubric.score_visibility not in (None, "visible"):
        raise ClassroomError(f"the rubric shows the total {rubric.score_visibility}, but GitHub Classroom shows "
                             "the points of every step at once: leave score_visibility out, or grade on Gradescope")
    graded = graded_checks(rubric, checks)
    if not graded:
        raise ClassroomError("no check is worth any points under this rubric, so the workflow would have no graded "
                             "step: give some checks points (or a default_points above 0)")
    fractional = [c.id for c in graded if float(rubric.points_for(c.id)) != int(rubric.points_for(c.id))]
    if fractional:
        raise ClassroomError(f"{', '.join(f'{c} ({rubric.points_for(c):g})' for c in fractional)}: GitHub "
                             "Classroom's command grader takes whole points (it reads max-score as an integer): "
                             "give whole points in the rubric")
    return graded


def workflow(target: str, rubric: rubrics.Rubric, checks, torch: str, index: str, wheel_name: str,
             extra: list[str]) -> str:
    graded = steps_for(rubric, checks)
    run = " ".join([_sh(MHA), _sh(target), "--rubric", _sh(str(FILES / "rubric.toml")), *map(_sh, extra)])
    lines = [
        f"# Made by mha-check {VERSION}: mha-check autograder --github-classroom.  One mha-check run, then one",
        "# command-grader step per check (points from the rubric); the grading reporter sums them.  Rewrite it with",
        "# that command rather than by hand, and do not add tests in Classroom's web form (it rewrites this file).",
        "name: Autograding Tests",
        "'on':", "  - push", "  - repository_dispatch", "  - workflow_dispatch",
        "permissions:", "  checks: write", "  actions: read", "  contents: read",
        "jobs:", "  run-autograding-tests:", "    runs-on: ubuntu-latest",
        "    if: github.actor != 'github-classroom[bot]'",
        "    steps:",
        "      - name: Checkout code", "        uses: actions/checkout@v4",
        "      - name: Set up Python", "        uses: actions/setup-python@v5", "        with:",
        f"          python-version: {_q(PYTHON)}",
        "      - name: Install mha-check with a CPU-only torch",
        "        run: |",
        '          python -m venv "${{ runner.temp }}/mha-venv"',
        f'          "${{{{ runner.temp }}}}/mha-venv/bin/pip" install --index-url {index} "torch=={torch}"',
        f'          "${{{{ runner.temp }}}}/mha-venv/bin/pip" install {_sh(str(FILES / wheel_name))}',
        "      - name: Run mha-check",
        "        run: |",
        "          as_root=; if [ \"$(id -u)\" != 0 ] && sudo -n true 2>/dev/null; then as_root=\"sudo -n\"; fi",
        f"          status=0; $as_root {run} --grading --format json -o {_sh(REPORT)} || status=$?",
        '          if [ "$status" -gt 1 ]; then echo "mha-check could not run (exit status $status)"; exit 1; fi',
        f"          {_sh(MHA)} result {_sh(REPORT)} || true",
    ]
    for check in graded:
        lines += [
            f"      - name: {_q(check.id)}", f"        id: {check.id}", f"        uses: {COMMAND_GRADER}",
            "        with:",
            f"          test-name: {_q(check.id + (' (lesson rule)' if check.kind == 'rule' else ' (math)'))}",
            f"          command: {_q(' '.join([_sh(MHA), 'result', _sh(REPORT), check.id]))}",
            "          timeout: 1",
            f"          max-score: {int(rubric.points_for(check.id))}",
        ]
    lines += ["      - name: Autograding Reporter", f"        uses: {REPORTER}", "        env:"]
    lines += [f"          {check.id.upper()}_RESULTS: \"${{{{steps.{check.id}.outputs.result}}}}\"" for check in graded]
    lines += ["        with:", f"          runners: {','.join(c.id for c in graded)}"]
    return "\n".join(lines) + "\n"


def write(folder: Path, text: str, rubric_bytes: bytes, wheel_file: Path, force: bool) -> list[Path]:
    """Write the workflow, the rubric and the wheel under `folder`; never overwrite without `force`."""
    targets = [folder / WORKFLOW, folder / FILES / "rubric.toml", folder / FILES / wheel_file.name]
    existing = [p for p in targets if p.exists()]
    if existing and not force:
        raise ClassroomError(f"{existing[0]} exists already: pass --force to replace it (a classroom.yml made by "
                             "Classroom's web form is replaced by this one)")
    for old in (folder / FILES).glob("*.whl") if force else ():
        old.unlink()  # one wheel: the one the workflow installs
    for path, data in zip(targets, (text.encode(), rubric_bytes, wheel_file.read_bytes())):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return targets
