"""What the student's code raised, read back from the one line the child gives for it (`AttributeError: text (at
typo.py:38 in forward: queries = self.W_qeury(x))`), so that a report can headline the crash as a crash: its kind,
its line and its words, and for a misspelt name the name most likely meant.

Read on the trusted side from plain text: nothing here runs or trusts the student's code.  The name meant is Python's
own suggestion when the text carries one (`Did you mean: 'W_query'?`), else the closest of the names the module is
known to have (difflib, as Python's own suggestion does), else none: never a guess beyond those.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import asdict, dataclass

HEAD = re.compile(r"(?:[\w ]*? raised )?(?P<kind>[A-Za-z_][\w.]*): (?P<rest>.*)", re.S)  # "importing ... raised X: "
FRAME = re.compile(r"(?:^|; )(?P<at>[^;]*?(?::\d+|, line \d+)) in (?P<fn>[\w<>.]+): ")
NAME_ERRORS = (  # (exception, how its text names the misspelt name)
    ("AttributeError", re.compile(r"has no attribute '(?P<name>\w+)'")),
    ("NameError", re.compile(r"name '(?P<name>\w+)' is not defined")),
    ("UnboundLocalError", re.compile(r"local variable '(?P<name>\w+)'|variable '(?P<name2>\w+)' where")),
    ("TypeError", re.compile(r"unexpected keyword argument '(?P<name>\w+)'")),
)
PYTHON_SUGGESTION = re.compile(r"[.;]? ?Did you mean:? '?(?P<name>[\w.]+)'?\??", re.I)


@dataclass
class Raised:
    kind: str  # the exception's class name
    text: str  # its message, without where it happened
    at: str = ""  # the student's line that raised: "typo.py:38", "lab.ipynb, code cell 2, line 16"
    code: str = ""  # that line as written
    name: str = ""  # a misspelt or undefined name the error is about ("" for any other error)
    meant: str = ""  # the name most likely meant ("" when none is close)

    def to_dict(self) -> dict:
        return asdict(self)


def parse(message: str) -> Raised | None:
    """The exception in the child's one-line form, or None when `message` is not one."""
    head = HEAD.fullmatch(" ".join(str(message).split()))
    if head is None:
        return None
    text, at, code = head["rest"], "", ""
    body, sep, where = text.rpartition(" (at ")
    if sep and where.endswith(")"):
        frames = list(FRAME.finditer(where[:-1]))
        if frames:  # the deepest of the student's frames is the line that raised
            text, at, code = body, frames[-1]["at"], where[frames[-1].end():-1]
    suggestion = PYTHON_SUGGESTION.search(text)
    text = text[:suggestion.start()] if suggestion else text
    name = next((m["name"] or m.groupdict().get("name2") or "" for kind, pattern in NAME_ERRORS
                 if kind == head["kind"] for m in [pattern.search(text)] if m), "")
    return Raised(head["kind"], text.strip(), at, code.strip(), name, suggestion["name"] if suggestion else "")


def attribute_names(paths) -> list[str]:
    """Every name in dotted attribute paths (`W_query.weight`, `blocks.0.attn.mask`): the names a module is known to
    have, for `closest`."""
    return sorted({part for path in paths for part in str(path).split(".") if part and not part.isdigit()})


def closest(name: str, names) -> str:
    """The one name in `names` that `name` most likely misspells ("" when none is close, or `name` is one)."""
    names = [n for n in names if n != name]
    if not name or name in names:
        return ""
    found = difflib.get_close_matches(name, names, n=1, cutoff=0.7)
    return found[0] if found else ""


def with_meant(raised: Raised, names) -> Raised:
    """`raised` with the name meant, when it is about a misspelt name and Python gave no suggestion."""
    if raised.name and not raised.meant:
        raised.meant = closest(raised.name, names)
    return raised
