"""Child side: which top-level statements of a notebook cell define something, judged with `ast` alone.

A notebook is built into a module from its definitions only, so that a training loop, a download or a plot never
runs: imports, functions, classes, `MyAttn.forward = forward`, and constants.  A constant's value may call only what
cannot reach outside the process: builtins that compute (`int`, `len`, `max`...) and the modules a notebook computes
with (torch, math, numpy and torch.nn / torch.nn.functional, under the names the notebook imported them as), minus
their file and network functions (`torch.load`, `torch.hub...`).  `device = 'cuda' if torch.cuda.is_available()
else 'cpu'` is a constant; `model = MyAttn(...)`, `train(model)`, `requests.get(...)` are not.  A call inside a
lambda's body runs only when the lambda is called, so it does not count.  An `if` whose branches only define (a
constant chosen by the hardware) is a definition too, except the `if __name__ == "__main__":` block, which is the
script's "run me" part by convention.
"""
from __future__ import annotations

import ast

SAFE_MODULES = {"torch", "math", "numpy", "torch.nn", "torch.nn.functional"}
SAFE_BUILTINS = {"int", "float", "bool", "str", "complex", "len", "range", "tuple", "list", "dict", "set",
                 "frozenset", "max", "min", "abs", "round", "sum", "pow", "divmod", "sorted", "reversed", "zip",
                 "enumerate", "isinstance", "slice", "any", "all"}
UNSAFE_ATTRIBUTES = {"load", "save", "hub", "loadtxt", "savetxt", "genfromtxt", "fromfile", "tofile", "memmap",
                     "open", "download", "system", "seed", "manual_seed"}  # files, network, global state


def is_main_guard(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.If) and any(isinstance(n, ast.Name) and n.id == "__name__" for n in ast.walk(stmt.test))


class Filter:
    """Decides statement by statement, learning from the kept imports which names are safe modules."""

    def __init__(self):
        self.safe: set[str] = set()  # names bound to a safe module or to something imported from one

    def learn(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname and alias.name in SAFE_MODULES:
                    self.safe.add(alias.asname)
                elif not alias.asname and alias.name.split(".")[0] in SAFE_MODULES:
                    self.safe.add(alias.name.split(".")[0])  # import torch.nn.functional binds `torch`
        elif isinstance(stmt, ast.ImportFrom) and stmt.level == 0 and stmt.module:
            for alias in stmt.names:
                if stmt.module in SAFE_MODULES or f"{stmt.module}.{alias.name}" in SAFE_MODULES:
                    if alias.name not in UNSAFE_ATTRIBUTES:
                        self.safe.add(alias.asname or alias.name)

    def defines(self, stmt: ast.stmt) -> bool:
        if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return True
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name):  # MyAttn.forward = forward, D = D_MODEL
            return all(isinstance(t, (ast.Name, ast.Tuple)) or (isinstance(t, ast.Attribute) and
                       isinstance(t.value, ast.Name)) for t in stmt.targets)
        if isinstance(stmt, ast.Assign):
            return all(isinstance(t, (ast.Name, ast.Tuple)) for t in stmt.targets) and self._computes(stmt.value)
        if isinstance(stmt, ast.AnnAssign):
            return isinstance(stmt.target, ast.Name) and (stmt.value is None or self._computes(stmt.value))
        if isinstance(stmt, ast.If):
            return not is_main_guard(stmt) and self._computes(stmt.test) and all(
                isinstance(s, ast.Pass) or self.defines(s) for s in stmt.body + stmt.orelse)
        if isinstance(stmt, ast.Try):  # try: import fast_thing / except ImportError: import slow_thing
            return all(isinstance(s, (ast.Import, ast.ImportFrom, ast.Pass)) for s in stmt.body + [
                s for h in stmt.handlers for s in h.body])
        return False

    def _computes(self, expr: ast.expr) -> bool:
        """Evaluating `expr` only computes: no call of anything but safe callees, no await / yield / walrus."""
        todo = [expr]
        while todo:
            node = todo.pop()
            if isinstance(node, (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
                return False
            if isinstance(node, ast.Call) and not self._safe_callee(node.func):
                return False
            if isinstance(node, ast.Lambda):  # the body runs when called; the defaults run now
                todo.extend(d for d in node.args.defaults + node.args.kw_defaults if d is not None)
                continue
            todo.extend(ast.iter_child_nodes(node))
        return True

    def _safe_callee(self, func: ast.expr) -> bool:
        attributes = []
        while isinstance(func, ast.Attribute):
            attributes.append(func.attr)
            func = func.value
        if not isinstance(func, ast.Name) or UNSAFE_ATTRIBUTES.intersection(attributes):
            return False
        return func.id in self.safe or (not attributes and func.id in SAFE_BUILTINS)
