"""Comparing numbers from the student's module with the reference's: the mismatch as data, formatted once.

Everything is float64 (inputs, weights, reference).  The tolerance is float32 rounding, relative 1e-5 and absolute
1e-6 of the largest expected magnitude, so that a layer computing its softmax in float32 (LLaMA style) is no false
alarm; every catalogued mistake differs by more than 1e-4.  A comparison returns `None` (equal within tolerance)
or a `Mismatch`: how many values differ out of how many, the greatest absolute and relative difference and where,
the values there, and the tolerance that was allowed, so that every renderer shows the same facts.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

RTOL, ATOL = 1e-5, 1e-6


@dataclass(frozen=True)
class Mismatch:
    shape_observed: tuple
    shape_expected: tuple
    differing: int = 0  # values outside the tolerance
    total: int = 0
    nonfinite: int = 0  # NaN or inf values where the expected value is finite
    max_abs: float = 0.0
    max_rel: float = 0.0
    index: tuple = ()
    observed_at: float = 0.0
    expected_at: float = 0.0
    rtol: float = RTOL
    atol: float = ATOL

    def describe(self, names=("yours", "reference")) -> str:
        if self.shape_observed != self.shape_expected:
            return f"shape {self.shape_observed} instead of {self.shape_expected}"
        if self.nonfinite:
            return f"{self.nonfinite} non-finite values (NaN or inf)"
        return (f"largest difference {self.max_abs:.3g} at index {self.index} ({names[0]} {self.observed_at:.6g}, "
                f"{names[1]} {self.expected_at:.6g}); {self.differing} of {self.total} values differ beyond "
                f"relative {self.rtol:g} + absolute {self.atol:g}·scale")

    def to_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}


def compare(observed: np.ndarray, expected: np.ndarray, rtol: float = RTOL, atol: float = ATOL,
            nan_equal: bool = False) -> Mismatch | None:
    """None when `observed` equals `expected` up to float32 rounding; otherwise the Mismatch.  `nan_equal`: for
    comparing the module with itself, where NaN in the same places is the same."""
    if observed.shape != expected.shape:
        return Mismatch(tuple(observed.shape), tuple(expected.shape))
    diff, bad = _differing(observed, expected, rtol, atol, nan_equal)
    if not bad.any():
        return None
    nonfinite = int((~np.isfinite(observed) & np.isfinite(expected)).sum())
    finite_diff = np.where(np.isfinite(diff), diff, -1.0)
    at = np.unravel_index(int(np.argmax(np.where(bad, finite_diff, -2.0))), diff.shape)
    rel = finite_diff / np.maximum(np.abs(expected), 1e-300)
    return Mismatch(tuple(observed.shape), tuple(expected.shape), int(bad.sum()), int(bad.size), nonfinite,
                    float(finite_diff.max(initial=0.0)), float(np.where(bad, rel, 0.0).max(initial=0.0)),
                    tuple(int(i) for i in at), float(observed[at]), float(expected[at]), rtol, atol)


def _differing(observed: np.ndarray, expected: np.ndarray, rtol: float, atol: float,
               nan_equal: bool) -> tuple[np.ndarray, np.ndarray]:
    """|observed - expected| and where it is beyond the tolerance (same shapes).  The scale is the largest FINITE
    expected magnitude: an inf in `expected` made every bound infinite, so any finite difference passed.  With
    `nan_equal` (the module against itself) a value equal to the other, the same infinity included, is the same:
    inf - inf is NaN, and an output holding inf twice in the same place was reported as differing between calls."""
    magnitude = np.abs(expected)
    finite = np.isfinite(magnitude)
    scale = max(1.0, float(magnitude[finite].max(initial=0.0)) if expected.size else 1.0)
    bound = atol * scale + rtol * np.where(finite, magnitude, 0.0)
    if nan_equal:
        alike = (np.isnan(observed) & np.isnan(expected)) | (observed == expected)
    else:
        alike = np.zeros(observed.shape, bool)
    with np.errstate(invalid="ignore"):
        diff = np.abs(observed - expected)
        bad = ~alike & ~(diff <= bound)  # NaN differences count as differing
    return diff, bad


def close(observed: np.ndarray, expected: np.ndarray) -> bool:
    """Equal up to float32 rounding, and finite."""
    return np.all(np.isfinite(observed)) and observed.shape == expected.shape and \
        not _differing(observed, expected, RTOL, ATOL, False)[1].any()


def close_each(observed: np.ndarray, candidates: list[np.ndarray]) -> list[bool]:
    """[close(observed, c) for c in candidates], the same answers, in a few array operations over all of them
    (view-order compares a module with some forty variants on every configuration)."""
    if not np.all(np.isfinite(observed)):
        return [False] * len(candidates)
    fitting = [i for i, c in enumerate(candidates) if c.shape == observed.shape]
    if not fitting or observed.size == 0:
        return [c.shape == observed.shape for c in candidates]
    answers = [False] * len(candidates)
    expected = np.stack([candidates[i] for i in fitting])
    axes = tuple(range(1, expected.ndim))
    magnitude = np.abs(expected)
    magnitude = np.where(np.isfinite(magnitude), magnitude, 0.0)  # the scale and bounds of finite values, as
    # _differing's: an inf candidate value is then no match for a finite one
    with np.errstate(invalid="ignore"):
        scale = np.maximum(1.0, np.max(magnitude, axis=axes, initial=0.0))
        bound = ATOL * scale.reshape((-1,) + (1,) * len(axes)) + RTOL * magnitude
        bad = ~(np.abs(observed - expected) <= bound)  # NaN differences count as differing
    for i, wrong in zip(fitting, bad.any(axis=axes) if axes else bad):
        answers[i] = not wrong
    return answers


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """For comparing the module with itself: equal up to rounding, NaN where the other has NaN.  `compare`'s
    answer without the Mismatch it would describe (diagnosis asks this thousands of times per submission, mostly of
    variants that differ: issue 27)."""
    return a.shape == b.shape and not _differing(a, b, RTOL, ATOL, True)[1].any()


def worst_difference(observed: np.ndarray, expected: np.ndarray, names=("yours", "reference")) -> str:
    mismatch = compare(observed, expected, nan_equal=True)
    return mismatch.describe(names) if mismatch else "no difference beyond rounding"
