"""`mha-check mutants export`: exercises made from the mutants keep the mistake and lose the answer.

Every exercise of `export --all` still fails mha-check exactly as its mutant does (the same failing checks, and the
diagnosis names the mutant), nothing in it gives the mistake away, and its solution passes every check.  A
solution's module docstring is the only part that differs between solutions with the same code, so each distinct
code (imports and class) is checked once.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from harness.engine import rewrite

import mutants
from conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("warm_single_runs")]  # see conftest
CATALOGUE = mutants.catalogue()


def cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "harness.frontends.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def _cls(path: Path) -> str:
    """The name of the class an exported file defines: CausalMHA, or CausalAttention for a single-head mutant."""
    return next(n.name for n in rewrite.parse(path.read_text()).body if isinstance(n, ast.ClassDef))


def _code(path: Path) -> str:
    """The file without its module docstring: what runs."""
    tree = rewrite.parse(path.read_text())
    return "\n".join(ast.unparse(node) for node in tree.body[1:])


@pytest.fixture(scope="module")
def exported(tmp_path_factory, reports) -> dict:
    """`mutants export --all` into a fresh folder: {mutant id: exercise path}, with every report asked for."""
    folder = tmp_path_factory.mktemp("set")
    run = cli("mutants", "export", "--all", "-o", folder)
    assert run.returncode == 0, run.stderr
    key = (folder / "solutions" / "README.md").read_text()
    by_id = {}
    for line in key.splitlines():
        if line.startswith("| [exercise-"):
            name, mid = line.split("|")[1].strip().split("]")[0][1:], line.split("|")[2].strip(" `")
            by_id[mid] = folder / "exercises" / name
    distinct = {_code(p): p for p in (folder / "solutions").glob("exercise-*.py")}
    reports.want([f"{p}:{_cls(p)}" for p in [*by_id.values(), *distinct.values()]])
    return {"folder": folder, "by_id": by_id, "solutions": distinct}


def test_the_set_has_every_mutant_an_index_and_the_answers_apart(exported):
    folder, by_id = exported["folder"], exported["by_id"]
    assert sorted(by_id) == sorted(CATALOGUE)
    names = sorted(p.name for p in (folder / "exercises").glob("exercise-*.py"))
    assert names == sorted(p.name for p in (folder / "solutions").glob("exercise-*.py")) and len(names) == len(by_id)
    index = (folder / "exercises" / "README.md").read_text()
    assert "mha-check exercise-01.py" in index
    for mid, path in by_id.items():  # each listed with what it trains and its task, never with its answer
        row = next(line for line in index.splitlines() if line.startswith(f"| [{path.name}]"))
        assert CATALOGUE[mid]["topic"] in row and CATALOGUE[mid]["task"] in row
        assert mid not in index and CATALOGUE[mid]["title"] not in index


@pytest.mark.parametrize("mutant_id", sorted(CATALOGUE))
def test_exercise_gives_nothing_away(exported, mutant_id):
    path = exported["by_id"][mutant_id]
    text = path.read_text()
    tree = rewrite.parse(text)  # a valid module
    entry = CATALOGUE[mutant_id]
    assert "BUG" not in text and "MutantInfo" not in text and "INFO" not in text and "mutants" not in text
    docstring = ast.get_docstring(tree)
    assert entry["task"] in " ".join(docstring.split()) and f"mha-check {path.name}" in docstring
    for answer in (mutant_id, entry["title"], entry["fix"], entry["symptom"]):
        assert answer not in docstring and answer not in text.replace("\n", " ")
    assert [n.name for n in tree.body if isinstance(n, ast.ClassDef)] == [mutants.class_name(mutant_id)]


@pytest.mark.parametrize("mutant_id", sorted(CATALOGUE))
def test_exercise_fails_as_its_mutant_does(exported, mutant_id, reports):
    report = reports(f"{exported['by_id'][mutant_id]}:{mutants.class_name(mutant_id)}")
    assert sorted(c.id for c in report.checks if c.status == "fail") == CATALOGUE[mutant_id]["failing"]
    assert report.diagnosis.mutant == mutant_id, report.diagnosis


def test_solutions_pass_every_check(exported, reports):
    assert 1 <= len(exported["solutions"]) <= 10  # the references' classes (multi-head, rotary, cached and
    # single-head), with each mutant's own imports
    for path in exported["solutions"].values():
        report = reports(f"{path}:{_cls(path)}")
        assert report.passed, [(c.id, c.status, c.message) for c in report.checks if c.status != "pass"]


def test_solution_class_is_the_reference_class(exported):
    """The solution is the exercise with the reference's lines in place of the buggy ones: the lesson's class."""
    for mid, path in exported["by_id"].items():
        reference = mutants.reference_path(mid).read_text()
        solution = exported["folder"] / "solutions" / path.name
        cls = next(n for n in rewrite.parse(solution.read_text()).body if isinstance(n, ast.ClassDef))
        assert ast.get_source_segment(solution.read_text(), cls) in reference, mid


def test_export_one_as_exercise_and_as_annotated_mutant(tmp_path):
    run = cli("mutants", "export", "split-view-order", "--as-exercise", "-o", tmp_path / "attention.py")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["wrote", str(tmp_path / "attention.py"), "wrote",
                                  str(tmp_path / "attention_solution.py")]
    exercise, solution = (tmp_path / "attention.py").read_text(), (tmp_path / "attention_solution.py").read_text()
    assert "t.view(B, self.h, n, self.dh)\n" in exercise and "mha-check attention.py" in exercise
    assert "t.view(B, n, self.h, self.dh).transpose(1, 2)" in solution and "Solution:" in solution
    run = cli("mutants", "export", "no_mask", "-o", tmp_path / "no_mask.py")  # the teacher's copy: the answer kept
    assert run.returncode == 0, run.stderr
    annotated = (tmp_path / "no_mask.py").read_text()
    assert "# BUG" in annotated and "Mutant no-mask" in annotated and "from mutants" not in annotated
    assert all(len(line) <= 100 for line in (exercise + solution).splitlines()[:20])


@pytest.mark.parametrize("args, words", [
    (["mutants", "export", "no-mask"], "-o FILE"),
    (["mutants", "export", "-o", "x.py"], "needs an ID"),
    (["mutants", "export", "no-mask", "--all", "-o", "d"], "not both"),
    (["mutants", "export", "no-mak", "-o", "x.py"], "did you mean no-mask"),
], ids=["no-output", "no-id", "id-and-all", "misspelt"])
def test_export_usage_errors_exit_2(tmp_path, args, words):
    run = cli(*args, cwd=tmp_path)
    assert run.returncode == 2 and words in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert list(tmp_path.iterdir()) == []


def test_catalogue_carries_each_exercise():
    """The task and topic come from each mutant's own file (MutantInfo), through the catalogue."""
    for mid in CATALOGUE:
        info = mutants.get(mid).INFO
        assert (CATALOGUE[mid]["task"], CATALOGUE[mid]["topic"]) == (info.task, info.topic)
