"""Heads merged in another order (issue 28, "readings decided by evidence"): the order is read off one output of
the module through W_o, proven by the reference reproducing it, and never found where the layer mixes tokens or
features inside a head (the view-order mistakes), nor where the plain order already reproduces."""
import itertools

import numpy as np
import pytest

import mutants

from harness.engine.head_order import HeadOrder, Strided, find, find_with, readings
from reference import numpy_ref, variants


def _setup(heads: int, d: int = 12, seed: int = 0):
    rng = np.random.default_rng(seed)
    w = numpy_ref.random_weights(rng, d, d, qkv_bias=True)
    x = rng.standard_normal((2, 5, d))
    return w, x


def _merged_in(order, x, heads, w, on_out=True):
    """The output of a layer that holds `w` as its parameters and puts head order[j] in block j of its merge (what
    a student's `torch.cat([ctx[:, h] for h in order], -1)` computes); without W_o when not `on_out`."""
    cache = {}
    numpy_ref.forward(x, heads, w, cache=cache)
    dh = w.d_out // heads
    ctx = cache["ctx"]
    merged = np.concatenate([ctx[..., h * dh:(h + 1) * dh] for h in order], axis=-1)
    return merged @ w.wo.T + w.bias("bo") if on_out else merged


@pytest.mark.parametrize("order", [(1, 0), (2, 1, 0), (2, 0, 1), (1, 2, 0), (3, 2, 1, 0), (1, 3, 0, 2)])
def test_the_order_is_read_from_the_output_and_proven(order):
    heads = len(order)
    w, x = _setup(heads)
    found = find(x, heads, w, _merged_in(order, x, heads, w))
    assert found is not None and found.order == order and found.on_out
    read = numpy_ref.Weights(**found.read(w.as_dict()))  # under it the reference computes the module's output
    np.testing.assert_allclose(numpy_ref.forward(x, heads, read), _merged_in(order, x, heads, w), rtol=1e-10)


def test_placing_then_reading_is_the_identity_and_the_module_computes_the_reference():
    """What is written into the module (`placed`) makes it compute the reference with the lesson's weights, and its
    parameters (or gradients) read back (`read`) are those weights."""
    w, x = _setup(3)
    order = HeadOrder((2, 0, 1), 4)
    held = numpy_ref.Weights(**order.placed(w.as_dict()))
    np.testing.assert_allclose(_merged_in(order.order, x, 3, held), numpy_ref.forward(x, 3, w), rtol=1e-10)
    for role, value in order.read(order.placed(w.as_dict())).items():
        np.testing.assert_array_equal(value, getattr(w, role))


def test_without_an_output_projection_the_rows_of_q_k_v_are_read_in_that_order():
    heads = 3
    w, x = _setup(heads)
    w.wo, w.bo = np.eye(w.d_out), None
    own = _merged_in((2, 1, 0), x, heads, w, on_out=False)
    found = find(x, heads, w, own, on_out=False)
    assert found is not None and found.order == (2, 1, 0) and not found.on_out
    held = numpy_ref.Weights(**found.placed(w.as_dict()))
    assert np.array_equal(held.wo, w.wo)  # W_o (the identity) is not touched
    np.testing.assert_allclose(_merged_in((2, 1, 0), x, heads, held, on_out=False), numpy_ref.forward(x, heads, w),
                               rtol=1e-10)


def test_the_plain_order_and_one_head_are_no_reading():
    w, x = _setup(3)
    assert find(x, 3, w, numpy_ref.forward(x, 3, w)) is None
    w1, x1 = _setup(1)
    assert find(x1, 1, w1, numpy_ref.forward(x1, 1, w1)) is None


@pytest.mark.parametrize("mid", ["split-view-order", "split-view-order-keys", "merge-no-transpose", "no-scaling",
                                 "no-mask", "swapped-q-k"])
def test_mistakes_that_mix_tokens_or_change_the_math_are_no_head_order(mid):
    """A view-order mistake mixes tokens and features inside the heads: no order of whole head blocks reproduces it
    (with every head count from 2 to 4), so it stays the mistake it is; so does any mistake in the math."""
    knobs = mutants.variants()[mid]
    for heads in (2, 3, 4):
        w, x = _setup(heads)
        assert find(x, heads, w, variants.forward(x, heads, w, **knobs)) is None


