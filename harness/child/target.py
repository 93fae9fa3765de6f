"""Child side: find the student's class or factory from a target string, without letting it shadow the tool.

Target forms: `module:Name`, `pkg.module:Name`, `path/to/file.py:Name`, `path/to/file.py` (the single nn.Module
subclass defined there).  A student's `checks.py`, `reference.py`, `harness.py` or `mutants.py` never replaces ours,
and ours never replaces theirs: the rule and why is harness.wire.names (defence 3, applied here).
"""
from __future__ import annotations

import dis
import difflib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import os
import re
import sys
import traceback

import torch

from harness import PACKAGES_ROOT
from harness.child import notebook
from harness.child.construct import key_of
from harness.wire import names
from harness.wire.target import Target
from dataclasses import dataclass, field


class TargetError(Exception):
    """The target cannot be loaded; the message is for the student, `kind` says which stage failed."""

    def __init__(self, kind: str, message: str, notes: list[str] | None = None):
        super().__init__(message)
        self.kind = kind
        self.notes = list(notes or [])  # what loading had left out before it failed: the report still says it


@dataclass
class LoadedTarget:
    obj: object  # a class or a factory function
    name: str
    module_file: str | None
    notes: list[str] = field(default_factory=list)  # what loading left out (a notebook's non-defining cells)


def _file_for(target: Target, search_dir: str) -> str | None:
    where = target.where
    if target.is_file:
        return os.path.join(search_dir, where)
    rel = os.path.join(search_dir, where.replace(".", os.sep))
    for cand in (rel + ".py", os.path.join(rel, "__init__.py")):
        if os.path.isfile(cand):
            return cand
    return None


def student_frames(tb, filename: str | None) -> str:
    """The lines of a traceback that point into the student's own file (ours are noise to them)."""
    frames = traceback.extract_tb(tb)
    mine = [f for f in frames if filename and os.path.abspath(f.filename) == os.path.abspath(filename)]
    ours = os.path.join(PACKAGES_ROOT, "harness")
    chosen = mine or [f for f in frames if os.path.dirname(os.path.abspath(f.filename)) != ours][-1:]
    return "; ".join(f"{notebook.location(f.filename, f.lineno)} in {f.name}: {(f.line or '').strip()}" for f in chosen)


def safe_type_name(exc: BaseException) -> str:
    """The exception's class name straight from the type object: no metaclass or property of the student's runs."""
    cls = type(exc)
    return type.__dict__["__qualname__"].__get__(cls)


def safe_message(exc: BaseException) -> str:
    """The exception's arguments when they are plain text or numbers; never calls the student's __str__."""
    args = BaseException.__dict__["args"].__get__(exc)
    plain = (str, int, float, bool, type(None), torch.dtype)  # a dtype: KeyError(torch.float64) from a table by dtype
    if issubclass(type(exc), SyntaxError):  # type(): isinstance would read a __class__ of the student's
        return str(SyntaxError.__dict__["msg"].__get__(exc))
    if issubclass(type(exc), OSError):  # its file's name is no argument: "[Errno 2] No such file or directory:
        # 'the-verdict.txt'", as Python says it (a student's trial read "2, No such file or directory", no name)
        read = {k: OSError.__dict__[k].__get__(exc) for k in ("errno", "strerror", "filename")}
        if type(read["errno"]) is int and type(read["strerror"]) is str and type(read["filename"]) is str:
            return f"[Errno {read['errno']}] {str.__str__(read['strerror'])}: {str.__repr__(read['filename'])}"
    if all(type(a) in plain or _plain_sequence(a) for a in args):
        return ", ".join(str.__str__(a) if type(a) is str else repr(a) for a in args)
    return "(exception arguments not shown: they are not plain text)"


def _plain_sequence(value) -> bool:
    """A shape or a tuple of numbers (ValueError(x.shape), a student's own shape check): torch.Size, tuple and list
    exactly, of ints, floats and bools exactly, whose repr runs none of the student's code."""
    return type(value) in (torch.Size, tuple, list) and len(value) <= 64 and all(
        type(v) in (int, float, bool) for v in value)


