"""An output of the wrong shape still shows what the weight-free checks measure (issue 28: "cannot tell only where
there is truly no evidence"): output-shape lets them run where the batch comes first, and causal-leakage reads a
leak along the one axis as long as the sequence.  Before, a layer returning (B, H, n, dh) had causal-leakage skipped,
so a forward that discarded its masked_fill had no leak reported (tests/zoo/buggy/cs224n_returns_heads_leaks.py)."""
import numpy as np

from checks.causal_leakage import along_tokens
from checks.output_shape import WEIGHT_FREE, measurable, tokens_axes
from harness.wire.config import Config

CFG = Config(d_in=8, d_out=8, heads=2, context_length=7, batch=2, n=5)


def test_the_token_axis_is_the_one_axis_as_long_as_the_sequence_after_the_batch():
    assert tokens_axes((2, 2, 5, 4), CFG) == [2]  # (B, H, n, dh)
    assert tokens_axes((2, 5, 2, 4), CFG) == [1]  # (B, n, H, dh)
    assert tokens_axes((2, 5, 5), Config(d_in=5, d_out=5, heads=1, context_length=7, batch=2, n=5)) == [1, 2]
    assert tokens_axes((5, 2, 8), CFG) == []  # the batch not first: nothing is read


def test_the_checks_that_still_decide_on_a_wrong_shape():
    assert measurable((2, 2, 5, 4), CFG) == list(WEIGHT_FREE) + ["causal-leakage"]
    assert measurable((2, 16), CFG) == list(WEIGHT_FREE)  # no axis of the tokens: no leak to measure
    assert measurable((4, 5, 8), CFG) == []


def test_outputs_are_read_with_their_tokens_second_or_not_at_all():
    y = np.arange(2 * 2 * 5 * 4, dtype=float).reshape(2, 2, 5, 4)
    (moved,) = along_tokens([y], CFG)
    assert moved.shape == (2, 5, 2, 4) and np.array_equal(moved[:, 3], y[:, :, 3])
    right = np.zeros((2, 5, 8))
    assert along_tokens([right], CFG)[0] is right
    assert along_tokens([np.zeros((2, 5, 5))], Config(d_in=5, d_out=4, heads=1, context_length=7, batch=2,
                                                       n=5)) is None  # two axes as long as the sequence