def test_a_mistake_made_with_the_heads_reordered_is_not_read_as_correct():
    """Reversed heads and no scaling: the order alone does not reproduce it, so no reading is proven by it."""
    heads = 3
    w, x = _setup(heads)
    cache = {}
    numpy_ref.forward(x, heads, numpy_ref.Weights(**{**w.as_dict(), "wq": w.wq * np.sqrt(4)}), cache=cache)
    merged = np.concatenate([cache["ctx"][..., h * 4:(h + 1) * 4] for h in (2, 1, 0)], axis=-1)
    assert find(x, heads, w, merged @ w.wo.T + w.bias("bo")) is None


def test_every_order_of_three_heads_is_found_with_one_solve():
    """No order is tried blindly: each of the 3! orders is read in one pass (the plain one is no reading)."""
    w, x = _setup(3)
    for order in itertools.permutations(range(3)):
        found = find(x, 3, w, _merged_in(order, x, 3, w))
        assert (found.order if found else tuple(range(3))) == order


@pytest.mark.parametrize("heads,d", [(2, 8), (3, 12), (4, 8), (2, 4)])
def test_heads_on_strided_features_split_and_merged_alike_are_a_reading(heads, d):
    """view(B, n, dh, H).permute(0, 3, 1, 2) on every projection and the merge back the same way: head h takes
    features h, h + H, h + 2H, ... of q, k and v, and its outputs go back to those places, so the layer is the
    lesson's with the rows of W_q, W_k, W_v and the columns of W_o renumbered alike (a student's trial).  Found as a
    reading, proven by the reference reproducing the module; what is placed makes the module compute the
    reference, and what is read back is the lesson's weights."""
    w, x = _setup(heads, d)
    own = numpy_ref.forward(x, heads, w, split="strided", merge="strided")
    found = find(x, heads, w, own)
    assert found is not None and found.on_out and "every" in found.describe()
    read = numpy_ref.Weights(**found.read(w.as_dict()))
    np.testing.assert_allclose(numpy_ref.forward(x, heads, read), own, rtol=1e-10)
    held = numpy_ref.Weights(**found.placed(w.as_dict()))
    np.testing.assert_allclose(numpy_ref.forward(x, heads, held, split="strided", merge="strided"),
                               numpy_ref.forward(x, heads, w), rtol=1e-10)
    for role, value in found.read(found.placed(w.as_dict())).items():
        np.testing.assert_array_equal(value, getattr(w, role))


@pytest.mark.parametrize("split,merge", [("strided", "lesson"), ("lesson", "strided"), ("strided:v", "lesson"),
                                         ("strided:q", "strided"), ("strided:kv", "lesson")])
def test_a_strided_split_and_merge_that_disagree_are_no_reading(split, merge):
    """Strided on some projections only, or on the split and not the merge (or the other way round): the heads'
    features do not go back where they came from, and no renumbering of the layer reproduces it; they stay the
    view-order mistakes they are (with every head count from 2 to 4)."""
    for heads in (2, 3, 4):
        w, x = _setup(heads)
        assert find(x, heads, w, numpy_ref.forward(x, heads, w, split=split, merge=merge)) is None


def test_a_strided_layer_without_an_output_projection_is_no_reading():
    """Without W_o the merged features are the output itself: interleaved across heads, no renumbering of the rows
    of W_q, W_k, W_v puts them back in the lesson's blocks, so nothing is read (the math judges it as it is)."""
    heads = 3
    w, x = _setup(heads)
    w.wo, w.bo = np.eye(w.d_out), None
    own = numpy_ref.forward(x, heads, w, split="strided", merge="strided")
    assert find(x, heads, w, own, on_out=False) is None


def test_a_grouped_layer_on_strided_features_is_read_with_its_own_key_value_heads():
    """Grouped-query attention (4 query heads, 2 key/value heads): W_k and W_v are read strided by their own number
    of heads, W_q and W_o by the query heads'."""
    rng = np.random.default_rng(0)
    w = numpy_ref.random_weights(rng, 8, 12, qkv_bias=True, d_kv=6)
    x = rng.standard_normal((2, 5, 8))
    own = numpy_ref.forward(x, 4, w, split="strided", merge="strided")
    found = find(x, 4, w, own)
    assert found is not None and (found.heads, found.kv_heads) == (4, 2)
    np.testing.assert_allclose(numpy_ref.forward(x, 4, numpy_ref.Weights(**found.read(w.as_dict()))), own, rtol=1e-10)


