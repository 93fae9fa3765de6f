"""The trace detectors of the constructor's widths (harness.engine.trace.detect_widths): each marks its mistake at
the student's line where the shapes (or what the constructor refuses) agree with it and with no other reading, and
nothing on the lesson's layer written the same way."""
from __future__ import annotations

import pytest

LAYER = '''
import torch
from torch import nn


class Head(nn.Module):
    def __init__(self, d, width, context_length):
        super().__init__()
        self.q, self.k, self.v = (nn.Linear(d, width) for _ in range(3))
        self.register_buffer("future", torch.ones(context_length, context_length, dtype=torch.bool).triu(1))

    def forward(self, x):
        n = x.shape[1]
        q, k, v = self.q(x), self.k(x), self.v(x)
        s = (q @ k.transpose(1, 2) / k.shape[-1] ** 0.5).masked_fill(self.future[:n, :n], float("-inf"))
        return s.softmax(-1) @ v


class Heads(nn.Module):
    def __init__(self, d_model, n_heads, context_length):
        super().__init__()
        assert d_model % n_heads == 0  # (the lesson's guard: without it, built-indivisible, not what this is about)
        self.heads = nn.ModuleList(Head(d_model, WIDTH, context_length) for _ in range(n_heads))
        PROJECTION

    def forward(self, x):
        return RETURN
'''


def _marks(tmp_path, source: str, target: str) -> list[tuple[str, str]]:
    from harness.child.inprocess import InProcess
    from harness.frontends.trace import trace
    from harness.sandbox.subject import Subject
    path = tmp_path / "layer.py"
    path.write_text(source)
    result = trace(f"{path}:{target}", make_subject=lambda spec, overrides, seed, weight_map: Subject(
        spec, overrides, seed, start=InProcess()))
    return [(m["id"], result.where(m)[1]) for m in result.mistakes]


CAT = "torch.cat([h(x) for h in self.heads], -1)"


@pytest.mark.parametrize("width, projection, returned, marked", [
    ("d_model", "self.o = nn.Linear(n_heads * d_model, d_model)", f"self.o({CAT})", ["heads-full-width"]),
    ("d_model", "", CAT, ["heads-full-width-unprojected"]),
    ("d_model", "self.o = nn.Linear(n_heads * d_model, n_heads * d_model)", f"self.o({CAT})", []),
    ("d_model // n_heads", "self.o = nn.Linear(d_model, d_model)", f"self.o({CAT})", []),
], ids=["projected-back", "no-projection", "d-out-per-head", "lesson"])
def test_heads_as_wide_as_the_layer_are_marked_where_their_projection_is_built(tmp_path, width, projection,
                                                                               returned, marked):
    """Each head's scores summed over the whole width d: marked at the line that chose that width, after the output
    the layer makes of them (projected back to d, or H·d side by side with no projection: then not also "no output
    projection").  The head's projection takes its width from its constructor's `width`, so the line is the
    layer's, which passes d_model as every head's width (a student's trial: `OneHead(emb, emb, block)` was told at
    the head's right `nn.Linear(emb, head_size)`).  The book's wrapper that reads d_out as one head's width (H·d
    through an H·d projection) is neither mistake; heads of d / H are the lesson's."""
    source = LAYER.replace("WIDTH", width).replace("PROJECTION", projection or "pass").replace("RETURN", returned)
    assert _marks(tmp_path, source, "Heads") == [(m, "self.heads = nn.ModuleList(Head(d_model, d_model, "
                                                     "context_length) for _ in range(n_heads))") for m in marked]


def test_heads_that_choose_the_full_width_themselves_are_marked_at_their_projection(tmp_path):
    """A head whose projection is built d wide by its own line (`nn.Linear(d, d)`, whatever width it is given) is
    marked there: that is the line to change."""
    source = LAYER.replace("nn.Linear(d, width)", "nn.Linear(d, d)").replace("WIDTH", "d_model // n_heads").replace(
        "PROJECTION", "self.o = nn.Linear(n_heads * d_model, d_model)").replace("RETURN", f"self.o({CAT})")
    assert _marks(tmp_path, source, "Heads") == [("heads-full-width", "self.q, self.k, self.v = (nn.Linear(d, d) "
                                                                      "for _ in range(3))")]


