"""eval-determinism on a layer with no dropout whose output changes from call to call through state it keeps (PaLM
lite's ALiBi cache, tests/realzoo/lucidrains_palm_lite_alibi_cache_pre_fix.py): the failure is right, its cause is not
dropout."""
from harness.child.inprocess import InProcess
from harness.engine.runner import Options, run_checks
from harness.sandbox.subject import Subject

STATEFUL = '''
import torch
import torch.nn as nn


class Attn(nn.Module):
    def __init__(self, d_in, d_out, context_length, num_heads):
        super().__init__()
        self.h, self.dh = num_heads, d_out // num_heads
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(d_in, d_out) for _ in range(3))
        self.o_proj = nn.Linear(d_out, d_out)
        self.register_buffer("bias", None, persistent=False)

    def forward(self, x):
        b, n, _ = x.shape
        split = lambda t: t.view(b, n, self.h, self.dh).transpose(1, 2)
        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        s = q @ k.transpose(2, 3) / self.dh ** 0.5
        if self.bias is not None:  # the cached branch adds the scores once more
            s = s + s
        self.register_buffer("bias", torch.zeros(n, n), persistent=False)
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        return self.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(b, n, -1))
'''


def test_a_layer_without_dropout_whose_output_changes_between_calls_is_not_blamed_on_dropout(tmp_path):
    """Before: "dropout is still active in eval mode", with dropout=0.5 as the failing configuration and the dropout
    fix, for a layer with no dropout at all."""
    path = tmp_path / "attn.py"
    path.write_text(STATEFUL)
    target = f"{path}:Attn"
    opts = Options(only=["eval-determinism"], examples=2, diagnose=False)
    result = run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))
    check = result["eval-determinism"]
    assert check.status == "fail" and check.details["finding"] == "differs between calls", check.message
    assert "no dropout argument nor nn.Dropout module to switch off" in check.message and \
        "dropout is still active" not in check.message


MULTI_QUERY = '''
import torch
import torch.nn as nn


class Attn(nn.Module):
    """One key/value head of width d_out // H shared by every query head: fewer parameters the more heads."""

    def __init__(self, d_in, d_out, context_length, num_heads):
        super().__init__()
        self.h, self.dh = num_heads, d_out // num_heads
        self.to_q = nn.Linear(d_in, d_out, bias=False)
        self.to_kv = nn.Linear(d_in, 2 * self.dh, bias=False)
        self.to_out = nn.Linear(d_out, d_out)

    def forward(self, x):
        b, n, _ = x.shape
        q = self.to_q(x).view(b, n, self.h, self.dh).transpose(1, 2)
        k, v = self.to_kv(x).chunk(2, dim=-1)
        s = (q @ k.transpose(1, 2)[:, None] / self.dh ** 0.5).masked_fill(
            torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        return self.to_out((s.softmax(-1) @ v[:, None]).transpose(1, 2).reshape(b, n, -1))
'''


def _head_invariance(tmp_path, source):
    path = tmp_path / "attn.py"
    path.write_text(source)
    target = f"{path}:Attn"
    opts = Options(only=["head-invariance"], examples=2, diagnose=False)
    result = run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))
    return result["head-invariance"]


def test_a_count_that_shrinks_with_the_heads_is_not_the_full_width_heads_pattern(tmp_path):
    """PaLM lite (tests/realzoo/lucidrains_palm_lite_alibi_cache_pre_fix.py) was diagnosed full-width-heads from
    head-invariance's "count grows with heads", though its count falls as H rises.  (Its shared key/value rows sit in
    one fused projection with the queries and the feed-forward input: here a projection whose name says no role.)"""
    check = _head_invariance(tmp_path, MULTI_QUERY.replace("to_kv", "shared"))
    assert check.status == "fail" and check.details["finding"] == "count shrinks with heads", check.message
    assert "count falls as heads are added" in check.fix and "full-width" not in check.fix  # not the growing
    # count's fix (a student's `[head] * H`, one head shared by all, was told to narrow heads it had made narrow)


def test_a_multi_query_layer_whose_fused_key_value_is_named_is_read_as_one_shared_head(tmp_path):
    """PaLM's first Attention (tests/realzoo/lucidrains_palm_mqa_rope_prenorm_inside.py): to_kv = Linear(d, 2 * dh)
    chunked [K; V] is one key/value head shared by every query head, so its count changes with H by design."""
    check = _head_invariance(tmp_path, MULTI_QUERY)
    assert check.status == "pass" and "one shared key/value head" in check.message, check.message


def test_an_output_that_changes_between_calls_is_not_blamed_on_the_strides(tmp_path):
    """PaLM lite failed contiguity ("the output changes when the same input is given with non-contiguous strides")
    because the non-contiguous call came second, after its first call had filled the ALiBi cache."""
    path = tmp_path / "attn.py"
    path.write_text(STATEFUL)
    target = f"{path}:Attn"
    opts = Options(only=["contiguity"], examples=2, diagnose=False)
    result = run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))
    assert result["contiguity"].status == "pass", result["contiguity"].message