def describe_exception(exc: BaseException, filename: str | None = None) -> str:
    text = f"{safe_type_name(exc)}: {safe_message(exc)}"
    where = student_frames(exc.__traceback__, filename) if exc.__traceback__ else ""
    return text + (f" (at {where})" if where else "")


_NOTEBOOK_NAME_HINT = (" (from a notebook only the definitions are run: imports, functions, classes and constants; a "
                       "value made by a call in a cell, such as cfg = load_config(), is not there: write the value "
                       "itself or compute it inside your class)")




class _SubmissionsOwn(importlib.abc.MetaPathFinder):
    """`import reference` (any of names.CHILD_HIDDEN) in a submission finds the student's own module of that name
    in their folder, or nothing, never ours; `import harness.x` of a module the worker has not imported is refused
    (harness.wire.names, defence 3: why)."""

    def __init__(self):
        self.folders: list[str] = []
        self.active = False  # off for mha-check's own code (a mutant imports mutants._info) and in-process runs

    def find_spec(self, name, path=None, target=None):
        if self.active and name.partition(".")[0] == "harness":  # only asked for a module not imported yet: the
            # worker has imported all it needs (harness.sandbox.trusted), the rest (the template's warm-up layer,
            # the trusted side's engine) is not for submissions
            raise ModuleNotFoundError(f"No module named {name!r} (mha-check's own modules are not for submissions)",
                                      name=name)
        if not self.active or path is not None or name not in names.CHILD_HIDDEN:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, self.folders)
        if spec is None:
            raise ModuleNotFoundError(f"No module named {name!r} in your submission (mha-check's own {name!r} is "
                                      f"not for submissions)", name=name)
        return spec


_OWN = _SubmissionsOwn()


def _their_folder(folder: str) -> None:
    """`folder` holds the student's modules: on sys.path after ours, and first for the names only they may have."""
    if folder not in sys.path:
        sys.path.append(folder)  # after our packages: the student's helpers import, ours stay ours
    if folder not in _OWN.folders:
        _OWN.folders.append(folder)
    if _OWN.active and _OWN not in sys.meta_path:
        sys.meta_path.insert(0, _OWN)
        for name in names.CHILD_HIDDEN:
            sys.modules.pop(name, None)


def _load_notebook(path: str):
    """The defining cells, written as a .py file in our throwaway working folder and imported from there."""
    _their_folder(os.path.dirname(os.path.abspath(path)))  # the notebook's own helper modules import (and are
    # found installed when its imports are looked at)
    try:
        generated, notes = notebook.write(path, os.getcwd())
    except notebook.NotebookError as e:
        raise TargetError("import", str(e)) from None
    try:
        module, loaded, _ = _load_file(generated)
    except TargetError as e:
        hint = _NOTEBOOK_NAME_HINT if "NameError" in str(e) else ""
        raise TargetError(e.kind, str(e) + hint, notes) from None
    return module, loaded, notes


def _opens(path: str) -> bool:
    try:
        with open(path, "rb"):
            return True
    except OSError:
        return False


def _blank(path: str) -> bool:
    """Whether the file holds nothing but white space (read no further than that shows)."""
    try:
        with open(path, "rb") as f:
            return not f.read(1 << 16).strip() and not f.read(1)
    except OSError:
        return False  # importing it says what is wrong


