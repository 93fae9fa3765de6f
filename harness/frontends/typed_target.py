"""A student's own run: a target that names no file there is a mistake of the command line, said in one line.

`mha-check f01_functonal.py:FuncAttn` (a typo) was a failing `construct` check with eighteen SKIP lines under it, exit
status 1 and grading words ("hand in your code under the file name the assignment asks for"), and `mha-check ./`
told the folder's name as if it were a module ("17 defines no torch.nn.Module subclass; e.g. 17:make_attention").  On
a student's run (not a grade: harness.frontends.single) both are a command line to correct, exit status 2, with the
names that can be typed instead.  A grade keeps the failing report: there a submission under another name is the
student's failure (harness.frontends.grader, `construct`'s "no such file").

Trusted side, before any child starts: it only lists the folder and reads the .py files' class statements with
`ast` (nothing of them runs here).
"""
from __future__ import annotations

import ast
import difflib
import os

from harness.wire.target import Target, nearly

SHOWN = 6  # names listed at most; a longer list ends with "…"
READ_BYTES = 1 << 20  # a .py file larger than this is listed without its classes (never parsed here)


def problem(spec: str, cwd: str | None = None) -> str | None:
    """The one-line error for a target that names no file or names a folder, as the student typed it; None when
    the target's file is there (or it is a module name: importing it says more than a listing would)."""
    cwd = cwd or os.getcwd()
    target = Target.parse(spec)
    path = os.path.join(cwd, target.where)
    if os.path.isdir(path) and (target.is_file or not os.path.isfile(os.path.join(path, "__init__.py"))):
        return _folder(target.where, path)
    if not target.is_file or os.path.lexists(path):
        return None
    typed_folder, name = os.path.split(target.where)
    folder = os.path.join(cwd, typed_folder)
    if not os.path.isdir(folder):
        return f"no such folder: {typed_folder} (for the file {target.where})"
    there = _files(folder)
    close = difflib.get_close_matches(name, there, n=1, cutoff=0.6)
    if close:
        return f"no such file: {target.where} (did you mean {os.path.join(typed_folder, close[0])}{target.suffix}?)"
    return f"no such file: {target.where}" + (f" (that folder has {_listed(there)})" if there else
                                              " (that folder has no .py or .ipynb file)")


def arg_problem(spec: str, overrides: dict, cwd: str | None = None) -> str | None:
    """The one-line error for an --arg whose name nearly spells a parameter of the target's constructor (a class's
    own `__init__`, or a factory function) that no other --arg names: `--arg Width=@d_out` for `width` (a student's
    trial: "CANNOT TELL: mha-check could not build your class", 18 skipped checks, exit status 1, the "did you mean"
    buried under them).  Read from the file's syntax tree only; None where the file, the class's own __init__ or a
    near name is not found (the child then says what it finds), and for names the signature could take anyway."""
    target = Target.parse(spec)
    if not target.is_file or not target.name or not overrides:
        return None
    params = _signature_names(os.path.join(cwd or os.getcwd(), target.where), target.name)
    if params is None:
        return None
    free = [p for p in params if p not in overrides]
    for name in overrides:
        near = nearly(name, free) if name not in params else None  # the child's rule (construct.misspelt)
        if near:
            return (f"--arg {name}: {target.name}'s constructor has no parameter {name} (it takes "
                    f"{', '.join(params)}); did you mean --arg {near}=...?")
    return None


def _signature_names(path: str, name: str) -> list[str] | None:
    """The parameter names of `name`'s own __init__ (a top-level class) or of the function `name`, self left out;
    None where the file cannot be read or parsed, or the class defines no __init__ of its own."""
    tree = _syntax_tree(path) if path.endswith(".py") else None
    if tree is None:
        return None
    node = next((n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == name), None)
    if isinstance(node, ast.ClassDef):
        node = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        skip = 1
    else:
        skip = 0
    if node is None:
        return None
    args = node.args
    return [a.arg for a in (args.posonlyargs + args.args)[skip:] + args.kwonlyargs]


def _folder(typed: str, path: str) -> str:
    """A folder given as the target: the target is a file and a class; the candidates as they can be typed."""
    prefix = "" if os.path.normpath(typed) == "." else os.path.normpath(typed)
    candidates = []
    for name in _files(path):
        classes = _module_classes(os.path.join(path, name)) if name.endswith(".py") else []
        typed_name = os.path.join(prefix, name)
        candidates += [f"{typed_name}:{c}" for c in classes] or [typed_name]
    return (f"{typed} is a folder: give the file and the class, FILE.py:Class (or FILE.ipynb:Class)" +
            (f", e.g. {_listed(candidates)}" if candidates else "; it has no .py or .ipynb file"))


def _files(folder: str) -> list[str]:
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(n for n in names if n.lower().endswith((".py", ".ipynb")) and not n.startswith("."))


def _listed(names: list[str]) -> str:
    return ", ".join(names[:SHOWN]) + (", …" if len(names) > SHOWN else "")


def _module_classes(path: str) -> list[str]:
    """The top-level classes of a .py file whose bases name a Module (nn.Module, torch.nn.Module, Module), read
    with ast; [] where the file cannot be read or parsed (it is still listed, by its name)."""
    tree = _syntax_tree(path)
    if tree is None:
        return []
    return [node.name for node in tree.body if isinstance(node, ast.ClassDef) and any(
        (b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")).endswith("Module") for b in node.bases)]


def _syntax_tree(path: str) -> ast.Module | None:
    """A .py file's syntax tree, never run; None where it cannot be read or parsed, or is larger than READ_BYTES."""
    try:
        with open(path, "rb") as f:
            source = f.read(READ_BYTES + 1)
        if len(source) > READ_BYTES:
            return None
        return ast.parse(source)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
