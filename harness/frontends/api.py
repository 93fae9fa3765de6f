"""Python and notebook API: `from harness.frontends.api import check`.

    from harness.frontends.api import check

    report = check("attn.py:MyAttn")   # the same target strings as the command line
    report = check(MyAttn)             # a class (or a factory function) defined in this notebook or imported
    report = check(my_attn)            # an nn.Module instance: checked through its class (see below)
    report                             # the text report; in Jupyter an HTML table
    report.passed                      # True only when every check ran and passed
    report["causal-leakage"].status    # a Status: "pass", "fail", "cannot_tell" or "skip"; .message, .fix, ...
    report["kv-cache"].not_applicable  # True: a pass with nothing to judge (no KV cache), counted apart
    report.to_dict(), report.to_json() # the JSON report of `mha-check --format json`

Options: `only=`/`skip=` (check ids, a list or "a,b"), `seed=`, `examples=`, `args={"name": value}` (the command
line's --arg: constructor arguments, "@d_out" binds one to the width), `weight_map={"q": "W_query", ...}` (--map),
`source=` (see below), `diagnose=`.

Your code still runs only in mha-check's child process, never in the notebook's kernel.  How a Python object gets
there:

- A class or function defined at the top level of an importable ``.py`` file (not ``__main__``) is loaded from that
  file, exactly as ``mha-check path/to/file.py:Name`` would (the whole file is imported in the child).
- Anything else (a notebook cell, a script's ``__main__``, a class defined inside a function) is checked from its
  SOURCE: ``inspect.getsource`` (for notebook classes, the cell kept by IPython is found through the code of the
  class's methods), written to a temporary file that starts with ``import math, torch, torch.nn as nn,
  torch.nn.functional as F`` followed by what the code refers to from its globals: modules (``import numpy as
  np``), functions and classes imported from installed modules (``from einops import rearrange``), simple constants
  (``D_MODEL = 64``), a lambda by the line that assigned it (``act = lambda x: ...``), and the source of helper
  functions and base classes defined next to it (in the same notebook), recursively.  Places in that copy are
  named "your notebook, class MyAttn, line 4", never by the temporary file.  A class whose source cannot be found
  gives a report that cannot tell (mha-check's limit), not an exception.  Other globals (a tensor built in another
  cell, ...) cannot be carried over: they are listed in ``report.notes``; make them constructor arguments or define them
  inside the class.  ``source=True`` forces this path for file-based objects too, ``source=False`` refuses it.
- An ``nn.Module`` instance is checked through its class: mha-check builds its own instances with its own
  configurations (widths, heads, context lengths), so your instance's constructor arguments and trained weights are
  not used (and cannot be known: Python does not keep them).

This module does not import torch (the kernel usually has, which is how an instance is recognised).
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import inspect
import linecache
import os
import shutil
import symtable
import sys
import tempfile
import textwrap
import types
from dataclasses import dataclass, field, fields

from harness import SOURCE_COPY_PREFIX
from harness.engine import leakage, rewrite
from harness.engine.context import Context
from harness.engine.report import CheckResult, Report
from harness.engine.runner import Options, UsageError, not_run, run_checks
from harness.frontends.options import ids
from harness.render import html as html_report
from harness.render import plot, text, view
from harness.sandbox.pool import single_run

HEADER = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
_HEADER_BINDINGS = {"math": "math", "torch": "torch", "nn": "torch.nn", "F": "torch.nn.functional"}

__all__ = ["check", "plot_leakage", "CheckResult", "NotebookReport", "Resolved", "resolved_target", "serialise",
           "TargetSourceError"]


class TargetSourceError(ValueError):
    """A Python object given as the target cannot be handed to the child process (no source, not a class...)."""


# -- the report ------------------------------------------------------------------------------------------------------
class NotebookReport(Report):
    """A `Report` that shows itself: `repr()` is the text report, `_repr_html_` a table for Jupyter.

    Everything of `Report` works unchanged: `.passed`, `report["check-id"]` (a `CheckResult`), `.checks`,
    `.summary()`, `.to_dict()`, `.to_json()`, `.to_text(verbose=True)`, `.diagnosis` (a record: `.mutant`, `.title`,
    `.fix`, `.at`; None when nothing failed).  `notes` says how the target reached the child (e.g. "checked through
    its class") and what could not be carried over.
    """

    notes: list[str]
    source: str | None

    @classmethod
    def from_report(cls, report: Report, notes=(), source: str | None = None) -> "NotebookReport":
        new = cls(**{f.name: getattr(report, f.name) for f in fields(Report)})
        new.notes, new.source = list(notes), source
        return new

    def _own_notes(self) -> list[str]:
        """The notes the report itself does not already show (a notebook's loading notes are in both)."""
        shown = self.adapter.notes
        return [n for n in getattr(self, "notes", []) if n not in shown]

    def __repr__(self) -> str:
        text_report = text.render(view.build(self))
        notes = self._own_notes()
        return text_report + ("\n" + "\n".join(f"note: {n}" for n in notes) if notes else "")

    def _repr_html_(self) -> str:
        return html_report.render(view.build(self), self._own_notes())


# -- from a Python object to a target string the child can load -------------------------------------------------------
@dataclass
class Resolved:
    spec: str  # what the child loads: "path.py:Name" (absolute path) or the string given
    display: str  # what the report calls it
    notes: list[str] = field(default_factory=list)
    source: str | None = None  # the serialised source, when the object was serialised


def _is_module_instance(obj) -> bool:
    torch = sys.modules.get("torch")  # never imported here: an instance exists only if the caller imported torch
    return torch is not None and isinstance(obj, torch.nn.Module)


def _file_spec(obj) -> str | None:
    """'/abs/file.py:QualName' when `obj` is reachable at the top level of an importable .py file (not __main__)."""
    modname = getattr(obj, "__module__", None)
    module = sys.modules.get(modname) if modname else None
    if module is None or modname == "__main__":
        return None
    filename = getattr(module, "__file__", None)
    qualname = getattr(obj, "__qualname__", "")
    if not filename or not filename.endswith(".py") or not os.path.isfile(filename) or "<" in qualname:
        return None
    found = module
    for part in qualname.split("."):
        found = getattr(found, part, None)
    if found is not obj:
        return None
    return f"{os.path.abspath(filename)}:{qualname}"


def _functions_of(obj) -> list:
    if inspect.isfunction(obj):
        return [obj]
    out = []
    for value in vars(obj).values():
        value = getattr(value, "__func__", value)  # staticmethod / classmethod
        if inspect.isfunction(value):
            out.append(value)
    return out


def _source_of(obj) -> str:
    """The object's source, dedented; for a class defined in a notebook cell, the cell is found through the code
    objects of its methods (IPython keeps every cell in linecache)."""
    try:
        return textwrap.dedent(inspect.getsource(obj))
    except (OSError, TypeError):
        pass
    name = obj.__name__
    kinds = (ast.ClassDef,) if inspect.isclass(obj) else (ast.FunctionDef, ast.AsyncFunctionDef)
    for fn in _functions_of(obj):
        code = fn.__code__
        found = _defined_in(code.co_filename, kinds, name, code.co_firstlineno)
        if found:
            return found
    if inspect.isclass(obj) and getattr(obj, "__module__", None) == "__main__":  # no method of its own (`class
        # Mine(Base): pass`): the newest kernel cell that defines a class of that name
        for filename in reversed([f for f in list(linecache.cache) if _is_cell(f)]):
            found = _defined_in(filename, kinds, name)
            if found:
                return found
    raise TargetSourceError(
        f"cannot get the source code of {name!r} (inspect.getsource failed and no notebook cell defines it), so "
        f"it cannot be checked in mha-check's separate process. Put the class in a .py file and check "
        f"'file.py:{name}', or define it in a notebook cell (not with exec or type())")


def _is_cell(filename: str) -> bool:
    """A file name IPython gives a cell's code: <ipython-input-3-...> (classic), /tmp/ipykernel_123/456.py."""
    return filename.startswith("<ipython-input-") or "ipykernel_" in filename


def _defined_in(filename: str, kinds: tuple, name: str, line: int | None = None) -> str | None:
    """The source of the top-level or nested definition `name` in a file kept by linecache (holding `line`)."""
    lines = linecache.getlines(filename)
    try:
        tree = rewrite.parse("".join(lines))
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, kinds) and node.name == name and (
                line is None or node.lineno <= line <= (node.end_lineno or node.lineno)):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return textwrap.dedent("".join(lines[start - 1: node.end_lineno]))
    return None


def _lambda_assignment(name: str, value) -> str | None:
    """`act = lambda x: torch.relu(x)` for a module-level lambda bound to `name`, from the line that made it
    (a lambda has no name of its own to write it back under); None when it was not made by such an assignment."""
    try:
        source = textwrap.dedent("".join(inspect.getsourcelines(value)[0]))
        tree = rewrite.parse(source)
    except (OSError, TypeError, SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda)
                and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)):
            return f"{name} = {ast.get_source_segment(source, node.value)}"
    return None