def _load_file(path: str):
    if os.path.islink(path) and not _opens(path):  # a link out of the submission: not in this run's view (or, seen,
        # not readable under Landlock)
        leads = "".join(c if c.isprintable() else "?" for c in os.readlink(path))[:80]
        raise TargetError("import", f"{os.path.basename(path)} is a symbolic link to {leads}, which this run cannot "
                                    "read (mha-check never follows a link out of a submission); hand in the file "
                                    "itself, not a link")
    if not os.path.isfile(path):
        folder = os.path.dirname(os.path.abspath(path))
        there = sorted(f for f in os.listdir(folder) if f.lower().endswith((".py", ".ipynb"))) \
            if os.path.isdir(folder) else None
        other = sorted(f for f in os.listdir(folder) if not f.startswith(".")) if os.path.isdir(folder) else []
        seen = "" if there is None else f" (that folder has {', '.join(there[:8])})" if there else \
            " (that folder has no .py or .ipynb file" + (f": it has {', '.join(other[:8])})" if other else ")")
        raise TargetError("import", f"no such file: {os.path.basename(path)}{seen}")  # its folder may be a copy
    if path.lower().endswith(".ipynb"):  # what platforms export: Lab.IPYNB, ATTENTION.PY
        return _load_notebook(path)
    if not path.lower().endswith(".py"):
        raise TargetError("import", f"{os.path.basename(path)} is neither a Python file (.py) nor a notebook (.ipynb)")
    path = os.path.abspath(path)
    if _blank(path) and not notebook.is_generated(path):  # said as it is: "has no 'MyAttn'" sent an empty hand-in
        # to review as a class named otherwise (a notebook's file is ours: the words that name the notebook follow)
        raise TargetError("import", f"{os.path.basename(path)} is empty: there is no code in it to check (hand in "
                                    "the file with your class in it)")
    folder = os.path.dirname(path)
    _their_folder(folder)
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem == "__init__":
        stem = os.path.basename(folder)
    name = names.student_module(stem, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=importlib.machinery.SourceFileLoader(name, path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        where = os.path.basename(path) if not e.lineno else notebook.location(path, e.lineno) if \
            notebook.is_generated(path) else f"{os.path.basename(path)}, line {e.lineno}"
        raise TargetError("import", f"SyntaxError in {where}: {e.msg}: {(e.text or '').strip()}") from None
    except BaseException as e:  # noqa: BLE001 - student code may raise anything, even SystemExit
        raise TargetError("import", "importing the file raised " + describe_exception(e, path)) from None
    return module, path, []


def _import_module(where: str, search_dir: str):
    _their_folder(search_dir)
    try:
        module = importlib.import_module(where)
    except ModuleNotFoundError as e:
        raise TargetError("import", f"cannot import module {where!r}: {e}. Run mha-check from the folder that "
                                    f"holds it, or give the file path (path/to/file.py:ClassName).") from None
    except BaseException as e:  # noqa: BLE001
        raise TargetError("import", f"importing {where!r} raised " + describe_exception(e)) from None
    return module, getattr(module, "__file__", None), []


def _candidates(module) -> list[str]:
    import torch.nn as nn  # noqa: PLC0415 - torch is the child's, imported once the target is loaded

    return sorted(
        n for n, obj in vars(module).items()
        if inspect.isclass(obj) and issubclass(obj, nn.Module) and obj.__module__ == module.__name__
    )


def _mentions(module, container: str, name: str) -> bool:
    """Does class `container`'s source use class `name` (e.g. MultiHeadAttention builds Head)?"""
    try:
        source = inspect.getsource(getattr(module, container))
    except (OSError, TypeError):
        return False
    return re.search(rf"\b{re.escape(name)}\b", source) is not None


ATTENTION_LIKE = re.compile(r"att|mha|multi_?head|^head|heads$|selfatt", re.IGNORECASE)


def _pick_single(module, candidates: list[str], shown: str) -> str:
    """With no class named: the attention class.  Among the classes whose name says attention (or heads), the one
    no other of them contains (MultiHeadAttention builds Head); never a Block or a model that merely contains it.
    Several equally likely classes, or none that says attention among several: the student must say which."""
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise TargetError("lookup", f"{shown} defines no torch.nn.Module subclass; name the class or factory "
                                    f"function explicitly, e.g. {shown}:make_attention")
    working = [c for c in candidates if any("forward" in vars(k) for k in getattr(module, c).__mro__
                                            if k.__module__ != "torch.nn.modules.module")]
    candidates = working or candidates  # a stub without a forward of its own is never the attention, nor an example
    if len(candidates) == 1:
        return candidates[0]
    attention = [c for c in candidates if ATTENTION_LIKE.search(c)]
    outer = [c for c in attention if not any(c != o and _mentions(module, o, c) for o in attention)]
    if len(outer) == 1:
        return outer[0]
    named = ", ".join(outer or candidates)
    which = "attention classes" if outer else "nn.Module classes, none named like attention"
    raise TargetError("ambiguous", f"{shown} defines several {which}: {named}. Say which one to check, e.g. "
                                f"{shown}:{(outer or candidates)[0]}")


SIZE_KEYS = ("width", "d_in", "d_out", "heads", "context_length", "head_width")


def settings_from_globals(obj) -> dict[str, str]:
    """Module-level numbers named like the configuration (n_embd, block_size, n_head, head_size...) that the target's
    code reads: mha-check cannot build such a class with its own sizes.  Looks through the target's methods and
    the classes of the same file it uses (karpathy's lecture: MultiHeadAttention builds Head, both read n_embd)."""
    module = sys.modules.get(getattr(obj, "__module__", ""), None)
    if module is None:
        return {}
    found, seen, todo = {}, set(), [obj]
    while todo:
        cls = todo.pop()
        if id(cls) in seen:
            continue
        seen.add(id(cls))
        members = vars(cls).values() if inspect.isclass(cls) else [cls]  # a factory: its own code
        for value in members:
            code = getattr(getattr(value, "__func__", value), "__code__", None)
            for name in _names(code) if code else ():
                g = vars(module).get(name)
                if inspect.isclass(g) and getattr(g, "__module__", None) == module.__name__:
                    todo.append(g)
                elif isinstance(g, (int, float)) and not isinstance(g, bool) and key_of(name) in SIZE_KEYS:
                    found[name] = repr(g)
    return dict(sorted(found.items()))  # by name: a set's order changes with each process's string hashes


GLOBAL_LOADS = ("LOAD_GLOBAL", "LOAD_NAME")


def _names(code) -> set[str]:
    """Global names a code object (and the code nested in it: lambdas, comprehensions) reads.  Only the names it
    loads as globals: `co_names` also holds the attributes it reads, and `self.n_head`, a constructor argument kept
    on the module, is no read of a module-level `n_head` (a notebook's cell of settings beside a class that takes
    them as arguments was told it "reads its sizes from module-level settings (n_head = 6)")."""
    names = {ins.argval for ins in dis.get_instructions(code) if ins.opname in GLOBAL_LOADS}
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _names(const)
    return names


def load_target(spec: str, search_dir: str | None = None, submission: bool = False) -> LoadedTarget:
    """`search_dir` is the folder the user ran mha-check from (the child itself runs in a throwaway folder);
    `submission`: the code is not mha-check's own, so our packages are not importable from it (_SubmissionsOwn)."""
    search_dir = search_dir or os.getcwd()
    _OWN.active = submission
    target = Target.parse(spec)
    where, name = target.where, target.name
    path = _file_for(target, search_dir)
    module, filename, notes = _load_file(path) if path else _import_module(where, search_dir)
    try:
        return _lookup(module, name, path or filename or where, filename, notes)
    except TargetError as e:
        raise TargetError(e.kind, str(e), notes) from None


def _lookup(module, name: str | None, where: str, filename: str | None, notes: list[str]) -> LoadedTarget:
    if name is None:
        name = _pick_single(module, _candidates(module), os.path.basename(where))
    obj = module
    for part in name.split("."):
        if not hasattr(obj, part):
            public = [n for n in dir(module) if not n.startswith("_")]
            close = difflib.get_close_matches(part, public, n=3, cutoff=0.5)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            found = _candidates(module)
            listing = f" nn.Module classes there: {', '.join(found)}." if found else ""
            raise TargetError("lookup", f"{os.path.basename(where)} has no {name!r}.{hint}"
                                        f"{listing}")
        obj = getattr(obj, part)
    import torch.nn as nn  # noqa: PLC0415 - torch is the child's, imported once the target is loaded

    if isinstance(obj, nn.Module):
        raise TargetError("lookup", f"{name!r} is an instance of {type(obj).__name__}, not a class: name the class "
                                    f"(file.py:{type(obj).__name__}) or a function that builds one")
    if not callable(obj):
        raise TargetError("lookup", f"{name!r} is a value of type {type(obj).__name__}, not a class or a factory "
                                    "function")
    return LoadedTarget(obj=obj, name=name, module_file=filename, notes=notes)
