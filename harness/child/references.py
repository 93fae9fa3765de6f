"""Where a layer's own class code reads a layer outside `__init__`: whether a layer the trace never saw used is
dead code or only unused on mha-check's inputs.

A layer forward never touched on the worked example is the lesson's mistake "made and never used" only if nothing
but its constructor names it.  Compressive Transformer's `ConvCompress.conv` (Realzoo22) runs once the memories
overflow, on a branch mha-check's inputs never take, and is trained by an auxiliary loss: told "delete the layer", its
author would break it.  Read here, in the child, from the source of the classes on the layer's path (the student's
files; nothing is run): each attribute on the path must be read as `self.NAME` in a method of its owner's class other
than `__init__`.  Runs beside the student's code, as every reader of their source does."""
from __future__ import annotations

import ast
import inspect
import textwrap

import torch.nn as nn

from harness.child.notebook import code_at, location


def referenced(module: nn.Module, layer: str) -> dict | None:
    """{"at", "code"} of where the class that owns `layer` (a dotted path from `module`) reads it outside __init__,
    when every attribute on the path is so read by its owner's class; None when one is read nowhere but in
    __init__, or a class's source cannot be read."""
    found = None
    owner_path, _, attr = layer.rpartition(".")
    while attr:
        try:
            owner = module.get_submodule(owner_path) if owner_path else module
        except AttributeError:
            return None
        here = _read_in_methods(type(owner), attr)
        if here is None:
            return None
        found = found or here  # the innermost: where the layer itself is read
        owner_path, _, attr = owner_path.rpartition(".") if owner_path else ("", "", "")
    return found


def _read_in_methods(cls: type, attr: str) -> dict | None:
    """The first `self.ATTR` (or `self.ATTR[...]`, `getattr(self, "ATTR")`) in a method of `cls` or its own bases
    other than __init__, as {"at", "code"}; None if there is none or no source."""
    for klass in cls.__mro__:
        if klass in (nn.Module, object) or klass.__module__.startswith("torch."):
            continue
        try:
            lines, start = inspect.getsourcelines(klass)
            path = inspect.getsourcefile(klass)
            tree = ast.parse(textwrap.dedent("".join(lines)))
        except (OSError, TypeError, SyntaxError, ValueError):
            continue
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name == "__init__":
                continue
            for node in ast.walk(fn):
                if _reads(node, attr) and path:
                    line = start + node.lineno - 1
                    return {"at": location(path, line), "code": code_at(path, line)}
    return None


def _reads(node: ast.AST, attr: str) -> bool:
    if isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name) and \
            node.value.id == "self":
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" and \
        len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value == attr
