"""reference-match's float32 probe (checks/reference_match.py), in this process: a layer wrong only in float32 fails
with the dtype and the tolerance named; one that cannot run in float32 at all is cannot tell, never a failure; a
float64 failure is still the one reported; float64 configurations draw what they drew before dtype existed; and the
child builds and runs a float32 configuration in float32, under torch's float32 default."""
from __future__ import annotations

import numpy as np

from checks.reference_match import FLOAT32_ATOL, FLOAT32_RTOL, PROBE
from conftest import ROOT
from harness.child.inprocess import InProcess
from harness.engine.runner import Options, run_checks
from harness.engine.search import find_failure, shrink
from harness.sandbox.subject import Subject
from harness.wire.config import FLOAT32, Config
from checks import cannot_tell, failed

REFERENCE = (ROOT / "reference" / "causal_mha.py").read_text()
SCORES = "scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)"


def run(path, only=("reference-match",)):
    target = f"{path}:CausalMHA"
    opts = Options(only=list(only), examples=2, diagnose=False)
    return run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))


def layer(tmp_path, scores: str, name: str = "attn.py"):
    """The lesson's reference with its line of scores replaced."""
    assert SCORES in REFERENCE
    path = tmp_path / name
    path.write_text(REFERENCE.replace(SCORES, scores))
    return path


def test_a_layer_wrong_only_in_float32_fails_with_the_dtype_and_the_tolerance(tmp_path):
    path = layer(tmp_path, "scores = q @ k.transpose(2, 3) / (self.dh if x.dtype == torch.float32 else "
                           "self.dh ** 0.5)")
    result = run(path)["reference-match"]
    assert result.status == "fail", result.message
    assert "in float32" in result.message and f"relative {FLOAT32_RTOL:g}" in result.message, result.message
    assert result.config["dtype"] == FLOAT32 and result.details["dtype"] == FLOAT32
    mismatch = result.details["mismatch"]
    assert mismatch["max_abs"] > 10 * FLOAT32_ATOL
    assert (mismatch["rtol"], mismatch["atol"]) == (FLOAT32_RTOL, FLOAT32_ATOL)
    assert "x.dtype" in result.fix


def test_a_layer_that_cannot_run_in_float32_is_cannot_tell_never_a_failure(tmp_path):
    path = layer(tmp_path, "scores = q @ k.transpose(2, 3).to(torch.float64) / self.dh ** 0.5  # float32 @ "
                           "float64 raises")
    result = run(path)["reference-match"]
    assert result.status == "cannot_tell", result.message
    assert "float32" in result.message and "passed in float64" in result.message, result.message


def test_the_reference_passes_and_its_float32_answer_is_well_inside_the_tolerance(tmp_path):
    """The pass, and the margin: the lesson's layer in float32 on the probe's sizes is at least 100 times inside."""
    assert run(ROOT / "reference" / "causal_mha.py")["reference-match"].status == "pass"
    subject = Subject(f"{ROOT / 'reference' / 'causal_mha.py'}:CausalMHA", start=InProcess())
    try:
        subject.load()
        f64 = subject.build(Config(d_in=8, d_out=8, heads=2, **PROBE))
        f32 = subject.build(Config(d_in=8, d_out=8, heads=2, dtype=FLOAT32, **PROBE))
        f64.layout = f32.layout = 0
        weights = {r: w.astype(np.float32).astype(np.float64) for r, w in f64.read_weights_many([0])[0].items()}
        f64.write_weights(weights)
        f32.write_weights(weights)
        x = np.random.default_rng(0).standard_normal((4, PROBE["n"], 8)).astype(np.float32).astype(np.float64)
        y32, y64 = f32.forward(x), f64.forward(x)
        scale = max(1.0, np.abs(y64).max())
        assert 0 < np.abs(y32 - y64).max() < FLOAT32_ATOL * scale / 100
    finally:
        subject.close()


