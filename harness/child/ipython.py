"""Child side: IPython's own syntax in a notebook cell turned into plain Python, without IPython.

IPython is not one of our dependencies (torch, numpy, nbformat), so this is a small rewrite of just what
students' notebooks hold, line by line, keeping every line number (messages name the cell's own lines):

- a first line `%%time`, `%%timeit` or `%%capture`: blanked, and the rest is an ordinary cell; any other cell magic
  (`%%bash`, `%%writefile x.py`) makes the whole cell foreign: it is left out (None) with a note;
- `%time stmt` / `%timeit [-n N -r N ...] stmt`: the statement itself (the cell filter then keeps it only if it
  defines something, so `%time train()` still never runs);
- any other line magic (`%matplotlib inline`), shell line (`!pip install x`), shell or magic assignment
  (`files = !ls`) and help (`x?`, `??x`, `x??`): `pass` at the same indentation, so a loop or function whose only
  body it was still parses, and a note says it was left out.

Lines are rewritten only when the cell does not parse as written: a line that merely looks like a magic inside a
string (`%d items` in a docstring) of a cell that parses stays as it is.
"""
from __future__ import annotations

import ast
import re

TIMING_CELL_MAGICS = ("%%time", "%%timeit", "%%capture")  # their body is the student's ordinary code
_TIMEIT_FLAGS_WITH_VALUE = {"-n", "-r", "-p"}
_HELP = re.compile(r"^(\?\??)?[A-Za-z_][\w.]*(\?\??)?$")  # torch.nn?  ??torch  torch.softmax??
_ASSIGNED = re.compile(r"^[A-Za-z_][\w.]*(\s*,\s*[A-Za-z_][\w.]*)*\s*=\s*[!%]")  # files = !ls, env = %env


def parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):  # ValueError: a NUL byte (Python 3.11)
        return False
    return True


def plain(text: str, number: int, notes: list[str]) -> str | None:
    """Code cell `number` as plain Python (same line numbers), or None when a cell magic makes it foreign."""
    lines = text.replace("\r\n", "\n").split("\n")
    first = lines[0].strip()
    if first.startswith("%%"):
        magic = first.split()[0]
        if magic not in TIMING_CELL_MAGICS:
            notes.append(f"code cell {number}: a cell magic ({magic}): the cell was left out")
            return None
        notes.append(f"code cell {number}: the cell magic {magic} was left out (the cell itself is read as usual)")
        lines[0] = ""
    code = "\n".join(lines)
    if parses(code):
        return code
    return "\n".join(_line(line, number, notes) for line in lines)


def _line(line: str, number: int, notes: list[str]) -> str:
    stripped = line.strip()
    indent = line[: len(line) - len(line.lstrip())]
    if stripped.startswith(("%time ", "%timeit ")):
        statement = _timed(stripped)
        if statement:
            return indent + statement
    help_line = "?" in stripped and _HELP.match(stripped)
    if not (stripped.startswith(("%", "!")) or help_line or _ASSIGNED.match(stripped)):
        return line
    kind = "IPython help" if help_line else "a magic or shell command"
    notes.append(f"code cell {number}: {stripped[:60]!r} ({kind}) was left out")
    return indent + "pass"


def _timed(stripped: str) -> str:
    """The statement a `%time` / `%timeit` line times (timeit's own options skipped)."""
    magic, _, rest = stripped.partition(" ")
    rest = rest.strip()
    while magic == "%timeit" and rest.startswith("-"):
        flag, _, rest = rest.partition(" ")
        if flag in _TIMEIT_FLAGS_WITH_VALUE:
            rest = rest.strip().partition(" ")[2]
        rest = rest.strip()
    return rest
