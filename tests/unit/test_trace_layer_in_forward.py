"""The detector of weights made inside forward (layer-made-in-forward), on forwards recorded in this process:
`nn.Linear` constructed in forward and `torch.randn` weights are marked at their line; a hand-written dropout mask
drawn with torch.rand, and layers built once in __init__, are not."""
from __future__ import annotations

import inspect

import torch
import torch.nn as nn

from harness.child.recorders import TraceRecorder
from harness.engine.trace.analysis import analyse
from harness.engine.trace.vocabulary import WORKED


class Attention(nn.Module):
    """The lesson's layer (d=8, 2 heads), its output projection `out` made once in __init__ unless `lazy`."""

    def __init__(self, lazy: str = ""):
        super().__init__()
        self.lazy = lazy
        self.q, self.k, self.v = (nn.Linear(8, 8, bias=False) for _ in range(3))
        self.out = nn.Linear(8, 8)
        self.register_buffer("mask", torch.triu(torch.ones(16, 16), 1).bool())

    def forward(self, x):
        B, n, d = x.shape
        split = lambda t: t.view(B, n, 2, 4).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        w = torch.softmax((q @ k.transpose(2, 3) / 2.0).masked_fill(self.mask[:n, :n], float("-inf")), dim=-1)
        if self.lazy == "dropout by hand":
            w = w * (torch.rand(w.shape) > 0.1) / 0.9
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)
        if self.lazy == "linear":
            out = nn.Linear(d, d)  # the line marked
            return out(ctx)
        if self.lazy == "randn":
            W_o = torch.randn(d, d)  # the line marked
            return ctx @ W_o
        if self.lazy == "parameter":
            W_o = nn.Parameter(torch.randn(d, d) / d ** 0.5)  # the line marked
            return ctx @ W_o
        if self.lazy == "transposed weight":  # made once in __init__, applied by hand: right
            return ctx @ self.out.weight.T + self.out.bias
        return self.out(ctx)


def _marks(lazy: str, whole: bool = False) -> list[tuple[str, str]]:
    """(mark id, the marked line's code) of one recorded forward of Attention(lazy); `whole`: with the marks on the
    forward as a whole (code "")."""
    module = Attention(lazy)
    x = torch.randn(2, 3, 8)
    names = {id(p): n for n, p in module.named_parameters()} | {id(x): "x"}  # as the worker names them
    recorder = TraceRecorder(inspect.getsourcefile(Attention), names)
    with torch.enable_grad(), recorder:  # as the worker records a forward: autograd on
        module(x)
    _, found, _ = analyse(recorder.ops, dict(WORKED))
    return [(m["id"], recorder.ops[m["step"] - 1]["code"] if m.get("step") else "") for m in found
            if m.get("step") or whole]


def test_a_linear_layer_constructed_in_forward_is_marked_at_its_line():
    assert ("layer-made-in-forward", "out = nn.Linear(d, d)  # the line marked") in _marks("linear")


def test_weights_drawn_with_randn_in_forward_are_marked_at_their_line():
    assert ("layer-made-in-forward", "W_o = torch.randn(d, d)  # the line marked") in _marks("randn")


def test_a_dropout_mask_drawn_by_hand_and_layers_made_in_init_are_not_marked():
    for lazy in ("", "dropout by hand"):
        assert [i for i, _ in _marks(lazy) if i == "layer-made-in-forward"] == [], lazy


def test_weights_drawn_as_an_nn_parameter_in_forward_are_marked_at_their_line_and_project_the_heads():
    """nn.Parameter(w) wraps w's memory in a new tensor that no torch operation makes: the trace lost it, so the
    weight drawn in forward was not marked, and its product with the merged heads was read as a mixing of values
    ("no output projection" was marked instead, and named by the report)."""
    marks = _marks("parameter", whole=True)
    assert ("layer-made-in-forward", "W_o = nn.Parameter(torch.randn(d, d) / d ** 0.5)  # the line marked") in marks
    assert "heads-not-projected" not in [i for i, _ in marks]


def test_a_weight_of_init_applied_by_hand_transposed_is_an_output_projection():
    assert _marks("transposed weight", whole=True) == []
