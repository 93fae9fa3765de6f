#!/usr/bin/env python3
"""Mutation testing of mha-check's checks with mutmut 3: how strong are the checks, really?

    python mutation/run.py            # every mutant of the reference, the oracle and the parameter formula
    python mutation/run.py --fast     # only reference/causal_mha.py (the torch reference): about a fifth of the time
    tox -e mutation                   # the full run, in its own environment

mutmut mutates `reference/causal_mha.py` (a mutant that passes every check is a buggy attention layer that mha-check
accepts: a blind spot), `reference/numpy_ref.py` (the oracle every verdict is computed from) and
`reference/arithmetic.py` (the parameter formula of the param-count check), and runs mutation/test_reference_passes.py
against each mutant: the reference must pass every check (run in the checks' own sandboxed child), keep the lesson's
promises and the oracle its contract.  The run fails (exit status 1) when

- a mutant survives that mutation/equivalent.toml does not explain (or an entry there explains no survivor),
- the score, killed / (total - no tests - equivalent), drops below mutation/baseline.json,
- a mutant timed out, had no test, or ended in any state but killed or survived (mutmut counts a timeout as a kill
  and exits 0 with survivors: the verdict here is computed from `mutmut export-cicd-stats` and `mutmut results`),
- the hand-made `mutants/` package changed (checksums before and after).

Traps this script handles (measured with mutmut 3.8.1):
- mutmut works in a folder named `mutants/` in its current directory, hard-coded, the name of our hand-made mutants
  package.  It runs in `mutmut-stage/` (git-ignored, rebuilt on every run so that no verdict is cached from an older
  version of the checks): `reference` there is a link to the real folder (mutmut reads it, copies and mutates it into
  mutmut-stage/mutants/), `harness` and `checks` inside mutmut-stage/mutants/ are links to the real packages, so the
  tests import the real ones and mutmut's `reference`.
- The checks run the target with their worker in the test's own process (harness.child.inprocess: the reference is
  our own code): the target is the MODULE `reference.causal_mha`, the name mutmut's trampolines answer to, and the
  trampolines see MUTANT_UNDER_TEST where they run.  No child process, no torch import per mutant: the full run
  takes about 3 minutes on 2 cores.
- torch's OpenMP thread pool does not survive mutmut's fork: OMP_NUM_THREADS=1 here, torch.set_num_threads(1) in the
  test module before any torch work.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "mutation"
STAGE = ROOT / "mutmut-stage"
MARKER = ".mha-check-mutation-stage"  # only a folder carrying it is ever wiped
MUTATED = ("reference/causal_mha.py", "reference/numpy_ref.py", "reference/arithmetic.py")
FAST = ("reference/causal_mha.py",)
LINKED_PACKAGES = ("harness", "checks")  # inside mutmut's working folder: links to the real packages, never copies
TESTS = ("test_reference_passes.py",)
PARTS = ("oracle", "lesson", "checks")  # the parts of the test, in the order they run (see the test file)

SETUP_CFG = """\
# Written by mutation/run.py: mutmut's configuration for this staging folder (mutmut reads setup.cfg from its cwd).
[mutmut]
source_paths = reference
only_mutate =
{only_mutate}
pytest_add_cli_args_test_selection = tests/
# the folder is rebuilt on every run: nothing to detect, and git is none of mutmut's business here
use_git_change_detection = false
process_isolation = fork
# a mutant's test takes a few seconds; a hang is cut after (estimate + 5 s) x 10, and fails the run
timeout_multiplier = 10.0
timeout_constant = 5.0

