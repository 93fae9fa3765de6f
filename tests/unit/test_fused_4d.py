"""One fused 4-D parameter for W_q, W_k, W_v, one matrix per role and head (issue 28, "readings decided by
evidence"): `w_qkv = nn.Parameter(torch.randn(3, H, d, dh))` used as `q, k, v = einsum('btd,shde->sbhte', x, w_qkv)`
had no reading at all, so a correct layer's weight checks could not tell.  Each layer here is checked against the
lesson's reference in float64 with the reading mha-check offers: a reading is only right if the reference then
reproduces the layer, and weights written through it are the ones the layer computes with."""
import math

import pytest
import torch
import torch.nn as nn

from harness.child.layouts import discover, without_out_proj
from harness.engine.context import _reading
from reference.causal_mha import mha_forward

# (shape of the fused parameter given (d_in, H, dh), einsum of x with it to (role, b, h, t, e))
LAYOUTS = {
    "role first (3, H, d, dh)": (lambda d, h, e: (3, h, d, e), "btd,shde->sbhte"),
    "heads first (H, 3, d, dh)": (lambda d, h, e: (h, 3, d, e), "btd,hsde->sbhte"),
    "width first (d, 3, H, dh)": (lambda d, h, e: (d, 3, h, e), "btd,dshe->sbhte"),
    "role, width, heads (3, d, H, dh)": (lambda d, h, e: (3, d, h, e), "btd,sdhe->sbhte"),
    "head width before d (3, H, dh, d)": (lambda d, h, e: (3, h, e, d), "btd,shed->sbhte"),
}


def _layer(layout: str, d_in: int, d_out: int, heads: int, out: str = "linear", bias: bool = False) -> nn.Module:
    """`out`: "linear" (an nn.Linear out_proj), "3d" (w_o (H, dh, d_out)), "3d-width-first" (w_o (d_out, H, dh)),
    "none" (the heads concatenated and returned)."""
    shape, spec = LAYOUTS[layout]

    class Fused(nn.Module):
        def __init__(self):
            super().__init__()
            self.H, self.dh = heads, d_out // heads
            g = torch.Generator().manual_seed(0)
            self.w_qkv = nn.Parameter(torch.randn(shape(d_in, heads, self.dh), generator=g, dtype=torch.float64))
            self.heads_first = layout.startswith("heads first")
            if bias:  # laid out as the weight is: (H, 3, dh) beside a heads-first one, else (3, H, dh)
                self.b_qkv = nn.Parameter(torch.randn((heads, 3, self.dh) if self.heads_first else (3, heads, self.dh),
                                                      generator=g, dtype=torch.float64))
            if out == "3d":
                self.w_o = nn.Parameter(torch.randn(heads, self.dh, d_out, generator=g, dtype=torch.float64))
            elif out == "3d-width-first":
                self.w_o = nn.Parameter(torch.randn(d_out, heads, self.dh, generator=g, dtype=torch.float64))
            elif out == "linear":
                self.out_proj = nn.Linear(d_out, d_out, dtype=torch.float64)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = torch.einsum(spec, x, self.w_qkv)
            if bias:
                per_role = self.b_qkv.transpose(0, 1) if self.heads_first else self.b_qkv  # (3, H, dh)
                q, k, v = (t + per_role[i, :, None, :] for i, t in enumerate((q, k, v)))
            s = torch.einsum("bhte,bhse->bhts", q, k) / math.sqrt(self.dh)
            s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
            y = torch.einsum("bhts,bhse->bhte", torch.softmax(s, dim=-1), v)
            if out == "3d":
                return torch.einsum("bhte,hed->btd", y, self.w_o)
            if out == "3d-width-first":
                return torch.einsum("bhte,dhe->btd", y, self.w_o)
            merged = y.transpose(1, 2).reshape(b, t, d_out)
            return merged if out == "none" else self.out_proj(merged)
    return Fused()


def _x(d_in: int) -> torch.Tensor:
    return torch.randn(2, 5, d_in, generator=torch.Generator().manual_seed(1), dtype=torch.float64)


