"""A constructor's causal flag that is stored and never read (openlanguagemodel 2.0's MultiHeadAttention(embed_dims,
num_heads, dropout=0.0, causal=False): `self.causal = causal`, and compute_attention never looks at it; fixed in 2.1;
tests/realzoo/olm_mha_causal_flag_ignored_pre_fix.py).  mha-check builds it with causal=True and, its forward taking
an optional keep-mask, calls it with the causal mask: every check passed, though the flag does nothing.  Called as
forward(x), the mask left out as the forward allows, such a layer lets the whole future through: causal-leakage now
fails, naming the flag.  The same layer reading its flag passes; one that reads the flag in another path only (ESPnet's
flash path) is no evidence here (the flag is read)."""
from harness.child.inprocess import InProcess
from harness.engine.runner import Options, run_checks
from harness.sandbox.subject import Subject

LAYER = '''
import torch
import torch.nn as nn


class FlaggedAttention(nn.Module):
    def __init__(self, d_model, num_heads, causal=False, fast=False):
        super().__init__()
        assert d_model % num_heads == 0
        self.h = num_heads
        self.causal = causal
        self.fast = fast
        self.q, self.k, self.v, self.o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, x, mask=None):
        B, n, d = x.shape
        q, k, v = (f(x).view(B, n, self.h, -1).transpose(1, 2) for f in (self.q, self.k, self.v))
        s = q @ k.transpose(-2, -1) / (d // self.h) ** 0.5
        if READS:
            s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        if mask is not None:
            s = s.masked_fill(mask == 0, float("-inf"))
        y = torch.softmax(s, dim=-1) @ v
        return self.o(y.transpose(1, 2).reshape(B, n, d))
'''


def _leakage(tmp_path, reads: str):
    path = tmp_path / f"flagged_{abs(hash(reads))}.py"
    path.write_text(LAYER.replace("READS", reads))
    target = f"{path}:FlaggedAttention"
    opts = Options(only=["causal-leakage"], examples=2)
    report = run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))
    return report["causal-leakage"], report


def test_a_causal_flag_stored_and_never_read_fails(tmp_path):
    got, report = _leakage(tmp_path, "False")
    assert "mask=" in report.adapter.mapping["call"]  # made causal by the mask mha-check passes
    assert got.status == "fail" and "`causal` is stored and never read" in got.message, got.message
    assert got.details["finding"] == "leak:flag-not-applied"


def test_the_same_layer_reading_its_flag_passes(tmp_path):
    got, _ = _leakage(tmp_path, "self.causal")
    assert got.status == "pass", got.message


def test_a_flag_read_only_in_another_path_is_no_evidence(tmp_path):
    got, _ = _leakage(tmp_path, "self.causal and self.fast")  # read, where mha-check's call never goes
    assert got.status == "pass", got.message
