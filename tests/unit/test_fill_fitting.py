"""Finite fills of any value and any sign, in plain and rotary layers (issue 28): named from the numbers with the
fill read off the module's output (harness.engine.fitting), their value in the report's title whether or not
`trace` can read it from the line, and a fill that hides the future at every realistic magnitude (-1e4) judged alike
in a rotary layer and a plain one."""
from __future__ import annotations

import numpy as np
import pytest

from harness.child.inprocess import InProcess
from harness.engine import fitting
from harness.engine.compare import same
from harness.engine.runner import Options, run_checks
from harness.sandbox.subject import Subject
from reference import numpy_ref, variants
from reference.rotary import Rope

LAYER = '''
import torch
import torch.nn as nn


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class RoPEAttention(nn.Module):
    """Rotate-half rotary attention (HF's and rasbt's style), cos/sin buffers, a boolean triu mask buffer."""

    def __init__(self, emb_dim, n_heads, context_length):
        super().__init__()
        assert emb_dim % n_heads == 0
        self.n_heads, self.head_dim = n_heads, emb_dim // n_heads
        self.qkv = nn.Linear(emb_dim, 3 * emb_dim, bias=False)
        self.proj = nn.Linear(emb_dim, emb_dim)
        inv_freq = 1.0 / (10_000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        angles = torch.arange(context_length).float()[:, None] * inv_freq[None, :]
        angles = torch.cat([angles, angles], dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), 1))

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        ROTATE
        s = q @ k.transpose(-2, -1) / self.head_dim ** 0.5
        MASKING
        w = s.softmax(-1)
        return self.proj((w @ v).transpose(1, 2).reshape(b, n, d))
'''
ROTARY = ("cos, sin = self.cos[:n].to(x.dtype), self.sin[:n].to(x.dtype); "
          "q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin")
PLAIN = "pass  # no rotary embedding"


def _report(tmp_path, rotate: str, masking: str, only=("causal-leakage", "reference-match")):
    path = tmp_path / "layer.py"
    path.write_text(LAYER.replace("ROTATE", rotate).replace("MASKING", masking))
    target = f"{path}:RoPEAttention"
    opts = Options(only=list(only), examples=2)
    return run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))


@pytest.mark.parametrize("fill", ["-3.0", "17.0", "100.0"])
def test_a_finite_fill_in_a_rotary_layer_is_fitted_and_named_from_the_numbers(tmp_path, fill):
    """Rotary layers' fills were not fitted (the fit ran on the lesson's layer only): no reading reproduced, so
    reference-match was cannot-tell and causal-leakage's pattern alone named gqa-mask-one-group (-3, +17) or
    sdpa-bool-mask (+1e4), mistakes these layers do not have."""
    report = _report(tmp_path, ROTARY, f"s = s.masked_fill(self.mask[:n, :n], {fill})")
    assert report.adapter.mapping["rope"], report.adapter.mapping
    assert report["causal-leakage"].status == "fail" and report["reference-match"].status == "fail"
    assert (report.diagnosis.mutant, report.diagnosis.match) == ("finite-fill", "numbers")
    assert report.diagnosis.title == f"Masked scores filled with {float(fill):g} instead of -inf"


def test_a_fill_of_minus_1e4_is_judged_alike_in_a_rotary_layer_and_a_plain_one(tmp_path):
    """-1e4 hides the future exactly at ordinary magnitudes (the reference reproduces the layer, rotary or not) and
    leaks under the -5e4 probe: a causal leak, finite-fill-100, in both."""
    masking = "s = s.masked_fill(self.mask[:n, :n], -1e4)"
    rotary, plain = _report(tmp_path, ROTARY, masking), _report(tmp_path, PLAIN, masking)
    assert rotary.adapter.mapping.get("rope") and not plain.adapter.mapping.get("rope")
    for report in (rotary, plain):
        assert report["causal-leakage"].status == "fail" and report["reference-match"].status == "pass"
        assert report.diagnosis.mutant == "finite-fill-100"