def _global_names(source: str) -> list[str]:
    """Names the code reads from its module's globals (not its own locals, not what it defines itself)."""
    top = symtable.symtable(source, "<mha-check>", "exec")
    names: set[str] = set()
    for sym in top.get_symbols():
        if sym.is_referenced() and not (sym.is_assigned() or sym.is_imported()):
            names.add(sym.get_name())

    def walk(table):
        for child in table.get_children():
            for sym in child.get_symbols():
                if sym.is_global() and sym.is_referenced():
                    names.add(sym.get_name())
            walk(child)

    walk(top)
    return sorted(names)


def _namespace(obj) -> dict:
    """The globals the object's code sees, plus the closure values of a class or function defined inside a
    function (those become globals in the serialised copy)."""
    funcs = _functions_of(obj)
    ns: dict = {}
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    if module is not None:
        ns.update(vars(module))
    for fn in funcs:
        ns.update(fn.__globals__)
    for fn in funcs:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            if name == "__class__":
                continue
            try:
                ns[name] = cell.cell_contents
            except ValueError:  # empty cell
                pass
    for base in getattr(obj, "__bases__", ()):  # `class Mine(Base): pass` has no code of its own to find Base by
        ns.setdefault(base.__name__, base)
    return ns


def _importable(value) -> str | None:
    """'from mod import name' text when `value` can be re-imported by its module and qualified name."""
    modname = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    if not modname or not qualname or modname == "__main__" or "." in qualname or "<" in qualname:
        return None
    module = sys.modules.get(modname)
    if module is None or getattr(module, qualname, None) is not value:
        return None
    return f"from {modname} import {qualname}"


