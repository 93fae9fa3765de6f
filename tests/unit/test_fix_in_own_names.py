"""The fixes of the rules that read the student's class are written in their names, in the check and in the root
cause (issue 28 item 6: a fix in the student's names or in words, never a line of the reference's that does not fit
their class).  out-proj-bias: `self.o = nn.Linear(dim, dim, bias=False)` was told to write `self.out_proj =
nn.Linear(d_out, d_out)`, a name their forward never uses; divisibility's root cause spoke of nheads and d_out."""
from harness.child.inprocess import InProcess
from harness.engine.runner import Options, run_checks
from harness.sandbox.subject import Subject

LAYER = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Attn(nn.Module):
    def __init__(self, dim, heads, max_seq):
        super().__init__()
        assert dim % heads == 0
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        {out}
        self.register_buffer("mask", torch.ones(max_seq, max_seq).tril().bool())

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1) * (C // self.heads) ** -0.5).masked_fill(~self.mask[:T, :T], float("-inf"))
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
        return {apply}
'''


def _out_proj_bias(tmp_path, out: str, apply: str):
    path = tmp_path / "attn.py"
    path.write_text(LAYER.format(out=out, apply=apply))
    target = f"{path}:Attn"
    opts = Options(examples=2, only=("out-proj-bias",))
    report = run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))
    return next(c for c in report.checks if c.id == "out-proj-bias")


def test_a_linear_built_without_a_bias_is_told_to_drop_bias_false_in_its_own_name(tmp_path):
    line = _out_proj_bias(tmp_path, "self.o = nn.Linear(dim, dim, bias=False)", "self.o(y)")
    assert line.status == "fail"
    assert "self.o" in line.fix and "bias=False" in line.fix and "out_proj" not in line.fix


def test_a_raw_output_matrix_is_told_to_add_a_bias_after_it_in_words(tmp_path):
    line = _out_proj_bias(tmp_path, "self.w_out = nn.Parameter(torch.randn(dim, dim) / dim ** 0.5)",
                          "y @ self.w_out")
    assert line.status == "fail"
    assert "w_out" in line.fix and "out_proj" not in line.fix


def test_a_projection_with_its_bias_passes(tmp_path):
    assert _out_proj_bias(tmp_path, "self.o = nn.Linear(dim, dim)", "self.o(y)").status == "pass"


def test_the_root_cause_gives_the_same_fix_in_the_students_names(tmp_path):
    """The report's root cause named out-proj-no-bias with the catalogue's words ("nn.Linear(d_out, d_out)") while
    the failing check said `self.o`: the diagnosis takes the check's own fix."""
    from harness.engine.diagnosis import diagnose

    path = tmp_path / "attn.py"
    path.write_text(LAYER.format(out="self.o = nn.Linear(dim, dim, bias=False)", apply="self.o(y)"))
    target = f"{path}:Attn"
    opts = Options(examples=2)
    report = run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))
    found = diagnose(report)
    assert found.mutant == "out-proj-no-bias"
    assert "self.o" in found.fix and not found.fix_is_code


def test_the_root_cause_of_a_missing_divisibility_check_uses_the_constructors_own_names(tmp_path):
    """divisibility wrote its fix in the constructor's names (`if dim % heads: raise ...`) while the root cause gave
    the catalogue's words about nheads and d_out."""
    from harness.engine.diagnosis import diagnose

    path = tmp_path / "attn.py"
    source = LAYER.format(out="self.o = nn.Linear(dim, dim)", apply="self.o(y)")
    path.write_text(source.replace("        assert dim % heads == 0\n", ""))
    target = f"{path}:Attn"
    opts = Options(examples=2)
    report = run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))
    found = diagnose(report)
    assert found.mutant == "no-divisibility-check"
    assert "if dim % heads" in found.fix and "nheads" not in found.fix
