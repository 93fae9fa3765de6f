"""What `mha-check explain` says a mistake does, checked against what its mutant computes.

A mutant's texts (its worked example, symptom and exercise task) make claims a student will test by hand: "y[:, 0]
depends on x[:, 1]", "the last token's output is NaN".  `explain sdpa-bool-mask` once said y[:, 0] never depends on
x[:, 0], which is false (token 0's query weighs the keys it may see, whichever they are).  Every line of those texts
that speaks of an output position's dependence or of NaN is listed here with the claims it makes, and each claim is
computed on the mutant: a line that makes such a claim and is not listed fails the first test, so no unchecked
sentence of this kind can come back.

Dependence is read by changing the input at one position (both sequences of the batch) and comparing the output at
another, NaN equal to NaN: "depends" is a change larger than 1e-9, "independent" none larger than 1e-12 (the weights
a mask hides are exact zeros).  Gradients would not do: a NaN row poisons every position's backward pass.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import mutants

MENTIONS = re.compile(r"\b[yx]\[:, ?\d\]|output is (NaN|0)\b|all zeros|NaN values|output has NaN|output changes when|"
                      r"gives NaN")
FIELDS = ("example", "symptom", "task")


def dep(*pairs):  # (t, s): y[:, t] changes when x[:, s] changes
    return ("depends", pairs)


def indep(*pairs):  # (t, s): y[:, t] does not change when x[:, s] changes
    return ("independent", pairs)


def nan(*rows):  # exactly these positions' outputs are NaN (all their features, in every sequence)
    return ("nan", rows)


def batch():  # the first sequence's output changes when only the second sequence changes
    return ("batch", ())


def constant(t):  # y[:, t] is the same whatever the input
    return indep((t, 0), (t, 1), (t, 2))


# mutant -> [(a phrase of one of its lines, [claims], mode)]; mode "train": model.train() with dropout 0
CLAIMS = {
    "mask-hides-diagonal": [("16 NaN values: all 8 features of token 0", [nan(0)], "eval"),
                            ("first token has nothing left to attend to", [nan(0)], "eval"),
                            ("The output of the first token is NaN", [nan(0)], "eval")],
    "mask-inverted": [("so y[:, 2] is NaN", [nan(2)], "eval"),
                      ("the last token has nothing left to attend to, so its output is NaN", [nan(2)], "eval"),
                      ("The output of the last token is NaN, and each output depends on later tokens",
                       [nan(2), dep((0, 1), (0, 2), (1, 2))], "eval")],
    "mask-lets-one-future": [("so y[:, 0] depends on x[:, 1] and y[:, 1] on x[:, 2]", [dep((0, 1), (1, 2))], "eval"),
                             ("Each token's output changes when the next token changes", [dep((0, 1), (1, 2))],
                              "eval")],
    "no-mask": [("so y[:, 0] depends on x[:, 1] and x[:, 2]: changing token 2 moves the outputs of tokens 0 and 1",
                 [dep((0, 1), (0, 2), (1, 2))], "eval"),
                ("An early token's output changes when a later token changes.", [dep((0, 1), (0, 2))], "eval")],
    "mask-added": [("An early token's output changes when a later token changes", [dep((0, 1), (0, 2))], "eval")],
    "mask-multiplied": [("An early token's output changes when a later token changes", [dep((0, 1), (0, 2))],
                         "eval")],
    "single-masked-fill-discarded": [("Each position's output changes when a later token changes",
                                      [dep((0, 1), (0, 2), (1, 2))], "eval")],
    "batch-seq-swap": [("a sequence's output changes when the other sequences in the batch change", [batch()],
                        "eval")],
    "sdpa-bool-mask": [
        ("so y[:, 0] depends on x[:, 1] and x[:, 2], and on x[:, 0] through its query",
         [dep((0, 0), (0, 1), (0, 2))], "eval"),
        ("y[:, 1] only on x[:, 2] (one key left: weight 1 whatever the query), and y[:, 2] on none",
         [dep((1, 2)), indep((1, 0), (1, 1)), constant(2)], "eval"),
        ("row 2 to nothing (its attention output is 0)", [constant(2)], "eval"),
        ("its output is the output projection's bias alone, whatever the input", [constant(2)], "eval"),
        ("The last token's output is the same whatever the input, and each token's output depends on later tokens",
         [constant(2), dep((0, 1), (1, 2))], "eval")],
    "single-mask-tril": [("the last token's output is NaN", [nan(2)], "eval"),
                         ("softmax row is all -inf and gives NaN", [nan(2)], "eval"),
                         ("The output has NaN at the last position, and early positions see later tokens",
                          [nan(2), dep((0, 1), (0, 2))], "eval")],
    "single-softmax-wrong-axis": [("token 0's output changes when token 2 changes", [dep((0, 2))], "eval")],
    "softmax-wrong-axis": [("so y[:, 0] depends on x[:, 1] and x[:, 2]", [dep((0, 1), (0, 2))], "eval")],
    "train-only-leak": [("model.eval(): the gradient map of y[:, 0] is [+, 0, 0]",
                         [dep((0, 0)), indep((0, 1), (0, 2))], "eval"),
                        ("the map is [+, +, +]: y[:, 0] depends on x[:, 1] and x[:, 2]",
                         [dep((0, 0), (0, 1), (0, 2))], "train")],
    "zero-after-softmax": [("so y[:, 0] changes when x[:, 1] or x[:, 2] change", [dep((0, 1), (0, 2))], "eval")],
}
UNCHECKED = {  # lines that match MENTIONS but claim nothing these tests can compute, and why
    ("additive-mask-1e9", "1e30 wins the softmax: y[:, 0] changes"): "a claim about inputs of size 1e30: "
    "causal-leakage's 1e30 probe is what shows it (tests/unit/test_mutants.py kills the mutant with it)",
}


def _texts(mid: str) -> dict[str, str]:
    """The mutant's own texts, from its module (the catalogue is derived from them, and regenerated later)."""
    info = mutants.get(mid).INFO
    return {f: getattr(info, f) or "" for f in FIELDS}


