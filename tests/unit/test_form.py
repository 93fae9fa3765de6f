"""The form of a class (harness.wire.form): single head only on the constructor's evidence, and what it changes —
readings of the parameters without W_o, configurations with one head, the single-head parameter count."""
import torch.nn as nn

from harness.child import construct, layouts
from harness.engine.search import draws
from harness.wire.form import MULTI_HEAD, SINGLE_HEAD, SINGLE_HEAD_OUT_PROJ, form_of, readings_form
from reference.causal_attention import CausalAttention
from reference.causal_mha import CausalMHA


def _form(cls, overrides=None):
    return form_of(construct.read_signature(cls, overrides or {}), overrides)


class HeadSize(nn.Module):  # nanoGPT's Head(n_embd, head_size, block_size): one head of width head_size
    def __init__(self, n_embd, head_size, block_size):
        super().__init__()


class KeyAndValueWidths(nn.Module):  # one head: d_in -> d_k for queries and keys, d_in -> d_v for values
    def __init__(self, d_in, d_k, d_v, context_length):
        super().__init__()


class HeadsAndHeadSize(nn.Module):  # H heads of width head_size: derived from the width and the heads
    def __init__(self, n_embd, n_head, head_size, block_size):
        super().__init__()


class ConfigOnly(nn.Module):
    def __init__(self, config):
        super().__init__()


class WidthOnly(nn.Module):  # heads hard-coded inside: no heads parameter, yet a width
    def __init__(self, d_model, block_size):
        super().__init__()


class NothingKnown(nn.Module):
    def __init__(self):
        super().__init__()


def test_single_head_only_on_evidence_from_the_constructor():
    assert _form(CausalAttention) is SINGLE_HEAD
    assert _form(HeadSize) is SINGLE_HEAD and _form(WidthOnly) is SINGLE_HEAD
    assert _form(CausalMHA) is MULTI_HEAD  # takes nheads
    assert _form(ConfigOnly) is MULTI_HEAD  # a config object may hold the heads
    assert _form(NothingKnown) is MULTI_HEAD  # no width: nothing says what it is
    assert _form(WidthOnly, {"n": "@heads"}) is MULTI_HEAD  # --arg n=@heads binds a number of heads


def test_single_head_form_fixes_one_head_and_no_output_projection():
    assert SINGLE_HEAD.heads == 1 and not SINGLE_HEAD.out_proj
    assert {"view-order", "head-invariance", "divisibility", "out-proj-bias"} <= set(SINGLE_HEAD.not_applicable)
    assert all("single-head" in why for why in SINGLE_HEAD.not_applicable.values())
    assert MULTI_HEAD.heads is None and MULTI_HEAD.out_proj and not MULTI_HEAD.not_applicable


def test_three_linears_and_no_w_o_is_a_reading_of_the_single_head_form():
    m = CausalAttention(6, 8, 7, 0.0, qkv_bias=True)
    found, problem = layouts.discover(m, 6, 8, 1, out_proj=False)
    assert problem == "" and len(found) == 1 and found[0].certain
    assert found[0].describe() == {"wq": "W_query.weight", "wk": "W_key.weight", "wv": "W_value.weight",
                                   "bq": "W_query.bias", "bk": "W_key.bias", "bv": "W_value.bias"}
    assert layouts.discover(m, 6, 8, 1)[0] == []  # the multi-head reading needs a W_o


