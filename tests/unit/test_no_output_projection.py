"""A multi-head layer without an output projection (the heads concatenated, nothing after: CS224n's and many a
course's first layer) is read without one, W_o the identity (issue 28 item 3).  Before, no reading of its parameters
existed, every weight check could not tell, and a second mistake in the same layer (ChadGPT's 1/sqrt(n_embed) scale)
was never reported.  The reading is judged by the same evidence as any: used only where the lesson's layer without
its last step, or a known mistake in it, reproduces the module's own output; never where the layer may have a
projection mha-check did not recognise."""
import torch.nn as nn

from harness.child import layouts
from harness.child.inprocess import InProcess
from harness.engine.runner import Options, run_checks
from harness.sandbox.subject import Subject

LAYER = '''
import torch
import torch.nn as nn


class Attn(nn.Module):
    def __init__(self, d_model, n_heads, context_length):
        super().__init__()
        assert d_model % n_heads == 0
        self.h = n_heads
        self.query, self.key, self.value = (nn.Linear(d_model, d_model) for _ in range(3))
        {extra}
        self.register_buffer("tril", torch.tril(torch.ones(context_length, context_length)))

    def forward(self, x):
        B, T, C = x.shape
        split = lambda t: t.view(B, T, self.h, C // self.h).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        att = q @ k.transpose(-2, -1) / {scale}
        att = att.masked_fill(self.tril[:T, :T] == 0, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return {out}
'''
HEAD_SCALE = "(C // self.h) ** 0.5"


def _report(tmp_path, name: str, extra: str = "", scale: str = HEAD_SCALE, out: str = "y"):
    path = tmp_path / f"{name}.py"
    path.write_text(LAYER.format(extra=extra, scale=scale, out=out))
    target = f"{path}:Attn"
    opts = Options(examples=2)
    return run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))


def _statuses(report) -> dict[str, str]:
    return {c.id: c.status for c in report.checks}


class Concatenated(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)


class PalmLike(nn.Module):  # to_kv is read by no name, to_out says it is the output projection
    def __init__(self, d=8):
        super().__init__()
        self.to_q, self.to_kv, self.to_out = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)


class FusedUnnamed(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.lin = nn.Linear(d, 3 * d, bias=False)


def test_a_layer_without_w_o_is_offered_readings_without_it_that_are_never_certain():
    assert layouts.discover(Concatenated(), 8, 8, 2)[0] == []  # the multi-head reading still needs a W_o
    found = layouts.without_out_proj(Concatenated(), 8, 8, 2)
    assert [f.describe() for f in found] == [{"wq": "query.weight", "wk": "key.weight", "wv": "value.weight",
                                              "bq": "query.bias", "bk": "key.bias", "bv": "value.bias"}]
    assert not found[0].certain and "no output projection" in found[0].how  # the names cover every parameter, yet
    # only a reproduction proves there is no projection


def test_a_fused_projection_without_w_o_is_read_per_head_too():
    found = layouts.without_out_proj(FusedUnnamed(), 8, 8, 2)
    assert any("per head" in f.how for f in found) and any("per head" not in f.how for f in found)
    assert not any(f.certain for f in found)


def test_a_parameter_named_as_an_output_projection_is_never_read_away():
    """PaLM's to_q, to_kv, to_out: by position, the three Linear(8, 8) would be read as W_q, W_k, W_v, to_out among
    them; its name says the layer has an output projection, so no reading without one is offered."""
    assert layouts.without_out_proj(PalmLike(), 8, 8, 2) == []


def test_the_lesson_without_w_o_is_read_so_and_only_the_missing_projection_is_named(tmp_path):
    report = _report(tmp_path, "right")
    mapping = report.adapter.mapping
    assert mapping["proof"] == "reference" and "wo" not in mapping["layout"], mapping
    assert "no output projection" in mapping["note"]
    failing = {c for c, s in _statuses(report).items() if s != "pass"}
    assert failing == {"param-count", "out-proj-bias"}  # the projection, and its bias with it
    assert all(_statuses(report)[c] == "pass" for c in ("reference-match", "gradient-match", "view-order"))
    assert (report.diagnosis.mutant, report.diagnosis.also) == ("no-output-projection", None)


def test_a_second_mistake_beside_the_missing_projection_is_judged_and_named(tmp_path):
    """ChadGPT's case: scaled by the model width instead of the head width, and no W_o.  Read with W_o = I, the scale's
    mistake reproduces the layer, reference-match fails on it, and both mistakes are named."""
    report = _report(tmp_path, "scaled_by_d", scale="C ** 0.5")
    assert report.adapter.mapping["proof"] == "mistake" and report.adapter.mapping["mistakes"] == ["scale-by-sqrt-d"]
    assert _statuses(report)["reference-match"] == "fail" and _statuses(report)["view-order"] == "pass"
    root = report.diagnosis
    assert (root.mutant, root.also.mutant) == ("scale-by-sqrt-d", "no-output-projection")
    assert root.at.endswith(":19") and root.also.at.endswith(":22")  # the scale's line, then the returned heads


def test_a_projection_mha_check_does_not_recognise_is_never_taken_for_a_missing_one(tmp_path):
    """`self.zzz`, a raw matrix whose name no role reads (no position rule reads it either: it is no nn.Linear).
    Read without W_o, nothing reproduces the layer, so there is no mapping: the weight checks and out-proj-bias cannot
    tell, and the count (the lesson's without an output bias) passes: nothing is blamed on our limit."""
    report = _report(tmp_path, "unrecognised", extra="self.zzz = nn.Parameter(torch.randn(d_model, d_model) / 3)",
                     out="y @ self.zzz")
    got = _statuses(report)
    assert report.adapter.mapping["proof"] == "none"
    assert {c: got[c] for c in ("reference-match", "gradient-match", "view-order", "out-proj-bias")} == dict.fromkeys(
        ("reference-match", "gradient-match", "view-order", "out-proj-bias"), "cannot_tell")
    assert "fail" not in got.values() and report.diagnosis is None


def test_a_layer_the_reading_without_w_o_does_not_reproduce_stays_undecided(tmp_path):
    """A ReLU on the merged heads: no known mistake, so the reading without W_o proves nothing and the weight checks
    cannot tell (as before), never fail; the missing projection is still named from its count and its line."""
    report = _report(tmp_path, "relu", out="torch.relu(y)")
    got = _statuses(report)
    assert report.adapter.mapping["proof"] == "none" and "read without an output projection" in \
        report.adapter.mapping["problem"]
    assert got["reference-match"] == got["gradient-match"] == got["out-proj-bias"] == "cannot_tell"
    assert got["param-count"] == "fail" and report.diagnosis.mutant == "no-output-projection"
