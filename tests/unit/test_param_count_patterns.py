"""param-count's exact patterns of a wrong count, told in the student's terms only when every required
configuration's count is that pattern's."""
from checks.param_count import _full_width, _one_head_shared
from harness.child.inprocess import InProcess
from harness.engine.runner import Options, run_checks
from harness.sandbox.subject import Subject
from harness.wire.config import Config
from reference import param_count_formula

CFG = Config(d_in=8, d_out=8, heads=2, context_length=7, batch=2, n=5)


def test_one_head_shared_is_the_count_of_one_heads_qkv_beside_the_output_projection():
    one_head = 3 * 8 * 4 + 8 * 8 + 8  # W_q, W_k, W_v of one head of width 4, and Linear(8, 8)
    assert _one_head_shared(one_head, CFG)[1] == "count: one head shared"
    assert _one_head_shared(one_head + 3 * 4, CFG) is not None  # with that head's biases
    assert _one_head_shared(param_count_formula(8, 8), CFG) is None  # the lesson's count
    assert _one_head_shared(one_head, Config(**{**CFG.to_dict(), "heads": 1})) is None  # one head: nothing shared
    assert _full_width(one_head, CFG) is None  # not the count that grows with the heads


SHARED = '''
import torch
import torch.nn as nn


class Head(nn.Module):
    def __init__(self, d, hs, ctx):
        super().__init__()
        self.key, self.query, self.value = (nn.Linear(d, hs, bias=False) for _ in range(3))
        self.register_buffer("tril", torch.tril(torch.ones(ctx, ctx)))

    def forward(self, x):
        T = x.shape[1]
        w = self.query(x) @ self.key(x).transpose(-2, -1) * self.key.out_features ** -0.5
        w = w.masked_fill(self.tril[:T, :T] == 0, float("-inf")).softmax(-1)
        return w @ self.value(x)


class Attn(nn.Module):
    def __init__(self, d_model, n_heads, context_length):
        super().__init__()
        self.heads = nn.ModuleList([Head(d_model, d_model // n_heads, context_length)] * n_heads)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        return self.proj(torch.cat([h(x) for h in self.heads], -1))
'''


def test_a_head_module_repeated_for_every_head_is_told_so_with_its_own_fix(tmp_path):
    """A student's `nn.ModuleList([Head(...)] * H)`: param-count's general fix (split the width among the heads,
    not full-width projections) said the opposite of what the layer needs."""
    path = tmp_path / "attn.py"
    path.write_text(SHARED)
    target = f"{path}:Attn"
    opts = Options(only=["param-count"], diagnose=False)
    check = run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))[
        "param-count"]
    assert check.status == "fail" and check.details["finding"] == "count: one head shared", check.message
    assert "for _ in range" in check.fix and "full-width" not in check.fix, check.fix