def _lines():
    for mid in mutants.ids():
        for text in _texts(mid).values():
            for line in text.splitlines():
                if MENTIONS.search(line):
                    yield mid, line


def test_every_line_that_claims_a_dependence_or_a_nan_is_checked():
    unlisted = []
    for mid, line in _lines():
        phrases = [p for p, _, _ in CLAIMS.get(mid, [])] + [p for m, p in UNCHECKED if m == mid]
        if not any(p in line for p in phrases):
            unlisted.append((mid, line))
    assert unlisted == []


@pytest.mark.parametrize("mid,phrase", [(m, p) for m, claims in CLAIMS.items() for p, _, _ in claims] +
                         list(UNCHECKED), ids=lambda v: v if len(v) < 30 else v[:30])
def test_each_listed_phrase_is_still_in_the_mutants_texts(mid, phrase):
    assert any(phrase in text.replace("\n", " ") for text in _texts(mid).values())


def _module(mid: str, mode: str) -> torch.nn.Module:
    cls = getattr(mutants.get(mid), mutants.class_name(mid))
    torch.manual_seed(0)
    with torch.random.fork_rng():
        module = cls(8, 8, 16, 0.0) if mutants.form(mid) == "single-head" else cls(8, 2, 16)
    module = module.double()
    return module.train(mode == "train")


def _changes(module, x: torch.Tensor, t: int, s: int) -> float:
    """The largest change of y[:, t] when x[:, s] changes (NaN where it was NaN counts as no change)."""
    with torch.no_grad():
        before = module(x)[:, t].numpy()
        moved = x.clone()
        moved[:, s] += torch.from_numpy(np.random.default_rng([t, s]).standard_normal(moved[:, s].shape))
        after = module(moved)[:, t].numpy()
    same_nan = np.isnan(before) & np.isnan(after)
    if (np.isnan(before) != np.isnan(after)).any():
        return float("inf")
    return float(np.abs(np.where(same_nan, 0.0, after - before)).max())


@pytest.mark.parametrize("mid,phrase,claims,mode", [(m, p, c, mode) for m, listed in CLAIMS.items()
                                                    for p, c, mode in listed], ids=lambda v: str(v)[:30])
def test_the_claim_holds_on_the_mutant(mid, phrase, claims, mode):
    module = _module(mid, mode)
    x = torch.from_numpy(np.random.default_rng(7).standard_normal((2, 3, 8)))
    for kind, args in claims:
        if kind == "batch":
            moved = x.clone()
            moved[1] += 1.0
            with torch.no_grad():
                assert (module(moved)[0] - module(x)[0]).abs().max() > 1e-9, phrase
        elif kind == "nan":
            with torch.no_grad():
                rows = torch.isnan(module(x)).all(-1).all(0).nonzero().flatten().tolist()
                assert not torch.isnan(module(x)[:, [r for r in range(3) if r not in args]]).any(), phrase
            assert rows == list(args), phrase
        else:
            for t, s in args:
                moved = _changes(module, x, t, s)
                assert (moved > 1e-9) if kind == "depends" else (moved <= 1e-12), (phrase, t, s, moved)
