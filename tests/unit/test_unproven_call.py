"""How forward is called where no reading of the parameters proves it (harness.engine.unproven_call, issue 28): by
whether the future leaks, so that a layer no reading reproduces whose forward takes an optional mask gets the
weight-free checks' verdicts instead of "cannot tell how to call your forward".  The layer here has no output
projection and a gain on its output that no role reads: read without W_o (issue 28 item 3), neither the lesson's
layer nor a known mistake reproduces it, so no reading proves how to call it."""
from __future__ import annotations

import numpy as np
import pytest

from harness.child.inprocess import InProcess
from harness.sandbox.subject import Subject
from harness.engine.runner import Options, run_checks
from harness.render import view
from harness.engine.unproven_call import CAUSAL, LEAKS, MASKS_SOME, UNCLEAR, WINDOW, WRONG_SHAPE, CallEvidence, judge
from harness.wire.config import Config
from harness.wire.messages import JacobianResult

CFG = Config(d_in=2, d_out=2, heads=1, context_length=3, batch=1, n=3)


def _jacobian(G: np.ndarray) -> JacobianResult:
    """A Jacobian (B, n, B, n, d_in) whose influence map is G (n, n): G[t, s] on the first feature."""
    jac = np.zeros((1, 3, 1, 3, 2))
    jac[0, :, 0, :, 0] = G
    return JacobianResult(shape=[1, 3, 2], jac=jac)


LOWER = np.tril(np.ones((3, 3)))


@pytest.mark.parametrize("result, seen", [
    (_jacobian(LOWER), CAUSAL),
    (_jacobian(LOWER + np.triu(np.ones((3, 3)), 1) * 1e-40), LEAKS),  # a sliver of the future is a leak
    (_jacobian(np.tril(np.ones((3, 3)), 1)), MASKS_SOME),  # the next token seen, the one after it hidden
    (_jacobian(np.triu(np.ones((3, 3)))), MASKS_SOME),  # its own mask the wrong way round: the past hidden, the
    # future seen (triu where tril was meant, a trial's Hugging Face-style layer)
    (_jacobian(np.where(LOWER > 0, np.nan, 0.0)), LEAKS),
    (JacobianResult(no_graph=True, shape=[1, 3, 2]), LEAKS),  # a detached output is not causal under any call
    (JacobianResult(shape=[1, 1, 3, 2]), WRONG_SHAPE),
    (_jacobian(np.eye(3)), UNCLEAR),  # no leak, but no past: our axes may be read otherwise (sequence-first)
], ids=["causal", "leak", "one-future", "past-hidden-future-seen", "nan", "no-graph", "shape", "dead-past"])
def test_one_call_is_judged_by_its_gradients(result, seen):
    assert judge(result, CFG) == seen


def test_the_evidence_says_which_calls_ran_and_that_the_rest_raised():
    evidence = CallEvidence(0, (("forward(x)", LEAKS), ("forward(x, mask=A)", None), ("forward(x, mask=B)", LEAKS)))
    assert evidence.every_call_leaks
    assert evidence.ran() == "forward(x), forward(x, mask=B); 1 other raised"
    assert "under every way of calling it that ran" in evidence.note()
    assert not CallEvidence(0, (("forward(x)", LEAKS), ("forward(x, mask=A)", UNCLEAR))).every_call_leaks


LAYER = '''
import math
import torch
import torch.nn as nn


class NoProjection(nn.Module):
    """Three projections, heads split, no output projection, a gain on the output; forward(x, mask=None)."""

    def __init__(self, d_model, n_heads, block_size):
        super().__init__()
        self.h = n_heads
        self.query, self.key, self.value = (nn.Linear(d_model, d_model) for _ in range(3))
        self.gain = nn.Parameter(torch.tensor(2.0))  # no role reads it: no reading reproduces the layer
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x, mask=None):
        B, T, C = x.shape
        q, k, v = (f(x).view(B, T, self.h, C // self.h).transpose(1, 2) for f in (self.query, self.key, self.value))
        att = q @ k.transpose(-2, -1) / math.sqrt(C // self.h)
        if mask is None:
            DEFAULT
        MASKING
        y = torch.softmax(att, dim=-1) @ v
        RETURN
'''
OWN_MASK = "mask = self.tril[:T, :T]"
FILL = 'att = att.masked_fill(mask == 0, float("-inf"))'
MERGE = "return y.transpose(1, 2).contiguous().view(B, T, C) * self.gain"


