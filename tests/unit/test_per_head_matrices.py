"""3-D per-head weights used with einsum (issue 28, gap 1 of the last trial): `W_q = nn.Parameter(torch.randn(d, H,
dh))` with `torch.einsum('btd,dhe->bhte', x, W_q)` had no reading at all (only a heads-first (H, d, dh) was read), and
`--map q=W_q` refused every 3-D parameter ("pieces of unexpected rank") while its hint said that no reading had
reproduced the output.  Each layer here is checked against the lesson's functional reference with the reading
mha-check found, in float64: a reading is only right if the reference then reproduces the layer."""
import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn

from harness.child.layouts import discover
from harness.engine.context import _reading
from harness.engine.mapping import MAP_HELP, MAPPED_HELP, map_help
from reference.causal_mha import mha_forward

# (shape of W_q/W_k/W_v given (d_in, H, dh), einsum of x with it to (b, h, t, e))
LAYOUTS = {
    "heads first (H, d, dh)": (lambda d, h, e: (h, d, e), "btd,hde->bhte"),
    "heads first, (H, dh, d)": (lambda d, h, e: (h, e, d), "btd,hed->bhte"),
    "heads second (d, H, dh)": (lambda d, h, e: (d, h, e), "btd,dhe->bhte"),
    "heads last (d, dh, H)": (lambda d, h, e: (d, e, h), "btd,deh->bhte"),
}


def _layer(layout: str, d_in: int, d_out: int, heads: int, out_3d: bool = False) -> nn.Module:
    shape, spec = LAYOUTS[layout]

    class Einsum(nn.Module):
        def __init__(self):
            super().__init__()
            self.H, self.dh = heads, d_out // heads
            g = torch.Generator().manual_seed(0)
            self.W_q, self.W_k, self.W_v = (nn.Parameter(torch.randn(shape(d_in, heads, self.dh), generator=g,
                                                                     dtype=torch.float64)) for _ in range(3))
            if out_3d:  # the output projection per head too: y_h @ W_o[h], summed over heads
                self.W_o = nn.Parameter(torch.randn(heads, self.dh, d_out, generator=g, dtype=torch.float64))
            else:
                self.out_proj = nn.Linear(d_out, d_out, dtype=torch.float64)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = (torch.einsum(spec, x, w) for w in (self.W_q, self.W_k, self.W_v))
            s = torch.einsum("bhte,bhse->bhts", q, k) / math.sqrt(self.dh)
            s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
            y = torch.einsum("bhts,bhse->bhte", torch.softmax(s, dim=-1), v)
            if out_3d:
                return torch.einsum("bhte,hed->btd", y, self.W_o)
            return self.out_proj(y.transpose(1, 2).reshape(b, t, d_out))
    return Einsum()


