"""Masks multiplied into or added to the scores, and finite fills of any value (issue 28): named from the numbers,
with the mistake's free value read off the module's output (harness.engine.fitting), and a default mask that leaks
found behind an optional mask argument (harness.engine.mapping) without failing a correct layer under any
convention."""
from __future__ import annotations

import numpy as np
import pytest

from harness.child.inprocess import InProcess
from harness.engine import fitting, rewrite
from harness.engine.compare import same
from harness.engine.runner import Options, run_checks
from harness.sandbox.subject import Subject
from reference import numpy_ref, variants


def _weights(d=8, seed=0):
    rng = np.random.default_rng(seed)
    w = numpy_ref.Weights(wq=rng.standard_normal((d, d)), wk=rng.standard_normal((d, d)),
                          wv=rng.standard_normal((d, d)), wo=rng.standard_normal((d, d)), bo=rng.standard_normal(d))
    return w, rng.standard_normal((2, 5, d))


@pytest.mark.parametrize("knobs, value", [
    ({"fill": -10.0}, -1e-12),  # hyunwoongko's -e: the future's scores about 0
    ({"fill": -10.0}, 0.0),  # scores multiplied by the mask
    ({"fill": -10.0}, -3.7), ({"fill": -10.0}, 2.5), ({"fill": -10.0}, -25.0),
    ({"mask_op": "add", "fill": 1.0}, 1.0),  # att + (1 - keep): +1 on the future
    ({"mask_op": "add", "fill": 1.0}, -1.0),  # att + keep: +1 on the past
], ids=["-1e-12", "0", "-3.7", "2.5", "-25", "add+1", "add-1"])
def test_a_free_value_is_read_off_the_output_and_the_variant_then_is_the_output(knobs, value):
    w, x = _weights()
    y = variants.forward(x, 2, w, **{**knobs, "fill": value})
    assert abs(fitting.fit(x, 2, w, knobs, "fill", y) - value) < 1e-6
    assert same(y, fitting.output(x, 2, w, knobs, ("fill",), y))


@pytest.mark.parametrize("other", [{"scale": "none"}, {"mask": "none"}, {"softmax_axis": -2}, {"mask": "inverted"}])
def test_another_mistake_is_no_value_of_a_fill(other):
    """The fit only proposes a value: another mistake's output is not the variant at any value (a missing mask is
    not a fill of any constant, the last row without a future already differs under another scale)."""
    w, x = _weights(seed=1)
    y = variants.forward(x, 2, w, **other)
    for knobs in ({"fill": -10.0}, {"mask_op": "add", "fill": 1.0}):
        assert not same(y, fitting.output(x, 2, w, knobs, ("fill",), y))


def test_without_a_free_knob_the_declared_variant_is_used():
    w, x = _weights()
    y = variants.forward(x, 2, w, fill=-3.0)
    assert not same(y, fitting.output(x, 2, w, {"fill": -10.0}, (), y))


@pytest.mark.parametrize("line, fixed", [
    ("wei = wei * self.tril[:T, :T]", 'wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))'),
    ("scores = scores * ~self.mask[:n, :n]  # BUG", 'scores = scores.masked_fill((~self.mask[:n, :n]) == 0, '
                                                   'float("-inf"))'),
    ("att = mask * att", 'att = att.masked_fill(mask == 0, float("-inf"))'),
    ("att = att * (1 - future)", 'att = att.masked_fill((1 - future) == 0, float("-inf"))'),
    ("y = a * b", None), ("att = att * 0.5", None),
])
def test_a_multiplied_mask_is_rewritten_as_a_fill_where_it_is_zero(line, fixed):
    assert rewrite.own_line_fix("multiply", line) == fixed


