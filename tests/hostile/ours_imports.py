"""Hostile: imports a correct layer of mha-check's own, every way a module name allows: the reference (`reference`,
`reference.causal_mha`, through importlib and with mha-check's folder put first on sys.path), the mutants (one of
them made right by subclassing), the checks' numpy reference, and the template's warm-up layer
(`harness.warmup.rehearsal`), and subclasses the first it gets; gets full marks only if one of them imports."""
import importlib
import os
import sys

import torch
import torch.nn as nn

ESCAPED = []  # evidence that a wall gave way
FOUND = []  # the classes it got


def attempt(what, action):
    try:
        FOUND.append(action())
        ESCAPED.append(what)
    except Exception as e:  # noqa: BLE001 - the wall held
        print(f"{what}: {type(e).__name__}: {e}")


def warm_up_layer(module):
    """The template's warm-up layer: a class of the module, or made by it."""
    return module._RehearsalLayer if hasattr(module, "_RehearsalLayer") else module._rehearsal_layer()


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(sys.modules["harness"].__file__)))
attempt("import reference.causal_mha", lambda: __import__("reference.causal_mha", fromlist=["x"]).CausalMHA)
attempt("importlib reference.causal_mha", lambda: importlib.import_module("reference.causal_mha").CausalMHA)
attempt("import mutants", lambda: importlib.import_module("mutants.no_scaling").CausalMHA)
attempt("import reference.numpy_ref", lambda: importlib.import_module("reference.numpy_ref").forward)
attempt("import harness.engine", lambda: importlib.import_module("harness.engine.context").numpy_ref.forward)
attempt("import harness.warmup.rehearsal", lambda: warm_up_layer(importlib.import_module("harness.warmup.rehearsal")))
sys.path.insert(0, ROOT)
for name in ("reference", "reference.causal_mha", "mutants"):
    sys.modules.pop(name, None)
attempt("sys.path first, import reference", lambda: importlib.import_module("reference.causal_mha").CausalMHA)
print("walls that gave way:", ESCAPED)


class _Own(nn.Module):
    """Wrong: no causal mask."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.h, self.dh = num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)

    def forward(self, x):
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)
        q, k, v = split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x))
        w = torch.softmax(q @ k.transpose(2, 3) / self.dh ** 0.5, dim=-1)
        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))


_Base = next((c for c in FOUND if isinstance(c, type)), _Own)


class MyAttn(_Base):
    """The first layer of mha-check's it got, else its own wrong one."""