def _report(tmp_path, default=OWN_MASK, masking=FILL, ret=MERGE, only=("causal-leakage",)):
    path = tmp_path / "layer.py"
    path.write_text(LAYER.replace("DEFAULT", default).replace("MASKING", masking).replace("RETURN", ret))
    target = f"{path}:NoProjection"
    opts = Options(only=list(only), examples=2, diagnose=False)
    return run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))


def test_a_layer_that_masks_itself_is_judged_under_the_plain_call(tmp_path):
    report = _report(tmp_path)
    assert report["output-shape"].status == "pass"
    leakage = report["causal-leakage"]
    assert leakage.status == "pass" and "called as forward(x), the first way tried" in leakage.message
    mapping = report.adapter.mapping
    assert mapping["proof"] == "none" and mapping["call"] == "forward(x)" and "not proven" in mapping["note"]
    assert "could not tell how to pass the causal mask" not in mapping["problem"]


def test_a_leak_under_every_call_is_a_failure_without_any_mapping(tmp_path):
    """Scores multiplied by the 0/1 mask: a masked score is 0, not -inf, whatever mask the caller gives."""
    report = _report(tmp_path, masking="att = att * mask")
    leakage = report["causal-leakage"]
    assert leakage.status == "fail" and "the same under every way of calling forward that ran" in leakage.message
    assert "; forward was called as forward(x): under every way of calling it that ran" in view.build(report).mapping


def test_a_layer_that_leaves_the_mask_to_its_caller_is_judged_with_a_mask(tmp_path):
    """Called without a mask it attends to everything, as it should: one convention is causal, so no failure."""
    report = _report(tmp_path, default="mask = torch.ones(T, T)  # nothing masked: the caller's choice")
    leakage = report["causal-leakage"]
    assert leakage.status == "pass" and "called as forward(x, mask=causal mask" in leakage.message
    assert "called as forward(x) it lets the future through, as a layer that leaves the mask" in leakage.message
    assert "(called as forward(x) or 3 other ways before it, some output" in report.adapter.mapping["note"]


def test_a_default_mask_that_leaks_is_the_layers_own_leak_even_if_a_callers_mask_would_not(tmp_path):
    """tril(..., diagonal=1) as the default: called without a mask, the next token is seen and the rest hidden, so
    the layer masks by itself; a caller's causal mask (True = keep) would make it causal, and used to pass it."""
    report = _report(tmp_path, default="mask = torch.tril(torch.ones(T, T), diagonal=1)")
    leakage = report["causal-leakage"]
    assert leakage.status == "fail" and leakage.details["finding"] == "leak:one-future"
    assert "called as forward(x), your layer hides some positions and lets a later one through" in leakage.message
    assert report.adapter.mapping["call"] == "forward(x)"


def test_per_head_outputs_are_an_output_shape_failure_not_an_unknown_call(tmp_path):
    shape = _report(tmp_path, ret="return y", only=("output-shape",))["output-shape"]
    assert shape.status == "fail" and "= (B, H, n, dh) (the heads not merged back" in shape.message


def test_calls_that_show_no_leak_and_no_past_are_no_evidence(tmp_path):
    """Each output depends on its own token only under every call (as a sequence-first layer reads our batch-first
    input): that may be our reading of the axes, so the call stays undecided."""
    report = _report(tmp_path, default="pass", masking="att = torch.zeros_like(att) + torch.eye(T) * 1e9")
    assert report["output-shape"].status == "cannot_tell"
    assert "could not tell how to call your forward" in report["output-shape"].message