def _no_scaling(x, heads, w):
    return variants.forward(x, heads, w, **mutants.variants()["no-scaling"])


def _read(reading, w):
    return numpy_ref.Weights(**reading.read(w.as_dict()))


@pytest.mark.parametrize("order", [(1, 0), (2, 1, 0), (1, 2, 0), (3, 2, 1, 0)])
def test_heads_merged_in_another_order_beside_a_mistake_are_pointed_to_and_the_mistake_reproduces_under_them(order):
    """Issue 28, "a real bug must never end with zero failing checks": heads merged in another order and no scaling.
    No reading lets the reference reproduce the layer (`find`), but the output points to the order (the merged heads
    recovered through W_o are nearest the reference's heads in that order), and under it the mistake's variant is
    the module's output: proven as any reading is, by `find_with`."""
    heads = len(order)
    w, x = _setup(heads)
    held = numpy_ref.Weights(**HeadOrder(order, 12 // heads).placed(w.as_dict()))  # the module's own parameters
    own = _no_scaling(x, heads, w)  # what it computes: the mistake, with the lesson's weights read in that order
    assert find(x, heads, held, own) is None
    pointed = readings(x, heads, held, own)
    assert [r.order for r in pointed if isinstance(r, HeadOrder)] == [order]
    found = find_with(x, heads, held, own, lambda read: _no_scaling(x, heads, read))
    assert found is not None and found.order == order
    np.testing.assert_allclose(_no_scaling(x, heads, _read(found, held)), own, rtol=1e-10)


@pytest.mark.parametrize("heads,d", [(2, 8), (3, 12), (4, 8)])
def test_heads_on_strided_features_beside_a_mistake_are_pointed_to_and_the_mistake_reproduces_under_them(heads, d):
    """Strided heads split and merged alike and no scaling: the strided reading, nearer the module's merged heads
    than the lesson's blocks, is pointed to, and under it the mistake is the module's output."""
    w, x = _setup(heads, d)
    own = variants.forward(x, heads, w, split="strided", merge="strided", scale="none")
    assert find(x, heads, w, own) is None
    assert any(isinstance(r, Strided) for r in readings(x, heads, w, own))
    found = find_with(x, heads, w, own, lambda read: _no_scaling(x, heads, read))
    assert isinstance(found, Strided)
    np.testing.assert_allclose(_no_scaling(x, heads, _read(found, w)), own, rtol=1e-10)


@pytest.mark.parametrize("mid", ["no-scaling", "scale-by-sqrt-d", "finite-fill", "no-mask", "softmax-wrong-axis"])
def test_a_mistake_in_the_lessons_head_order_points_to_no_other_reading(mid):
    """The cost stays where the heads are in another order: a mistake made in the lesson's order (every head count
    from 2 to 4) points to no other reading, so no mistake is tried again under one."""
    knobs = mutants.variants()[mid]
    for heads in (2, 3, 4):
        w, x = _setup(heads)
        assert readings(x, heads, w, variants.forward(x, heads, w, **knobs)) == []


def test_find_with_the_reference_is_find_and_a_mistake_never_reproduces_a_correct_layer():
    """Under the reference `find_with` reads what `find` reads; a correct layer in another order is never its own
    mistake's: no-scaling does not reproduce it under any reading pointed to."""
    heads = 3
    w, x = _setup(heads)
    own = _merged_in((2, 0, 1), x, heads, w)
    assert find_with(x, heads, w, own, lambda read: numpy_ref.forward(x, heads, read)).order == (2, 0, 1)
    assert find_with(x, heads, w, own, lambda read: _no_scaling(x, heads, read)) is None


def test_the_order_of_a_layer_without_an_output_projection_is_told_without_w_o():
    """Issue 28: the note of a layer read without W_o said "the same layer with W_o's input blocks renumbered", blocks
    of a matrix the layer does not have; it says its heads are renumbered (the rows of W_q, W_k and W_v)."""
    without = HeadOrder((1, 0), 4, on_out=False).describe()
    assert "W_o" not in without and "no output projection" in without and "heads renumbered" in without
    assert "W_o's input blocks renumbered" in HeadOrder((1, 0), 4).describe()