def test_unnamed_linears_are_read_by_position_without_w_o():
    class Unnamed(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c = nn.Linear(6, 8), nn.Linear(6, 8), nn.Linear(6, 8)

    class Fused(nn.Module):
        def __init__(self):
            super().__init__()
            self.mix = nn.Linear(6, 24, bias=False)

    found, _ = layouts.discover(Unnamed(), 6, 8, 1, out_proj=False)  # names say nothing: every order, declared first
    assert [f.describe()["wq"] + f.describe()["wk"] for f in found] == [
        "a.weightb.weight", "b.weighta.weight", "a.weightc.weight", "c.weighta.weight", "b.weightc.weight",
        "c.weightb.weight"]
    assert not any(f.certain for f in found)
    found, _ = layouts.discover(Fused(), 6, 8, 1, out_proj=False)
    assert found[0].describe() == {"wq": "mix.weight[0:8]", "wk": "mix.weight[8:16]", "wv": "mix.weight[16:24]"}
    assert len({tuple(f.describe().values()) for f in found}) == 7  # six orders of the blocks, and rows interleaved


def test_an_output_projection_is_no_part_of_the_single_head_form():
    found, problem = layouts.discover(CausalMHA(6, 2, 7, d_out=8), 6, 8, 1, out_proj=False)
    assert found == [] and "single-head" in problem


class OneHeadThenProjection(nn.Module):  # fairseq's SingleHeadAttention: one head, then out_proj
    def __init__(self, d_in, d_out, context_length):
        super().__init__()
        self.W_query, self.W_key, self.W_value = (nn.Linear(d_in, d_out, bias=False) for _ in range(3))
        self.out_proj = nn.Linear(d_out, d_out)


def test_a_single_head_read_only_with_an_output_projection_is_the_single_head_with_w_o():
    """The constructor says one head; the parameters say whether an output projection follows it (issue 28: fairseq's
    SingleHeadAttention was checked as the single head without W_o and failed param-count alone).  Only readings
    that all have a W_o turn the form: a reading without one (the previous lesson's CausalAttention), or none at
    all, leaves the constructor's form."""
    assert _form(OneHeadThenProjection) is SINGLE_HEAD
    m = OneHeadThenProjection(6, 8, 7)
    assert layouts.discover(m, 6, 8, 1, out_proj=False)[0] == []  # no reading without W_o
    found, _ = layouts.discover(m, 6, 8, 1)  # the reading the child then offers
    assert found and readings_form(SINGLE_HEAD, found) is SINGLE_HEAD_OUT_PROJ
    without, _ = layouts.discover(CausalAttention(6, 8, 7, 0.0), 6, 8, 1, out_proj=False)
    assert readings_form(SINGLE_HEAD, without) is SINGLE_HEAD and readings_form(SINGLE_HEAD, []) is SINGLE_HEAD
    assert readings_form(MULTI_HEAD, found) is MULTI_HEAD  # the multi-head form is the constructor's alone


def test_the_single_head_with_w_o_is_the_lessons_layer_with_one_head():
    form = SINGLE_HEAD_OUT_PROJ
    assert form.single and form.heads == 1 and form.out_proj and form.family == "multi-head"
    assert set(form.not_applicable) == {"view-order", "head-invariance", "divisibility"}  # out-proj-bias applies
    assert "output projection" not in form.absent_steps and "merge" in form.absent_steps
    assert SINGLE_HEAD.family == "single-head" and MULTI_HEAD.family == "multi-head"


def test_draws_keep_the_forms_number_of_heads():
    fixed = draws(True, True, min_heads=2, min_n=2, examples=6, fixed_heads=1)
    assert len(fixed) == 6 and {c.heads for c in fixed} == {1} and all(c.n >= 2 for c in fixed)
    assert draws(True, True, 2, 2, 6) == draws(True, True, 2, 2, 6, None)  # unchanged without a fixed number


class UnreadDefault(nn.Module):  # tests/zoo/ours/default_heads_unknown_name.py: n_h=4 may be the heads
    def __init__(self, d_model, max_len, n_h=4):
        super().__init__()


def test_a_parameter_mha_check_cannot_read_is_no_evidence_of_a_single_head():
    assert _form(UnreadDefault) is MULTI_HEAD
    assert _form(UnreadDefault, {"n_h": 1}) is SINGLE_HEAD  # --arg n_h=1: now every parameter is accounted for


def test_a_head_width_without_a_number_of_heads_is_the_single_heads_output_width_apart_from_the_input():
    """nanoGPT's Head(n_embd, head_size, block_size) was built with head_size = n_embd (the head width derived from
    the width, one head): a scale taken from x's width (`C ** -0.5`, the lecture's first text) passed.  The head
    width is the one head's own, d_out; the width is the input's, d_in."""
    sig = construct.read_signature(HeadSize, {})
    assert sig.separate_widths and sig.accepts == {"d_in": "n_embd", "d_out": "head_size",
                                                   "context_length": "block_size"}
    assert sig.derived == {} and _form(HeadSize) is SINGLE_HEAD
    assert not construct.read_signature(HeadSize, {"head_size": 4}).separate_widths  # given with --arg: as it was
    assert "head_size" in construct.read_signature(HeadsAndHeadSize, {}).derived  # a number of heads: derived


def test_a_single_heads_key_and_value_widths_are_both_its_output_width_apart_from_the_input():
    """A student's Head(d_in, d_k, d_v, context_length) was built with d_k = d_v = d_in (two head widths derived from
    the width, one head), and its scale by the input's width, x.shape[-1] ** 0.5, passed."""
    sig = construct.read_signature(KeyAndValueWidths, {})
    assert sig.separate_widths and sig.accepts == {"d_in": "d_in", "d_out": "d_k", "context_length": "context_length"}
    assert sig.derived == {"d_v": "d_out"} and _form(KeyAndValueWidths) is SINGLE_HEAD
