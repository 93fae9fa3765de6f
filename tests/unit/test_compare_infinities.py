"""Comparing the module with itself when its output holds inf (TransformerLens 1.0.0's Attention built by a factory
runs on parameters left torch.empty, whose garbage makes inf; tests/realzoo/README.md, Realzoo14): batch-independence
said "the same input gave different outputs in two calls: largest difference 0 ... (second time inf, first time
inf)", because inf - inf is NaN and NaN counted as differing; and an inf anywhere in the expected values made the
tolerance infinite, so any finite difference passed."""
import numpy as np

from harness.engine.compare import compare, same, worst_difference


def test_the_same_infinity_twice_is_the_same():
    a = np.array([[1.0, np.inf, -np.inf, np.nan]])
    assert same(a, a.copy())
    assert worst_difference(a, a.copy()) == "no difference beyond rounding"


def test_an_infinity_elsewhere_does_not_hide_a_finite_difference():
    a = np.array([[1.0, np.inf, 2.0]])
    b = np.array([[1.0, np.inf, 3.0]])
    assert not same(a, b)
    found = compare(b, a, nan_equal=True)
    assert (found.differing, found.index, found.max_abs) == (1, (0, 2), 1.0)


def test_infinities_of_opposite_sign_differ():
    assert not same(np.array([np.inf]), np.array([-np.inf]))
