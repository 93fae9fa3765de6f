"""The words causal-leakage gives a leak's pattern (checks.causal_leakage.describe_leak): they describe what was
measured, and point at a mistake only where the measurement tells it."""
import numpy as np

from checks.causal_leakage import LEAK_PATTERNS, describe_leak


def test_a_nan_gradient_is_not_pinned_on_a_mask_that_hides_the_diagonal():
    """trial6: an inverted mask (masked_fill(keep, -inf)) leaves the last token nothing to attend to; its report's
    root cause was right (mask-inverted, with its fix), but causal-leakage's words said "the mask also hides the
    diagonal (use triu(..., 1))", another mistake's fix; a softmax over the heads and a layer returning NaN were told
    the same.  A NaN gradient says a row has no allowed score, or the forward made a NaN: the words say so, with both
    ways a mask leaves a row empty."""
    G = np.zeros((1, 3, 3))
    G[0, 2, :] = np.nan  # the last token's row: an inverted mask hides everything there
    what, code = describe_leak(G)
    assert code == "nan" and "output 2" in what
    words = LEAK_PATTERNS[code]
    assert "inverted" in words and "diagonal" in words and "use triu" not in words, words


def test_a_small_leak_names_a_softmax_by_hand_beside_a_finite_fill():
    """trial6: exp(s - s.amax(-1)) * keep / sum leaks by rounding (its row maximum holds the future's score); the
    words said the usual cause is a finite fill, in a layer that fills nothing."""
    words = LEAK_PATTERNS["small-leak"]
    assert "finite fill" in words and "softmax written by hand" in words, words
