"""The line a trace gives for mistakes that had none (issue 28 item 6): a missing output projection is told at the
student's `return` line (where the projection is to be applied; `return out` runs no torch operation, so the
child notes the line its forward returns from), and a grouped-query layer's key/value heads tiled with `.repeat`
at the repeat (traced with 4 query heads sharing 2 key/value heads: with as many as the heads, `.repeat` and
`.repeat_interleave` look the same).  Forwards recorded by the worker in this process, analysed as `trace` does."""
from __future__ import annotations

import numpy as np
import torch

_DTYPE = torch.get_default_dtype()
from harness.child import worker  # noqa: E402 - sets float64 as the process's default dtype...

torch.set_default_dtype(_DTYPE)  # ...which the rest of the suite does not expect

from harness.engine.trace.analysis import analyse  # noqa: E402
from harness.engine.trace.result import TraceResult  # noqa: E402
from harness.engine.trace.vocabulary import WORKED  # noqa: E402
from harness.render.trace_text import render  # noqa: E402
from harness.wire import messages as m  # noqa: E402
from harness.wire.config import Config  # noqa: E402

HEAD = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Attn(nn.Module):
    def __init__(self, n_embd, n_head, n_kv_head, block_size):
        super().__init__()
        self.n_head, self.n_kv_head, self.hs = n_head, n_kv_head, n_embd // n_head
        self.n_rep = n_head // n_kv_head
        self.W_q = nn.Linear(n_embd, n_embd, bias=False)
        self.W_k = nn.Linear(n_embd, n_kv_head * self.hs, bias=False)
        self.W_v = nn.Linear(n_embd, n_kv_head * self.hs, bias=False)
        self.proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        q = self.W_q(x).view(B, T, self.n_head, self.hs).transpose(1, 2)
        k = self.W_k(x).view(B, T, self.n_kv_head, self.hs).transpose(1, 2)
        v = self.W_v(x).view(B, T, self.n_kv_head, self.hs).transpose(1, 2)
'''
TAIL = '''        att = q @ k.transpose(-2, -1) * self.hs ** -0.5
        att = F.softmax(att.masked_fill(self.tril[:T, :T] == 0, float("-inf")), dim=-1)
        out = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