[tool:pytest]
# an ini file here, so that pytest does not climb up to the project's own configuration
addopts = -p no:cacheprovider
"""


def tree_digest(folder: Path) -> str:
    """Checksum of every file under `folder` (names and contents; bytecode caches left out)."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def stage(dest: Path = STAGE, files=MUTATED) -> Path:
    """(Re)build the staging folder; returns it.  Never touches ROOT/mutants: mutmut's `mutants/` is dest/mutants."""
    dest = dest.resolve()
    if dest in (ROOT, ROOT / "mutants") or dest in ROOT.parents or (ROOT / "mutants") in (dest, *dest.parents):
        raise SystemExit(f"refusing to stage in {dest}")
    if dest.exists():
        if not (dest / MARKER).exists():
            raise SystemExit(f"{dest} exists and is not a staging folder of this script: not wiping it")
        shutil.rmtree(dest)
    (dest / "tests").mkdir(parents=True)
    (dest / "mutants").mkdir()
    (dest / "records").mkdir()
    (dest / MARKER).write_text("built by mutation/run.py; wiped on every run\n")
    (dest / "setup.cfg").write_text(SETUP_CFG.format(only_mutate="\n".join(f"    {f}" for f in files)))
    (dest / "reference").symlink_to(ROOT / "reference", target_is_directory=True)
    for name in TESTS:
        (dest / "tests" / name).symlink_to(HERE / name)
    for pkg in LINKED_PACKAGES:
        (dest / "mutants" / pkg).symlink_to(ROOT / pkg, target_is_directory=True)
    return dest


def mutmut_command() -> list[str]:
    """The mutmut of this interpreter's environment (`python -m mutmut` re-executes its main module: avoided)."""
    exe = Path(sys.executable).parent / "mutmut"
    if not exe.exists():
        raise SystemExit(f"no mutmut next to {sys.executable}: pip install -c constraints.txt -e '.[mutation]' "
                         "(mutmut==3.8.1), or run tox -e mutation")
    return [str(exe)]


