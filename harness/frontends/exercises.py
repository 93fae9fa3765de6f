"""`mha-check mutants export`: a mutant as a file to hand out, or the whole catalogue as a set of exercises.

A mutant file is a copy of the reference class with one marked bug, plus the answer (its INFO block, a docstring
that names the mistake, `# BUG` comments).  An exercise is the same class with every trace of the answer removed
and a docstring that says what to do and what can be observed (`MutantInfo.task`); its solution is the same file
with the reference's lines in place of the buggy ones (the mutant differs from the reference only there, which
tests/unit/test_mutants.py enforces), so `diff exercise.py solution.py` shows the fix and nothing else.

Everything is read as text (the mutant's source, the catalogue): no torch, so exporting is instant.
"""
from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass
from pathlib import Path

import mutants
import reference
from harness.engine import rewrite
from harness.render.text import wrap
from mutants._info import TOPICS

BUG_COMMENT = re.compile(r"\s*# BUG\b.*$")
REFERENCE = Path(reference.__file__).parent / "causal_mha.py"
LESSON = "LM3-T5, multi-head attention"


@dataclass
class Exported:
    exercise: str  # the student's file
    solution: str  # the same file with the fix applied


def _parts(path: Path, name: str = "CausalMHA") -> tuple[list[str], list[str]]:
    """A mutant (or the reference) file as (its import lines, its CausalMHA class lines), without the module
    docstring, the INFO block and the import of MutantInfo."""
    source = path.read_text()
    lines = source.splitlines()
    imports, cls = [], []
    for node in rewrite.parse(source).body:
        segment = lines[node.lineno - 1:node.end_lineno]
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not (
                isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mutants")):
            imports += segment
        elif isinstance(node, ast.ClassDef) and node.name == name:
            cls = lines[(node.decorator_list[0].lineno if node.decorator_list else node.lineno) - 1:node.end_lineno]
    return imports, cls


def _fixed(buggy: list[str], right: list[str]) -> list[str]:
    """`buggy` with every block that differs from `right` replaced by right's lines: the reference's line in place
    of the buggy one."""
    out = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=buggy, b=right, autojunk=False).get_opcodes():
        out += buggy[i1:i2] if op == "equal" else right[j1:j2]
    return out


def _docstring(*paragraphs: str) -> str:
    """A module docstring within 100 columns: each paragraph wrapped, except one that starts with four spaces
    (a command, lines of code), which is kept as it is."""
    blocks = [p if p.startswith("    ") else "\n".join(wrap(p)) for p in paragraphs]
    return '"""' + "\n\n".join(blocks).replace('"""', "'''") + '\n"""'


def export(mutant_id: str, name: str = "exercise.py") -> Exported:
    """One mutant as an exercise file and its solution; `name` is what the student will call the file."""
    mid = _id(mutant_id)
    entry = mutants.catalogue()[mid]
    cls = mutants.class_name(mid)
    imports, buggy = _parts(mutants.source_path(mid), cls)
    _, right = _parts(mutants.reference_path(mid), cls)
    clean = [BUG_COMMENT.sub("", line) for line in buggy]
    single = mutants.form(mid) == "single-head"  # the previous lesson's CausalAttention
    layer = "single-head causal attention" if single else "causal multi-head attention"
    lesson = "the lesson before LM3-T5, causal attention" if single else LESSON
    task = _docstring(f"Exercise ({lesson}): the {layer} layer below has one mistake.",
                      f"What you can observe: {entry['task']}",
                      "Find the mistake and fix it, changing as little as you can. Check your work with",
                      f"    mha-check {name}",
                      f"It passes when every check passes; `mha-check trace {name}` shows every step of the "
                      f"forward pass with its shapes. The part of the layer to look at: {entry['topic']}.")
    # the lesson's lines the mutant lacks, and those the fix puts back that the mutant has elsewhere (a reset line)
    put_back = {j for op, _, _, j1, j2 in difflib.SequenceMatcher(a=clean, b=right, autojunk=False).get_opcodes()
                if op != "equal" for j in range(j1, j2)}
    changed = [ln.strip() for j, ln in enumerate(right) if ln not in buggy or j in put_back]
    answer = _docstring(f"Solution: {entry['title']}.", f"What goes wrong: {entry['symptom']}",
                        f"The fix (the lesson's line{'s' if len(changed) != 1 else ''}):",
                        "\n".join(f"    {ln}" for ln in changed),
                        f"`mha-check explain {mid}` tells the whole story, with a worked example.")
    return Exported("\n".join([task, *imports, "", "", *clean]) + "\n",
                    "\n".join([answer, *imports, "", "", *_fixed(clean, right)]) + "\n")