def _literal(value) -> str | None:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001
        return None
    try:
        if ast.literal_eval(text) == value and type(ast.literal_eval(text)) is type(value):
            return text
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.dtype):
        return text  # "torch.float32": evaluated after `import torch`
    return None


class _Serialiser:
    def __init__(self, home_module: str | None):
        self.home = home_module
        self.imports: list[str] = []
        self.constants: list[str] = []
        self.blocks: list[str] = []
        self.notes: list[str] = []
        self.done: set[int] = set()

    def add(self, obj) -> None:
        if id(obj) in self.done:
            return
        self.done.add(id(obj))
        source = _source_of(obj)
        self._bind_globals(source, _namespace(obj), obj.__name__)
        self.blocks.append(source)

    def _bind_globals(self, source: str, ns: dict, own: str) -> None:
        try:
            names = _global_names(source)
        except SyntaxError as e:
            raise TargetSourceError(f"the source of {own!r} does not parse on its own: {e}") from None
        for name in names:
            if name == own or name not in ns:
                continue  # itself, a builtin, or (an error in the student's code) undefined
            value = ns[name]
            if getattr(builtins, name, object()) is value:
                continue
            self._bind(name, value)

    def _add_lambda(self, name: str, value) -> bool:
        """A lambda global: its assignment line, after what it refers to; False when it cannot be recovered."""
        text = _lambda_assignment(name, value)
        if text is None:
            return False
        if id(value) not in self.done:
            self.done.add(id(value))
            self._bind_globals(text, dict(value.__globals__), name)
            self.blocks.append(text + "\n")
        return True

    def _bind(self, name: str, value) -> None:
        if isinstance(value, types.ModuleType):
            if _HEADER_BINDINGS.get(name) == value.__name__:
                return
            line = f"import {value.__name__}" if value.__name__ == name else f"import {value.__name__} as {name}"
            self._once(self.imports, line)
            return
        if inspect.isclass(value) or inspect.isfunction(value) or inspect.isbuiltin(value) or callable(value):
            same_home = getattr(value, "__module__", None) in (self.home, "__main__")
            text = None if same_home else _importable(value)
            if text is not None:
                qualname = getattr(value, "__qualname__", None) or value.__name__
                self._once(self.imports, text + ("" if qualname == name else f" as {name}"))
                return
            if inspect.isfunction(value) and value.__name__ == "<lambda>":
                if self._add_lambda(name, value):
                    return
            elif inspect.isclass(value) or inspect.isfunction(value):
                try:
                    self.add(value)
                    if value.__name__ != name:
                        self._once(self.constants, f"{name} = {value.__name__}")
                    return
                except TargetSourceError:
                    pass
        literal = _literal(value)
        if literal is not None:
            self._once(self.constants, f"{name} = {literal}")
            return
        self.notes.append(f"the global {name!r} ({type(value).__name__}) used by the code could not be carried "
                          "into the checked copy; make it a constructor argument or define it inside the class")
        self._once(self.constants, f"# mha-check: the global {name!r} ({type(value).__name__}) was not carried over")

    @staticmethod
    def _once(bucket: list, line: str) -> None:
        if line not in bucket:
            bucket.append(line)

    def text(self) -> str:
        parts = ["# Written by mha-check from the notebook's source: what the target refers to, then the target.",
                 HEADER.rstrip("\n")]
        parts += self.imports
        parts += self.constants
        return "\n".join(parts) + "\n\n\n" + "\n\n\n".join(b.rstrip("\n") for b in self.blocks) + "\n"


