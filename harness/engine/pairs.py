"""Two catalogued mistakes at once, named from the numbers (issue 28: a layer with the wrong `view` order in both the
head split and the head merge was named by nothing, and its leak was sent to the mask).

Asked only when no single mistake's variant reproduces the module's output (`diagnosis._numeric` found none), on
the samples that search already took (the same transplanted weights, inputs and outputs: no second run of the
student's code).  A pair is two mistakes whose knobs of `reference.variants` compose (`variants.compose`: knobs set
apart, or the split's view order on different projections), so that the composed variant is both at once; it is
tried only when both mistakes are plausible here (each one's own check did not pass: `diagnosis.diagnose`'s
`possible`), which keeps the search to at most a few hundred numpy evaluations on small arrays (0.16 s measured with
every plain multi-head mistake plausible).

A pair is named only when all of these hold, on every sample:

1. the composed variant is the module's output, value for value within `compare.same`'s tolerance, and differs from
   the reference on at least one sample;
2. each of the two shows: the composed output differs from the other mistake alone on some sample (a pair whose
   second mistake changes nothing is the first one alone, or neither);
3. neither mistake, nor the two together, is the mirror of a correct module: a variant the reference computes under
   another reading of the same-shaped projections (queries and keys swapped is the lesson's layer with W_q and W_k
   read the other way round) proves nothing about the student's code;
4. it is the only such pair, or the only one whose two mistakes the recorded forward marks (a fill of 0 is both
   finite-fill's and mask-multiplied's number: the line tells which); a mistake that every such pair has needs no
   mark of its own (an inverted mask with a -1e4 fill reproduces with finite-fill's -10 and finite-fill-100's -100:
   the marked fill tells which, the inverted mask is in both).

A mistake whose effect hides the other's (no mask at all makes a finite fill invisible) does not reproduce as a pair
by rule 2, and is not named as one: the single mistake that reproduces is.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

import mutants
from harness.engine import fitting
from harness.engine.compare import same
from reference import numpy_ref, variants
from reference.rotary import with_rope


@dataclass(frozen=True)
class Sample:
    """One required configuration, as the single-mistake search saw it: input, transplanted weights, the module's
    output and the reference's."""
    x: np.ndarray
    heads: int
    w: numpy_ref.Weights
    y: np.ndarray
    expected: np.ndarray


def _output(s: Sample, knobs: dict, free: tuple[str, ...], rope):
    knobs = with_rope(knobs, rope)
    if not variants.applies(s.w, s.heads, knobs):
        return None
    return fitting.output(s.x, s.heads, s.w, knobs, free, s.y)


def _mirror(samples: list[Sample], knobs: dict, rope) -> bool:
    """The mistake's variant is the reference under another reading of the same-shaped W_q, W_k, W_v (on the first
    sample: a reading that reproduces is a reading on every one)."""
    s = samples[0]
    mine = _output(s, knobs, (), rope)
    if mine is None or same(mine, s.expected):
        return False
    roles = ("wq", "wk", "wv")
    for order in itertools.permutations(roles):
        if order == roles or len({getattr(s.w, r).shape for r in roles}) != 1:
            continue
        moved = {k + r[1]: getattr(s.w, k + o[1]) for r, o in zip(roles, order) for k in "wb"}  # and their biases
        other = numpy_ref.Weights(**{**vars(s.w), **moved})
        if same(mine, numpy_ref.forward(s.x, s.heads, other, rope=rope)):
            return True
    return False


def reproducing(samples: list[Sample], knobs: dict[str, dict], fitted: dict[str, tuple[str, ...]],
                rope=None, named_reading: bool = False) -> list[tuple[str, str]]:
    """Every pair of mistakes (ids in `knobs`, with their variants' knobs) that meets rules 1 to 3 on `samples`.
    `named_reading`: the weights are read the one way the parameters' names allow (`W_query`, `W_key`: the mapping
    by structure), so no other reading of them is plausible and rule 3 has nothing to refuse: a swap of the queries
    and keys is the student's own, as the single swapped-q-k is named under the same reading."""
    return [p for p, mirror in _composed(samples, knobs, fitted, rope) if named_reading or not mirror]


def mirrored(samples: list[Sample], knobs: dict[str, dict], fitted: dict[str, tuple[str, ...]],
             rope=None) -> list[tuple[str, str]]:
    """The pairs that meet rules 1 and 2 and are refused by rule 3 alone: the report says that more than one mistake
    may be present, without naming one."""
    return [p for p, mirror in _composed(samples, knobs, fitted, rope) if mirror]


def _composed(samples: list[Sample], knobs: dict[str, dict], fitted: dict[str, tuple[str, ...]],
              rope=None) -> list[tuple[tuple[str, str], bool]]:
    """Every pair that meets rules 1 and 2, and whether rule 3 refuses it (a mirror of a correct layer in it)."""
    found = []
    for a, b in itertools.combinations(sorted(knobs), 2):
        both = variants.compose(knobs[a], knobs[b])
        if both is None:
            continue
        free = fitted.get(a, ()) + fitted.get(b, ())
        shown, each = False, {a: False, b: False}
        for s in samples:
            theirs = _output(s, both, free, rope)
            if theirs is None or theirs.shape != s.y.shape or not same(s.y, theirs):
                break
            shown |= not same(theirs, s.expected)
            for one, other in ((a, b), (b, a)):  # does `one` show beside `other` alone?
                if not each[one]:
                    alone = _output(s, knobs[other], fitted.get(other, ()), rope)
                    each[one] = alone is None or alone.shape != theirs.shape or not same(alone, theirs)
        else:
            if shown and all(each.values()):
                found.append(((a, b), any(_mirror(samples, k, rope) for k in (knobs[a], knobs[b], both))))
    return _catalogued_first(found)


def _catalogued_first(found: list[tuple[tuple[str, str], bool]]) -> list[tuple[tuple[str, str], bool]]:
    """The pairs found, less those with a mistake named only by the trace (a divisor read off the output) where the
    same partner pairs with a catalogued mistake too: no scaling and a swap reproduce a layer, and so does any
    divisor, 1 among them, with the swap."""
    by_trace = mutants.named_by_trace()
    partners = {m for pair, _ in found if not set(pair) & by_trace for m in pair}
    return [(pair, mirror) for pair, mirror in found
            if not any(m in by_trace and (set(pair) - {m}) & partners for m in pair)]


def choose(found: list[tuple[str, str]], marks: list[dict], catalogue: dict) -> tuple[str, str] | None:
    """Rule 4: the one pair, or the one whose two mistakes the trace marks; in the order the forward reaches their
    lines (the first marked first), else the catalogue's."""
    if not found:
        return None
    shown = {m["id"] for m in marks}
    traced = lambda mid: bool(set(catalogue[mid].get("trace", ())) & shown)
    found = [p for p in found if all(traced(m) or m not in mutants.named_by_trace() for m in p)]  # a divisor
    # read off the output is named only where the trace marks its line (scale-other), in a pair as alone
    if not found:
        return None
    if len(found) > 1:
        common = set.intersection(*(set(p) for p in found))  # in every pair that reproduces: the numbers decided it
        found = [p for p in found if all(traced(m) for m in p if m not in common)]
        if len(found) != 1:
            return None
    step = {m["mutant"]: i for i, m in reversed(list(enumerate(marks))) if m.get("mutant")}
    return tuple(sorted(found[0], key=lambda m: (step.get(m, len(marks)), m)))
