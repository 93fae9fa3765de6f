"""Where the constructor made a module's tensors (harness.child.recorders.OriginRecorder, Worker._origins): the
line that shaped a mask buffer (its tril/triu, not the `.bool()` or `register_buffer` after it), what its first
n x n positions mark, the line of the tensor a raw nn.Parameter wraps, and no trace of the extra build in the
generators the constructor drew from."""
import random

import numpy as np
import torch

_DTYPE = torch.get_default_dtype()
from harness.child import worker  # noqa: E402 - sets float64 as the process's default dtype...

torch.set_default_dtype(_DTYPE)  # ...which the rest of the suite does not expect

from harness.wire import messages as m  # noqa: E402
from harness.wire.config import Config  # noqa: E402

LAYER = '''import random

import numpy as np
import torch
import torch.nn as nn


class Attn(nn.Module):
    def __init__(self, d_model, n_heads, block_size):
        super().__init__()
        self.h = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.noise = torch.randn(1) + random.random() + float(np.random.rand())  # draws from every generator
        keep = torch.tril(torch.ones(block_size, block_size), diagonal=1)
        self.register_buffer("keep", keep.bool())
        self.hidden = torch.triu(torch.ones(block_size, block_size), 1)  # a plain attribute, right
        self.masks = {t: torch.ones(t, t).triu(1) for t in (2, 3)}  # a plain dict of masks
        nn.init.normal_(self.proj.weight, std=0.02)  # filled again: the layer's line stays the weight's
        self.W_o = nn.Parameter(torch.randn(d_model, d_model) / d_model ** 0.5)  # wraps the quotient, no operation

    def forward(self, x):
        return self.proj(x) @ self.W_o
'''


def test_a_buffers_line_is_the_one_that_shaped_it_and_the_generators_are_left_as_they_were(tmp_path):
    path = tmp_path / "attn.py"
    path.write_text(LAYER)
    torch.set_default_dtype(torch.float64)
    try:
        w = worker.Worker(own_process=False)
        w.answer(m.Load(f"{path}:Attn", str(tmp_path)))
        handle = w.answer(m.Build(Config(8, 8, 2, 7).to_dict(), handle=0)).handle
        inst = w.instances[handle]
        before = (torch.random.get_rng_state(), random.getstate(), np.random.get_state()[1].copy())
        origins = w._origins(inst, 3)
        after = (torch.random.get_rng_state(), random.getstate(), np.random.get_state()[1].copy())
    finally:
        torch.set_default_dtype(_DTYPE)
    assert torch.equal(before[0], after[0]) and before[1] == after[1] and np.array_equal(before[2], after[2])
    module = inst["module"]
    keep, hidden = origins[id(module.keep)], origins[id(module.hidden)]
    assert keep["at"] == "attn.py:15" and keep["code"].startswith("keep = torch.tril(")
    assert keep["nonzero"] == [[1, 1, 0], [1, 1, 1], [1, 1, 1]]
    assert hidden["at"] == "attn.py:17" and hidden["nonzero"] == [[0, 1, 1], [0, 0, 1], [0, 0, 0]]
    weight, proj = origins[id(module.qkv.weight)], origins[id(module.proj.weight)]  # a parameter: where its layer
    # was built (the line a construction mistake such as bias=False is on), a weight, not a mask: no pattern
    assert (weight["at"], weight["kind"], weight["path"]) == ("attn.py:12", "parameter", "qkv.weight")
    assert "nonzero" not in weight and proj["at"] == "attn.py:13"
    raw = origins[id(module.W_o)]  # a raw Parameter: the line of the quotient it wraps (a student's full-width W_q
    # had no line, and its mistake none)
    assert (raw["at"], raw["kind"], raw["path"]) == ("attn.py:20", "parameter", "W_o")
    cached = origins[id(module.masks[3])]  # a tensor of a plain container: its path names the key
    assert (cached["at"], cached["kind"], cached["path"]) == ("attn.py:18", "container", "masks[3]")
    assert cached["nonzero"] == [[0, 1, 1], [0, 0, 1], [0, 0, 0]]