def test_the_child_runs_a_float32_configuration_in_float32(tmp_path):
    """What the module sees: a float32 input, float32 parameters, torch's default dtype float32 (in its constructor
    and its forward), and nothing of it in a float64 configuration."""
    path = tmp_path / "spy.py"
    path.write_text(REFERENCE.replace(
        "        B, n, _ = x.shape\n",
        "        B, n, _ = x.shape\n"
        "        seen = [x.dtype, self.q.weight.dtype, torch.get_default_dtype(), self.made_under]\n"
        "        if seen != [torch.float32] * 4 and seen != [torch.float64] * 4:\n"
        "            raise RuntimeError(f'mixed dtypes {seen}')\n"
        "        if x.dtype == torch.float32:\n"
        "            return torch.full((B, n, self.h * self.dh), 32.0)\n").replace(
        "        self.h, self.dh = nheads, d_out // nheads\n",
        "        self.h, self.dh = nheads, d_out // nheads\n"
        "        self.made_under = torch.get_default_dtype()\n"))
    subject = Subject(f"{path}:CausalMHA", start=InProcess())
    try:
        subject.load()
        cfg = Config(d_in=4, d_out=4, heads=2, context_length=5, batch=2, n=3)
        x = np.ones((2, 3, 4))
        assert subject.build(Config(**{**cfg.to_dict(), "dtype": FLOAT32})).forward(x).max() == 32.0
        assert subject.build(cfg).forward(x).max() != 32.0  # built apart: a float64 module of its own
    finally:
        subject.close()


def test_float64_configurations_draw_what_they_drew_before_dtype_existed():
    cfg = Config(d_in=6, d_out=8, heads=2, context_length=7, batch=2, n=5)
    assert repr(cfg) == ("Config(d_in=6, d_out=8, heads=2, context_length=7, batch=2, n=5, dropout=0.0, "
                         "qkv_bias=False)")
    assert "dtype" not in cfg.to_dict() and "float" not in cfg.describe()
    f32 = Config(**{**cfg.to_dict(), "dtype": FLOAT32})
    assert repr(f32).endswith("dtype='float32')") and f32.to_dict()["dtype"] == FLOAT32
    assert f32.ctor_key() != cfg.ctor_key() and "float32" in f32.describe()


class _Ctx:
    """What search.find_failure reads of a context: no child (asked one at a time)."""
    separate_widths, examples, form = False, 2, None

    def __init__(self, required):
        self._required = required

    def required_configs(self):
        return self._required

    def accepts(self, key):
        return False


def test_a_float64_failure_is_reported_before_the_float32_probe():
    base = Config(d_in=8, d_out=8, heads=2, context_length=7, batch=2, n=5)
    probe = Config(**{**base.to_dict(), "dtype": FLOAT32, **PROBE})
    asked = []

    def prop(cfg):
        asked.append(cfg)
        return failed(cfg.dtype) if cfg.n >= 3 else None

    found = find_failure(_Ctx([base]), prop, after=[probe])
    assert found.message == "float64" and found.config["n"] == 3  # the float64 failure, shrunk in float64
    assert probe not in asked and all(c.dtype == "float64" for c in asked)


def test_the_probe_is_judged_last_shrunk_in_float32_and_never_shrunk_to_cannot_tell():
    base = Config(d_in=8, d_out=8, heads=2, context_length=7, batch=2, n=5)
    probe = Config(**{**base.to_dict(), "dtype": FLOAT32, **PROBE})

    def prop(cfg):
        if cfg.dtype != FLOAT32:
            return None
        return failed("wrong in float32") if cfg.n >= 4 else cannot_tell("raised in float32")

    found = find_failure(_Ctx([base]), prop, after=[probe])
    assert found.status == "fail" and found.config["dtype"] == FLOAT32 and found.config["n"] == 4
    undecided = find_failure(_Ctx([base]), lambda cfg: cannot_tell("raised") if cfg.dtype == FLOAT32 else None,
                             after=[probe])
    assert undecided.status == "cannot_tell" and undecided.config == probe.to_dict()  # as it is, not shrunk
    assert shrink(failed("x"), probe, lambda cfg: cannot_tell("raised"), 1, 1, False).message == "x"