'''
TILED = "        k, v = k.repeat(1, self.n_rep, 1, 1), v.repeat(1, self.n_rep, 1, 1)\n"
INTERLEAVED = "        k, v = k.repeat_interleave(self.n_rep, dim=1), v.repeat_interleave(self.n_rep, dim=1)\n"
EXPANDED = ("        k, v = (t[:, :, None].expand(B, self.n_kv_head, self.n_rep, T, self.hs)"
            ".reshape(B, self.n_head, T, self.hs) for t in (k, v))\n")
EXPANDED_TILED = ("        k, v = (t[:, None].expand(B, self.n_rep, self.n_kv_head, T, self.hs)"
                  ".reshape(B, self.n_head, T, self.hs) for t in (k, v))\n")
UNSQUEEZED_TILED = ("        k = k.unsqueeze(1).expand(-1, self.n_rep, -1, -1, -1).reshape(B, -1, T, self.hs)\n"
                    "        v = v.unsqueeze(1).expand(-1, self.n_rep, -1, -1, -1).reshape(B, -1, T, self.hs)\n")


def _traced(tmp_path, source: str, heads: int = 4, kv: int = 2) -> TraceResult:
    """One forward of `source`'s Attn, recorded by the worker and analysed as `mha-check trace` does."""
    path = tmp_path / "attn.py"
    path.write_text(source)
    torch.set_default_dtype(torch.float64)
    try:
        w = worker.Worker(own_process=False)
        w.answer(m.Load(f"{path}:Attn", str(tmp_path)))
        w.answer(m.Build(Config(8, 8, heads, 16, batch=2, n=3, kv_heads=kv).to_dict(), handle=0, origins=True))
        reply = w.answer(m.Trace(0, np.random.default_rng(0).standard_normal((2, 3, 8)), 400, 0))
    finally:
        torch.set_default_dtype(_DTYPE)
    cfg = {**WORKED, "heads": heads, "kv_heads": kv}
    result = TraceResult("attn.py:Attn", "", cfg)
    result.steps, result.mistakes, result.notes = analyse(reply.ops, cfg, complete=not reply.raised,
                                                          output=reply.output)
    return result


def _lines(result: TraceResult) -> list[tuple[str, str]]:
    return [(mark["id"], result.where(mark)[0]) for mark in result.mistakes]


def test_a_missing_output_projection_is_told_at_the_return_line(tmp_path):
    result = _traced(tmp_path, HEAD + INTERLEAVED + TAIL + "        return out\n")
    assert _lines(result) == [("heads-not-projected", "attn.py:26")]
    assert result.where(result.mistakes[0])[1] == "return out"
    assert "(the line to change: attn.py:26)" in render(result)


def test_an_applied_output_projection_is_not_marked(tmp_path):
    assert _lines(_traced(tmp_path, HEAD + INTERLEAVED + TAIL + "        return self.proj(out)\n")) == []


def test_key_value_heads_tiled_with_repeat_are_marked_at_the_repeat(tmp_path):
    result = _traced(tmp_path, HEAD + TILED + TAIL + "        return self.proj(out)\n")
    assert _lines(result) == [("kv-heads-tiled", "attn.py:22")] * 2  # the keys' and the values' repeat
    assert ".repeat_interleave(2, dim=1)" in result.mistakes[0]["text"]


def test_key_value_heads_tiled_with_expand_are_marked_at_the_expand(tmp_path):
    """expand on a new axis before the key/value heads, then a reshape merging the two: the tiling of .repeat (a
    student's trial: the report named the mistake without a line, and the trace marked nothing)."""
    result = _traced(tmp_path, HEAD + EXPANDED_TILED + TAIL + "        return self.proj(out)\n")
    assert _lines(result) == [("kv-heads-tiled", "attn.py:22")] * 2
    assert ".repeat_interleave(2, dim=1)" in result.mistakes[0]["text"]
    result = _traced(tmp_path, HEAD + UNSQUEEZED_TILED + TAIL + "        return self.proj(out)\n")
    assert _lines(result) == [("kv-heads-tiled", "attn.py:22"), ("kv-heads-tiled", "attn.py:23")]


def test_key_value_heads_repeated_each_in_turn_are_not_marked(tmp_path):
    for right in (INTERLEAVED, EXPANDED):
        assert _lines(_traced(tmp_path, HEAD + right + TAIL + "        return self.proj(out)\n")) == [], right


def test_with_as_many_key_value_heads_as_heads_a_repeat_shows_nothing_to_mark(tmp_path):
    """Why a grouped layer is traced grouped: with KV = H the repeat is by 1, and tiling is not wrong there."""
    assert _lines(_traced(tmp_path, HEAD + TILED + TAIL + "        return self.proj(out)\n", heads=2, kv=2)) == []


def test_a_fill_of_minus_1e4_is_marked_with_its_own_value_and_told_by_the_scores_it_needs():
    """causal-leakage finds early GPT-2's -1e4 (its probe pushes real scores near -5e4) and the report named
    finite-fill-100 with no line and a story of -100; the trace now marks the fill at its line, with its value."""
    from harness.engine.trace.detect_mask import PROBED_FILL, fill_mark

    mark = fill_mark(-1e4)
    assert mark["id"] == "fill-leaks-invisibly" and mark["title"] == "Masked scores filled with -10000 instead of -inf"
    assert "e^-10000, rounds to 0 while the scores are small" in mark["symptom"]
    assert "real scores fall near -10000" in mark["text"] and "= 0 " not in mark["text"]
    assert PROBED_FILL < -1e4 < -100  # marked, as -100 is; -1e9 stays a note (the lesson's rule)
    assert "title" not in fill_mark(-100.0)  # the catalogue's own story tells -100


def test_the_fix_of_tiled_key_value_heads_is_the_students_line_with_repeat_interleave():
    from harness.engine.rewrite import KINDS, own_line_fix

    assert own_line_fix("repeat", "k = k.repeat(1, self.n_rep, 1, 1)  # BUG") == \
        "k = k.repeat_interleave(self.n_rep, dim=1)" + KINDS["repeat"]  # the values' line is to be fixed too
    assert own_line_fix("repeat", "k, v = (t.repeat(1, self.group, 1, 1) for t in (k, v))") == \
        "k, v = (t.repeat_interleave(self.group, dim=1) for t in (k, v))"
    assert own_line_fix("repeat", "return x.repeat(1, 1, n_rep, 1)") == "return x.repeat_interleave(n_rep, dim=2)"
    assert own_line_fix("repeat", "k = k.repeat(2, 2, 1, 1)") is None  # two axes grown: not this mistake's line


NAN_GUARD_TAIL = '''        att = q @ k.transpose(-2, -1) * self.hs ** -0.5
        att = F.softmax(att.masked_fill(self.tril[:T, :T] == 0, float("-inf")), dim=-1)
        att = att.masked_fill(torch.isnan(att), 0.0)
        out = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
