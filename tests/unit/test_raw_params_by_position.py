"""Raw parameters whose names say no role, read by their order (issue 28, a student trial): `nn.ParameterList([W_q,
W_k, W_v, W_o])` used as `x @ W`, or one stacked `W` of shape (3, d, d) used as `x @ W[0]`, `x @ W[1]`, `x @ W[2]`
beside `W_out`, had no reading: every weight check could not tell, and a layer that forgot to scale its scores ended
with zero failing checks.  A reading is right only if the lesson's functional reference, given it, reproduces the
layer in float64; none is certain (the proof on the trusted side decides among them)."""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from harness.child.layouts import discover
from harness.child.raw_params import by_position
from reference.causal_mha import mha_forward


class _Raw(nn.Module):
    """Causal MHA on raw matrices: `style` says how they are kept ("list": a ParameterList of four, "stacked": one
    (3, ., .) parameter and an output matrix) and `x_at_w` how they are used (x @ W, or F.linear's W x)."""

    def __init__(self, d_in, d_out, heads, style, x_at_w=True, qkv_bias=False):
        super().__init__()
        self.h, self.x_at_w = heads, x_at_w
        g = torch.Generator().manual_seed(0)
        shape = (d_in, d_out) if x_at_w else (d_out, d_in)
        make = lambda *s: nn.Parameter(torch.randn(*s, generator=g, dtype=torch.float64) / math.sqrt(d_in))
        if style == "list":
            self.mats = nn.ParameterList([make(*shape) for _ in range(3)] + [make(d_out, d_out)])
        else:
            self.W = make(3, *shape)
            self.W_out = make(d_out, d_out)
        self.style = style
        if qkv_bias:
            self.bias_q, self.bias_k, self.bias_v = (make(d_out) for _ in range(3))
        self.qkv_bias = qkv_bias
        self.bias_o = make(d_out)

    def _proj(self, x, w, b=None):
        return (x @ w if self.x_at_w else F.linear(x, w)) + (0 if b is None else b)

    def forward(self, x):
        B, n, _ = x.shape
        ws = list(self.mats[:3]) if self.style == "list" else [self.W[i] for i in range(3)]
        out = self.mats[3] if self.style == "list" else self.W_out
        bs = (self.bias_q, self.bias_k, self.bias_v) if self.qkv_bias else (None,) * 3
        q, k, v = (self._proj(x, w, b).view(B, n, self.h, -1).transpose(1, 2) for w, b in zip(ws, bs))
        s = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).masked_fill(
            torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        y = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, n, -1)
        return y @ out + self.bias_o if self.x_at_w else F.linear(y, out, self.bias_o)


def _reproduces(layer: nn.Module, layout, heads: int, d_in: int) -> bool:
    w = layout.read()
    x = torch.randn(2, 5, d_in, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    ref = mha_forward(x, heads, w["wq"], w["wk"], w["wv"], w["wo"], bq=w.get("bq"), bk=w.get("bk"), bv=w.get("bv"),
                      bo=w.get("bo"))
    with torch.no_grad():
        return torch.allclose(layer(x), ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("style", ["list", "stacked"])
@pytest.mark.parametrize("x_at_w", [True, False], ids=["x@W", "Wx"])
@pytest.mark.parametrize("d_in,d_out,heads,qkv_bias", [(8, 8, 2, False), (6, 8, 4, True), (8, 8, 1, True)])
def test_raw_parameters_are_read_by_order(style, x_at_w, d_in, d_out, heads, qkv_bias):
    layer = _Raw(d_in, d_out, heads, style, x_at_w, qkv_bias)
    assert discover(layer, d_in, d_out, heads)[0] == []  # no reading by names or nn.Linear layers: why this exists
    found = by_position(layer, d_in, d_out)
    assert found and not any(lay.certain for lay in found)
    assert sum(_reproduces(layer, lay, heads, d_in) for lay in found) == 1


def test_the_stacked_reading_names_each_slice():
    found = by_position(_Raw(8, 8, 2, "stacked"), 8, 8)
    assert found[0].describe() == {"wq": "W[0].T", "wk": "W[1].T", "wv": "W[2].T", "wo": "W_out.T", "bo": "bias_o"}


def test_parameters_that_are_not_the_lessons_are_not_read_by_order():
    """A normalisation's weight, a fifth matrix or a single-head layer: what the order would mean is unknown."""
    layer = _Raw(8, 8, 2, "list")
    layer.norm = nn.LayerNorm(8, dtype=torch.float64)  # weight and bias beside b_o: three vectors, no known order
    assert by_position(layer, 8, 8) == []
    layer = _Raw(8, 8, 2, "list")
    layer.extra = nn.Parameter(torch.zeros(8, 8, dtype=torch.float64))
    assert by_position(layer, 8, 8) == []
    assert by_position(_Raw(8, 8, 2, "list"), 8, 8, out_proj=False) == []
    assert by_position(_Raw(8, 8, 2, "list"), 8, 16) == []  # the sizes are not the configuration's
