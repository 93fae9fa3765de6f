"""Child side: a notebook target (`lab.ipynb:CausalMHA`): the class built from the cells that define things.

The notebook is read with nbformat (the Jupyter project's own reader).  Each code cell is first made plain Python
(ipython.py: `%time x = 1` is `x = 1`, `!pip install ...` and `x?` are left out with a note, a `%%bash` cell is left
out), then only its top-level statements that define something are kept (defining.py: imports, functions, classes,
constants; a training loop, a download, a plot, `model = MyAttn(...)` never run; what Python runs while it
defines what is kept, class bodies, default arguments and decorators, runs here in the confined child, as in any
import).  A cell that does not parse is
the student's SyntaxError only if it defines a class or function; otherwise it is skipped with a note.  An import of
a module that is not installed here is left out with a note (the training loop's `tqdm`).  What is kept is written
to one Python file in the child's throwaway folder (`from __future__` lines first) and imported from there;
`location()` turns a line of that file back into "lab.ipynb, code cell 7, line 12" for every message and pointer.
"""
from __future__ import annotations

import ast
import importlib.util
import io
import keyword
import linecache
import os
import re
import tokenize
import warnings
from dataclasses import dataclass, field

from harness import SOURCE_COPY_PREFIX
from harness.child import defining, ipython

_PLACES: dict[str, tuple[str, dict[int, tuple[int, int]]]] = {}  # generated file -> (notebook name, line map)
_COPIES: dict[str, list[ast.stmt]] = {}  # the notebook API's copy of a kernel's code -> its top-level statements


class NotebookError(Exception):
    """The notebook cannot be read or one of its defining cells does not parse: the message says where."""


@dataclass
class Extracted:
    source: str
    lines: dict[int, tuple[int, int]]  # line of `source` -> (code cell number, line in that cell)
    notes: list[str] = field(default_factory=list)


def _installed(stmt: ast.stmt, number: int, notes: list[str]) -> str | None:
    """An import statement without the modules that are not installed (None: nothing left to import).  A notebook
    often imports what only its other cells use (`from tqdm import tqdm` for the training loop); if the class needs
    it, the NameError hint says so later."""
    if isinstance(stmt, ast.ImportFrom):
        if stmt.level or not stmt.module or stmt.module == "__future__" or _available(stmt.module):
            return ast.unparse(stmt)
        missing = [stmt.module]
        kept = None
    else:
        missing = [a.name for a in stmt.names if not _available(a.name)]
        names = [a for a in stmt.names if a.name not in missing]
        kept = ast.unparse(ast.Import(names=names)) if names else None
    if missing:
        notes.append(f"code cell {number}: {', '.join(repr(m) for m in missing)} is not installed here: the import "
                     "was left out")
    return kept