'''


def test_a_nan_guard_after_the_softmax_is_no_mask_applied_after_it(tmp_path):
    """tfs-mt's `QKt_norm.masked_fill(torch.isnan(QKt_norm), 0.0)` after the softmax (rows a padding mask hides
    entirely become 0, not NaN) was marked mask-after-softmax (zero-after-softmax named in the trace) on a correct
    layer: a fill chosen by isnan of the weights hides no token, only the NaNs of rows with none.  So was ESPnet's
    zeroing, after the softmax, of the weights its mask had hidden before it."""
    source = HEAD + INTERLEAVED + NAN_GUARD_TAIL + "        return self.proj(out)\n"
    assert _lines(_traced(tmp_path, source)) == []
    again = source.replace("torch.isnan(att), 0.0", "self.tril[:T, :T] == 0, 0.0")  # ESPnet: the same mask again
    assert _lines(_traced(tmp_path, again)) == []  # after the softmax zeroes weights that are already 0: not marked
    zeroed = again.replace('att.masked_fill(self.tril[:T, :T] == 0, float("-inf"))', "att")  # only after: marked
    assert [i for i, _ in _lines(_traced(tmp_path, zeroed))] == ["mask-after-softmax"]
    wider = again.replace("self.tril[:T, :T] == 0, 0.0", "self.tril[:T, :T].T == 0, 0.0")  # zeroes the past too
    assert [i for i, _ in _lines(_traced(tmp_path, wider))] == ["mask-after-softmax"]


def test_a_statement_over_several_lines_is_one_heading(tmp_path):
    """A fused projection split with `.view(` on one line and its `.permute(` two lines down: the operations of the
    one statement stand under one heading with the statement's lines (a student's trace had shown the whole
    statement twice, at its first line and at its last), and the mark points into it."""
    split = ("        q = self.W_q(x).view(\n"
             "            B, T, self.n_head, self.hs,\n"
             "        ).transpose(1, 2)\n")
    source = HEAD.replace("        q = self.W_q(x).view(B, T, self.n_head, self.hs).transpose(1, 2)\n", split)
    text = render(_traced(tmp_path, source + INTERLEAVED + TAIL + "        return self.proj(out)\n"))
    assert "attn.py:19-21  q = self.W_q(x).view(B, T, self.n_head, self.hs).transpose(1, 2)" in text
    assert "attn.py:19 " not in text and "attn.py:21 " not in text
    assert text.count("attn.py:22  k = self.W_k(x)") == 1  # a statement of one line keeps its own heading


WHERE_FILL_FIRST = '''        att = q @ k.transpose(-2, -1) * self.hs ** -0.5
        att = torch.where(HIDDEN, torch.full_like(att, float("-inf")), att)
        out = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(out)
'''


def test_where_with_the_fill_first_hides_its_condition(tmp_path):
    """torch.where(mask, torch.full_like(att, -inf), att): the fill, made from the scores but holding none of them,
    is where's first value, so the condition is what is hidden (a student's trial: a right layer was marked
    mask-inverted by trace while the report passed it, and the mask one diagonal late was told as mask-wrong with the
    hidden rows inverted, and without its line in the report)."""
    right = WHERE_FILL_FIRST.replace("HIDDEN", "self.tril[:T, :T] == 0")
    assert _lines(_traced(tmp_path, HEAD + INTERLEAVED + right)) == []
    late = WHERE_FILL_FIRST.replace("HIDDEN", "torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), "
                                                     "diagonal=2)")
    result = _traced(tmp_path, HEAD + INTERLEAVED + late)
    assert [mark["id"] for mark in result.mistakes] == ["mask-one-token-late"]
    assert "hidden, row by row: ..x; ...; ..." in render(result)