@pytest.mark.parametrize("fill", ["17.0", "100.0", "1e4"])
def test_a_positive_fill_is_named_from_the_numbers_with_the_lines_value(tmp_path, fill):
    """A fill above every score (the future outweighs the past): +1e4 made the trace raise (math.exp overflowed in
    its mark's text), so the report lost the line and told the catalogue's -10."""
    report = _report(tmp_path, PLAIN, f"s = s.masked_fill(self.mask[:n, :n], {fill})")
    assert report["causal-leakage"].status == "fail" and report["reference-match"].status == "fail"
    assert (report.diagnosis.mutant, report.diagnosis.match) == ("finite-fill", "numbers")
    assert report.diagnosis.title == f"Masked scores filled with {float(fill):g} instead of -inf"
    lines = (tmp_path / "layer.py").read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "masked_fill" in text)
    assert report.diagnosis.at == f"layer.py:{line}"


@pytest.mark.parametrize("fill", ["-3.0", "0.5", "17.0", "1e4"])
def test_a_fill_no_line_tells_shows_its_fitted_value_in_the_title(tmp_path, fill):
    """`torch.where(mask, torch.full_like(s, v), s)`: the trace reads no fill value off that line, so the title came
    from the catalogue ("such as -10.0") whatever the fill; now it is the value read off the outputs.  Above every
    score (+17 and +1e4 under the diagnosis's weights, whose scores are about 1) any larger fill gives the same
    outputs: the title says the least value that does, "or more", never a number the outputs do not pin."""
    report = _report(tmp_path, PLAIN, f"s = torch.where(self.mask[:n, :n], torch.full_like(s, {fill}), s)")
    assert (report.diagnosis.mutant, report.diagnosis.match, report.diagnosis.at) == ("finite-fill", "numbers", None)
    if float(fill) < 10:
        assert report.diagnosis.title == f"Masked scores filled with {float(fill):g} instead of -inf"
    else:
        least = float(report.diagnosis.title.split("filled with ")[1].split(" or more")[0])
        assert 5 < least <= float(fill) and report.diagnosis.title.endswith(" or more instead of -inf")
        assert "or more relative to a score of 0: more than any past token's" in report.diagnosis.symptom


def _layers(count: int, seed: int):
    """Random layers whose scores are large (standard normal weights, inputs up to 3x): fills compete with scores
    of tens to hundreds, where the fit once stopped on a flat stretch between two grid values."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        heads = int(rng.integers(1, 5))
        d, n = heads * int(rng.choice([2, 4, 6])), int(rng.integers(2, 9))
        w = numpy_ref.random_weights(rng, d, d, qkv_bias=bool(rng.integers(2)))
        for role in ("wq", "wk", "wv", "wo"):
            setattr(w, role, rng.standard_normal(getattr(w, role).shape))
        yield heads, w, rng.standard_normal((int(rng.integers(1, 4)), n, d)) * float(rng.choice([1, 3])), rng


@pytest.mark.parametrize("low, high, rope", [(-38, 30, None), (10, 200, None), (200, 2e4, None), (10, 2e4, "half")])
def test_fills_of_either_sign_and_any_size_are_read_off_layers_with_large_scores(low, high, rope):
    """A value is read when the variant with it is the module's output, every value within tolerance.  Missed before
    (grid -40..+40, steps of at most 5 from its best point): 3 of 109 in [-38, 30], 44 of 120 in [10, 200], 54 of
    120 in [200, 2e4], 49 of 120 rotary in [10, 2e4]; after: 0 of each (at most one allowed, for another BLAS's
    rounding)."""
    extra = Rope(rope).knobs() if rope else {}
    missed, tried = [], 0
    for heads, w, x, rng in _layers(60, seed=123):
        for knobs in ({"fill": -10.0}, {"mask_op": "add", "fill": 1.0}):
            value = float(rng.uniform(low, high))
            k = {**knobs, **extra}
            y = variants.forward(x, heads, w, **{**k, "fill": value})
            if same(y, variants.forward(x, heads, w, **extra)):
                continue  # a fill too low to show at these scores: the reference's numbers, nothing to read
            tried += 1
            if not same(y, fitting.output(x, heads, w, k, ("fill",), y)):
                missed.append((knobs.get("mask_op", "fill"), round(value, 2)))
    assert tried >= 100 and len(missed) <= 1, missed