def serialise(obj) -> tuple[str, list[str]]:
    """Source text of a self-contained module defining `obj` (a class or function) under its own name."""
    ser = _Serialiser(getattr(obj, "__module__", None))
    ser.add(obj)
    return ser.text(), ser.notes


@contextlib.contextmanager
def resolved_target(target, source: bool | None = None):
    """Yield a `Resolved` for a target string, class, factory function or nn.Module instance; a temporary file
    holding serialised source is removed afterwards."""
    if isinstance(target, os.PathLike):
        target = os.fspath(target)
    if isinstance(target, str):
        yield Resolved(target, target)
        return
    notes = []
    obj = target
    if _is_module_instance(target):
        obj = type(target)
        notes.append(f"an nn.Module instance is checked through its class {obj.__name__}: mha-check builds its own "
                     "instances with its own configurations; this instance's arguments and weights are not used")
    if not (inspect.isclass(obj) or inspect.isfunction(obj)):
        raise TargetSourceError(f"cannot check a {type(target).__name__}: give a class, a factory function, an "
                                "nn.Module instance or a target string such as 'attn.py:MyAttn'")
    spec = None if source else _file_spec(obj)
    if spec is not None:
        rel = spec
        with contextlib.suppress(ValueError):
            rel = os.path.relpath(spec)
        yield Resolved(spec, rel if not rel.startswith("..") else spec, notes)
        return
    if source is False:
        raise TargetSourceError(f"{obj.__qualname__} does not live at the top level of an importable .py file, "
                                "and source=False forbids serialising its source")
    text, more = serialise(obj)
    folder = tempfile.mkdtemp(prefix="mha-check-src-")
    try:
        path = os.path.join(folder, f"{SOURCE_COPY_PREFIX}{obj.__name__}.py")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        yield Resolved(f"{path}:{obj.__name__}", f"{obj.__name__} (from its source)", notes + more, text)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


SOURCE_HELP = ("mha-check runs your code in a separate process, so it needs the code's source: define the class in "
               "a notebook cell or a .py file (not with exec or type()), or check 'file.py:ClassName'")


def check(target, *, only=None, skip=None, seed: int = 0, examples: int = 6, args: dict | None = None,
          weight_map: dict | None = None, source: bool | None = None, diagnose: bool = True, rules: bool = True,
          debug: bool = False) -> NotebookReport:
    """Run mha-check on `target` ("file.py:Class", "module:Class", a class, a factory function or an nn.Module
    instance) and return the report.  See the module docstring for how Python objects reach the child process."""
    if examples < 1:
        raise ValueError("examples must be at least 1")
    options = Options(only=ids(only), skip=ids(skip), seed=seed, examples=examples, overrides=dict(args or {}),
                      weight_map=dict(weight_map or {}), rules=rules, diagnose=diagnose, debug=debug)
    try:
        with resolved_target(target, source) as resolved:
            try:
                report = run_checks(resolved.spec, options)
            except UsageError as e:
                raise ValueError(str(e)) from None
    except TargetSourceError as e:
        if source is False or not (inspect.isclass(target) or inspect.isfunction(target)
                                   or _is_module_instance(target)):
            raise  # the caller's own request (source=False, a value that is not code): theirs to fix
        name = getattr(target, "__qualname__", None) or type(target).__name__  # our limit: the code is not wrong
        return NotebookReport.from_report(not_run(name, str(e), options, fix=SOURCE_HELP, ours=True))
    report.target = resolved.display
    loading = [n for n in report.adapter.notes if n not in resolved.notes]  # a notebook's cells
    return NotebookReport.from_report(report, resolved.notes + loading, resolved.source)


def plot_leakage(target, path, heads: bool = True, *, seed: int = 0, args: dict | None = None,
                 weight_map: dict | None = None, source: bool | None = None) -> dict:
    """Draw the leakage map of `target` (any form `check` takes) to `path`; returns {"path", "headline", "config",
    "panels": [{"label", "leaks", "dead", "verdict"}], "notes"}, or {"path": None, "error"} when the module cannot be
    built or run.  RuntimeError, before any work, when matplotlib is missing."""
    plot.require_matplotlib()
    with resolved_target(target, source) as resolved:
        subject = single_run(resolved.spec, overrides=dict(args or {}), seed=seed, weight_map=dict(weight_map or {}))
        try:
            maps = leakage.maps_or_error(Context(subject, seed), heads)
        finally:
            subject.close()
    if maps.error:
        return {"path": None, "error": maps.error}
    headline = plot.draw(maps, path, title=resolved.display)
    return {"path": str(path), "headline": headline, "config": maps.config, "notes": list(maps.notes),
            "panels": [{k: v for k, v in p.to_dict().items() if k != "G"} for p in maps.panels]}