def _reproduces(layer: nn.Module, layout, heads: int, d_in: int) -> bool:
    w = layout.read()
    x = torch.randn(2, 5, d_in, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    ref = mha_forward(x, heads, w["wq"], w["wk"], w["wv"], w["wo"], bo=w.get("bo"))
    with torch.no_grad():
        return torch.allclose(layer(x), ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("out_3d", [False, True], ids=["out_proj Linear", "W_o per head"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_heads_axis_is_read_by_names_and_the_reading_reproduces_the_layer(layout, out_3d):
    layer = _layer(layout, 6, 8, 2, out_3d)
    found, problem = discover(layer, 6, 8, 2)
    assert problem == "" and found, problem
    assert any(_reproduces(layer, lay, 2, 6) for lay in found)
    assert len(found) == 1 and found[0].certain  # sizes 6, 8, 2 heads of 4: one heads axis, one orientation


def test_the_heads_axis_is_in_the_reading_so_other_configurations_find_the_same_one():
    """With one head every axis of length 1 could be the heads axis: both are offered, and the description (which
    `Context._same_layout` compares with the proven one) tells W_q[0] from W_q[:, 0]."""
    layer = _layer("heads second (d, H, dh)", 1, 2, 1)
    found, _ = discover(layer, 1, 2, 1)
    texts = {lay.describe()["wq"] for lay in found}
    assert {"W_q[0].T", "W_q[:, 0].T"} <= texts and len(found) <= 12
    proven = _reading("W_q[:, 0].T + W_q[:, 1].T")  # proven with two heads
    assert [t for t in texts if _reading(t) == proven] == ["W_q[:, 0].T"]


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_map_reads_a_3d_parameter_as_one_matrix_per_head(layout):
    layer = _layer(layout, 6, 8, 2, out_3d=True)
    mapping = {"q": "W_q", "k": "W_k", "v": "W_v", "o": "W_o"}
    found, problem = discover(layer, 6, 8, 2, mapping=mapping)
    assert problem == "" and len(found) == 1 and found[0].certain
    assert _reproduces(layer, found[0], 2, 6)


def test_map_on_a_3d_parameter_stays_a_few_readings_where_sizes_coincide():
    """One head, d_in = 1: every axis of every 3-D parameter fits; read alike (W_q, W_k, W_v share the heads axis and
    orientation) they make a few readings, not 6 ** 3 (216 overran the child's channel)."""
    layer = _layer("heads second (d, H, dh)", 1, 2, 1, out_3d=True)
    found, problem = discover(layer, 1, 2, 1, mapping={"q": "W_q", "k": "W_k", "v": "W_v", "o": "W_o"})
    assert problem == "" and 1 < len(found) <= 16


def test_map_refuses_a_3d_parameter_whose_sizes_are_not_a_heads_block():
    layer = _layer("heads first (H, d, dh)", 6, 8, 2)
    found, problem = discover(layer, 6, 8, 2, mapping={"q": "W_q", "k": "W_k", "v": "W_v", "o": "W_q"})
    assert found == [] and problem.startswith("--map o=W_q: a 3-D parameter of shape (2, 6, 4)")


def test_the_hint_after_a_refused_map_does_not_say_readings_were_tried():
    ctx = SimpleNamespace(subject=SimpleNamespace(weight_map={"q": "nothere"}))
    refused = map_help(ctx, "--map q=nothere: no parameter or module of that name")
    assert "could not be read" in refused and "3-D" in refused and "no reading reproduces" not in refused
    assert map_help(ctx, "no reading reproduces your output") == MAPPED_HELP  # tried, and none reproduced
    assert map_help(SimpleNamespace(subject=SimpleNamespace(weight_map=None)), "--map") == MAP_HELP


STUDENT = '''
import math
import torch
import torch.nn as nn


class MHA(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads):
        super().__init__()
        assert d_out % num_heads == 0
        self.H, self.dh = num_heads, d_out // num_heads
        self.W_q = nn.Parameter(torch.randn(d_in, num_heads, self.dh) / math.sqrt(d_in))
        self.W_k = nn.Parameter(torch.randn(d_in, num_heads, self.dh) / math.sqrt(d_in))
        self.W_v = nn.Parameter(torch.randn(d_in, num_heads, self.dh) / math.sqrt(d_in))
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1).bool())

    def forward(self, x):
        b, t, _ = x.shape
        q = torch.einsum('btd,dhe->bhte', x, self.W_q)
        k = torch.einsum('btd,dhe->bhte', x, self.W_k)
        v = torch.einsum('btd,dhe->bhte', x, self.W_v)
        s = torch.einsum('bhte,bhse->bhts', q, k) / SCALE
        s = s.masked_fill(self.mask[:t, :t], float('-inf'))
        a = self.dropout(torch.softmax(s, dim=-1))
        y = torch.einsum('bhts,bhse->bthe', a, v).reshape(b, t, self.H * self.dh)
        return self.out_proj(y)
'''


def _checked(tmp_path, scale: str):
    from harness.child.inprocess import InProcess
    from harness.engine.runner import Options, run_checks
    from harness.sandbox.subject import Subject

    path = tmp_path / "einsum_heads_second.py"
    path.write_text(STUDENT.replace("SCALE", scale))
    target = f"{path}:MHA"
    opts = Options(only=["reference-match", "gradient-match", "view-order"], examples=2)
    return run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))


def test_the_weight_checks_run_on_a_heads_second_einsum_layer_and_judge_it(tmp_path):
    """Before: cannot-tell on every weight check (no reading).  Now the correct layer passes them, and the same layer
    scaled by sqrt(d_out) fails reference-match and is named for it."""
    good = _checked(tmp_path, "math.sqrt(self.dh)")
    assert [(c.id, c.status, c.message) for c in good.checks if c.status != "pass"] == []
    assert {"reference-match", "gradient-match", "view-order"} <= {c.id for c in good.checks}
    bad = _checked(tmp_path, "math.sqrt(self.H * self.dh)")
    assert bad["reference-match"].status == "fail"
    assert bad.diagnosis is not None and bad.diagnosis.mutant == "scale-by-sqrt-d"
