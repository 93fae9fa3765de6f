"""A forward whose mask argument must be an object of the package's own (neuralforecast's FullAttention reads
`attn_mask.mask` from a TriangularCausalMask; tests/realzoo/neuralforecast_attention_layer_sdpa_path_drops_causal_mask
.py): every call that gives a tensor mask raises, and only forward(x, x, x, attn_mask=None) runs.  causal-leakage
judges that call, the only one that ran, and fails it; the weight checks did not: "a forward that takes a mask and got
none computes unmasked attention by design", so no-mask's numbers were not tried and reference-match was CANNOT TELL
("no reading reproduces").  Only the calls that ran count now: the plain call is the layer's own."""
from harness.child.inprocess import InProcess
from harness.engine.runner import Options, run_checks
from harness.sandbox.subject import Subject

LAYER = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class ObjectMaskAttention(nn.Module):
    def __init__(self, d_model, n_heads, context_length):
        super().__init__()
        self.h = n_heads
        self.query_projection = nn.Linear(d_model, d_model)
        self.key_projection = nn.Linear(d_model, d_model)
        self.value_projection = nn.Linear(d_model, d_model)
        self.out_projection = nn.Linear(d_model, d_model)

    def forward(self, queries, keys, values, attn_mask):
        B, n, d = queries.shape
        q, k, v = (p(t).view(B, n, self.h, -1).transpose(1, 2) for p, t in
                   ((self.query_projection, queries), (self.key_projection, keys), (self.value_projection, values)))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask.mask if attn_mask is not None else None,
                                           is_causal=IS_CAUSAL)
        return self.out_projection(y.transpose(1, 2).reshape(B, n, d))
'''


def _report(tmp_path, is_causal: bool):
    path = tmp_path / f"object_mask_{is_causal}.py"
    path.write_text(LAYER.replace("IS_CAUSAL", str(is_causal)))
    target = f"{path}:ObjectMaskAttention"
    opts = Options(only=["reference-match", "causal-leakage"], examples=2)
    return run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))


def test_only_the_plain_call_runs_and_its_unmasked_attention_is_no_mask(tmp_path):
    report = _report(tmp_path, is_causal=False)
    statuses = {c.id: c.status.value for c in report.checks}
    assert (statuses["reference-match"], statuses["causal-leakage"]) == ("fail", "fail"), statuses
    assert report.adapter.mapping["proof"] == "mistake" and report.adapter.mapping["mistakes"] == ["no-mask"]
    assert report.diagnosis is not None and report.diagnosis.mutant == "no-mask"


def test_the_same_layer_causal_by_itself_passes(tmp_path):
    report = _report(tmp_path, is_causal=True)
    statuses = {c.id: c.status.value for c in report.checks}
    assert set(statuses.values()) == {"pass"}, statuses