def annotated(mutant_id: str) -> str:
    """The mutant for a teacher: its class with the `# BUG` markers, standalone, with a docstring that names the
    mistake, how it shows and the fix."""
    mid = _id(mutant_id)
    entry = mutants.catalogue()[mid]
    imports, cls = _parts(mutants.source_path(mid), mutants.class_name(mid))
    story = _docstring(f"Mutant {mid}: {entry['title']}.", f"Lesson: {entry['lesson']}",
                       f"What goes wrong: {entry['symptom']}", "Fix:", f"    {entry['fix']}",
                       f"Caught by: {caught_by(entry)}.")
    return "\n".join([story, *imports, "", "", *cls]) + "\n"


def also_fails(p: dict) -> list[str]:
    """The checks a mutant fails beyond those made for it, as measured (the catalogue's `failing`)."""
    return [c for c in p["failing"] if c not in p["killed_by"]]


def caught_by(p: dict) -> str:
    """The checks made for a mutant, then what else it fails as measured: `explain query-for-keys` named only the
    two made for it, while its unused W_k fails parameters-used too, as `mutants show` said."""
    also = also_fails(p)
    return ", ".join(p["killed_by"]) + (f" (also fails: {', '.join(also)})" if also else "")


def _id(mutant_id: str) -> str:
    mid = str(mutant_id).replace("_", "-")
    if mid not in mutants.catalogue():
        mutants.source_path(mid)  # raises KeyError with suggestions
    return mid


def solution_path(path: Path) -> Path:
    """Where the solution of the exercise at `path` goes: `attention.py` -> `attention_solution.py`."""
    return path.with_name(f"{path.stem}_solution{path.suffix or '.py'}")


def ordered() -> list[str]:
    """Every mutant id, in the lesson's order of topics (then by id): the order of an exercise set."""
    catalogue = mutants.catalogue()
    return sorted(catalogue, key=lambda m: (TOPICS.index(catalogue[m]["topic"]), m))


def export_all(folder: Path) -> list[Path]:
    """The whole catalogue as exercises: `exercises/exercise-NN.py` (to hand out, with README.md), and
    `solutions/exercise-NN.py` with `solutions/README.md`, which says which mistake each one is."""
    catalogue = mutants.catalogue()
    (folder / "exercises").mkdir(parents=True, exist_ok=True)
    (folder / "solutions").mkdir(exist_ok=True)
    written, index, answers = [], [], []
    for n, mid in enumerate(ordered(), 1):
        name = f"exercise-{n:02d}.py"
        files = export(mid, name)
        for sub, text in (("exercises", files.exercise), ("solutions", files.solution)):
            (folder / sub / name).write_text(text)
            written.append(folder / sub / name)
        entry = catalogue[mid]
        index.append(f"| [{name}]({name}) | {entry['topic']} | {entry['task']} |")
        answers.append(f"| [{name}]({name}) | `{mid}` | {entry['title']} | {', '.join(entry['killed_by'])} |")
    readme = [f"# Exercises: find the mistake ({LESSON})", "",
              "Each file holds the lesson's causal multi-head attention layer (`CausalMHA`) with one mistake. "
              "Read the task at the top of the file, find the mistake, fix it, and check your work:", "",
              "```bash", "mha-check exercise-01.py            # passes when every check passes",
              "mha-check trace exercise-01.py      # every step of the forward pass with its shapes", "```", "",
              "| exercise | what it trains | what you can observe |", "|---|---|---|", *index, ""]
    key = ["# Solutions", "",
           "Each solution is its exercise with the lesson's line in place of the buggy one: "
           "`diff ../exercises/exercise-01.py exercise-01.py` shows the fix. Keep this folder for the teacher.", "",
           "| exercise | mistake (`mha-check explain ID`) | what it is | checks that catch it |", "|---|---|---|---|",
           *answers, ""]
    for path, lines in ((folder / "exercises" / "README.md", readme), (folder / "solutions" / "README.md", key)):
        path.write_text("\n".join(lines))
        written.append(path)
    return written
