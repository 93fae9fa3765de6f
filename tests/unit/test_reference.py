"""The reference reproduces the lesson's figures, and the numpy reference (used for every verdict) agrees with it."""
import numpy as np
import pytest
import torch

from reference import CausalMHA, mha_forward, numpy_ref, param_count_formula, score_entries


def count(m):
    return sum(p.numel() for p in m.parameters())


@pytest.mark.parametrize("heads", [1, 2, 4])
def test_lesson_worked_example_has_264_parameters_for_any_head_count(heads):
    torch.manual_seed(0)
    m = CausalMHA(8, heads, context_length=16)
    assert tuple(m(torch.randn(2, 3, 8)).shape) == (2, 3, 8)
    assert count(m) == 264 == param_count_formula(8, 8)


def test_gpt2_small_counts():
    assert count(CausalMHA(768, 12, 1024)) == 2_360_064 == param_count_formula(768, 768)
    assert count(CausalMHA(768, 12, 1024, qkv_bias=True)) == 2_362_368 == param_count_formula(768, 768, True)


def test_score_tensor_entries_per_sequence():
    assert score_entries(heads=12, n=1024) == 12_582_912
    assert score_entries(heads=12, n=1024) * 4 / 1e6 == pytest.approx(50.3, abs=0.1)  # "about 50 MB in float32"


def test_width_must_be_divisible_by_heads():
    with pytest.raises(ValueError, match="not divisible"):
        CausalMHA(8, 3, 16)


def test_mask_is_a_registered_buffer():
    m = CausalMHA(8, 2, 16)
    assert "mask" in dict(m.named_buffers()) and "mask" in m.state_dict()


def _module_weights(m):
    get = lambda t: None if t is None else t.detach().double().numpy()
    return numpy_ref.Weights(get(m.q.weight), get(m.k.weight), get(m.v.weight), get(m.out.weight),
                             get(m.q.bias), get(m.k.bias), get(m.v.bias), get(m.out.bias))


@pytest.mark.parametrize("d_in,d_out,heads,n,ctx,bias", [(8, 8, 2, 3, 16, False), (5, 12, 3, 7, 7, True),
                                                         (6, 4, 4, 1, 3, False)])
