"""built-indivisible (no-divisibility-check's trace mark): told at the constructor's `def __init__` line, where the
guard belongs, in every case where that line is known, with the evidence in its words: a parameter H·(d // H) wide,
or a forward that raised.  A student's trial was pointed at `self.proj = nn.Linear(head_size * num_heads, n_embd)`
while the fix said "at the top of __init__", and given no line at all for a layer whose forward raised."""
from __future__ import annotations

from harness.engine.trace.analysis import analyse
from harness.engine.trace.vocabulary import WORKED

INIT = {"at": "attn.py:17", "code": "def __init__(self, d_in, d_out, context_length, dropout, num_heads):"}
SHORT = [{"at": "attn.py:22", "code": "self.proj = nn.Linear(head_size * num_heads, n_embd)", "shape": [8, 6]},
         {"at": "attn.py:21", "code": "self.W_q = nn.Linear(n_embd, inner)", "shape": [6, 8]}]


def marks(indivisible: dict) -> list[dict]:
    _, found, _ = analyse([], {**WORKED, "indivisible": {"d_out": 8, "heads": 3, "params": [], **indivisible}},
                          complete=False)
    return [m for m in found if m["id"] == "built-indivisible"]


def test_a_short_parameter_is_told_at_def_init_with_the_parameter_as_evidence():
    [mark] = marks({"params": SHORT, "init": INIT})
    assert (mark["at"], mark["code"]) == (INIT["at"], INIT["code"])
    assert "the parameter made at attn.py:21 has 6 = 3 x 2 features" in mark["text"]


def test_without_the_constructors_line_the_first_short_parameter_is_the_line():
    [mark] = marks({"params": SHORT})
    assert mark["at"] == "attn.py:21" and "this parameter has 6 = 3 x 2 features" in mark["text"]


def test_a_forward_that_raised_is_told_at_def_init_and_says_it_raised():
    [mark] = marks({"raised": "RuntimeError: shape '[2, 3, 3, 2]' is invalid for input of size 48",
                    "raised_at": "attn.py:32", "init": INIT})
    assert (mark["at"], mark["code"]) == (INIT["at"], INIT["code"])
    assert "the layer's forward then raised at attn.py:32, far from the cause (RuntimeError: shape" in mark["text"]
    assert "cover" not in mark["text"] and "dropped" not in mark["text"]


def test_a_layer_the_heads_divide_or_with_no_evidence_is_not_marked():
    assert marks({"init": INIT}) == []
    assert marks({"params": [{**SHORT[0], "shape": [8, 8]}], "init": INIT}) == []


def test_a_forward_that_refuses_the_width_itself_is_not_told_that_nothing_refuses_it():
    """torchtext's container asserts in forward that the heads divide the width: late, but a refusal."""
    assert marks({"raised": "AssertionError: query's embed_dim must be divisible by the number of heads",
                  "raised_at": "attn.py:133", "init": INIT}) == []


MASK_REQUIRED = '''
import torch
from torch import nn


class MHA(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.h = n_heads
        self.q, self.k, self.v, self.o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, mask=None):
        assert mask is not None, "Mask is None, please specify a mask"
        B, n, d = x.shape
        split = lambda t: t.view(B, n, self.h, d // self.h).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        s = (q @ k.transpose(-1, -2) / (d // self.h) ** 0.5).masked_fill(mask == 0, float("-inf"))
        return self.o((s.softmax(-1) @ v).transpose(1, 2).reshape(B, n, d))
'''


def test_the_indivisible_build_is_called_the_proven_way(tmp_path):
    """Realzoo24 (ParlAI's MultiHeadAttention, whose forward asserts that a mask is given): the trace said the
    layer's forward "then raised ... far from the cause (AssertionError: Mask is None, please specify a mask)" - its
    build for the indivisible width was called as forward(x), not with the mask the proof found; the raise was
    mha-check's call, not the width's.  Called the proven way it raises where the heads are split."""
    from harness.child.inprocess import InProcess
    from harness.frontends.trace import trace
    from harness.sandbox.subject import Subject
    path = tmp_path / "layer.py"
    path.write_text(MASK_REQUIRED)
    result = trace(f"{path}:MHA", make_subject=lambda spec, overrides, seed, weight_map: Subject(
        spec, overrides, seed, start=InProcess()))
    [mark] = [m for m in result.mistakes if m["id"] == "built-indivisible"]
    assert "Mask is None" not in mark["text"] and "far from the cause (RuntimeError: shape" in mark["text"], mark
