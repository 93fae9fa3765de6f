"""Child side: a notebook target (`lab.ipynb:CausalMHA`): the class built from the cells that define things.

The notebook is read with nbformat (the Jupyter project's own reader). From every code cell only the top-level
statements that define something are kept: imports, functions, classes, assignments of constants (no call in the
value) and `MyAttn.forward = forward` (a method written in a later cell). A top-level training loop, download, plot
or `model = MyAttn(...)` in a later cell is left out; what Python runs while it defines what is kept (class bodies,
default arguments, decorators) runs, here in the confined child, as in any import. IPython magics and shell escapes (`%matplotlib inline`, `!pip
install ...`) are left out with a note, as is a cell that starts with a cell magic (`%%time`). What is kept is
written to one Python file in the child's throwaway folder and imported from there; `location()` turns a line of
that file back into "lab.ipynb, code cell 7, line 12" for every message and line pointer.
"""
from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field

_PLACES: dict[str, tuple[str, dict[int, tuple[int, int]]]] = {}  # generated file -> (notebook name, line map)


class NotebookError(Exception):
    """The notebook cannot be read or one of its defining cells does not parse: the message says where."""


@dataclass
class Extracted:
    source: str
    lines: dict[int, tuple[int, int]]  # line of `source` -> (code cell number, line in that cell)
    notes: list[str] = field(default_factory=list)


def _defines(stmt: ast.stmt) -> bool:
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return True
    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name):  # MyAttn.forward = forward (a later cell)
        return all(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) for t in stmt.targets)
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        plain = all(isinstance(t, (ast.Name, ast.Tuple)) for t in targets)
        return plain and not any(isinstance(n, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr))
                                 for n in ast.walk(stmt.value))
    if isinstance(stmt, ast.Try):  # try: import fast_thing / except ImportError: import slow_thing
        return all(isinstance(s, (ast.Import, ast.ImportFrom, ast.Pass)) for s in stmt.body + [
            s for h in stmt.handlers for s in h.body])
    return False


def _without_magics(text: str, number: int, notes: list[str]) -> str | None:
    """The cell's code with magic and shell lines blanked (line numbers kept); None for a cell magic cell."""
    lines = text.splitlines()
    if lines and lines[0].lstrip().startswith("%%"):
        notes.append(f"code cell {number}: a cell magic ({lines[0].strip().split()[0]}): the cell was left out")
        return None
    kept = []
    for line in lines:
        if line.lstrip().startswith(("%", "!")):
            notes.append(f"code cell {number}: {line.strip()[:60]!r} (a magic or shell command) was left out")
            kept.append("")
        else:
            kept.append(line)
    return "\n".join(kept)


def extract(path: str) -> Extracted:
    import nbformat  # noqa: PLC0415 - only a notebook target needs it

    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as e:  # noqa: BLE001 - any reader failure: the file is not a notebook we can read
        raise NotebookError(f"{os.path.basename(path)} is not a readable notebook ({type(e).__name__}: "
                            f"{str(e)[:200]})") from None
    out, lines, notes, number = [], {}, [], 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        number += 1
        code = _without_magics(cell.source, number, notes)
        if code is None or not code.strip():
            continue
        try:
            tree = ast.parse(code)
        except SyntaxError as e:
            raise NotebookError(f"SyntaxError in {os.path.basename(path)}, code cell {number}, line {e.lineno}: "
                                f"{e.msg}: {(e.text or '').strip()}") from None
        cell_lines = code.splitlines()
        skipped = 0
        for stmt in tree.body:
            if not _defines(stmt):
                skipped += 1
                continue
            first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
            for k in range(first, stmt.end_lineno + 1):
                out.append(cell_lines[k - 1])
                lines[len(out)] = (number, k)
        if skipped:
            notes.append(f"code cell {number}: {skipped} statement(s) that do not define anything (a call, a loop, "
                         "a plot...) were not run")
    return Extracted("\n".join(out) + "\n", lines, notes)


def write(path: str, folder: str) -> tuple[str, list[str]]:
    """The defining code of notebook `path` as a .py file in `folder`; returns (its path, notes)."""
    found = extract(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    target = os.path.join(folder, f"{stem if stem.isidentifier() else 'notebook'}_cells.py")
    with open(target, "w", encoding="utf-8") as f:
        f.write(found.source)
    _PLACES[os.path.abspath(target)] = (os.path.basename(path), found.lines)
    return target, found.notes


def is_generated(filename: str) -> bool:
    """Whether `filename` is a file this module wrote from a notebook."""
    return os.path.abspath(filename) in _PLACES


def location(filename: str, lineno: int) -> str:
    """"attn.py:30", or for the file built from a notebook "lab.ipynb, code cell 7, line 12"."""
    place = _PLACES.get(os.path.abspath(filename))
    if place and lineno in place[1]:
        cell, line = place[1][lineno]
        return f"{place[0]}, code cell {cell}, line {line}"
    return f"{os.path.basename(filename)}:{lineno}"