LAYER = '''
import math
import torch
import torch.nn as nn


class Attn(nn.Module):
    """Three projections and an output projection (so that the weights can be mapped); forward(x, mask=None)."""

    def __init__(self, d_model, n_heads, block_size):
        super().__init__()
        if d_model % n_heads:
            raise ValueError("d_model must be divisible by n_heads")
        self.h = n_heads
        self.query, self.key, self.value = (nn.Linear(d_model, d_model) for _ in range(3))
        self.proj = nn.Linear(d_model, d_model)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x, mask=None):
        B, T, C = x.shape
        q, k, v = (f(x).view(B, T, self.h, C // self.h).transpose(1, 2) for f in (self.query, self.key, self.value))
        att = q @ k.transpose(-2, -1) / math.sqrt(C // self.h)
        DEFAULT
        MASKING
        y = torch.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
'''
OWN = "mask = self.tril[:T, :T] if mask is None else mask  # 1 = keep"
NONE = "pass  # no mask: the caller's choice"


def _report(tmp_path, default, masking):
    path = tmp_path / "layer.py"
    path.write_text(LAYER.replace("DEFAULT", default).replace("MASKING", masking))
    target = f"{path}:Attn"
    opts = Options(only=["causal-leakage", "reference-match"], examples=2)
    return run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))


@pytest.mark.parametrize("default, masking, call", [
    (NONE, 'att = att if mask is None else att.masked_fill(mask == 0, float("-inf"))', "bool, True = keep"),
    (OWN, 'att = att.masked_fill(mask == 0, float("-inf"))', "forward(x)"),
    (NONE, "att = att if mask is None else att.masked_fill(mask, float('-inf'))", "bool, True = masked"),
    (NONE, "att = att if mask is None else att + mask", "additive, -inf = masked"),
], ids=["keep-fill", "keep-fill-own-default", "masked-fill", "additive"])
def test_a_correct_layer_passes_under_the_convention_that_makes_it_causal(tmp_path, default, masking, call):
    """Each convention a correct layer may have: under the others it leaks (masked_fill(mask == 0) given a mask
    that is True where hidden hides the past), and that is never held against it."""
    report = _report(tmp_path, default, masking)
    assert [(c.id, c.status) for c in report.checks if c.status != "pass"] == [] and report.diagnosis is None
    assert call in report.adapter.mapping["call"]


@pytest.mark.parametrize("default, masking, mistake, call", [
    (NONE, "att = att if mask is None else att * mask", "mask-multiplied", "bool, True = keep"),
    (OWN, "att = att * mask", "mask-multiplied", "bool, True = keep"),
    (NONE, "att = att if mask is None else att * mask.float()", "mask-multiplied", "bool, True = keep"),
    (OWN, "att = att + (1 - mask)", "mask-added", "float, 1 = keep"),
    (NONE, "att = att if mask is None else att + (1 - mask.float())", "mask-added", "bool, True = masked"),
    (OWN, "att = att + mask", "mask-added", "forward(x)"),
], ids=["multiply", "multiply-own-default", "multiply-bool", "add-future", "add-future-no-default",
        "add-keep-own-default"])
def test_a_mask_multiplied_or_added_fails_and_is_named_under_every_convention(tmp_path, default, masking, mistake,
                                                                             call):
    """A multiplied mask is causal under no convention (0 or ±inf where -inf is needed), nor is +1 on the future.
    +1 on the past (`att + mask` with its own 0/1 default) is causal under a caller's additive -inf mask and used
    to pass: called without a mask, its default is mask-added's numbers, so the plain call is the one judged."""
    report = _report(tmp_path, default, masking)
    assert report["causal-leakage"].status == "fail" and report["reference-match"].status == "fail"
    assert (report.diagnosis.mutant, report.diagnosis.match) == (mistake, "numbers")
    assert call in report.adapter.mapping["call"]
    if call == "forward(x)":
        assert "called without a mask, your forward masks by itself" in report.adapter.mapping["note"]