def _reproduces(layer: nn.Module, layout, heads: int, d_in: int) -> bool:
    w = layout.read()
    x = _x(d_in)
    ref = mha_forward(x, heads, w["wq"], w["wk"], w["wv"], w.get("wo", torch.eye(w["wq"].shape[0],
                                                                                   dtype=torch.float64)),
                      w.get("bq"), w.get("bk"), w.get("bv"), w.get("bo"))
    with torch.no_grad():
        return torch.allclose(layer(x), ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("out", ["linear", "3d", "3d-width-first"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_fused_4d_layout_is_read_and_one_reading_reproduces_the_layer(layout, out):
    layer = _layer(layout, 6, 8, 2, out)
    found, problem = discover(layer, 6, 8, 2)
    assert problem == "" and found, problem
    assert [_reproduces(layer, lay, 2, 6) for lay in found] == [True]  # sizes 6, 8, 2 heads of 4: one reading
    assert not found[0].certain  # q, k, v in that order is read, not known: the proof decides
    assert "fused q/k/v per head, axes" in found[0].how


def test_weights_written_through_the_reading_are_the_ones_the_layer_computes_with():
    """The trusted side transplants its own weights through the proven reading: written, they read back the same,
    and the layer then computes the reference with them."""
    layer = _layer("heads first (H, 3, d, dh)", 6, 8, 2, "3d")
    (layout,), _ = discover(layer, 6, 8, 2)
    g = torch.Generator().manual_seed(7)
    ours = {r: torch.randn(shape, generator=g, dtype=torch.float64)
            for r, shape in {"wq": (8, 6), "wk": (8, 6), "wv": (8, 6), "wo": (8, 8)}.items()}
    layout.write(ours)
    assert all(torch.equal(layout.read()[r], ours[r]) for r in ours)
    with torch.no_grad():
        assert torch.allclose(layer(_x(6)), mha_forward(_x(6), 2, *ours.values()), rtol=1e-10, atol=1e-12)


def test_with_three_heads_both_role_axes_are_offered_and_the_proven_one_is_found_again():
    """(3, 3, 6, 2) with 3 heads: either length-3 axis could be the role; both readings are offered (the proof
    decides, on the base configuration with 2 heads), and their texts tell the role axis apart, as
    `Context._same_layout` compares them with the proven one."""
    layer = _layer("heads first (H, 3, d, dh)", 6, 6, 3, "linear")
    found, _ = discover(layer, 6, 6, 3)
    assert len(found) == 2 and [_reproduces(layer, lay, 3, 6) for lay in found] == [False, True]
    proven = _reading("w_qkv[:, 0][0].T + w_qkv[:, 0][1].T")  # W_q as proven with two heads
    assert [_reading(lay.describe()["wq"]) == proven for lay in found] == [False, True]


def test_without_an_output_projection_it_is_read_alone_to_be_proven():
    layer = _layer("width first (d, 3, H, dh)", 8, 8, 2, "none")
    assert discover(layer, 8, 8, 2)[0] == []
    found = without_out_proj(layer, 8, 8, 2)
    assert [_reproduces(layer, lay, 2, 8) for lay in found] == [True] and not found[0].certain


def test_where_sizes_coincide_the_readings_stay_few():
    """One head, d = dh = 3: every length-3 axis could be the role, both orientations fit: each is offered, a
    handful, well within what the worker sends (`_within_bounds`)."""
    layer = _layer("role first (3, H, d, dh)", 3, 3, 1, "linear")
    found, _ = discover(layer, 3, 3, 1)
    assert 1 < len(found) <= 12 and any(_reproduces(layer, lay, 1, 3) for lay in found)


def test_a_4d_parameter_beside_named_projections_is_no_reading_of_them():
    """A layer with its own q, k, v projections keeps them: a 4-D parameter beside them is left with no role."""
    layer = _layer("role first (3, H, d, dh)", 6, 8, 2, "linear")
    layer.q, layer.k, layer.v = (nn.Linear(6, 8, dtype=torch.float64) for _ in range(3))
    found, _ = discover(layer, 6, 8, 2)
    assert found and all("w_qkv" not in text for lay in found for text in lay.describe().values())
    assert "parameters with no role: w_qkv" in found[0].notes


def test_map_names_a_4d_parameter_as_qkv():
    layer = _layer("role first (3, H, d, dh)", 6, 8, 2, "3d")
    found, problem = discover(layer, 6, 8, 2, mapping={"qkv": "w_qkv", "o": "w_o"})
    assert problem == "" and len(found) == 1 and _reproduces(layer, found[0], 2, 6)
    found, _ = discover(_layer("role first (3, H, d, dh)", 6, 6, 3, "3d"), 6, 6, 3,
                        mapping={"qkv": "w_qkv.T", "o": "w_o"})
    assert len(found) == 2 and not any(lay.certain for lay in found)  # role and heads axes both 3 long


def test_map_refuses_a_4d_parameter_whose_sizes_are_not_the_three_projections():
    layer = _layer("role first (3, H, d, dh)", 6, 8, 2, "3d")
    found, problem = discover(layer, 8, 8, 2, mapping={"qkv": "w_qkv", "o": "w_o"})  # its d is 6, not 8
    assert found == [] and problem.startswith("--map qkv=w_qkv: a 4-D parameter of shape (3, 2, 6, 4)")



@pytest.mark.parametrize("layout", ["role first (3, H, d, dh)", "heads first (H, 3, d, dh)"])
def test_a_fused_per_head_bias_is_read_with_its_weight(layout):
    """A fused bias beside the 4-D weight, laid out alike (b_qkv (3, H, dh) beside (3, H, d, dh), (H, 3, dh) beside
    (H, 3, d, dh)): read as b_q, b_k, b_v, so a layer whose bias is not zero is reproduced.  With 3 heads of width 3
    each of the bias's axes but one could be the role: the weight's reading decides."""
    for d, heads in ((6, 2), (9, 3)):
        layer = _layer(layout, d, d, heads, "linear", bias=True)
        found, problem = discover(layer, d, d, heads)
        assert problem == "" and all({"bq", "bk", "bv"} <= set(lay.roles) and lay.covers(layer) for lay in found)
        assert sum(_reproduces(layer, lay, heads, d) for lay in found) == 1, [lay.describe() for lay in found]
