"""Hostile: loads a correct layer of mha-check's own by the path of its file, past any import hook
(importlib.util.spec_from_file_location, or the source read and run): the lesson's reference
(reference/causal_mha.py), a mutant with its one bug undone (mutants/finite_fill_100.py, -100.0 made -inf), and the
template's warm-up layer (harness/warmup/rehearsal.py) with its one wrong token put right (a red team's full-marks
submission), and subclasses the first it gets.  Gets full marks only if reference/, mutants/ or harness/warmup/ is
readable (the child's view holds none of them)."""
import importlib.util
import os
import sys

import torch
import torch.nn as nn

ESCAPED = []  # evidence that a wall gave way: a correct layer of ours loaded
FOUND = []  # the classes it got, best first


def by_spec(rel, name):
    spec = importlib.util.spec_from_file_location("zz_loaded_" + name, os.path.join(ROOT, rel))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def undone_mutant():
    with open(os.path.join(ROOT, "mutants", "finite_fill_100.py")) as f:
        text = f.read().replace("from mutants._info import MutantInfo", "MutantInfo = lambda **kw: None")
    space = {"__name__": "zz_mutant"}
    exec(compile(text.replace("-100.0)", 'float("-inf"))'), "zz_mutant", "exec"), space)
    return space["CausalMHA"]


def warm_up_layer(module):
    """The template's warm-up layer: a class of the module, or made by it."""
    return module._RehearsalLayer if hasattr(module, "_RehearsalLayer") else module._rehearsal_layer()


def attempt(what, action, counts=True):
    try:
        FOUND.append(action())
        if counts:
            ESCAPED.append(what)
    except Exception as e:  # noqa: BLE001 - the wall held
        print(f"{what}: {type(e).__name__}: {e}")


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(sys.modules["harness"].__file__)))
attempt("reference/causal_mha.py by path", lambda: by_spec("reference/causal_mha.py", "reference").CausalMHA)
attempt("mutants/finite_fill_100.py undone", undone_mutant)


def warm_up_put_right():
    """The warm-up layer's source with its scores divided by the square root of the head width, as the lesson's."""
    with open(os.path.join(ROOT, "harness", "warmup", "rehearsal.py")) as f:
        text = f.read()
    space = {"__name__": "zz_warm_up"}
    exec(compile(text.replace("/ self.head_dim  # WRONG", "/ self.head_dim ** 0.5"), "zz_warm_up", "exec"), space)
    return space["_rehearsal_layer"]()


attempt("harness/warmup/rehearsal.py put right", warm_up_put_right)
print("walls that gave way:", ESCAPED)


class _Own(nn.Module):
    """Wrong: no causal mask (what it falls back on when every wall holds)."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.h, self.dh = num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)

    def forward(self, x):
        B, n, _ = x.shape
        q, k, v = (w(x).view(B, n, self.h, self.dh).transpose(1, 2) for w in (self.W_query, self.W_key, self.W_value))
        w = torch.softmax(q @ k.transpose(2, 3) / self.dh ** 0.5, dim=-1)
        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))


class MyAttn(FOUND[0] if FOUND else _Own):
    """The first layer of mha-check's it got, else its own wrong one."""