@pytest.mark.parametrize("buffer, diagnosis", [
    ("torch.ones(block_size, block_size)", "no-mask"),
    ("torch.ones(1, 1, block_size, block_size).bool()", "no-mask"),
    ("torch.tril(torch.ones(block_size, block_size))", None),
], ids=["ones", "all-true-4d", "tril"])
def test_an_own_mask_that_hides_nothing_is_no_mask_though_a_callers_mask_would_make_it_causal(tmp_path, buffer,
                                                                                             diagnosis):
    """eztransformer's CausalSelfAttention for recent_context=None: its mask buffer is all True and an attn_mask
    argument replaces it, so the plain call is unmasked attention and a caller's causal mask makes it the lesson's
    layer.  It used to pass, read as a layer that leaves the mask to its caller; the buffer over the context holding
    one value everywhere is its own mask hiding nothing: the plain call is judged, no-mask named.  The same layer
    with a causal buffer passes as before."""
    path = tmp_path / "layer.py"
    path.write_text(LAYER.replace("torch.tril(torch.ones(block_size, block_size))", buffer)
                    .replace("DEFAULT", OWN.replace("self.tril[:T, :T]", "self.tril[..., :T, :T]"))
                    .replace("MASKING", 'att = att.masked_fill(mask == 0, float("-inf"))'))
    target = f"{path}:Attn"
    opts = Options(only=["causal-leakage", "reference-match"], examples=2)
    report = run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))
    if diagnosis is None:
        assert [(c.id, c.status) for c in report.checks if c.status != "pass"] == [] and report.diagnosis is None
        return
    assert report["causal-leakage"].status == "fail" and report["reference-match"].status == "fail"
    assert report.diagnosis.mutant == diagnosis
    assert "hides nothing" in report.adapter.mapping["note"] and "forward(x)" in report.adapter.mapping["call"]

def _marks(tmp_path, default, masking) -> list[str]:
    from harness.frontends.trace import trace
    path = tmp_path / "layer.py"
    path.write_text(LAYER.replace("DEFAULT", default).replace("MASKING", masking))
    result = trace(f"{path}:Attn", make_subject=lambda spec, overrides, seed, weight_map: Subject(
        spec, overrides, seed, start=InProcess()))
    assert result.error is None
    return [m["id"] for m in result.mistakes]


@pytest.mark.parametrize("masking, marked", [
    ("att = att * mask", ["mask-multiplied"]),
    ("att = att + (1 - mask)", ["mask-added"]),
    ("att = att + mask", ["mask-added"]),
    ('att = att.masked_fill(mask == 0, float("-inf"))', []),
    ('att = att + torch.zeros_like(mask).masked_fill(mask == 0, float("-inf"))', []),  # additive, 0 or -inf
    ("att = att + (1 - mask) * -1e9", ["additive-finite-mask"]),  # additive-finite-mask's, not a 0/1 mask
    ("att = att + (1 - mask) * -1e4", ["fill-leaks-invisibly"]),  # CTRL's: it leaks at -5e4 as a -1e4 fill does
], ids=["multiplied", "added-future", "added-past", "fill", "additive-inf", "additive-1e9", "additive-1e4"])
def test_trace_marks_a_mask_multiplied_or_added_and_not_a_right_one(tmp_path, masking, marked):
    assert _marks(tmp_path, OWN, masking) == marked


def test_a_product_completed_by_a_fill_is_not_a_multiplied_mask(tmp_path):
    """GPT-2's `w * b - 1e4 * (1 - b)` (the real-code zoo's pytorch-pretrained-bert entry) fills the future with
    -1e4 by arithmetic: a finite fill, not a product left as it is; likewise a product followed by a -inf fill."""
    assert _marks(tmp_path, OWN, "att = att * mask - 1e4 * (1 - mask)") == []
    assert _marks(tmp_path, OWN, 'att = (att * mask).masked_fill(mask == 0, float("-inf"))') == []


@pytest.mark.parametrize("fill", ["-1e-12", "-3.0", "0.0"])
def test_a_finite_fill_of_any_value_behind_a_mask_argument_is_named_with_its_own_value(tmp_path, fill):
    """hyunwoongko's -1e-12 (the real-code zoo), and values no mutant has: finite-fill from the numbers, its fill
    read off the output, and the title tells the line's own value (never the catalogue's -10)."""
    report = _report(tmp_path, NONE, f"att = att if mask is None else att.masked_fill(mask == 0, {fill})")
    assert (report.diagnosis.mutant, report.diagnosis.match) == ("finite-fill", "numbers")
    assert report.diagnosis.title == f"Masked scores filled with {float(fill):g} instead of -inf"
