"""Scores divided by a number no named scale has (`/ 3.0`, `/ 8.0`, sqrt(KV·dh)): the divisor read off the module's
output (harness.engine.fitting), which proves the reading and names scale-other at the line the trace marks; a
learned temperature, which the trace does not judge, is not named (issue 28: a real bug must never end with no
failing check, and a mistake is never named without evidence)."""
from __future__ import annotations

import numpy as np
import pytest

from harness.child.inprocess import InProcess
from harness.engine import fitting
from harness.engine.compare import same
from harness.engine.runner import Options, run_checks
from harness.sandbox.subject import Subject
from reference import numpy_ref, variants

LAYER = '''
import math

import torch
from torch import nn


class Attn(nn.Module):
    def __init__(self, width, n_heads, max_len=32):
        super().__init__()
        if width % n_heads:
            raise ValueError("width must be divisible by n_heads")
        self.h = n_heads
        self.a = nn.Parameter(torch.randn(width, width) / math.sqrt(width))
        self.b = nn.Parameter(torch.randn(width, width) / math.sqrt(width))
        self.c = nn.Parameter(torch.randn(width, width) / math.sqrt(width))
        self.o = nn.Linear(width, width)
        TEMPERATURE
        self.register_buffer("keep", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))

    def forward(self, x):
        B, T, D = x.shape
        q = (x @ self.a).view(B, T, self.h, D // self.h).transpose(1, 2)
        k = (x @ self.b).view(B, T, self.h, D // self.h).transpose(1, 2)
        v = (x @ self.c).view(B, T, self.h, D // self.h).transpose(1, 2)
        s = q @ k.transpose(-2, -1) SCALE
        s = s.masked_fill(~self.keep[:T, :T], float("-inf"))
        y = (s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D)
        return self.o(y)
'''


def _report(tmp_path, scale: str, temperature: str = "pass"):
    path = tmp_path / "layer.py"
    path.write_text(LAYER.replace("SCALE", scale).replace("TEMPERATURE", temperature))
    target = f"{path}:Attn"
    opts = Options(only=["reference-match"], examples=2)
    return run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))


@pytest.mark.parametrize("divisor", ["3.0", "8", "0.5"])
def test_a_constant_divisor_proves_the_reading_and_is_named_at_its_line(tmp_path, divisor):
    """Raw matrices named a, b, c: no name says which is W_q.  Before, no reading reproduced the output, so every
    weight check was cannot-tell and the report said nothing it could check is wrong."""
    report = _report(tmp_path, f"/ {divisor}")
    assert report["reference-match"].status == "fail"
    assert (report.diagnosis.mutant, report.diagnosis.match) == ("scale-other", "numbers")
    line = next(i for i, text in enumerate((tmp_path / "layer.py").read_text().splitlines(), 1) if "@ k.tr" in text)
    assert report.diagnosis.at == f"layer.py:{line}"


def test_a_learned_temperature_is_not_named_though_a_divisor_reproduces_it(tmp_path):
    """A temperature of the layer's own (a parameter) is its design: the trace does not judge a scale read from a
    parameter, so no line shows the mistake, and a divisor read off the output is no evidence of one."""
    report = _report(tmp_path, "/ self.t", "self.t = nn.Parameter(torch.tensor(3.0))")
    assert report["reference-match"].status == "fail"
    assert report.diagnosis is None or report.diagnosis.mutant is None


def _sample(seed: int, heads: int = 2, d: int = 8, n: int = 5):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((2, n, d)), heads, numpy_ref.random_weights(rng, d, d, qkv_bias=True)


@pytest.mark.parametrize("divisor", [0.3, 1.7, 3.0, 8.0, 40.0, 300.0])
def test_divisors_from_sharp_to_flat_are_read_off_the_output(divisor):
    x, heads, w = _sample(int(divisor * 10))
    y = variants.forward(x, heads, w, scale=divisor)
    out = fitting.output(x, heads, w, {"scale": 8.0}, ("scale",), y)
    assert same(out, y)


def test_the_lessons_own_output_is_the_lessons_not_a_fitted_divisors():
    """On a configuration where the student's constant is sqrt(dh) (`/ 3.0` with heads 9 wide) the output is the
    reference's: the mistake cannot show there, and the sample stays open, not a refutation."""
    x, heads, w = _sample(1, heads=1, d=9)
    y = variants.forward(x, heads, w, scale=3.0)
    lesson = variants.forward(x, heads, w)
    assert same(y, lesson) and same(fitting.output(x, heads, w, {"scale": 8.0}, ("scale",), y), lesson)


def test_another_mistake_is_not_read_as_a_divisor():
    """An inverted mask is no scale: the rows with one key allowed already differ, and nothing is fitted."""
    x, heads, w = _sample(2)
    y = variants.forward(x, heads, w, mask="inverted", empty_rows="zero")
    assert fitting.fit(x, heads, w, {"scale": 8.0}, "scale", y) is None
    assert not same(fitting.output(x, heads, w, {"scale": 8.0}, ("scale",), y), y)
