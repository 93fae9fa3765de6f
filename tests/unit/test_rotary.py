"""The rotary numpy reference (reference/rotary.py, its knobs in reference/variants.py and the rope argument of
reference/numpy_ref) agrees with the torch references of reference/rotary_mha.py in float64, in both conventions,
forward and backward; and the two conventions and every rotary mistake give numbers of their own."""
import numpy as np
import pytest
import torch

from reference import numpy_ref, variants
from reference.rotary import MIXED, Rope, rotate
from reference.rotary_mha import RotaryMHA, rope, rope_mha_forward


def _weights(seed=0, d_in=8, d_out=8, bias=True):
    return numpy_ref.random_weights(np.random.default_rng(seed), d_in, d_out, qkv_bias=bias)


def _torch(w):
    return {k: torch.tensor(v) for k, v in w.as_dict().items()}


@pytest.mark.parametrize("convention", ["interleaved", "half"])
@pytest.mark.parametrize("theta", [10000.0, 500000.0])
def test_rotation_matches_torch(convention, theta):
    t = np.random.default_rng(1).standard_normal((2, 3, 7, 8))
    want = rope(torch.tensor(t), convention, theta).numpy()
    np.testing.assert_allclose(rotate(t, convention, theta), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("convention", ["interleaved", "half"])
def test_pairs_turned_by_tables_of_the_other_convention_are_that_computation_and_no_rotation(convention):
    """reference.rotary.MIXED (fixes28b item 1): rotate_half with repeat_interleave tables, rotate-every-two with
    cat((f, f)) tables, written as a student writes them; a pair's features turn by different angles, so lengths
    change (a rotation keeps them) and the result is neither convention's rotation."""
    t = np.random.default_rng(2).standard_normal((2, 3, 7, 8))
    x = torch.tensor(t)
    inv = 1.0 / 10000.0 ** (torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    ang = torch.outer(torch.arange(7, dtype=torch.float64), inv)
    if convention == "half":
        tab = ang.repeat_interleave(2, dim=-1)
        partner = torch.cat((-x[..., 4:], x[..., :4]), dim=-1)
    else:
        tab = torch.cat((ang, ang), dim=-1)
        partner = torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)
    want = (x * tab.cos() + partner * tab.sin()).numpy()
    got = rotate(t, convention + MIXED)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert not np.allclose(np.linalg.norm(got, axis=-1), np.linalg.norm(t, axis=-1))
    assert not any(np.allclose(got, rotate(t, c)) for c in ("interleaved", "half"))


@pytest.mark.parametrize("convention", ["interleaved", "half"])
@pytest.mark.parametrize("heads,d_in,d_out", [(2, 8, 8), (2, 6, 8), (4, 12, 16)])
def test_numpy_forward_and_variants_match_torch(convention, heads, d_in, d_out):
    w = _weights(d_in=d_in, d_out=d_out)
    x = np.random.default_rng(2).standard_normal((2, 5, d_in))
    want = rope_mha_forward(torch.tensor(x), heads, convention=convention, **_torch(w)).numpy()
    r = Rope(convention)
    np.testing.assert_allclose(numpy_ref.forward(x, heads, w, rope=r), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(variants.forward(x, heads, w, **r.knobs()), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("convention", ["interleaved", "half"])
def test_numpy_backward_matches_autograd(convention):
    w = _weights(d_in=6, d_out=8)
    x = np.random.default_rng(3).standard_normal((2, 5, 6))
    gy = np.random.default_rng(4).standard_normal((2, 5, 8))
    tw = {k: v.clone().requires_grad_(True) for k, v in _torch(w).items()}
    tx = torch.tensor(x, requires_grad=True)
    (rope_mha_forward(tx, 2, convention=convention, **tw) * torch.tensor(gy)).sum().backward()
    cache = {}
    numpy_ref.forward(x, 2, w, cache=cache, rope=Rope(convention))
    got = numpy_ref.backward(gy, w, cache)
    np.testing.assert_allclose(got["x"], tx.grad.numpy(), rtol=1e-9, atol=1e-12)
    for role, t in tw.items():
        np.testing.assert_allclose(got[role], t.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_lesson_style_module_is_the_interleaved_reference():
    torch.manual_seed(0)
    m = RotaryMHA(6, 2, context_length=7, d_out=8, qkv_bias=True).double().eval()
    x = np.random.default_rng(5).standard_normal((2, 5, 6))
    w = numpy_ref.Weights(*(getattr(m, r).weight.detach().numpy() for r in ("q", "k", "v", "out")),
                          *(getattr(m, r).bias.detach().numpy() for r in ("q", "k", "v", "out")))
    y = m(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(y, numpy_ref.forward(x, 2, w, rope=Rope("interleaved")), rtol=1e-6, atol=1e-7)


def test_conventions_and_mistakes_differ():
    """Each convention and each mistake knob changes the output by far more than the checks' tolerance (1e-5)."""
    w = _weights(d_in=8, d_out=8)
    x = np.random.default_rng(6).standard_normal((2, 5, 8))
    outs = {"none": variants.forward(x, 2, w)}
    for conv in ("interleaved", "half"):
        outs[conv] = variants.forward(x, 2, w, rope=conv)
        for name, knob in (("values", {"rope_values": True}), ("model", {"rope_freqs": "model"}),
                           ("before", {"rope_where": "before-split"}), ("shift", {"rope_key_shift": 1})):
            outs[f"{conv}-{name}"] = variants.forward(x, 2, w, rope=conv, **knob)
    names = list(outs)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert np.abs(outs[a] - outs[b]).max() > 1e-3, (a, b)


def test_rotation_keeps_scores_relative():
    """RoPE's point: shifting every position by the same amount leaves q·k unchanged."""
    q, k = np.random.default_rng(7).standard_normal((2, 6, 8))
    for conv in ("interleaved", "half"):
        s0 = rotate(q, conv) @ rotate(k, conv).T
        s3 = rotate(q, conv, positions=np.arange(6) + 3.0) @ rotate(k, conv, positions=np.arange(6) + 3.0).T
        np.testing.assert_allclose(s0, s3, rtol=1e-10, atol=1e-10)


# -- the child side: positions handed to forward, the rotary base bound and reported --------------------------------
def _cs336():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).parents[1] / "zoo" / "correct" / "rotary_cs336.py"
    spec = importlib.util.spec_from_file_location("rotary_cs336", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.MultiheadSelfAttentionWithRoPE


def test_positions_argument_is_offered_in_each_layout():
    from harness.child.calling import styles_for
    m = _cs336()(8, 2, 16)
    ways = styles_for(m)
    assert not ways.problem and len(ways.styles) == 3
    x = torch.zeros(2, 5, 8)
    shapes = [tuple(s.arguments(x)[1]["token_positions"].shape) for s in ways.styles]
    assert shapes == [(5,), (1, 5), (2, 5)]
    assert all(s.bare and "token_positions=arange(n)" in s.describe() for s in ways.styles)  # bare: no mask
    assert torch.equal(ways.styles[0].arguments(x)[1]["token_positions"], torch.arange(5))


def test_optional_positions_are_tried_after_the_plain_call():
    from harness.child.calling import styles_for

    class Optional(torch.nn.Module):
        def forward(self, x, position_ids=None):
            return x

    styles = styles_for(Optional()).styles
    assert [s.positions for s in styles] == [None, "position_ids", "position_ids", "position_ids"]


def test_rotary_tables_in_forward_cannot_be_made_up():
    from harness.child.calling import styles_for

    class NeedsTables(torch.nn.Module):
        def forward(self, x, cos, sin):
            return x

    ways = styles_for(NeedsTables())
    assert not ways.styles and "cos, sin" in ways.problem and "factory" in ways.problem


@pytest.mark.parametrize("ctor,want", [
    ("def f(d_model, n_heads, max_seq_len, theta=10000.0): pass", 10000.0),
    ("def f(d_model, n_heads, max_seq_len, rope_theta=500000): pass", 500000.0),
    ("def f(d_model, n_heads, max_seq_len, base): pass", 10000.0),
    ("def f(d_model, n_heads, max_seq_len): pass", None),
    ("def f(d_model, n_heads, base=None): pass", None),
    ("def f(hidden_dim, n_heads, n_kv_heads, re_base=100000): pass", 100000.0),  # nanoVLM's lm_re_base
])
def test_theta_is_bound_and_reported(ctor, want):
    from harness.child.construct import build, read_signature
    from harness.wire.config import Config
    scope = {}
    exec(ctor, scope)
    sig = read_signature(scope["f"], {})
    assert sig.rope_theta == want and not sig.unfillable
    if "base)" in ctor:  # a required base gets 10000
        got = {}
        scope["g"] = lambda d_model, n_heads, max_seq_len, base: got.update(base=base)
        build(scope["g"], Config(d_in=8, d_out=8, heads=2, context_length=7), {}, sig)
        assert got["base"] == 10000.0


def test_theta_from_arg_and_config_object():
    from harness.child.construct import config_bag, read_signature
    from harness.wire.config import Config
    sig = read_signature(lambda d_model, n_heads, theta=10000.0: None, {"theta": 500000.0})
    assert sig.rope_theta == 500000.0
    sig = read_signature(lambda config: None, {})
    assert sig.rope_theta == 10000.0
    assert config_bag(Config(d_in=8, d_out=8, heads=2, context_length=7), {}).rope_theta == 10000.0


def test_a_share_of_the_head_for_the_rotary_embedding_is_named_so_and_a_position_scaling_is_not():
    """GPT-NeoX's rotary_pct, labml-nn's rope_percentage, HF's partial_rotary_factor say a rotary layer turns part of
    each head (realzoo8's NeoX entry: the only sign it is rotary); rope_scaling_factor scales positions instead."""
    from types import SimpleNamespace

    from harness.engine.mapping import rotary_fraction
    named = lambda *params: rotary_fraction(SimpleNamespace(signature=SimpleNamespace(params=list(params))))
    for name in ("rope_percentage", "rotary_pct", "partial_rotary_factor", "rotary_emb_fraction"):
        assert named("d", "heads", name) == name
    assert named("d", "heads", "rope_scaling_factor", "rope_theta", "rotary_dim") is None


def test_a_share_of_the_head_is_given_as_all_of_it_unless_an_arg_says_otherwise():
    """No reference turns part of each head, so a rotary fraction gets 1.0 whatever its default (the rest of the
    layer is checked: labml-nn's NeoX layer, whose -1e4 fill was cannot-tell at its default 0.25); --arg wins, and a
    config object answers the usual names with 1.0 too."""
    from harness.child.construct import build, config_bag, read_signature
    from harness.wire.config import Config
    cfg = Config(d_in=8, d_out=8, heads=2, context_length=7)
    got = {}

    def layer(n_hidden, n_heads, rope_percentage=0.25, mask_fill=-10000.0):
        got.update(rope_percentage=rope_percentage)

    sig = read_signature(layer, {})
    assert sig.derived == {"rope_percentage": "rope_fraction"} and not sig.unfillable
    build(layer, cfg, {}, sig)
    assert got == {"rope_percentage": 1.0}
    assert read_signature(layer, {"rope_percentage": 0.5}).derived == {}
    bag = config_bag(cfg, {})
    assert bag.partial_rotary_factor == 1.0 and bag.rotary_pct == 1.0
    assert config_bag(cfg, {"partial_rotary_factor": 0.5}).partial_rotary_factor == 0.5
