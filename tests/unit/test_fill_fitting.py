"""Finite fills of any value and any sign, in plain and rotary layers (issue 28): named from the numbers with the
fill read off the module's output (harness.engine.fitting), their value in the report's title whether or not
`trace` can read it from the line, and a fill that hides the future at every realistic magnitude (-1e4) judged alike
in a rotary layer and a plain one."""
from __future__ import annotations

import pytest

from harness.child.inprocess import InProcess
from harness.engine.runner import Options, run_checks
from harness.sandbox.subject import Subject

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