def test_numpy_reference_equals_torch_module_and_functional(d_in, d_out, heads, n, ctx, bias):
    torch.manual_seed(1)
    m = CausalMHA(d_in, heads, ctx, d_out=d_out, qkv_bias=bias).double().eval()
    x = torch.randn(2, n, d_in, dtype=torch.float64)
    w = _module_weights(m)
    y = m(x).detach().numpy()
    np.testing.assert_allclose(numpy_ref.forward(x.numpy(), heads, w), y, rtol=1e-12, atol=1e-13)
    t = {k: (None if v is None else torch.from_numpy(v)) for k, v in vars(w).items()}
    np.testing.assert_allclose(mha_forward(x, heads, **t).detach().numpy(), y, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("split,merge", [("lesson", "lesson"), ("view-bhnd", "lesson"), ("lesson", "no-transpose"),
                                         ("view-bhnd:q", "lesson"), ("view-bhnd:kv", "no-transpose"),
                                         ("strided", "lesson"), ("lesson", "strided"), ("strided:v", "strided"),
                                         ("strided", "strided")])
def test_numpy_backward_equals_autograd(split, merge):
    rng = np.random.default_rng(0)
    w = numpy_ref.random_weights(rng, 5, 6, qkv_bias=True)
    x = rng.standard_normal((2, 4, 5))
    gy = rng.standard_normal((2, 4, 6))
    cache = {}
    numpy_ref.forward(x, 3, w, split=split, merge=merge, cache=cache)
    got = numpy_ref.backward(gy, w, cache)

    tw = {k: torch.tensor(v, requires_grad=True) for k, v in w.as_dict().items()}
    tx = torch.tensor(x, requires_grad=True)
    B, n, _ = tx.shape
    lin = torch.nn.functional.linear
    how, _, roles = split.partition(":")
    wrong = "" if split == "lesson" else (roles or "qkv")  # the roles split view(B, H, n, dh), or strided
    splits = {"view-bhnd": lambda t: t.reshape(B, 3, n, 2), "strided": lambda t: t.view(B, n, 2, 3).permute(0, 3, 1, 2)}
    sp = lambda t, r: splits[how](t) if r in wrong else t.view(B, n, 3, 2).transpose(1, 2)
    q, k, v = (sp(lin(tx, tw["w" + r], tw["b" + r]), r) for r in "qkv")
    s = (q @ k.transpose(2, 3) / 2 ** 0.5).masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), -torch.inf)
    c = torch.softmax(s, -1) @ v
    merges = {"lesson": lambda c: c.transpose(1, 2).reshape(B, n, 6), "no-transpose": lambda c: c.reshape(B, n, 6),
              "strided": lambda c: c.permute(0, 2, 3, 1).reshape(B, n, 6)}
    c = merges[merge](c)
    y = lin(c, tw["wo"], tw["bo"])
    (y * torch.tensor(gy)).sum().backward()
    np.testing.assert_allclose(got["x"], tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    for role, t in tw.items():
        np.testing.assert_allclose(got[role], t.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=role)


def test_variants_differ_from_lesson():
    rng = np.random.default_rng(2)
    w = numpy_ref.random_weights(rng, 6, 6, qkv_bias=False)
    x = rng.standard_normal((2, 4, 6))
    ref = numpy_ref.forward(x, 2, w)
    assert not np.allclose(numpy_ref.forward(x, 2, w, split="view-bhnd"), ref)
    assert not np.allclose(numpy_ref.forward(x, 2, w, merge="no-transpose"), ref)
    assert not np.allclose(numpy_ref.forward(x, 2, w, split="strided"), ref)
    assert not np.allclose(numpy_ref.forward(x, 2, w, merge="strided"), ref)


def test_partial_splits_hit_only_their_projections():
    """Each of the seven ways to split some projections wrongly computes its own numbers: none equals the reference,
    the whole mistake or another partial one (random weights, float64, relative 1e-5)."""
    rng = np.random.default_rng(3)
    w = numpy_ref.random_weights(rng, 6, 6, qkv_bias=True)
    x = rng.standard_normal((2, 4, 6))
    ys = {s: numpy_ref.forward(x, 2, w, split=s) for s in numpy_ref.SPLITS + numpy_ref.PARTIAL_SPLITS}
    for a, ya in ys.items():
        for b, yb in ys.items():
            assert a == b or not np.allclose(ya, yb, rtol=1e-5, atol=0), (a, b)
    assert numpy_ref.split_for("view-bhnd:kv", "q") == "lesson"
    assert numpy_ref.split_for("view-bhnd:kv", "v") == "view-bhnd" == numpy_ref.split_for("view-bhnd", "q")
    with pytest.raises(ValueError):
        numpy_ref.forward(x, 2, w, split="view-bhnd:z")


@pytest.mark.parametrize("d_in,d_out,qkv_bias", [(3, 2, False), (6, 8, True), (8, 8, False)])
def test_single_head_causal_attention_is_the_numpy_reference_with_one_head_and_no_output_projection(d_in, d_out,
                                                                                                     qkv_bias):
    """The single-head form (harness.wire.form) is checked against numpy_ref with heads=1 and W_o = I, b_o = 0:
    the previous lesson's CausalAttention computes exactly that, forward and backward, in float64; its parameter
    count is 3·d_in·d_out (+ 3·d_out with Q/K/V biases)."""
    from reference.causal_attention import CausalAttention

    torch.manual_seed(0)
    m = CausalAttention(d_in, d_out, context_length=7, dropout=0.0, qkv_bias=qkv_bias).double().eval()
    assert count(m) == 3 * d_in * d_out + (3 * d_out if qkv_bias else 0)
    get = lambda lin: (lin.weight.detach().numpy(), None if lin.bias is None else lin.bias.detach().numpy())
    (wq, bq), (wk, bk), (wv, bv) = get(m.W_query), get(m.W_key), get(m.W_value)
    w = numpy_ref.Weights(wq, wk, wv, np.eye(d_out), bq, bk, bv, None)
    x = torch.randn(2, 5, d_in, dtype=torch.float64, requires_grad=True)
    y = m(x)
    cache = {}
    np.testing.assert_allclose(y.detach().numpy(), numpy_ref.forward(x.detach().numpy(), 1, w, cache=cache),
                               rtol=1e-12, atol=1e-12)
    gy = torch.randn_like(y)
    (y * gy).sum().backward()
    want = numpy_ref.backward(gy.numpy(), w, cache)
    np.testing.assert_allclose(x.grad.numpy(), want["x"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(m.W_query.weight.grad.numpy(), want["wq"], rtol=1e-10, atol=1e-12)


def test_forward_many_gives_forward_s_numbers_for_every_split_and_merge():
    """view-order compares a module with every (split, merge) at once: the shared attention changes no number."""
    w = numpy_ref.random_weights(np.random.default_rng(3), 6, 8, qkv_bias=True)
    x = np.random.default_rng(4).standard_normal((2, 5, 6))
    pairs = [(s, m) for s in (*numpy_ref.SPLITS, *numpy_ref.PARTIAL_SPLITS) for m in numpy_ref.MERGES]
    many = numpy_ref.forward_many(x, 2, w, pairs)
    assert list(many) == pairs
    for split, merge in pairs:
        assert np.array_equal(many[split, merge], numpy_ref.forward(x, 2, w, split=split, merge=merge))


def test_close_each_answers_as_close_does_candidate_by_candidate():
    """Within the tolerance and just past it, NaN and inf on either side, another shape, a scalar."""
    from harness.engine.compare import ATOL, RTOL, close, close_each

    rng = np.random.default_rng(5)
    y = rng.standard_normal((2, 3, 4)) * 50
    step = (ATOL * np.abs(y).max() + RTOL * np.abs(y)) * 0.9
    candidates = [y.copy(), y + step, y + 3 * step, y.reshape(4, 3, 2), np.where(y > 0, np.nan, y),
                  np.where(y > 0, np.inf, y), -y, y * (1 + 1e-12)]
    assert close_each(y, candidates) == [close(y, c) for c in candidates]
    assert close_each(np.where(y > 0, np.nan, y), candidates) == [False] * len(candidates)
    assert close_each(np.array(2.0), [np.array(2.0), np.array(3.0)]) == [True, False]
    assert close_each(np.zeros((0, 3)), [np.zeros((0, 3)), np.zeros((3, 0))]) == [True, False]
