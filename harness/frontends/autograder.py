"""`mha-check autograder`: a Gradescope autograder zip in one command, and a dry run of it here (and, with
--github-classroom, GitHub Classroom's workflow: harness.frontends.classroom).

    mha-check autograder --target attention.py:MyAttn [--rubric rubric.toml] -o autograder.zip
    mha-check autograder --dry-run path/to/a/submission/ [--zip autograder.zip]
    mha-check autograder --github-classroom --target attention.py:MyAttn [--rubric rubric.toml] [-o TEMPLATE_REPO]

The zip holds what Gradescope asks for and nothing it would have to fetch from this repository: `setup.sh` (a
virtual environment with a CPU-only torch from PyTorch's CPU index, then mha-check from the wheel of the installed
mha-check packed into the zip), `run_autograder` (exactly one `mha-check ... --format gradescope` run into
results/results.json) and `rubric.toml`.  The points of every test in results.json add up to the rubric's total,
which the build prints: Gradescope's assignment total must be set to it by hand, and a mismatch is what
instructors otherwise find out from students.

The dry run is the same run_autograder, unpacked into a temporary folder laid out like Gradescope's /autograder
(source, submission, results; the script's paths are environment variables), with this machine's mha-check in
place of the one setup.sh installs (installing torch again would prove nothing about the checks).  It prints the
results.json the student would get and refuses one whose points do not add up to the rubric's total.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from importlib import metadata
from pathlib import Path

from checks import all_checks, needs_by_id
from harness.engine import instructor
from harness.engine.report import VERSION
from harness.frontends import classroom, options, wheel
from harness.render import rubric as rubrics
from harness.wire.target import Target

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TARGET = re.compile(r"(?!/)(?!.*\.\.)[\w./-]+\.(py|ipynb)(:[A-Za-z_]\w*)?")  # a file the student hands in, its class
PYTEST = '\n"$VENV/bin/pip" install --no-cache-dir "pytest>=7.4"  # runs the instructor\'s tests (tests/)'
DEFAULT_RUBRIC = "# every check one point, visible (mha-check's defaults); keys: mha-check's docs/grading.md\n" \
                 "default_points = 1\ndefault_visibility = \"visible\"\n"

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder image from this zip alone: a virtual
# environment with a CPU-only torch from PyTorch's CPU index (PyPI's Linux torch is the CUDA build: several GB of
# nvidia-* packages a grader never uses), then mha-check from the wheel in this zip.  Made by mha-check {version}.
set -euo pipefail
SOURCE="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
AUTOGRADER="${{AUTOGRADER_DIR:-/autograder}}"
VENV="${{MHA_VENV:-$AUTOGRADER/mha-venv}}"
TORCH_INDEX="${{TORCH_INDEX_URL:-{index}}}"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' || {{
    echo "mha-check needs Python 3.10 or newer and python3 here is $(python3 --version 2>&1):" \\
         "choose a newer base image (Ubuntu 22.04 or later) in the autograder settings"; exit 1; }}
python3 -m venv --clear "$VENV" || {{ apt-get update && apt-get install -y python3-venv \
    && python3 -m venv --clear "$VENV"; }}
"$VENV/bin/pip" install --no-cache-dir --index-url "$TORCH_INDEX" "torch=={torch}" || {{
    echo "torch=={torch} has no CPU build for $(python3 --version 2>&1) on $TORCH_INDEX: taking the newest torch 2"
    "$VENV/bin/pip" install --no-cache-dir --index-url "$TORCH_INDEX" "torch>=2.1,<3"; }}
"$VENV/bin/pip" install --no-cache-dir "$SOURCE/{wheel}"{pytest}
"$VENV/bin/mha-check" --version
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this for every submission, in /autograder.  One mha-check run: the student's {file} checked
# against the rubric, in Gradescope's format, into results/results.json.  mha-check's exit status 1 means a check
# did not pass: that is a grade (in results.json), not a failure of this script.  `mha-check autograder --dry-run`
# runs this very file with the paths below pointed at a temporary folder.
set -uo pipefail
AUTOGRADER="${{AUTOGRADER_DIR:-/autograder}}"
SOURCE="${{AUTOGRADER_SOURCE:-$AUTOGRADER/source}}"
SUBMISSION="${{AUTOGRADER_SUBMISSION:-$AUTOGRADER/submission}}"
RESULTS="${{AUTOGRADER_RESULTS:-$AUTOGRADER/results}}"
MHA_CHECK="${{MHA_CHECK:-$AUTOGRADER/mha-venv/bin/mha-check}}"
mkdir -p "$RESULTS"
TARGET="$SUBMISSION/{target}"
if [ ! -e "$SUBMISSION/{file}" ]; then  # uploaded zipped with its folder (hw3/{base}): the one file of that name
    found="$(find "$SUBMISSION" -mindepth 2 -maxdepth 4 -type f -name '{base}' -not -path '*/.*' \
             -not -path '*/__MACOSX/*' 2>/dev/null)"
    if [ -n "$found" ] && [ "$(printf '%s\n' "$found" | wc -l)" -eq 1 ]; then
        echo "run_autograder: {file} is at ${{found#"$SUBMISSION/"}} in the submission: that file is checked"
        TARGET="$found{cls}"
    fi
fi
"$MHA_CHECK" "$TARGET" --format gradescope --rubric "$SOURCE/rubric.toml" -o "$RESULTS/results.json"{extra}{tests}
status=$?
if [ "$status" -gt 1 ] || [ ! -s "$RESULTS/results.json" ]; then
    echo "run_autograder: mha-check ended with status $status without a results.json (its message is above)"
    exit 1
fi
exit 0
"""


