"""Hostile: looks in its own process's memory for a layer of mha-check's (the warm template's rehearsal layer, which a
child forked from it inherits): every subclass of nn.Module defined by mha-check's modules, the objects the garbage
collector knows of (its frozen heap thawed first), and the modules still loaded; subclasses what it finds.  Gets
full marks only if the layer it finds is a correct one: the template deletes its warm-up layer before it forks,
and the only layer it can make again is wrong by design."""
import gc

import torch
import torch.nn as nn
import sys

ESCAPED = []  # evidence that a wall gave way: a class of ours still in memory
FOUND = []


def subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from subclasses(sub)


gc.unfreeze()
for cls in list(subclasses(nn.Module)) + [o for o in gc.get_objects() if isinstance(o, type)]:
    if issubclass(cls, nn.Module) and (cls.__module__ or "").startswith(("harness", "reference", "mutants")):
        FOUND.append(cls)
        ESCAPED.append(f"class {cls.__module__}.{cls.__qualname__}")
for name, module in list(sys.modules.items()):
    make = getattr(module, "_rehearsal_layer", None) or getattr(getattr(module, "rehearsal", None),
                                                                 "_rehearsal_layer", None)
    if make is not None and name.startswith("harness"):
        FOUND.append(make())  # a factory left behind: it makes a layer wrong by design, not a wall that gave way
print("found:", [f"{c.__module__}.{c.__qualname__}" for c in FOUND])
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


class MyAttn(FOUND[0] if FOUND else _Own):
    """The first layer of mha-check's it found, else its own wrong one."""
