"""A failing lesson rule shows the student's line that trace marks for it (student trial 18: a correct einsum layer
without a divisibility guard and with an output projection built without bias got both rules' fixes and no line,
while `mha-check trace` named both lines)."""
from harness.child.inprocess import InProcess
from harness.engine.runner import Options, run_checks
from harness.render import text as text_render
from harness.render.formats import words_and_code
from harness.render.view import build
from harness.sandbox.subject import Subject

LAYER = '''import torch
import torch.nn as nn


class EinAttn(nn.Module):
    def __init__(self, d, h, context_length=16):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(d, 3 * d)
        self.o = nn.Linear(d, d, bias=False)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), 1))

    def forward(self, x):
        B, n, d = x.shape
        q, k, v = self.qkv(x).view(B, n, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        s = torch.einsum("bhid,bhjd->bhij", q, k) / (d // self.h) ** 0.5
        w = s.masked_fill(self.mask[:n, :n], float("-inf")).softmax(-1)
        return self.o(torch.einsum("bhij,bhjd->bhid", w, v).transpose(1, 2).reshape(B, n, d))
'''


def test_each_failing_rule_shows_the_line_trace_marks_for_it(tmp_path):
    path = tmp_path / "einsum_layer.py"
    path.write_text(LAYER)
    target = f"{path}:EinAttn"
    opts = Options(examples=2)
    report = run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))
    lines = report.diagnosis.rule_lines
    assert lines["out-proj-bias"]["at"].endswith("einsum_layer.py:10"), lines
    assert lines["out-proj-bias"]["code"] == "self.o = nn.Linear(d, d, bias=False)"
    assert lines["divisibility"]["at"].endswith("einsum_layer.py:6") and lines["divisibility"]["missing"], lines
    shown = "\n".join(text_render.render(build(report), cols=200).splitlines())
    assert "where: " in shown and "einsum_layer.py:10: self.o = nn.Linear(d, d, bias=False)" in shown, shown
    assert "einsum_layer.py:6 (where it belongs): def __init__(self, d, h, context_length=16):" in shown, shown


def test_words_after_a_code_span_keep_their_space_on_a_markdown_page():
    assert words_and_code("Build `self.o` as an nn.Linear") == "Build `self.o` as an nn.Linear"