SPLIT = '''
import torch
from torch import nn


class Split(nn.Module):
    def __init__(self, d_in, d_out, num_heads, context_length):
        super().__init__()
        GUARD
        self.h, self.dh = num_heads, d_out // num_heads
        self.q, self.k, self.v = (nn.Linear(d_in, d_out) for _ in range(3))
        self.o = nn.Linear(d_out, d_out)

    def forward(self, x):
        b, n, c = x.shape
        heads = lambda t: t.view(b, n, self.h, WIDTH).transpose(1, 2)
        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        future = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)
        s = (q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5).masked_fill(future, float("-inf"))
        return self.o((s.softmax(-1) @ v).transpose(1, 2).reshape(b, n, -1))
'''


UNGUARDED = ("built-indivisible", "def __init__(self, d_in, d_out, num_heads, context_length):")  # no guard: its
# forward raises on 8 features in 3 heads, and the report's divisibility check fails it too (the guard belongs there)


@pytest.mark.parametrize("guard, width, marked", [
    ("pass", "c // self.h", [("head-width-from-input", "heads = lambda t: t.view(b, n, self.h, c // "
                                                       "self.h).transpose(1, 2)"), UNGUARDED]),
    ("pass", "int(c / self.h)", [("head-width-from-input", "heads = lambda t: t.view(b, n, self.h, int(c / "
                                                           "self.h)).transpose(1, 2)"), UNGUARDED]),
    ("pass", "self.dh", [UNGUARDED]),
    ("assert d_out % num_heads, 'd_out must divide into heads'", "self.dh",
     [("guard-refuses-divisible", "assert d_out % num_heads, 'd_out must divide into heads'")]),
    ("assert d_out % num_heads == 0, 'd_out must divide into heads'", "self.dh", []),
], ids=["floor-of-x", "int-of-x", "no-guard", "guard-inverted", "guard"])
def test_a_head_width_read_off_x_and_a_guard_the_wrong_way_round_are_marked_at_their_lines(tmp_path, guard, width,
                                                                                          marked):
    """The head width computed from x's width on the split's own line raises only with d_in != d_out: marked there
    (a width kept in an attribute was computed where the forward does not show: no mark).  A guard that refuses the
    worked example, whose width its heads divide, and builds the same width with 3 heads: marked at the guard, no
    forward to record.  No guard at all: its forward raises on a width the heads do not divide, marked at `def
    __init__`, where the guard belongs (the report's divisibility check fails these layers too)."""
    source = SPLIT.replace("GUARD", guard).replace("WIDTH", width)
    assert _marks(tmp_path, source, "Split") == marked


SINGLE = '''
import torch
from torch import nn


class Single(nn.Module):
    def __init__(self, n_embd, head_size, block_size):
        super().__init__()
        self.key, self.query, self.value = (nn.Linear(n_embd, head_size, bias=False) for _ in range(3))
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        k, q = self.key(x), self.query(x)
        wei = q @ k.transpose(-2, -1) * SCALE
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf")).softmax(-1)
        return wei @ self.value(x)
'''


@pytest.mark.parametrize("scale, marked", [
    ("C ** -0.5", [("single-scaled-by-input-width", "wei = q @ k.transpose(-2, -1) * C ** -0.5")]),
    ("k.shape[-1] ** -0.5", []),
], ids=["input-width", "keys-width"])
def test_a_single_head_scaled_by_the_inputs_width_is_marked_at_its_scale(tmp_path, scale, marked):
    assert _marks(tmp_path, SINGLE.replace("SCALE", scale), "Single") == marked


