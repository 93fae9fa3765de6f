"""The normalisations a layer keeps inside itself (harness.child.norms, issue 28): taken for one only on evidence
(torch's LayerNorm and RMSNorm over the last axis, or a class named like a norm that acts on each token alone and
ignores its scale), and switched off only while asked; the call styles that ask for it (harness.child.calling)."""
import pytest
import torch
import torch.nn as nn

from harness.child import calling, norms


class GainOnlyLayerNorm(nn.Module):
    """PaLM's: a learned gain, a zero bias kept as a buffer, F.layer_norm."""

    def __init__(self, d):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(d))
        self.register_buffer("beta", torch.zeros(d))

    def forward(self, x):
        return nn.functional.layer_norm(x, x.shape[-1:], self.gamma, self.beta)


class ClampedRMSNorm(nn.Module):
    """PaLM lite's: x / max(||x|| / sqrt(d), eps) * g."""

    def __init__(self, d, eps=1e-8):
        super().__init__()
        self.scale, self.eps = d ** -0.5, eps
        self.g = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x / (torch.norm(x, dim=-1, keepdim=True) * self.scale).clamp(min=self.eps) * self.g


class TokenNorm(nn.Module):
    """Named like a norm, normalising over the tokens (dim 1): one token's output moves with the others."""

    def __init__(self, d):
        super().__init__()
        self.g = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return self.g * (x - x.mean(1, keepdim=True)) / (x.std(1, keepdim=True, unbiased=False) + 1e-5)


class GateNorm(nn.Module):
    """Named like a norm, a per-token gate: the token's scale goes through."""

    def __init__(self, d):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.sigmoid(self.w)


class GatedRMSNorm(nn.Module):
    """rela-transformer 0.0.7's (tests/realzoo/lucidrains_rela_relu_attention_gated_rmsnorm.py): an RMS norm times a
    sigmoid gate of the input, sigmoid(x * w).  On large tokens the gate is 0 or 1 and the scale seems ignored; on
    tokens of ordinary size it is not."""

    def __init__(self, dim, eps=1e-8):
        super().__init__()
        self.scale = dim ** -0.5
        self.eps = eps
        self.w = nn.Parameter(torch.ones(dim))
        self.g = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        norm = torch.norm(x, dim=-1, keepdim=True) * self.scale
        normed_x = x / norm.clamp(min=self.eps) * self.g
        return normed_x * (x * self.w).sigmoid()


class Holder(nn.Module):
    def __init__(self, norm: nn.Module, d: int = 6):
        super().__init__()
        self.norm = norm
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        return self.proj(self.norm(x))


@pytest.mark.parametrize("norm,kind", [(nn.LayerNorm(6), "LayerNorm"), (nn.RMSNorm(6), "RMSNorm"),
                                       (GainOnlyLayerNorm(6), "GainOnlyLayerNorm"),
                                       (ClampedRMSNorm(6), "ClampedRMSNorm"),
                                       (GainOnlyLayerNorm(2), "GainOnlyLayerNorm")])
def test_normalisations_of_torch_and_of_the_students_own_are_found_with_their_parameters(norm, kind):
    """Two features are enough for the probe: its tokens are large, so the eps beside the variance moves
    nothing (a layer of width 2 is among the configurations mha-check builds)."""
    layer = Holder(norm, d=norm.gamma.shape[0] if isinstance(norm, GainOnlyLayerNorm) else 6)
    found = norms.find(layer)
    assert [(n.path, n.kind) for n in found] == [("norm", kind)]
    assert found[0].params == [f"norm.{name}" for name, _ in norm.named_parameters()]


@pytest.mark.parametrize("norm", [TokenNorm(6), GateNorm(6), nn.BatchNorm1d(6).eval(), nn.LayerNorm((3, 6)),
                                  nn.GroupNorm(2, 6)])
def test_what_mixes_tokens_keeps_their_scale_or_normalises_more_than_the_features_is_no_norm(norm):
    """Switched off, such a module could hide a leak (over the tokens) or a computation of the layer (a gate)."""
    assert norms.find(Holder(norm)) == []


@pytest.mark.parametrize("width", [2, 3, 4, 6, 12])
def test_a_norm_gated_by_its_input_is_no_norm_at_any_width(width):
    """The large probe saturates the gate, so it alone found rela's GatedRMSNorm a norm at some widths (4, 2) and not
    at others (12, 6, 3): its parameters were left out of some counts of head-invariance only.  A probe of tokens of
    ordinary size, scaled by 3, moves the gate."""
    assert norms.find(Holder(GatedRMSNorm(width), d=width)) == []


def test_the_probe_leaves_the_candidate_as_it_was():
    """A BatchNorm over 3 features runs on the (2, 3, 3) probe in training mode: its running statistics must not
    learn from it (the probe runs on a copy), and it is still no norm (its output depends on the batch)."""
    bn = nn.BatchNorm1d(3)
    before = bn.running_mean.clone(), bn.running_var.clone(), int(bn.num_batches_tracked)
    assert norms.find(Holder(bn, d=3)) == []
    assert torch.equal(bn.running_mean, before[0]) and torch.equal(bn.running_var, before[1])
    assert int(bn.num_batches_tracked) == before[2]


def test_the_layer_itself_is_never_its_own_norm_and_a_norm_inside_a_norm_is_found_once():
    class OuterNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.LayerNorm(6)

        def forward(self, x):
            return self.inner(x)

    assert norms.find(nn.LayerNorm(6)) == []
    found = norms.find(Holder(OuterNorm()))
    assert [n.path for n in found] == ["norm"] and found[0].params == ["norm.inner.weight", "norm.inner.bias"]


def test_a_norm_switched_off_returns_its_input_while_asked_and_only_then():
    layer = Holder(GainOnlyLayerNorm(6)).double()
    x = torch.randn(2, 3, 6, dtype=torch.float64) * 5
    with norms.switched_off(norms.find(layer)):
        assert torch.equal(layer(x), layer.proj(x))
    assert torch.allclose(layer(x), layer.proj(nn.functional.layer_norm(x, (6,))))
    assert "forward" not in layer.norm.__dict__


def test_a_forward_set_on_the_instance_is_put_back():
    layer = Holder(nn.LayerNorm(6)).double()
    own = lambda x: x * 2
    layer.norm.forward = own
    with norms.switched_off(norms.find(layer)):
        assert layer.norm.forward is not own
    assert layer.norm.forward is own


def test_call_style_indices_come_in_four_families():
    """i: the call; count + i: sequence first; 2 * count + i: the norms off; 3 * count + i: and the input taken away
    from the output."""
    ways = calling.Calling([calling.Style((("x", False),), None), calling.Style((("x", False),), 0,
                                                                                 mask=("mask", False))])
    picked = [ways.pick(i) for i in range(8)]
    assert [(p.seq_first, p.norms_off, p.residual) for p in picked] == [
        (False, False, False)] * 2 + [(True, False, False)] * 2 + [(False, True, False)] * 2 + [(False, True, True)] * 2
    assert [p.style for p in picked] == ways.styles * 4
    assert ways.pick(8) is None and ways.pick(-1) is None and calling.Calling([], "no input").pick(0) is None
