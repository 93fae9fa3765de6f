"""The registry of trace detectors: validated at the door, complete, listed truly, and the vocabulary a mutant's
`trace=` is checked against when the mutant is imported."""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

import mutants
from harness.engine.trace import detectors, registry
from harness.engine.trace.naming import Namer
from harness.engine.trace.registry import DETECTORS, Findings, detector
from harness.engine.trace.vocabulary import WORKED
from mutants import MutantInfo

ROOT = Path(__file__).resolve().parents[2]
EXERCISE = {"task": "observe it", "topic": "the causal mask", "remedy": "say it in words"}


def _listed() -> list[tuple[str, list[str]]]:
    """(module, ids) for each bullet of the `detectors` docstring, parenthesised remarks left out."""
    doc = re.sub(r"\([^()]*\)", "", detectors.__doc__)
    bullets = re.findall(r"^- (detect_\w+): (.*?)(?=^- |^\S|\Z)", doc, re.M | re.S)
    return [(module, re.findall(r"[a-z0-9]+(?:-[a-z0-9]+)*", text)) for module, text in bullets]


def test_the_docstring_lists_every_registered_id_in_the_order_they_run():
    listed = _listed()
    assert [f"harness.engine.trace.{m}" for m, _ in listed] == [m.__name__ for m in detectors.MODULES]
    assert [i for _, ids in listed for i in ids] == [i for d in detectors.in_order() for i in d.ids]
    assert len(DETECTORS) == 94  # 33, then dropout-always-on, mask-made-without-device, additive-finite-mask,
    # mask-multiplied, mask-added, layer-made-in-forward, kv-heads-tiled, keys-from-query-weights, split-strided,
    # merge-strided, values-split-strided, mask-kept-as-attribute, merge-moves-batch, queries-and-keys-swapped,
    # kv-features-repeated, kv-heads-expanded, mask-on-some-heads, mask-kept-in-container, out-proj-without-bias,
    # values-rotated, merge-view-to-input-width, mask-only-in-eval, mask-hides-past, mask-made-too-short,
    # dropout-before-softmax, mask-dropped-out, heads-full-width, heads-full-width-unprojected, head-width-from-input,
    # guard-refuses-divisible, single-scaled-by-input-width, built-to-input-width, keys-not-rotated,
    # keys-rotated-out-of-step, rotated-before-split, frequencies-from-model-width, layer-in-plain-list,
    # layer-never-used, weights-without-grad, kv-projections-full-width, built-indivisible, cache-append-wrong-axis,
    # cache-mask-not-offset, cache-position-set, cache-chunk-unmasked, cache-rope-from-zero, cache-not-reset,
    # view-on-transposed-in-training, fill-below-probe, scaled-by-sqrt-heads, exp-before-mask, cache-empty-slots-read,
    # cache-keys-rotated-twice, rotation-pairs-mismatched, scaled-by-sqrt-n, residual-inside, query-bias-left-out,
    # key-bias-left-out, value-bias-left-out, values-from-keys, scaled-after-softmax


def test_every_id_a_mutant_declares_is_a_registered_detector():
    declared = {d for entry in mutants.catalogue().values() for d in entry.get("trace", [])}
    assert declared and declared <= set(DETECTORS)


def test_a_misspelt_trace_id_fails_when_the_mutant_is_built():
    with pytest.raises(ValueError, match="'mask-hides-diagonal' is not a detector.*mean mask-includes-diagonal"):
        MutantInfo(id="x", title="t", lesson="l", killed_by=("causal-leakage",), symptom="s", fix="f",
                   trace=("mask-hides-diagonal",), **EXERCISE)  # the mutant's id, not its detector's
    with pytest.raises(ValueError, match="trace must be a tuple"):
        MutantInfo(id="x", title="t", lesson="l", killed_by=("causal-leakage",), symptom="s", fix="f",
                   trace="mask-includes-diagonal", **EXERCISE)
    ok = MutantInfo(id="x", title="t", lesson="l", killed_by=("causal-leakage",), symptom="s", fix="f",
                    trace=("mask-includes-diagonal",), **EXERCISE)
    assert ok.trace == ("mask-includes-diagonal",)


