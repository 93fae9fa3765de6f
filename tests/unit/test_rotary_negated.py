"""A rotary embedding turned by minus the usual angle (issue 28, gap 2 of the last trial; modded-nanogpt's first
rotary: y1 = x1 cos + x2 sin, y2 = -x1 sin + x2 cos).  Is it a bug?  Decided by evidence, here:

- the lesson has no rotary embedding at all (LM3-T5 adds no positions), so "differs from the lesson" cannot make it
  one: mha-check's rotary reference is the usual RoPE, which the lesson does not fix either;
- RoPE's one property is that scores depend on positions only through t - s (relative-position equivariance).  The
  negated rotation keeps it (test below), and it is exactly the usual rotation with one coordinate of every pair of
  W_q's and W_k's rows negated: the same family of layers under another reading of the weights.  A model trained
  with it is as good as one trained with the usual sign (modded-nanogpt trained its speed records with it).

So it is correct, and calling it cannot-tell left real evidence unused: before, every weight check of that file said
mha-check has "no reference for it".  Now the reference turned the other way reproduces it (tried only for a layer
that shows it is rotary, and no mistake is ever named under it), the weight checks pass, and the file keeps failing
mask-buffer for its real, latent bug (cos/sin cached in plain attributes stay behind on .to(device)); the
layer is tests/zoo/buggy/rotary_plain_attr_cache_negative_angle.py, written anew from that pattern."""
import numpy as np

from conftest import ZOO
from harness.child.inprocess import InProcess
from harness.engine.runner import Options, run_checks
from harness.sandbox.subject import Subject
from reference import numpy_ref
from reference.rotary import NEGATED, Rope, rotate

MODDED = ZOO / "buggy" / "rotary_plain_attr_cache_negative_angle.py"  # (modded-nanogpt's pattern, written anew)


def test_the_negated_rotation_keeps_scores_relative_and_is_the_usual_one_on_reflected_weights():
    q, k = np.random.default_rng(3).standard_normal((2, 6, 8))
    for conv in ("interleaved", "half"):
        neg = conv + NEGATED
        s0 = rotate(q, neg) @ rotate(k, neg).T
        s3 = rotate(q, neg, positions=np.arange(6) + 3.0) @ rotate(k, neg, positions=np.arange(6) + 3.0).T
        np.testing.assert_allclose(s0, s3, rtol=1e-10, atol=1e-10)  # relative positions only
        flip = np.ones(8)
        flip[slice(1, None, 2) if conv == "interleaved" else slice(4, 8)] = -1.0  # one coordinate of every pair
        np.testing.assert_allclose(s0, rotate(q * flip, conv) @ rotate(k * flip, conv).T, rtol=1e-10, atol=1e-10)
        assert np.abs(s0 - rotate(q, conv) @ rotate(k, conv).T).max() > 1e-3  # and not the usual numbers


def test_unapply_inverts_apply_for_the_negated_rotation():
    g = np.random.default_rng(4).standard_normal((2, 5, 8))
    for conv in ("interleaved", "half"):
        rope = Rope(conv + NEGATED)
        np.testing.assert_allclose(rope.unapply(rope.apply(g)), g, rtol=1e-12, atol=1e-12)
        assert "minus the usual angle" in rope.describe()


def test_the_negated_layer_is_not_taken_for_the_usual_one():
    """Under the usual rotation the negated layer's numbers differ beyond the checks' tolerance: without the
    negated reading there is no evidence either way, with it the evidence is exact."""
    rng = np.random.default_rng(5)
    w = numpy_ref.Weights(*(rng.standard_normal((8, 8)) for _ in range(4)))
    x = rng.standard_normal((2, 5, 8))
    usual = numpy_ref.forward(x, 2, w, rope=Rope("half"))
    assert np.abs(numpy_ref.forward(x, 2, w, rope=Rope("half" + NEGATED)) - usual).max() > 1e-3


def test_modded_nanogpts_weight_checks_run_and_pass_and_its_real_bug_still_fails():
    target = f"{MODDED}:RotarySelfAttention"
    opts = Options(only=["reference-match", "gradient-match", "view-order", "mask-buffer"], examples=2)
    report = run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))
    assert report.adapter.mapping["proof"] == "reference"
    assert "minus the usual angle" in report.adapter.mapping["rope"]
    assert {c: report[c].status for c in ("reference-match", "gradient-match", "view-order")} == \
        {"reference-match": "pass", "gradient-match": "pass", "view-order": "pass"}
    assert report["mask-buffer"].status == "fail"  # cos/sin cached in plain attributes: the real latent bug
    assert report.diagnosis is None or report.diagnosis.mutant is None  # and no mistake named for it
