"""Grouped-query and multi-query attention: the numpy reference (reference.grouped through numpy_ref and
variants) agrees with the torch reference (reference.grouped_mha) in float64, forward and backward, and its
mistake knobs compute what the classic mistakes compute."""
import numpy as np
import pytest
import torch

from reference import grouped, numpy_ref, param_count_formula, variants
from reference.grouped_mha import GroupedMHA, gqa_forward

CASES = [(8, 8, 4, 2, 5, False), (6, 6, 3, 1, 4, True), (8, 12, 4, 4, 3, True), (5, 12, 6, 3, 7, False),
         (8, 8, 2, 1, 1, False)]  # (d_in, d_out, heads, kv_heads, n, qkv_bias)


def _weights(m):
    get = lambda t: None if t is None else t.detach().double().numpy()
    return numpy_ref.Weights(get(m.q.weight), get(m.k.weight), get(m.v.weight), get(m.out.weight),
                             get(m.q.bias), get(m.k.bias), get(m.v.bias), get(m.out.bias))


def _module(d_in, d_out, heads, kv, bias, seed=1):
    torch.manual_seed(seed)
    return GroupedMHA(d_in, heads, 16, kv, d_out=d_out, qkv_bias=bias).double().eval()


@pytest.mark.parametrize("d_in,d_out,heads,kv,n,bias", CASES)
def test_numpy_reference_equals_torch_module_and_functional(d_in, d_out, heads, kv, n, bias):
    m = _module(d_in, d_out, heads, kv, bias)
    x = torch.randn(2, n, d_in, dtype=torch.float64)
    w = _weights(m)
    assert w.wk.shape == (kv * d_out // heads, d_in) and w.kv_heads(heads) == kv
    y = m(x).detach().numpy()
    np.testing.assert_allclose(numpy_ref.forward(x.numpy(), heads, w), y, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(variants.forward(x.numpy(), heads, w), y, rtol=1e-12, atol=1e-13)
    t = {k: (None if v is None else torch.from_numpy(v)) for k, v in vars(w).items()}
    np.testing.assert_allclose(gqa_forward(x, heads, **t).detach().numpy(), y, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("d_in,d_out,heads,kv,n,bias", CASES)
def test_numpy_backward_equals_autograd(d_in, d_out, heads, kv, n, bias):
    m = _module(d_in, d_out, heads, kv, bias, seed=2)
    x = torch.randn(2, n, d_in, dtype=torch.float64, requires_grad=True)
    y = m(x)
    gy = torch.randn_like(y)
    (y * gy).sum().backward()
    cache = {}
    w = _weights(m)
    numpy_ref.forward(x.detach().numpy(), heads, w, cache=cache)
    g = numpy_ref.backward(gy.numpy(), w, cache)
    np.testing.assert_allclose(g["x"], x.grad.numpy(), rtol=1e-10, atol=1e-12)
    for role, lin in (("q", m.q), ("k", m.k), ("v", m.v), ("o", m.out)):
        np.testing.assert_allclose(g["w" + role], lin.weight.grad.numpy(), rtol=1e-10, atol=1e-12)
        if lin.bias is not None:
            np.testing.assert_allclose(g["b" + role], lin.bias.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_plain_multi_head_is_kv_heads_equal_heads():
    m = _module(8, 8, 4, 4, False)
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    w = _weights(m)
    from reference import mha_forward
    t = {k: (None if v is None else torch.from_numpy(v)) for k, v in vars(w).items()}
    np.testing.assert_allclose(mha_forward(x, 4, **t).detach().numpy(), m(x).detach().numpy(), rtol=1e-12)


def test_pairings_and_their_adjoint():
    assert list(grouped.kv_index(4, 2)) == [0, 0, 1, 1] and list(grouped.kv_index(4, 2, "repeat")) == [0, 1, 0, 1]
    assert list(grouped.kv_index(3, 1)) == [0, 0, 0] == list(grouped.kv_index(3, 1, "repeat"))
    rng = np.random.default_rng(0)
    t, g = rng.standard_normal((2, 3, 4, 2)), rng.standard_normal((2, 6, 4, 2))
    for pairing in grouped.PAIRINGS:  # <expand(t), g> == <t, collapse(g)>
        assert np.isclose((grouped.expand(t, 6, pairing) * g).sum(), (t * grouped.collapse(g, 3, pairing)).sum())


def test_repeat_knob_is_torch_repeat():
    """`.repeat(1, group, 1, 1)` tiles the key/value heads: query head h uses h % kv_heads."""
    m = _module(8, 8, 4, 2, False)
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    w = _weights(m)
    B, n, H, KV, dh = 2, 5, 4, 2, 2
    q = m.q(x).view(B, n, H, dh).transpose(1, 2)
    k = m.k(x).view(B, n, KV, dh).transpose(1, 2).repeat(1, H // KV, 1, 1)
    v = m.v(x).view(B, n, KV, dh).transpose(1, 2).repeat(1, H // KV, 1, 1)
    s = (q @ k.transpose(2, 3) / dh ** 0.5).masked_fill(torch.triu(torch.ones(n, n), 1).bool(), float("-inf"))
    y = m.out((torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, n, 8)).detach().numpy()
    np.testing.assert_allclose(variants.forward(x.numpy(), H, w, kv_pairing="repeat"), y, rtol=1e-12)
    assert not np.allclose(y, numpy_ref.forward(x.numpy(), H, w))


def test_parameter_count_formula():
    for d_in, d_out, heads, kv, _, bias in CASES:
        m = _module(d_in, d_out, heads, kv, bias)
        got = sum(p.numel() for p in m.parameters())
        assert got == param_count_formula(d_in, d_out, bias, kv_width=kv * d_out // heads)
    # at a fixed group size the count does not change with the heads: the K/V width is d_out / group
    counts = {param_count_formula(12, 12, kv_width=(h // 2) * (12 // h)) for h in (2, 4, 6)}
    assert len(counts) == 1


def test_grouped_knobs_apply_only_to_grouped_weights():
    rng = np.random.default_rng(0)
    plain = numpy_ref.random_weights(rng, 8, 8, False)
    narrow = numpy_ref.random_weights(rng, 8, 8, False, d_kv=4)
    assert narrow.kv_heads(4) == 2 and plain.kv_heads(4) == 4
    assert variants.applies(narrow, 4, {"kv_pairing": "repeat"})
    assert not variants.applies(plain, 4, {"kv_pairing": "repeat"})
    assert variants.applies(plain, 4, {"kv_mask": "first-group"})
    assert not variants.applies(narrow, 4, {"keys": "q"}) and variants.applies(plain, 4, {"keys": "q"})