KEEPER = '''
import torch
from torch import nn


class Keeper(nn.Module):
    def __init__(self, d_in, d_out, num_heads, context_length):
        super().__init__()
        assert d_out % num_heads == 0  # (the lesson's guard: without it, built-indivisible, not what this is about)
        WIDTH
        self.h = num_heads
        self.qkv = nn.Linear(d_in, 3 * d_out)
        self.o = nn.Linear(d_out, d_out)

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.h, -1).permute(2, 0, 3, 1, 4)
        future = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)
        s = (q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5).masked_fill(future, float("-inf"))
        return self.o((s.softmax(-1) @ v).transpose(1, 2).reshape(b, n, -1))
'''


@pytest.mark.parametrize("width, marked", [
    ("d_out = d_in", []),  # the line that ignores d_out is not one the forward shows: no line
    ("pass", []),
], ids=["ignored-above", "lesson"])
def test_a_layer_whose_projections_name_the_output_width_is_not_marked_for_ignoring_it(tmp_path, width, marked):
    """Built to the input's width throughout, with lines that name d_out (`nn.Linear(d_in, 3 * d_out)` after
    `d_out = d_in`): the width was set on a line the forward does not show, so the projection's is not the line to
    change."""
    assert _marks(tmp_path, KEEPER.replace("WIDTH", width), "Keeper") == marked


def test_a_layer_built_to_the_inputs_width_is_marked_at_its_first_projection(tmp_path):
    source = KEEPER.replace("WIDTH", "pass").replace("3 * d_out", "3 * d_in").replace("(d_out, d_out)",
                                                                                     "(d_in, d_in)")
    assert _marks(tmp_path, source, "Keeper") == [("built-to-input-width", "self.qkv = nn.Linear(d_in, 3 * d_in)")]


GROUPED_KV = '''
import torch
import torch.nn.functional as F
from torch import nn


class Grouped(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, dim // n_heads
        self.q = nn.Linear(dim, dim, bias=False)
        self.kv = nn.Linear(dim, KV_WIDTH, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        q = self.q(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(x).split(KV_SPLIT, dim=-1)
        k = k.view(B, T, -1, self.head_dim).transpose(1, 2)
        v = v.view(B, T, -1, self.head_dim).transpose(1, 2)
        r = self.n_heads // k.shape[1]
        k, v = k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(out.transpose(1, 2).reshape(B, T, C))
'''


@pytest.mark.parametrize("width, split, marked", [
    ("2 * n_kv_heads * self.head_dim", "self.n_kv_heads * self.head_dim", []),
    ("2 * dim", "C", ["kv-projections-full-width"]),
], ids=["kv-heads-wide", "full-width"])
def test_a_fused_kv_projection_is_full_width_only_at_twice_the_width(tmp_path, width, split, marked):
    """One Linear making the keys and the values together ([K; V], split after: transformer-toolkit 0.0.33's
    GroupedQueryAttention, realzoo19) holds both roles: 2 * KV * head_dim wide is the grouped layer right, and with
    KV = H / 2 that is d features - it was marked kv-projections-full-width (gqa-kv-heads-ignored) at the fused
    Linear; 2 * d wide is the mistake."""
    source = GROUPED_KV.replace("KV_WIDTH", width).replace("KV_SPLIT", split)
    assert [i for i, _ in _marks(tmp_path, source, "Grouped") if i == "kv-projections-full-width"] == marked



def test_a_fused_qkv_projection_of_a_grouped_layer_is_not_marked(tmp_path):
    """[Q; K; V] from one Linear of d + 2 * KV * head_dim features (the zoo's correct gqa_fused_qkv): with KV = H / 2
    that is 2·d, which a rule counting only the keys' and values' roles read as a full-width [K; V] (gpt-fast's,
    litgpt's and mamba's grouped layers were marked on the way to the fix above); the projection holds three roles,
    full width 3·d."""
    from pathlib import Path
    zoo = Path(__file__).resolve().parents[1] / "zoo" / "correct" / "gqa_fused_qkv.py"
    marks = _marks(tmp_path, zoo.read_text(), "GroupedQueryAttention")
    assert [i for i, _ in marks if i == "kv-projections-full-width"] == []
