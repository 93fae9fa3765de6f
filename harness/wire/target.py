"""What the user asked mha-check to check, parsed once: `FILE:Class`, `module:Class`, `FILE` or `module`.

Both processes and every front end read a target through this record: the rule that splits it (the last colon,
unless it is a Windows drive letter) and the rule that tells a file from a dotted module name live here alone.
Stdlib only: the child imports it before the student's code runs.
"""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass

CODE_SUFFIXES = (".py", ".ipynb", ".txt")  # a target file: a module, a notebook, a notebook exported as text


@dataclass(frozen=True)
class Target:
    where: str  # a file path (relative to the folder mha-check runs from) or a dotted module name
    name: str | None = None  # the class or factory; None: the one the file defines

    @classmethod
    def parse(cls, spec: str | None) -> Target:
        """'a/b.py:Cls' -> (a/b.py, Cls); 'mod:Cls' -> (mod, Cls); 'a/b.py' -> (a/b.py, None); 'C:x.py' stays a
        path (a drive letter is not a separator), and so does 'my:attn.py' (a colon is legal in a file name: what
        follows the last colon is a class only if it is a Python name, `Outer.Inner` included, and not a file's
        name: `attn.py` would be the class `py` of `attn`)."""
        spec = spec or ""
        if ":" in spec:
            where, _, name = spec.rpartition(":")
            named = not name or all(part.isidentifier() for part in name.split(".")) and \
                not name.lower().endswith(CODE_SUFFIXES)
            if named and not (len(where) == 1 and where.isalpha()):
                return cls(where, name or None)
        return cls(spec, None)

    @property
    def is_file(self) -> bool:
        """A file (by its suffix or a path separator), not a dotted module name."""
        return self.where.lower().endswith(CODE_SUFFIXES) or os.sep in self.where or "/" in self.where

    @property
    def file_name(self) -> str:
        """The file's own name (`attention.py` for `hw3/attention.py:Attn`); "" for a module."""
        return os.path.basename(self.where) if self.is_file else ""

    @property
    def suffix(self) -> str:
        """":Class", or "" when no class is named: what follows the file when the file is moved or found."""
        return f":{self.name}" if self.name else ""

    def at(self, where: str) -> Target:
        """The same class in another file (found in a sub-folder, copied into the scratch)."""
        return Target(where, self.name)

    def __str__(self) -> str:
        return self.where + self.suffix


def nearly(name: str, candidates, cutoff: float = 0.8) -> str | None:
    """The candidate a typed `name` nearly spells: the same but for case (`Breite` for `breite`), else the closest
    by difflib at `cutoff`; None.  One rule for every typo of a command line: an --arg's name, read by the child
    from the signature and by the trusted side from the file's syntax tree, and an @-binding's."""
    candidates = list(candidates)
    same = [c for c in candidates if c.lower() == name.lower()]
    return (same or difflib.get_close_matches(name, candidates, n=1, cutoff=cutoff) or [None])[0]