def rubric_total(rubric: rubrics.Rubric, suite: instructor.Suite | None = None) -> float:
    """The points a perfect submission earns: the scoring rule's total over every check (rubric.score) and every
    instructor's test (--tests)."""
    return float(sum(rubric.points_for(c.id) for c in all_checks() if c.kind == "correctness" or rubric.rules) +
                 sum(rubric.points_for(t) for t in (suite.ids if suite else ())))


def _torch_version() -> str:
    """The torch this machine runs (the version the instructor tried), without its local label (+cpu)."""
    try:
        return metadata.version("torch").split("+")[0]
    except metadata.PackageNotFoundError:
        return ""


def _check_options(args, parser) -> list[str]:
    """The options of a single check that the autograder passes on (those not at their default), validated now
    as the single run will read them (options.from_args) rather than on Gradescope."""
    options.from_args(args)
    out = [word for item in args.arg for word in ("--arg", item)] + \
        [word for item in args.map for word in ("--map", item)]
    for dest in ("time_limit", "memory_mb", "output_limit", "seed", "examples"):
        value = getattr(args, dest)
        if value != parser.get_default(dest):
            out += ["--" + dest.replace("_", "-"), f"{value:g}" if isinstance(value, float) else str(value)]
    return out


def _add(zf: zipfile.ZipFile, name: str, data: bytes, mode: int = 0o644) -> None:
    entry = zipfile.ZipInfo(name, wheel.EPOCH)
    entry.external_attr = mode << 16
    zf.writestr(entry, data, zipfile.ZIP_DEFLATED)


def _settings(args, parser) -> tuple[rubrics.Rubric, list[str], str, str]:
    """The rubric, the options passed on to every check, the target and the torch version, all validated here."""
    try:
        args.suite = instructor.find(args.tests, need_pytest=False) if args.tests else None  # run on Gradescope
        rubric = rubrics.load_rubric(args.rubric, _check_ids(), args.suite.ids if args.suite else (), needs_by_id()) \
            if args.rubric else rubrics.Rubric()
        extra = _check_options(args, parser)
    except (rubrics.RubricError, options.OptionError, instructor.TestsError) as e:
        parser.error(str(e))
    target = args.target or rubric.target
    if not target or not TARGET.fullmatch(target):
        parser.error(f"--target {target or ''!r}: give the file students hand in and its class, e.g. "
                     "--target attention.py:MyAttn or lab.ipynb:CausalMHA (a relative path; or the rubric's target "
                     "key)")
    torch = args.torch or _torch_version()
    if not re.fullmatch(r"\d+(\.\d+)*", torch or ""):
        parser.error(f"--torch {torch!r}: give a torch version such as 2.13.0")
    return rubric, extra, target, torch