def run_mutmut(dest: Path, max_children: int) -> tuple[int, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MHA_MUTATION_RECORD=str(dest / "records"))
    done = subprocess.run(mutmut_command() + ["run", "--max-children", str(max_children)], cwd=dest, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    (dest / "mutmut-run.log").write_text(done.stdout)
    return done.returncode, done.stdout


def cicd_stats(dest: Path) -> dict:
    subprocess.run(mutmut_command() + ["export-cicd-stats"], cwd=dest, check=True, stdout=subprocess.DEVNULL)
    return json.loads((dest / "mutants" / "mutmut-cicd-stats.json").read_text())


def statuses(dest: Path) -> dict[str, str]:
    out = subprocess.run(mutmut_command() + ["results", "--all=true"], cwd=dest, check=True, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
    found = {}
    for line in out.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and "__mutmut_" in name:
            found[name] = status
    return found


_DIFFS = """
import json, sys
from mutmut.mutation.diff_apply import find_mutant, get_diff_for_mutant
print(json.dumps({n: get_diff_for_mutant(n, path=find_mutant(n).path) for n in json.load(sys.stdin)}))
"""


def diffs(dest: Path, names: list[str]) -> dict[str, str]:
    """`mutmut show` for many mutants in one process."""
    if not names:
        return {}
    done = subprocess.run([sys.executable, "-c", _DIFFS], cwd=dest, input=json.dumps(names), text=True,
                          stdout=subprocess.PIPE, check=True)
    return json.loads(done.stdout)


def describe(name: str, diff: str) -> dict:
    """file, function and the changed lines of a mutant: how mutation/equivalent.toml names it (mutmut's numbers
    shift whenever the file changes)."""
    module, _, mangled = name.partition("__mutmut_")[0].rpartition(".")
    function = mangled[2:] if mangled.startswith("x_") else ".".join(mangled[1:].split("ǁ")[1:])
    lines = [line for line in diff.splitlines() if line[:1] in "-+" and not line.startswith(("---", "+++"))]
    return {"file": module.replace(".", "/") + ".py", "function": function,
            "before": "\n".join(line[1:].strip() for line in lines if line[0] == "-"),
            "after": "\n".join(line[1:].strip() for line in lines if line[0] == "+")}


def load_equivalent(path: Path = HERE / "equivalent.toml") -> list[dict]:
    entries = tomllib.loads(path.read_text())["equivalent"]
    for e in entries:
        missing = {"file", "function", "before", "after", "reason"} - set(e)
        if missing or not e["reason"].strip():
            raise SystemExit(f"{path.name}: entry {e} lacks {sorted(missing) or ['a reason']}")
    return entries


def explain(desc: dict, entries: list[dict]) -> dict | None:
    for e in entries:
        if all(e[k].strip() == desc[k] for k in ("file", "function", "before", "after")):
            return e
    return None


def read_record(dest: Path, name: str) -> dict | None:
    path = dest / "records" / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def killer(record: dict | None) -> str:
    """The first part of the test that noticed the mutant."""
    if record is None:
        return "unrecorded"
    for part in PARTS:
        if record.get(part):
            return part
    return "unrecorded"


def one_line(desc: dict) -> str:
    return f"{desc['file']} {desc['function']}: {desc['before'] or '∅'!r} -> {desc['after'] or '∅'!r}"


def main(argv=None) -> int:  # noqa: C901 - the run's steps in order, each a few lines
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fast", action="store_true", help=f"mutate only {', '.join(FAST)} (the CI subset)")
    ap.add_argument("--max-children", type=int, default=os.cpu_count() or 2, help="mutants tested at once")
    ap.add_argument("--stage-only", action="store_true", help="build the staging folder and stop (no mutmut)")
    args = ap.parse_args(argv)
    files = FAST if args.fast else MUTATED
    started = time.monotonic()
    before = tree_digest(ROOT / "mutants")
    command = mutmut_command()  # fail early when mutmut is missing
    dest = stage(STAGE, files)
    print(f"staged {dest} (mutmut's working folder: {dest / 'mutants'}; the project's mutants/ is not touched)")
    if args.stage_only:
        return 0
    print(f"{' '.join(command)} run on {', '.join(files)} ({args.max_children} at a time) ...", flush=True)
    code, log = run_mutmut(dest, args.max_children)
    problems = []
    if code != 0:
        print(log[-4000:])
        problems.append(f"mutmut run exited with status {code} (clean run failed, forced failure not detected, "
                        f"or no test reached the mutants): see {dest / 'mutmut-run.log'}")
        return report_and_exit(problems, started)
    stats, status = cicd_stats(dest), statuses(dest)
    entries = [e for e in load_equivalent() if e["file"] in files]
    baseline = json.loads((HERE / "baseline.json").read_text())["score_percent"]

    records = {n: read_record(dest, n) for n in status}
    survivors = sorted(n for n, s in status.items() if s == "survived")
    killed = sorted(n for n, s in status.items() if s == "killed")
    not_by_checks = [n for n in killed if killer(records[n]) != "checks"]
    shown = diffs(dest, survivors + not_by_checks)
    described = {n: describe(n, shown[n]) for n in shown}
    equivalent, unexplained, used = [], [], set()
    for n in survivors:
        entry = explain(described[n], entries)
        (equivalent if entry else unexplained).append((n, entry))
        if entry:
            used.add(id(entry))

    total, no_tests, timeouts = stats["total"], stats["no_tests"], stats["timeout"]
    counted = sum(stats[k] for k in ("killed", "survived", "no_tests", "skipped", "suspicious", "timeout",
                                     "check_was_interrupted_by_user", "segfault"))
    tested = total - no_tests - len(equivalent)
    score = 100.0 * stats["killed"] / tested if tested > 0 else 0.0
    raw = 100.0 * stats["killed"] / (total - no_tests) if total > no_tests else 0.0
    by_part = {p: sum(killer(records[n]) == p for n in killed) for p in PARTS + ("unrecorded",)}
    causal = [n for n in killed if n.startswith("reference.causal_mha.")]
    in_child = sum(bool((records[n] or {}).get("checks")) for n in causal)

    print(f"\nmha-check mutation run (mutmut {mutmut_version()}): {', '.join(files)}")
    print(f"  mutants              {total}")
    print(f"  killed               {stats['killed']}   first noticed by: the checks {by_part['checks']}, the "
          f"lesson's promises {by_part['lesson']}, the oracle's contract {by_part['oracle']}"
          + (f", unrecorded {by_part['unrecorded']}" if by_part["unrecorded"] else ""))
    print(f"  equivalent           {len(equivalent)}   (mutation/equivalent.toml, reasons below)")
    print(f"  survived, unexplained {len(unexplained)}")
    print(f"  timeouts             {timeouts}")
    print(f"  no tests             {no_tests}")
    others = {k: stats[k] for k in ("skipped", "suspicious", "segfault", "check_was_interrupted_by_user") if stats[k]}
    if others or counted != total:
        print(f"  other                {others}, not checked {total - counted}")
    print(f"  score                {score:.2f} % of the non-equivalent mutants killed (baseline {baseline:.2f} %); "
          f"killed / (total - no tests) = {raw:.2f} %")
    print(f"  by the checks        {in_child} of the {len(causal)} killed mutants of reference/causal_mha.py were "
          "noticed by the checks themselves (the others by the lesson's promises, first)")
    if equivalent:
        print("\nEquivalent mutants (survivors, each explained):")
        for n, e in equivalent:
            print(f"  {one_line(described[n])}\n      {e['reason']}    [{n.rpartition('.')[2]}]")
    if unexplained:
        print("\nSURVIVING MUTANTS, NOT EXPLAINED (a blind spot: add a check that kills it, or explain it in "
              "mutation/equivalent.toml):")
        for n, _ in unexplained:
            print(f"  {one_line(described[n])}    [{n}]")
    for part, title in (("lesson", "the lesson's promises (no check uses the constructor's defaults or wording)"),
                        ("oracle", "the oracle's contract (the reference still passes against these oracles)")):
        names = [n for n in not_by_checks if killer(records[n]) == part]
        if names:
            print(f"\nFirst noticed by {title}: {len(names)}")
            for n in names:
                print(f"  {one_line(described[n])}")

    stale = [e for e in entries if id(e) not in used]
    if unexplained:
        problems.append(f"{len(unexplained)} surviving mutant(s) not explained")
    if stale:
        problems.append(f"{len(stale)} entr{'y' if len(stale) == 1 else 'ies'} of mutation/equivalent.toml match no "
                        "surviving mutant (killed now, or the line changed): review and remove: "
                        + "; ".join(f"{e['function']}: {e['after']!r}" for e in stale))
    if timeouts:
        problems.append(f"{timeouts} mutant(s) timed out (a hang, e.g. torch's OpenMP after fork): the run is invalid")
    if no_tests:
        problems.append(f"{no_tests} mutant(s) had no test: mutmut's stats did not see the test reach them")
    if others or counted != total:
        problems.append(f"mutants in unexpected states: {others}, not checked {total - counted}")
    if by_part["unrecorded"]:
        problems.append(f"{by_part['unrecorded']} killed mutant(s) left no record of what noticed them")
    if causal and not in_child:
        problems.append("no mutant of reference/causal_mha.py failed a check: the checks' child does not run them")
    if round(score, 2) < baseline:
        problems.append(f"score {score:.2f} % below the baseline {baseline:.2f} % (mutation/baseline.json)")
    if tree_digest(ROOT / "mutants") != before:
        problems.append("the project's mutants/ package changed during the run")
    return report_and_exit(problems, started)


def mutmut_version() -> str:
    try:
        from importlib.metadata import version

        return version("mutmut")
    except Exception:  # noqa: BLE001
        return "?"


def report_and_exit(problems: list[str], started: float) -> int:
    wall = time.monotonic() - started
    print(f"\nwall time {int(wall // 60)} min {wall % 60:.0f} s")
    if problems:
        print("MUTATION RUN FAILED:\n" + "\n".join(f"  - {p}" for p in problems))
        return 1
    print("mutation run passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