COUNTING = '''import torch
import torch.nn as nn

BUILT = []


class Attn(nn.Module):
    def __init__(self, d_model, n_heads, block_size):
        super().__init__()
        BUILT.append(block_size)  # a constructor with a side effect (a print, say): it must run once per build
        self.proj = nn.Linear(d_model, d_model)
        self.register_buffer("mask", torch.triu(torch.ones(block_size, block_size), 1).bool())

    def forward(self, x):
        n = x.shape[1]
        w = torch.softmax((x @ x.transpose(1, 2)).masked_fill(self.mask[:n, :n], float("-inf")), dim=-1)
        return self.proj(w @ x)
'''


def test_a_traced_build_notes_its_lines_as_it_is_built_so_the_constructor_runs_once(tmp_path):
    """`mha-check trace` ran the student's constructor twice for the traced module (the build, then a twin to learn
    where the mask was made): a constructor that prints printed twice.  A Build that asks for its origins notes
    the lines while it builds; the trace reads them and builds nothing more."""
    path = tmp_path / "attn.py"
    path.write_text(COUNTING)
    torch.set_default_dtype(torch.float64)
    try:
        w = worker.Worker(own_process=False)
        w.answer(m.Load(f"{path}:Attn", str(tmp_path)))
        handle = w.answer(m.Build(Config(8, 8, 2, 7).to_dict(), handle=0, origins=True)).handle
        built = w.target.obj.__init__.__globals__["BUILT"]
        assert built == [7]
        reply = w.answer(m.Trace(handle, np.random.default_rng(0).standard_normal((2, 3, 8)), 400, 0))
    finally:
        torch.set_default_dtype(_DTYPE)
    assert built == [7]  # the trace built no twin
    mask = next(t for op in reply.ops for t in op["in"] if t.get("name") == "mask")
    assert mask["made"]["at"] == "attn.py:12" and mask["made"]["nonzero"] == [[0, 1, 1], [0, 0, 1], [0, 0, 0]]


FILLED_LATER = '''import torch
import torch.nn as nn
from torch.nn.utils import skip_init


class Attn(nn.Module):
    def __init__(self, d_model, n_heads, block_size):
        super().__init__()
        self.qkv = skip_init(nn.Linear, d_model, 3 * d_model, bias=False)
        self.proj = skip_init(nn.Linear, d_model, d_model, bias=False)
        self.W_o = nn.Parameter(torch.empty(d_model, d_model))
        self._reset_parameters()

    def _reset_parameters(self):
        nn.init.xavier_uniform_(self.W_o)

    def forward(self, x):
        return self.proj(x) @ self.W_o


def build(d_model, n_heads, block_size):
    m = Attn(d_model, n_heads, block_size)
    for p in m.parameters():
        nn.init.xavier_uniform_(p)
    return m
'''


def test_a_parameter_filled_later_keeps_the_line_that_made_it(tmp_path):
    """OpenNMT-py 3.5 builds its projections with torch.nn.utils.skip_init (meta, then to_empty: a new Parameter
    over fresh memory) and its model builder fills them afterwards: trace said the output projection "was built
    without [a bias] at" the factory's `nn.init.xavier_uniform_(p)` line.  A Parameter's line is where its memory
    was made (the skip_init line; `nn.Parameter(torch.empty(...))`, not the reset method that fills it)."""
    path = tmp_path / "attn.py"
    path.write_text(FILLED_LATER)
    torch.set_default_dtype(torch.float64)
    try:
        w = worker.Worker(own_process=False)
        w.answer(m.Load(f"{path}:build", str(tmp_path)))
        handle = w.answer(m.Build(Config(8, 8, 2, 7).to_dict(), handle=0)).handle
        inst = w.instances[handle]
        origins = w._origins(inst, 3)
    finally:
        torch.set_default_dtype(_DTYPE)
    module = inst["module"]
    assert origins[id(module.qkv.weight)]["at"] == "attn.py:9"
    assert origins[id(module.proj.weight)]["at"] == "attn.py:10"
    assert origins[id(module.W_o)]["at"] == "attn.py:11"