def build(args, parser) -> int:
    rubric, extra, target, torch = _settings(args, parser)
    suite = args.suite
    total = rubric_total(rubric, suite)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            whl = wheel.build(Path(tmp))
        except wheel.WheelError as e:
            print(f"mha-check autograder: error: {e}", file=sys.stderr)
            return 1
        with zipfile.ZipFile(args.output, "w") as zf:
            _add(zf, "setup.sh", SETUP.format(version=VERSION, index=CPU_INDEX, torch=torch, wheel=whl.name,
                                              pytest=PYTEST if suite else "").encode(), 0o755)
            asked = Target.parse(target)
            _add(zf, "run_autograder", RUN.format(target=target, file=asked.where, base=Path(asked.where).name,
                                                  cls=asked.suffix,
                                                  extra="".join(" " + shlex.quote(a) for a in extra),
                                                  tests=' --tests "$SOURCE/tests"' if suite else "").encode(), 0o755)
            _add(zf, "rubric.toml", Path(args.rubric).read_bytes() if args.rubric else DEFAULT_RUBRIC.encode())
            _add(zf, whl.name, whl.read_bytes())
            for rel, source in (suite.files.items() if suite else ()):
                _add(zf, f"tests/{rel}", source.encode())
    print(f"wrote {args.output}: setup.sh (torch=={torch}, CPU build, from {CPU_INDEX}; {whl.name}), run_autograder "
          f"(checks the submission's {target}), rubric.toml" + (
              f", tests/ (your {len(suite.ids)} tests, run beside the checks)" if suite else ""))
    print(f"the tests' points add up to {total:g}: set the assignment's autograder points to {total:g} on "
          "Gradescope")
    print(f"try it on a solution first: mha-check autograder --dry-run path/to/solution/ --zip {args.output}")
    return 0


def build_classroom(args, parser) -> int:
    """The GitHub Classroom workflow, its rubric and the wheel, written into a template repository."""
    rubric, extra, target, torch = _settings(args, parser)
    if args.suite:
        parser.error("--tests with --github-classroom: not supported yet (Classroom's workflow runs one step per "
                     "check); build a Gradescope zip, or run mha-check grade --tests on the collected repositories")
    folder = Path(args.output or ".")
    try:
        steps = len(classroom.steps_for(rubric, all_checks()))  # before the wheel is built: a refusal is quick
    except classroom.ClassroomError as e:
        parser.error(str(e))  # a usage error, as for any other rubric mistake
    with tempfile.TemporaryDirectory() as tmp:
        try:
            whl = wheel.build(Path(tmp))
        except wheel.WheelError as e:
            print(f"mha-check autograder: error: {e}", file=sys.stderr)
            return 1
        text = classroom.workflow(target, rubric, all_checks(), torch, CPU_INDEX, whl.name, extra)
        try:
            written = classroom.write(folder, text, Path(args.rubric).read_bytes() if args.rubric else
                                      DEFAULT_RUBRIC.encode(), whl, args.force)
        except classroom.ClassroomError as e:
            parser.error(str(e))
    print(f"wrote {', '.join(str(p) for p in written)}")
    print(f"{steps} graded steps (one per check, {target} checked once) worth {rubric_total(rubric):g} points in all; "
          "commit these files to the assignment's template repository, and add no tests in Classroom's web form")
    return 0


def _check_ids() -> set[str]:
    return {c.id for c in all_checks()}


def _mha_check_command(folder: Path) -> Path:
    """This machine's mha-check as one executable path, for run_autograder's MHA_CHECK."""
    script = Path(sys.executable).parent / "mha-check"
    if script.is_file() and os.access(script, os.X_OK):
        return script
    wrapper = folder / "mha-check"
    wrapper.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m harness.frontends.cli \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper


def dry_run(args, parser) -> int:
    submission, archive = Path(args.dry_run), Path(args.zip)
    if not archive.is_file():
        parser.error(f"--zip {archive}: no such file (build it with mha-check autograder --target ... -o {archive})")
    if not submission.exists():
        parser.error(f"{submission}: no such file or folder")
    with tempfile.TemporaryDirectory(prefix="mha-check-dry-run-") as tmp:
        root = Path(tmp)
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(root / "source")
            mode = zf.getinfo("run_autograder").external_attr >> 16 if "run_autograder" in zf.namelist() else 0
        if not mode & 0o100:
            print(f"mha-check autograder: error: {archive} has no executable run_autograder", file=sys.stderr)
            return 1
        shutil.copy(root / "source" / "run_autograder", root / "run_autograder")  # as Gradescope does
        (root / "run_autograder").chmod(mode & 0o777)
        if submission.is_dir():
            shutil.copytree(submission, root / "submission")
        else:
            (root / "submission").mkdir()
            shutil.copy(submission, root / "submission" / submission.name)
            wanted = re.search(r'"\$SUBMISSION/([^":]+)', (root / "run_autograder").read_text())
            if wanted and wanted.group(1) != submission.name:
                print(f"note: Gradescope keeps a file's name, and this autograder checks {wanted.group(1)}: "
                      f"{submission.name} is graded as a student who handed in that name would be (rename a copy "
                      f"to {wanted.group(1)} to see its checks)", file=sys.stderr)
        env = {**os.environ, "AUTOGRADER_DIR": str(root), "MHA_CHECK": str(_mha_check_command(root))}
        started = time.monotonic()
        run = subprocess.run([str(root / "run_autograder")], cwd=root, env=env, capture_output=True, text=True)
        seconds = time.monotonic() - started
        results = root / "results" / "results.json"
        if run.stdout.strip() or run.stderr.strip():
            print("what run_autograder printed (Gradescope keeps it for you in results/stdout):\n" + run.stdout +
                  run.stderr, file=sys.stderr)
        if run.returncode != 0 or not results.is_file():
            print(f"mha-check autograder: error: run_autograder failed (exit status {run.returncode})",
                  file=sys.stderr)
            return 1
        text = results.read_text()
        suite = instructor.find([str(root / "source" / "tests")]) if (root / "source" / "tests").is_dir() else None
        rubric = rubrics.load_rubric(str(root / "source" / "rubric.toml"), _check_ids(), suite.ids if suite else (),
                                  needs_by_id())
    data = json.loads(text)
    total, points = rubric_total(rubric, suite), sum(t["max_score"] for t in data.get("tests", []))
    sys.stdout.write(text)
    unseen = [t["name"] for t in data.get("tests", []) if t.get("visibility", "visible") != "visible"]
    print(f"score {data['score']:g} of {points:g}; run_autograder took {seconds:.1f} s" +
          (f"; not shown to the student now: {', '.join(unseen)}" if unseen else ""), file=sys.stderr)
    if abs(points - total) > 1e-9:
        print(f"mha-check autograder: error: the tests' points add up to {points:g}, the rubric's to {total:g}",
              file=sys.stderr)
        return 1
    return 0


def main(argv: list[str]) -> int:
    p = _parser()
    args = p.parse_args(argv[1:])
    if args.dry_run:
        return dry_run(args, p)
    if args.github_classroom:
        return build_classroom(args, p)
    args.output = args.output or "autograder.zip"
    return build(args, p)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mha-check autograder", description=__doc__.split("\n\n")[0],
                                epilog="run_autograder passes on --arg, --map, --time-limit, --memory-mb, "
                                       "--output-limit, --seed and --examples to every check, as mha-check's own "
                                       "options.")
    p.add_argument("--target", help="FILE.py:ClassName: the file students hand in and its class (default: the "
                                    "rubric's target)")
    p.add_argument("--rubric", metavar="FILE.toml", help="points and visibility per check (default: one point "
                                                         "each, visible)")
    p.add_argument("--tests", action="append", default=[], metavar="PATH",
                   help="the instructor's own pytest file, or a folder of them (repeatable): packed into the zip and "
                        "run for each submission beside the checks, in the same confinement, the student's class "
                        "given as the student_class fixture; each test one rubric item")
    p.add_argument("-o", "--output", help="the zip to write (default autograder.zip); with --github-classroom the "
                                          "template repository to write into (default: this folder)")
    p.add_argument("--github-classroom", action="store_true",
                   help="write .github/workflows/classroom.yml (one command-grader step per check, points from the "
                        "rubric) and .github/mha-check/ (the rubric, mha-check's wheel) instead of a Gradescope zip")
    p.add_argument("--force", action="store_true", help="with --github-classroom: replace existing files")
    p.add_argument("--torch", help="the torch version setup.sh installs (default: this machine's torch)")
    p.add_argument("--dry-run", metavar="SUBMISSION", help="run the zip's run_autograder on this submission (a "
                                                           "folder, or one file) and print its results.json")
    p.add_argument("--zip", default="autograder.zip", help="the zip a dry run uses (default autograder.zip)")
    options.add_shared(p, ("arg", "map", "time-limit", "memory-mb", "output-limit", "seed", "examples"))
    return p
