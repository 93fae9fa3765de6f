"""param-count and a layer whose Q, K and V live in the input width (realzoo15, Sockeye's MultiHeadSelfAttention(
depth_att, heads, depth_out): ff_in Linear(depth_att, 3 * depth_att), ff_out Linear(depth_att, depth_out)).  Such a
layer is checked with d_in = d_out by the mapping proof (timm's Attention without attn_head_dim), but when its forward
could not run for the proof (Sockeye raises KeyError on float64 in eval()), param-count failed it with d_in=6,
d_out=8: "156 parameters; 3·6·8 + 8² + biases gives 216 ... split the width among the heads" - a correct layer
failed with a wrong fix.  Its count is the lesson's where d_in = d_out; a count that is neither still fails."""
from harness.child.inprocess import InProcess
from harness.engine.runner import Options, run_checks
from harness.sandbox.subject import Subject

LAYER = '''
import torch
import torch.nn as nn


class InputWidthAttention(nn.Module):
    def __init__(self, depth_att, heads, depth_out, extra=0):
        super().__init__()
        self.heads = heads
        self.ff_in = nn.Linear(depth_att, 3 * depth_att + extra, bias=False)
        self.ff_out = nn.Linear(depth_att, depth_out)
        self.extra = extra

    def forward(self, x):
        b, n, d = x.shape
        proj = self.ff_in(x)
        q, k, v = (t.view(b, n, self.heads, d // self.heads).transpose(1, 2) for t in proj[..., :3 * d].split(d, -1))
        s = (q @ k.transpose(-2, -1)) / (d // self.heads) ** 0.5
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        return self.ff_out((s.softmax(-1) @ v).transpose(1, 2).reshape(b, n, d))
'''


def _param_count(tmp_path, text):
    path = tmp_path / "input_width.py"
    path.write_text(text)
    target = f"{path}:InputWidthAttention"
    opts = Options(only=["param-count"], examples=2, diagnose=False)
    report = run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))
    return report["param-count"]


def test_q_k_v_in_the_input_width_is_counted_as_the_lesson_s_layer_with_d_in_equal_d_out(tmp_path):
    got = _param_count(tmp_path, LAYER)
    assert got.status == "pass", got.message
    assert "maps Q, K and V in the input width" in got.message


def test_a_count_outside_that_family_still_fails(tmp_path):
    got = _param_count(tmp_path, LAYER.replace("extra=0", "extra=1"))
    assert got.status == "fail", got.message
