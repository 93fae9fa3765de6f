"""A forward that takes a causal FLAG and an optional mask (bio-attention's AttnLayer: forward(x, pos=None, mask=None,
causal=False); tests/realzoo/bio_attention_attn_layer_causal_mask_hides_diagonal.py).  mha-check calls it with the
flag alone, where it is the lesson's layer; its callers pass both (a padding mask and causal=True), and there its
own causal part, `triu(diagonal=0)`, hides the diagonal too: every token loses its own key, the first token sees
none.  causal-leakage now also calls the flag style with a mask that hides nothing, in every convention and shape:
where every one that runs leaves an earlier (or its own) position without influence, it fails.  The same layer with
`diagonal=1` passes; one whose mask replaces the flag is no evidence either way (its own contract)."""
from harness.child.inprocess import InProcess
from harness.engine.runner import Options, run_checks
from harness.sandbox.subject import Subject

LAYER = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class FlagAndMaskAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        assert dim % heads == 0
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x, mask=None, causal=False):
        B, n, d = x.shape
        q, k, v = (t.view(B, n, self.heads, -1).transpose(1, 2) for t in self.qkv(x).split(d, dim=-1))
        if mask is not None:  # (B, n, n) or (n, n) bool keep-mask, made additive
            mask = torch.zeros(mask.shape, dtype=x.dtype).masked_fill(~mask.bool(), float("-inf"))
            mask = mask.expand(B, n, n).unsqueeze(1)
            if causal and COMBINE:
                mask = mask.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(diagonal=DIAGONAL), float("-inf"))
            causal = False
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
        return self.out(y.transpose(1, 2).reshape(B, n, d))
'''


def _leakage(tmp_path, diagonal: int, combine: bool = True):
    path = tmp_path / f"flag_mask_{diagonal}_{combine}.py"
    path.write_text(LAYER.replace("DIAGONAL", str(diagonal)).replace("COMBINE", str(combine)))
    target = f"{path}:FlagAndMaskAttention"
    opts = Options(only=["causal-leakage"], examples=2)
    report = run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))
    return report["causal-leakage"], report


def test_the_flag_and_a_mask_together_hiding_the_diagonal_fail(tmp_path):
    got, report = _leakage(tmp_path, diagonal=0)
    assert "causal=True" in report.adapter.mapping["call"]
    assert got.status == "fail" and "output 0 on input 0" in got.message, got.message
    assert got.details["finding"] == "leak:flag-and-mask-hide-the-past"


def test_the_same_layer_hiding_only_the_future_passes(tmp_path):
    got, _ = _leakage(tmp_path, diagonal=1)
    assert got.status == "pass", got.message


def test_a_mask_that_replaces_the_flag_is_no_evidence_here(tmp_path):
    got, _ = _leakage(tmp_path, diagonal=1, combine=False)
    assert got.status == "pass", got.message