def test_a_default_mask_mishandled_is_the_layers_own_leak_though_another_convention_is_causal(tmp_path):
    """`att + mask` with its own 0/1 tril as the default (+1 on the past): a caller's additive -inf mask makes it
    causal and used to pass it.  Called without a mask it computes exactly what it computes given the causal mask
    as True = keep (its default), which leaks: the plain call is judged, and it fails (issue 28)."""
    report = _report(tmp_path, masking="att = att + mask")
    leakage = report["causal-leakage"]
    assert leakage.status == "fail" and report.adapter.mapping["call"] == "forward(x)"
    assert "computes exactly what it computes as forward(x, mask=causal mask" in leakage.message
    assert "its own default mask" in report.adapter.mapping["note"]


@pytest.mark.parametrize("masking", ["att = att + mask", 'att = att.masked_fill(mask == 0, float("-inf"))',
                                     "att = att.masked_fill(mask, float('-inf'))"], ids=["additive", "keep", "masked"])
def test_a_layer_that_leaves_the_mask_to_its_caller_passes_in_each_convention(tmp_path, masking):
    """No default mask (the plain call attends to everything): no mask tried reproduces that, so no default is
    read into it, and the convention that makes it causal is used."""
    report = _report(tmp_path, default="pass", masking=f"att = att if mask is None else {masking.split(' = ', 1)[1]}")
    assert report["causal-leakage"].status == "pass", report["causal-leakage"].message


def test_a_layer_whose_own_mask_hides_the_past_and_shows_the_future_fails_under_the_plain_call(tmp_path):
    """A trial's Hugging Face-style layer made its own causal mask with triu where tril was meant and took an
    optional additive mask: called without one it hides the past and shows the future; with a caller's causal mask
    only the diagonal is left, causal but not depending on the past.  No call was judged causal, so output-shape
    could not tell how to call forward and every check was skipped: a real bug with no failing check.  The plain call
    hides positions by itself, so the layer masks itself, wrongly: judged there, it leaks."""
    report = _report(tmp_path, default="mask = 1 - self.tril[:T, :T] + torch.eye(T)")
    assert report["output-shape"].status == "pass"
    assert report["causal-leakage"].status == "fail"


BAND = np.tril(np.ones((4, 4))) - np.tril(np.ones((4, 4)), -2)  # each token and the one before it: a window of 2


@pytest.mark.parametrize("G, seen", [
    (BAND, WINDOW),
    (np.tril(np.ones((4, 4))), CAUSAL),
    (np.eye(4), UNCLEAR),  # the diagonal alone: a sequence-first layout read batch-first, no evidence
    (BAND - np.diag([0, 0, 0, 1]), UNCLEAR),  # a row without its own token: no band
    (BAND + np.tril(np.ones((4, 4)), -3), UNCLEAR),  # a far token seen past a dead one: not a window
], ids=["window", "causal", "diagonal", "own-token-missing", "holes"])
def test_a_causal_band_is_a_sliding_window_not_an_unknown_layout(G, seen):
    """A window hides every earlier position more than k back, keeps the k before each token and the token itself
    (k >= 1), and lets no later one through: evidence about the layer, where the diagonal alone is not."""
    jac = np.zeros((1, 4, 1, 4, 2))
    jac[0, :, 0, :, 0] = G
    assert judge(JacobianResult(shape=[1, 4, 2], jac=jac), Config(d_in=2, d_out=2, heads=1, context_length=4,
                                                                    batch=1, n=4)) == seen


def test_a_sliding_window_no_reading_reproduces_fails_causal_leakage_without_a_proof(tmp_path):
    """audiocraft's past_context (tests/realzoo): each token sees itself and the two before it.  No reading
    reproduces the layer (the gain), yet no way of calling it is needed to see that the early tokens do not count:
    it was "cannot tell how to call your forward" with every weight-free check skipped."""
    window = ("i = torch.arange(T).view(-1, 1); j = torch.arange(T).view(1, -1); "
              "att = att.masked_fill((i - j < 0) | (i - j > 2), float('-inf'))")  # whatever mask is given
    report = _report(tmp_path, default="pass", masking=window, only=("output-shape", "causal-leakage"))
    assert report["output-shape"].status == "pass"
    leakage = report["causal-leakage"]
    assert leakage.status == "fail" and leakage.details["finding"] == "leak:dead-past", leakage.message
    assert report.adapter.mapping["call"] == "forward(x)" and "not proven" in report.adapter.mapping["note"]