def test_a_misspelt_trace_id_fails_at_import_of_the_mutant_module(tmp_path):
    source = (ROOT / "mutants" / "mask_hides_diagonal.py").read_text()
    assert 'trace=("mask-includes-diagonal",)' in source
    module = tmp_path / "mask_hides_diagonal.py"
    module.write_text(source.replace('trace=("mask-includes-diagonal",)', 'trace=("mask-include-diagonal",)'))
    spec = importlib.util.spec_from_file_location("typo_mutant", module)
    with pytest.raises(ValueError, match="'mask-include-diagonal' is not a detector"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


def test_registration_is_validated_before_the_registry_is_touched():
    before = (dict(DETECTORS), list(registry.ORDER))
    with pytest.raises(ValueError, match="'Mask_Wrong' is not kebab-case"):
        detector("Mask_Wrong")
    with pytest.raises(ValueError, match="repeat an id"):
        detector("made-up-one", "made-up-one")
    with pytest.raises(ValueError, match="'mask-wrong' is already registered by .*detect_mask.mask_shape"):
        detector("made-up-two", "mask-wrong")
    with pytest.raises(ValueError, match="at least one"):
        detector()
    assert (dict(DETECTORS), list(registry.ORDER)) == before


def test_a_detector_can_set_only_the_ids_it_registered():
    findings = Findings(Namer([], WORKED), [], WORKED, complete=True, allowed=("mask-wrong",))
    findings.mark(0, {"id": "mask-wrong", "text": "t"})
    findings.mark(0, {"id": "mask-wrong", "text": "later, kept out"}, keep_earlier=True)
    assert findings.at == {0: {"id": "mask-wrong", "text": "t"}}
    with pytest.raises(ValueError, match="set the mark 'raised'"):
        findings.mark(1, {"id": "raised", "text": "t"})
    with pytest.raises(ValueError, match="set the mark 'no-mask-applied'"):
        findings.mark_whole("no-mask-applied", "t")


def test_the_order_does_not_depend_on_which_detector_module_was_imported_first():
    code = ("import harness.engine.trace.detect_output, harness.engine.trace.detect_mask; "
            "from harness.engine.trace import detectors; print([d.name for d in detectors.in_order()])")
    late = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert late.stdout.strip() == str([d.name for d in detectors.in_order()]), late.stderr[-2000:]


def test_importing_the_detectors_as_a_mutant_does_loads_no_catalogue_process_or_wire():
    code = ("import sys; import harness.engine.trace.detectors; print(sorted(m for m in sys.modules if m.startswith("
            "('mutants', 'harness.engine.trace.drive', 'harness.wire', 'harness.sandbox', 'torch'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.stdout.strip() == "[]", done.stderr[-2000:]


def test_a_numpy_scalar_argument_is_read_as_its_number():
    """Hugging Face's CTRL divides its scores by np.sqrt(dk), recorded as div(np.float64(2.0)): read as no number, the
    scale step was not seen and the trace marked no-scaling on the line before, on a layer that scales right."""
    from harness.engine.trace.vocabulary import number
    assert number("np.float64(2.0)") == 2.0 and number("np.float32(0.5)") == 0.5 and number("np.int64(3)") == 3.0
    assert number("0.25") == 0.25 and number("np.sqrt") is None and number(None) is None


STRIDED_LAYER = '''
import torch
from torch import nn


class Strided(nn.Module):
    def __init__(self, d_in, d_out, context_length, num_heads):
        super().__init__()
        assert d_out % num_heads == 0  # (the lesson's guard: without it, built-indivisible)
        self.H, self.dh = num_heads, d_out // num_heads
        self.q, self.k, self.v = (nn.Linear(d_in, d_out) for _ in range(3))
        self.o = nn.Linear(d_out, d_out)

    def forward(self, x):
        B, n, _ = x.shape
        d = self.H * self.dh  # the heads' width, d_out (x's would be merge-view-d-in's mistake)
        lesson = lambda t: t.view(B, n, self.H, self.dh).transpose(1, 2)
        strided = lambda t: t.view(B, n, self.dh, self.H).permute(0, 3, 1, 2)
        q, k, v = SPLIT
        a = (q @ k.transpose(-1, -2) / self.dh ** 0.5).masked_fill(
            torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1), float("-inf")).softmax(-1)
        return self.o(MERGE)
'''


@pytest.mark.parametrize("split, merge, marked", [
    ("strided(self.q(x)), strided(self.k(x)), strided(self.v(x))", "(a @ v).permute(0, 2, 3, 1).reshape(B, n, d)", []),
    ("strided(self.q(x)), strided(self.k(x)), strided(self.v(x))", "(a @ v).transpose(1, 2).reshape(B, n, d)",
     ["split-strided"] * 3),
    ("lesson(self.q(x)), lesson(self.k(x)), lesson(self.v(x))", "(a @ v).permute(0, 2, 3, 1).reshape(B, n, d)",
     ["merge-strided"]),
    ("lesson(self.q(x)), lesson(self.k(x)), strided(self.v(x))", "(a @ v).transpose(1, 2).reshape(B, n, d)",
     ["values-split-strided"]),
    ("strided(self.q(x)), lesson(self.k(x)), lesson(self.v(x))", "(a @ v).transpose(1, 2).reshape(B, n, d)", []),
], ids=["alike", "split", "merge", "values", "queries-no-mutant"])
def test_trace_marks_heads_on_strided_features_only_where_the_layer_does_not_undo_them(tmp_path, split, merge, marked):
    """A strided split merged back strided is the lesson's layer renumbered (harness.engine.head_order.Strided): no
    mark.  A strided split with the lesson's merge, the lesson's split merged strided, the values alone split so:
    marked at their steps, the lines the report points to.  The queries alone split so: no mutant is that mistake,
    no mark (view-order still names it from the numbers)."""
    from harness.child.inprocess import InProcess
    from harness.frontends.trace import trace
    from harness.sandbox.subject import Subject
    path = tmp_path / "layer.py"
    path.write_text(STRIDED_LAYER.replace("SPLIT", split).replace("MERGE", merge))
    result = trace(f"{path}:Strided", make_subject=lambda spec, overrides, seed, weight_map: Subject(
        spec, overrides, seed, start=InProcess()))
    assert result.error is None
    assert [m["id"] for m in result.mistakes] == marked


FOLDED_LAYER = '''
import torch
from torch import nn


class Folded(nn.Module):
    def __init__(self, d_in, d_out, context_length, num_heads):
        super().__init__()
        assert d_out % num_heads == 0  # (the lesson's guard: without it, built-indivisible)
        self.H, self.dh = num_heads, d_out // num_heads
        self.q, self.k, self.v = (nn.Linear(d_in, d_out) for _ in range(3))
        self.o = nn.Linear(d_out, d_out)

    def forward(self, x):
        B, n, _ = x.shape
        H, dh = self.H, self.dh
        d = H * dh  # the heads' width, d_out (x's would be merge-view-d-in's mistake)
        fold = lambda t: t.view(B, n, H, dh).transpose(1, 2).reshape(B * H, n, dh)
        q, k, v = fold(self.q(x)), fold(self.k(x)), fold(self.v(x))
        a = (torch.bmm(q, k.transpose(1, 2)) / dh ** 0.5).masked_fill(
            torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1), float("-inf")).softmax(-1)
        y = torch.bmm(a, v)
        return self.o(MERGE)
'''


@pytest.mark.parametrize("merge, marked", [
    ("y.view(B, H, n, dh).transpose(1, 2).reshape(B, n, d)", []),
    ("y.view(B, n, H, dh).reshape(B, n, d)", ["merge-without-transpose"]),
    ("y.view(B, H, n, dh).reshape(B, n, H, dh).reshape(B, n, d)", ["merge-without-transpose"]),
], ids=["lesson", "unfolded-tokens-first", "heads-reshaped-behind-tokens"])
def test_trace_marks_a_merge_that_reads_folded_or_leading_heads_as_tokens_first(tmp_path, merge, marked):
    """A student's trial: heads folded into the batch for bmm, merged back with y.view(B, n, H, dh): in memory the
    folded tensor is (B, H, n, dh), so that view is the merge without the transpose.  The report named
    merge-without-transpose from the numbers and gave no line; the trace said no known mistake shows."""
    from harness.child.inprocess import InProcess
    from harness.frontends.trace import trace
    from harness.sandbox.subject import Subject
    path = tmp_path / "layer.py"
    path.write_text(FOLDED_LAYER.replace("MERGE", merge))
    result = trace(f"{path}:Folded", make_subject=lambda spec, overrides, seed, weight_map: Subject(
        spec, overrides, seed, start=InProcess()))
    assert result.error is None
    assert [m["id"] for m in result.mistakes] == marked


FUSED_MASK_LAYER = '''
import torch
import torch.nn.functional as F
from torch import nn


class FusedMask(nn.Module):
    def __init__(self, d_in, d_out, context_length, num_heads):
        super().__init__()
        assert d_out % num_heads == 0  # (the lesson's guard: without it, built-indivisible)
        self.H = num_heads
        self.qkv, self.o = nn.Linear(d_in, 3 * d_out), nn.Linear(d_out, d_out)
        self.register_buffer("mask", torch.ones(context_length, context_length, dtype=torch.bool).tril())

    def forward(self, x):
        B, n, _ = x.shape
        q, k, v = self.qkv(x).view(B, n, 3, self.H, -1).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=MASK)
        return self.o(y.transpose(1, 2).reshape(B, n, -1))  # the heads' width, d_out (not x's: merge-view-d-in)
'''


@pytest.mark.parametrize("mask, marked", [("self.mask[:n, :n]", []), ("self.mask", ["mask-size-not-n"])],
                         ids=["sliced", "whole"])
def test_a_fused_attention_that_raises_on_a_whole_context_mask_is_marked_mask_not_cut(tmp_path, mask, marked):
    """A trial's F.multi_head_attention_forward(..., attn_mask=self.causal) raised on a (context_length,
    context_length) mask: the trace marked only that it raised, and the report named no mistake.  A fused attention
    meets its attn_mask with the scores inside: the mask not cut to the sequence, as for masked_fill."""
    from harness.child.inprocess import InProcess
    from harness.frontends.trace import trace
    from harness.sandbox.subject import Subject
    path = tmp_path / "layer.py"
    path.write_text(FUSED_MASK_LAYER.replace("MASK", mask))
    result = trace(f"{path}:FusedMask", make_subject=lambda spec, overrides, seed, weight_map: Subject(
        spec, overrides, seed, start=InProcess()))
    assert [m["id"] for m in result.mistakes] == marked


MODES_LAYER = '''
import torch
import torch.nn.functional as F
from torch import nn


class Modes(nn.Module):
    def __init__(self, d_in, d_out, context_length, num_heads):
        super().__init__()
        assert d_out % num_heads == 0  # (the lesson's guard: without it, built-indivisible)
        self.H = num_heads
        self.qkv, self.o = nn.Linear(d_in, 3 * d_out), nn.Linear(d_out, d_out)
        self.register_buffer("mask", torch.ones(context_length, context_length, dtype=torch.bool).triu(1))

    def forward(self, x):
        B, n, _ = x.shape
        q, k, v = self.qkv(x).view(B, n, 3, self.H, -1).permute(2, 0, 3, 1, 4)
        s = q @ k.transpose(-1, -2) / q.size(-1) ** 0.5
        if self.training:
            y = TRAINING
        else:
            y = s.masked_fill(self.mask[:n, :n], float("-inf")).softmax(-1) @ v
        return self.o(y.transpose(1, 2).reshape(B, n, -1))
'''


@pytest.mark.parametrize("training, marked", [
    ("F.scaled_dot_product_attention(q, k, v, is_causal=True)", []),  # causal in both modes
    ("s.softmax(-1) @ v", [("mask-only-in-eval", "layer.py:19")]),  # the mask only in eval mode: at the if
], ids=["fused-when-training", "unmasked-when-training"])
def test_a_mask_applied_in_eval_mode_only_is_marked_where_the_modes_part(tmp_path, training, marked):
    """The trace runs eval mode, where a mask skipped in training is applied: the forward recorded in training mode
    too shows it missing there, and the lines each mode ran show the line that parts them (`if not self.training:`),
    the line to change.  A layer causal in both modes by other means (SDPA's is_causal in training) is not marked."""
    from harness.child.inprocess import InProcess
    from harness.frontends.trace import trace
    from harness.sandbox.subject import Subject
    path = tmp_path / "layer.py"
    path.write_text(MODES_LAYER.replace("TRAINING", training))
    result = trace(f"{path}:Modes", make_subject=lambda spec, overrides, seed, weight_map: Subject(
        spec, overrides, seed, start=InProcess()))
    assert result.error is None
    assert [(m["id"], result.where(m)[0]) for m in result.mistakes] == marked


SIZED_MASK_LAYER = '''
import torch
from torch import nn


class Sized(nn.Module):
    def __init__(self, d_in, d_out, context_length, num_heads):
        super().__init__()
        assert d_out % num_heads == 0  # (the lesson's guard: without it, built-indivisible)
        self.H = num_heads
        self.qkv, self.o = nn.Linear(d_in, 3 * d_out), nn.Linear(d_out, d_out)
        self.register_buffer("mask", torch.ones(SIZE, SIZE, dtype=torch.bool).triu(1))

    def forward(self, x):
        B, n, _ = x.shape
        GROW
        q, k, v = self.qkv(x).view(B, n, 3, self.H, -1).permute(2, 0, 3, 1, 4)
        s = q @ k.transpose(-1, -2) / q.size(-1) ** 0.5
        y = s.masked_fill(self.mask[:n, :n], float("-inf")).softmax(-1) @ v
        return self.o(y.transpose(1, 2).reshape(B, n, -1))
'''
REGROWN = ("if n > self.mask.size(0):\n"
           "            self.mask = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)")


@pytest.mark.parametrize("size, grow, marked", [
    ("context_length", "", []),
    ("8", "", [("mask-made-too-short", "layer.py:12")]),  # the worked example's 3 tokens fit; 16 do not
    ("5", "", [("mask-made-too-short", "layer.py:12")]),
    ("8", REGROWN, []),  # a mask made short and grown when a longer sequence comes: right
], ids=["context-length", "eight", "five", "regrown"])
def test_a_mask_made_shorter_than_the_context_length_is_marked_where_it_was_made(tmp_path, size, grow, marked):
    """A mask built for a fixed number of positions (mask-size-fixed) passes the worked example's 3 tokens: only a
    sequence as long as the context length the constructor was given meets it, so trace records that forward too
    and marks the mask's line where it raised there, never where a longer sequence runs."""
    from harness.child.inprocess import InProcess
    from harness.frontends.trace import trace
    from harness.sandbox.subject import Subject
    path = tmp_path / "layer.py"
    path.write_text(SIZED_MASK_LAYER.replace("SIZE", size).replace("GROW", grow))
    result = trace(f"{path}:Sized", make_subject=lambda spec, overrides, seed, weight_map: Subject(
        spec, overrides, seed, start=InProcess()))
    assert result.error is None
    assert [(m["id"], result.where(m)[0]) for m in result.mistakes] == marked
    if marked:
        assert f"made for {size} positions" in result.mistakes[0]["text"]
        assert ("title" in result.mistakes[0]) == (size != "8")  # the catalogue's words say 8


DROPOUT_LAYER = '''
import torch
from torch import nn


class Dropped(nn.Module):
    def __init__(self, d_in, d_out, context_length, num_heads, dropout=0.1):
        super().__init__()
        assert d_out % num_heads == 0  # (the lesson's guard: without it, built-indivisible)
        self.H = num_heads
        self.qkv, self.o = nn.Linear(d_in, 3 * d_out), nn.Linear(d_out, d_out)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("mask", torch.ones(context_length, context_length).MADE)

    def forward(self, x):
        B, n, _ = x.shape
        q, k, v = self.qkv(x).view(B, n, 3, self.H, -1).permute(2, 0, 3, 1, 4)
        s = q @ k.transpose(-1, -2) / q.size(-1) ** 0.5
        hidden = HIDDEN
        s = s.masked_fill(hidden, float("-inf"))
        w = WEIGHTS
        return self.o((w @ v).transpose(1, 2).reshape(B, n, -1))
'''


@pytest.mark.parametrize("made, hidden, weights, marked", [
    ("triu(1)", "self.mask[:n, :n] > 0", "self.drop(s.softmax(-1))", []),  # the lesson's: dropout on the weights
    ("triu(1)", "self.mask[:n, :n] > 0", "self.drop(s).softmax(-1)", [("dropout-before-softmax", "layer.py:21")]),
    ("triu(1)", "self.drop(self.mask[:n, :n]) > 0", "self.drop(s.softmax(-1))", [("mask-dropped-out", "layer.py:19")]),
    ("tril()", "self.drop(self.mask[:n, :n]) == 0", "self.drop(s.softmax(-1))", []),  # a dropped 1 of a keep-mask
    # hides a past token (no future shows: not this mistake)
    ("triu(1)", "nn.functional.dropout(self.mask[:n, :n], 0.0, self.training) > 0", "s.softmax(-1)", []),  # p = 0
], ids=["weights", "masked-scores", "triu-mask", "tril-mask", "rate-zero"])
def test_dropout_on_the_masked_scores_or_on_the_mask_is_marked_where_training_shows_it(tmp_path, made, hidden,
                                                                                       weights, marked):
    """Dropout in the wrong place is the identity in eval mode, where the trace runs: the forward recorded in
    training mode shows it, NaN out of a dropout of scores holding -inf (0 · -inf), a future position a dropped-out
    mask no longer hides.  Marked only where those numbers are there: not on the weights' dropout, nor on a keep-mask
    whose dropped entries hide the past, nor on a dropout of rate 0."""
    from harness.child.inprocess import InProcess
    from harness.frontends.trace import trace
    from harness.sandbox.subject import Subject
    path = tmp_path / "layer.py"
    path.write_text(DROPOUT_LAYER.replace("MADE", made).replace("HIDDEN", hidden).replace("WEIGHTS", weights))
    result = trace(f"{path}:Dropped", make_subject=lambda spec, overrides, seed, weight_map: Subject(
        spec, overrides, seed, start=InProcess()))
    assert result.error is None
    assert [(m["id"], result.where(m)[0]) for m in result.mistakes] == marked