def _available(module: str) -> bool:
    """Whether the top-level package can be found; `find_spec` of a top-level name looks, it imports nothing."""
    try:
        return importlib.util.find_spec(module.split(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def _parse(code: str, name: str, number: int, notes: list[str]) -> ast.Module | None:
    """The cell's tree; a cell that still does not parse is the student's SyntaxError only if it defines a class or
    function (a half-written scratch cell is not what is checked: it is skipped with a note)."""
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError) as e:
        line, msg = getattr(e, "lineno", None), getattr(e, "msg", str(e))
        if _DEFINITION.search(code):
            raise NotebookError(f"SyntaxError in {name}, code cell {number}, line {line}: {msg}: "
                                f"{(getattr(e, 'text', '') or '').strip()}") from None
        notes.append(f"code cell {number} does not parse (line {line}: {msg}) and defines no class or function: it "
                     "was skipped")
        return None


_DEFINITION = re.compile(r"^\s*(async\s+def|def|class)\s+\w", re.MULTILINE)


def extract(path: str) -> Extracted:
    import nbformat  # noqa: PLC0415 - only a notebook target needs it

    try:
        with warnings.catch_warnings():  # nbformat's own warnings (a cell without an id) are not the student's
            warnings.simplefilter("ignore")  # output: they landed in what "your code printed"
            nb = nbformat.read(path, as_version=4)
    except Exception as e:  # noqa: BLE001 - any reader failure: the file is not a notebook we can read
        raise NotebookError(f"{os.path.basename(path)} is not a readable notebook ({type(e).__name__}: "
                            f"{str(e)[:200]})") from None
    futures, kept, notes, number = [], [], [], 0  # (text lines, code cell, first line) per kept statement
    keep = defining.Filter()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        number += 1
        code = ipython.plain(cell.source, number, notes)
        tree = _parse(code, os.path.basename(path), number, notes) if code and code.strip() else None
        if tree is None:
            continue
        cell_lines = code.split("\n")
        skipped = 0
        for stmt in tree.body:
            if isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
                continue  # a magic made `pass`, a docstring, a bare string
            if defining.is_main_guard(stmt):
                notes.append(f"code cell {number}: the `if __name__ == \"__main__\":` block was not run")
                continue
            if not keep.defines(stmt):
                skipped += 1
                continue
            first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
            text = cell_lines[first - 1: stmt.end_lineno]
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                single = _installed(stmt, number, notes)
                if single is None:
                    continue
                if single != ast.unparse(stmt):  # some of its modules left out: one line instead
                    text = [single]
                keep.learn(ast.parse(single).body[0])
            is_future = isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"
            (futures if is_future else kept).append((text, number, first))
        if skipped:
            notes.append(f"code cell {number}: {skipped} statement(s) that do not define anything (a call, a loop, "
                         "a plot...) were not run")
    out, lines = [], {}
    for text, cell, first in futures + kept:  # `from __future__` must come first in a module, from any cell
        for k, line in enumerate(text):
            out.append(line)
            lines[len(out)] = (cell, first + k)
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
    """Whether `filename` is a file written from a notebook: by this module, or by the notebook API (a class from a
    live kernel); its own name means nothing to the student."""
    return os.path.abspath(filename) in _PLACES or _is_copy(filename)


def _is_copy(filename: str) -> bool:
    return os.path.basename(filename).startswith(SOURCE_COPY_PREFIX) and filename.endswith(".py")


def location(filename: str, lineno: int) -> str:
    """"attn.py:30"; for the file built from a notebook "lab.ipynb, code cell 7, line 12"; for the API's copy of a
    kernel's code "your notebook, class MyAttn, line 12" (counted from the class's first line)."""
    place = _PLACES.get(os.path.abspath(filename))
    if place and lineno in place[1]:
        cell, line = place[1][lineno]
        return f"{place[0]}, code cell {cell}, line {line}"
    if _is_copy(filename):
        return _in_copy(filename, lineno)
    return f"{os.path.basename(filename)}:{lineno}"


STATEMENT_LINES = 6  # the most lines of one statement `code_at` joins; a longer one is shown by its line and "…"
STATEMENT_CHARS = 320  # the most characters of a joined statement, likewise
_TREES: dict[str, ast.Module | None] = {}  # a student's file -> its syntax tree (None: it does not parse here)
_CODE: dict[tuple[str, int], str] = {}  # (file, line) -> what code_at gives for it
_STATEMENTS: dict[tuple[str, int], str] = {}  # (file, line) -> what statement_at gives for it


def code_at(filename: str, lineno: int) -> str:
    """The student's code at this line, as one line of text: the line itself, or, where it is part of a statement
    written over several lines (a call whose arguments go on, a header split inside its brackets), the smallest
    statement that holds it, its lines joined with their comments left out (`x = f(\n    a,\n    b)` is `x = f(a,
    b)`), so that the argument that is the mistake is shown, and a one-line fix can be written for the whole of it.
    A statement longer than STATEMENT_LINES lines or STATEMENT_CHARS characters, or holding a string over several
    lines, is shown by its line and " …" (and is no line a fix is written for).  Only read: nothing is run."""
    key = (filename, lineno)
    if key not in _CODE:
        _CODE[key] = _code_at(filename, lineno)
    return _CODE[key]


def _code_at(filename: str, lineno: int) -> str:
    lines = linecache.getlines(filename)
    if not 0 < lineno <= len(lines):
        return ""
    line = lines[lineno - 1].strip()
    first, last = _span(filename, lines, lineno)
    if first == last:
        return line[:160]
    joined = _joined(lines[first - 1:last]) if last - first < STATEMENT_LINES else None
    if joined is None or len(joined) > STATEMENT_CHARS:
        return line[:160] + " …"
    return joined


def statement_at(filename: str, lineno: int) -> str:
    """Where the statement `code_at` shows whole for this line is, as "attn.py:28-30" (its first line's place, then
    its last line), so that a trace puts a statement's operations under one heading however many of its lines they
    come from; "" where `code_at` shows the line alone (a statement of one line, or one too long to join)."""
    key = (filename, lineno)
    if key not in _STATEMENTS:
        _STATEMENTS[key] = _statement_at(filename, lineno)
    return _STATEMENTS[key]


def _statement_at(filename: str, lineno: int) -> str:
    lines = linecache.getlines(filename)
    if not 0 < lineno <= len(lines) or code_at(filename, lineno).endswith(" …"):
        return ""
    first, last = _span(filename, lines, lineno)
    if first == last:
        return ""
    end = re.search(r"(\d+)$", location(filename, last))
    return f"{location(filename, first)}-{end.group(1)}" if end else ""


def _span(filename: str, lines: list[str], lineno: int) -> tuple[int, int]:
    """(first, last) line of the smallest statement that holds `lineno`; for a compound statement (def, if, for,
    with ...) whose header holds it, the header's lines; (lineno, lineno) where the file does not parse."""
    path = os.path.abspath(filename)
    if path not in _TREES:
        try:
            with warnings.catch_warnings():  # (an invalid escape in a string: Python's warning, not the student's)
                warnings.simplefilter("ignore")
                _TREES[path] = ast.parse("".join(lines))
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            _TREES[path] = None
    tree = _TREES[path]
    if tree is None:
        return lineno, lineno
    found = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno <= lineno <= (node.end_lineno or node.lineno) and \
                (found is None or (node.end_lineno or 0) - node.lineno < (found.end_lineno or 0) - found.lineno):
            found = node
    if found is None:
        return lineno, lineno
    body = getattr(found, "body", None)
    if isinstance(body, list) and body and isinstance(body[0], ast.stmt):  # compound: its header, if it holds the line
        if lineno >= body[0].lineno or body[0].lineno == found.lineno:
            return lineno, lineno
        last = body[0].lineno - 1
        while last > found.lineno and (not lines[last - 1].strip() or lines[last - 1].lstrip().startswith("#")):
            last -= 1
        return found.lineno, max(last, lineno)
    return found.lineno, found.end_lineno or found.lineno


def _joined(rows: list[str]) -> str | None:
    """These lines of one statement as one line: comments and line breaks left out, a break just inside a bracket
    closed up; None where a string goes over several of them (joining it would change it)."""
    rows = [r.rstrip("\r\n") for r in rows]
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO("\n".join(rows) + "\n").readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    for t in tokens:
        if t.type == tokenize.STRING and t.start[0] != t.end[0]:
            return None
        if t.type == tokenize.COMMENT:
            row = t.start[0] - 1
            rows[row] = rows[row][:t.start[1]]
    out = ""
    for row in rows:
        piece = row.strip().removesuffix("\\").strip()
        if not piece:
            continue
        if out.endswith(",") and piece.startswith((")", "]", "}")) and _comma_changes_nothing(out):
            out = out[:-1]  # `f(\n a,\n)` is `f(a)`: the comma was there for the line break
        out += piece if not out or out.endswith(("(", "[", "{")) or piece.startswith((")", "]", "}")) \
            else " " + piece
    return out


def _comma_changes_nothing(text: str) -> bool:
    """Whether the comma that ends `text`, just before the bracket that closes it, can go without changing the code:
    inside a call's brackets, or after two elements or more; not in `(a,)` or `x[a,]`, a tuple of one."""
    tokens = []
    try:
        for t in tokenize.generate_tokens(io.StringIO(text).readline):
            tokens.append(t)
    except (tokenize.TokenError, SyntaxError, IndentationError):  # the brackets still open at the end: expected
        pass
    tokens = [t for t in tokens if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.ENDMARKER)]
    if not tokens or tokens[-1].string != ",":
        return False
    depth, commas = 0, 0
    for i in range(len(tokens) - 2, -1, -1):
        word = tokens[i].string
        if word in (")", "]", "}"):
            depth += 1
        elif word in ("(", "[", "{") and depth:
            depth -= 1
        elif word in ("(", "[", "{"):
            before = tokens[i - 1] if i else None
            after_value = before is not None and (
                before.type == tokenize.STRING or before.string in (")", "]", "}")
                or before.type == tokenize.NAME and not keyword.iskeyword(before.string))
            if commas:
                return True  # two elements or more: (a, b,) is (a, b), x[a, b,] is x[a, b]
            return after_value if word == "(" else not after_value  # f(a,) is f(a); [a,] is [a]; not x[a,]
        elif word == "," and depth == 0:
            commas += 1
    return False


def _in_copy(filename: str, lineno: int) -> str:
    """A line of the API's copy named by the definition holding it (the copy is ours: read, never run, here)."""
    path = os.path.abspath(filename)
    if path not in _COPIES:
        try:
            with open(path, encoding="utf-8") as f:
                _COPIES[path] = ast.parse(f.read()).body
        except (OSError, SyntaxError, ValueError):
            _COPIES[path] = []
    for node in _COPIES[path]:
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        if start <= lineno <= (node.end_lineno or node.lineno):
            if isinstance(node, ast.ClassDef):
                label = f"class {node.name}"
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                label = f"function {node.name}"
            else:
                return f"your notebook, where {ast.unparse(node)[:60]}"
            return f"your notebook, {label}, line {lineno - start + 1}"
    return "your notebook (the imports mha-check wrote before your code)"
