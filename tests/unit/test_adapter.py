"""The child side's adapter pieces, in this process (no child): parameter roles by name, constructor signatures,
calling conventions of forward, weight layouts and which class a file means."""
import argparse

import pytest
import torch
import torch.nn as nn

from harness.child.calling import styles_for
from harness.child.construct import (Unbindable, build, config_bag, key_of, ours, read_signature, require_bindable,
                                     require_free_sizes)
from harness.child.layouts import discover, role_of
from harness.child.target import TargetError, load_target, settings_from_globals
from harness.frontends.options import constructor_args
from harness.wire.config import Config


@pytest.mark.parametrize("name,role", [
    ("q", "q"), ("W_query", "q"), ("query", "q"), ("q_proj", "q"), ("to_q", "q"), ("Wq", "q"), ("b_q", "q"),
    ("key", "k"), ("W_key", "k"), ("k_proj", "k"), ("value", "v"), ("W_value", "v"), ("v_proj", "v"),
    ("c_attn", "qkv"), ("qkv", "qkv"), ("in_proj", "qkv"), ("W_qkv", "qkv"),
    ("out_proj", "o"), ("c_proj", "o"), ("proj", "o"), ("W_o", "o"), ("out", "o"), ("to_out", "o"), ("dense", "o"),
    ("tokeys", "k"), ("toqueries", "q"), ("tovalues", "v"), ("unifyheads", "o"), ("to_keys", "k"),
    ("proj_q", "q"), ("proj_out", "o"),
    ("heads", None), ("dropout", None), ("ln", None), ("token", None), ("total", None), ("bias", None),
])
def test_role_of_parameter_names(name, role):
    assert role_of(name) == role
    assert role_of(name) == role  # remembered (issue 27): the same answer the second time


def test_a_name_that_is_not_a_plain_str_is_read_afresh_not_from_memory():
    """A name's role is remembered by its text for plain `str` names only: a str subclass (whose equality and hash
    are its class's own) that claims to equal a remembered name is read by its own characters."""
    class Claims(str):
        def __eq__(self, other):
            return True

        def __hash__(self):
            return hash("W_query")

    assert role_of("W_query") == "q"
    assert role_of(Claims("out_proj")) == "o" and role_of(Claims("dropout")) is None


def _sig(fn, **overrides):
    return read_signature(fn, overrides)


def test_signature_lesson_style():
    s = _sig(lambda d, nheads, context_length: None)
    assert s.accepts == {"width": "d", "heads": "nheads", "context_length": "context_length"}
    assert not s.separate_widths and not s.unfillable


def test_signature_book_style_has_separate_widths():
    s = _sig(lambda d_in, d_out, context_length, dropout, num_heads, qkv_bias=False: None)
    assert s.separate_widths and s.accepts["d_in"] == "d_in" and s.accepts["d_out"] == "d_out"
    assert s.accepts["dropout"] == "dropout" and s.accepts["qkv_bias"] == "qkv_bias"


def test_signature_reference_style_d_and_d_out():
    s = _sig(lambda d, nheads, context_length, d_out=None: None)
    assert s.separate_widths and s.accepts["d_in"] == "d" and s.accepts["d_out"] == "d_out"


def test_signature_config_object_and_unknown_required():
    assert _sig(lambda config: None).config_param == "config"
    assert _sig(lambda cfg, extra=1: None).config_param == "cfg"
    s = _sig(lambda embed_dim, num_heads, widget: None)
    assert s.unfillable == ["widget"]
    assert _sig(lambda embed_dim, num_heads, widget: None, widget=3).unfillable == []
    bound = _sig(lambda size, num_heads: None, size="@d_out")  # bound by --arg: no slot taken, nothing unfillable
    assert bound.accepts == {"heads": "num_heads"} and bound.unfillable == []
    book = _sig(lambda d_in, d_out, num_heads, context_length: None, d_in="@d_out")  # d_out keeps its own slot
    assert book.accepts["width"] == "d_out" and not book.separate_widths and book.unfillable == []
    # a student's trial: d_in bound to the input width by --arg kept the layer two-width (it had made it one-width,
    # and a scale from x.shape, wrong only where d_in != d_out, passed)
    own = _sig(lambda d_in, d_out, num_heads, context_length: None, d_in="@d_in")
    assert own.separate_widths and own.accepts["d_out"] == "d_out"


class _ParlAIStyle(nn.Module):
    """ParlAI's MultiHeadAttention(opt, n_heads=None, dim=None, dropout=0) (parlai 1.7.2, tests/realzoo): the options
    dict comes FIRST and is read even when the sizes are given (`default(n_heads, opt['n_heads'])` evaluates
    opt['n_heads'] first)."""

    def __init__(self, opt, n_heads=None, dim=None, dropout=0):
        super().__init__()
        n_heads = n_heads if n_heads is not None else opt['n_heads']
        dim = dim if dim is not None else opt['embedding_size']
        self.n_heads, self.dim, self.opt_heads = n_heads, dim, opt['n_heads']
        self.q_lin = nn.Linear(dim, dim)


def test_a_parameter_named_opt_is_a_config_object():
    """Realzoo24: ParlAI names its options dict `opt`; mha-check had no value for it, advised
    `--arg opt=@context_length`, and, followed, the correct layer FAILED construct ("your code raised TypeError:
    'int' object is not subscriptable").  `opt` is a config object, as opts and options are."""
    s = _sig(_ParlAIStyle)
    assert s.config_param == "opt" and not s.unfillable and s.accepts["heads"] == "n_heads"
    m = build(_ParlAIStyle, Config(d_in=8, d_out=8, heads=2, context_length=7, batch=2, n=5), {}, s)
    assert (m.n_heads, m.dim, m.opt_heads) == (2, 8, 2)


class _KwargsOnly(nn.Module):
    def __init__(self, **cfg):
        super().__init__()
        self.d, self.nh = cfg.get("d_model", 64), cfg["n_heads"]
        self.qkv = nn.Linear(self.d, 3 * self.d, bias=cfg.get("qkv_bias", False))
        self.extra = cfg.get("tag", "x")  # a key mha-check does not know: left to its default


def test_a_constructor_taking_only_kwargs_is_called_with_the_keys_its_source_reads():
    """A student's `__init__(self, **cfg)` reading cfg.get("d_model", 64) had been built with nothing, its default
    width 64 fed inputs of width 8: the layer failed output-shape, param-count and divisibility on mha-check's own
    inputs.  Its keys are read from its source and given as keywords, each with the configuration's value."""
    s = _sig(_KwargsOnly)
    assert s.config_param == "**cfg" and not s.unfillable
    m = build(_KwargsOnly, Config(d_in=8, d_out=8, heads=2, context_length=7, batch=2, n=5), {}, s)
    assert (m.d, m.nh, m.qkv.bias, m.extra) == (8, 2, None, "x")
    assert _sig(lambda **kwargs: None).config_param is None  # reads nothing: not taken for a config
    assert _sig(lambda d_model, **kwargs: None).config_param is None  # named parameters say it all


def test_a_width_fixed_to_a_number_by_arg_is_refused_with_the_binding_that_helps():
    """--arg d_in=6 met inputs of the width mha-check chose (8), and the student's first Linear was blamed."""
    def layer(d_in, d_out, num_heads, context_length):
        return None

    def free(overrides):
        return require_free_sizes(layer, read_signature(layer, overrides), overrides)

    with pytest.raises(Unbindable, match=r"bind it with --arg d_in=@d_in, or leave it out; a number \(d_in=6\)"):
        free({"d_in": 6})
    free({"d_in": "@d_in", "num_heads": 1})  # bound, or one head (a single head by choice)
    with pytest.raises(Unbindable, match=r"--arg num_heads=@heads, or leave it out; a number \(num_heads=2\)"):
        free({"num_heads": 2})
    with pytest.raises(Unbindable, match=r"--arg context_length=@context_length, or leave it out"):
        free({"context_length": 16})
    free({"context_length": 128})  # longer than any input mha-check feeds (64 tokens)


def test_numbers_for_parameters_mha_check_cannot_read_are_refused_where_a_size_has_no_parameter():
    """A student's trial: told "--arg NAME=VALUE", they passed numbers; every check built the layer at one size and
    fed it others (false failures on correct code, and mask-size-fixed named on a layer whose mask was their 16)."""
    def layer(breite, koepfe, kontextlaenge):
        return None

    overrides = {"breite": 8, "koepfe": 2, "kontextlaenge": 16}
    with pytest.raises(Unbindable) as e:
        require_free_sizes(layer, read_signature(layer, overrides), overrides)
    assert "--arg breite=@d_out --arg koepfe=@heads --arg kontextlaenge=@context_length" in str(e.value)
    assert "breite=8, koepfe=2, kontextlaenge=16" in str(e.value)

    def abbreviated(d, nh, cl):
        return None

    with pytest.raises(Unbindable, match=r"cl=16: a number fixes this parameter .* e.g. --arg cl=@context_length"):
        require_free_sizes(abbreviated, read_signature(abbreviated, {"cl": 16}), {"cl": 16})

    def sized(d_model, n_heads, block_size, n_layers):
        return None

    require_free_sizes(sized, read_signature(sized, {"n_layers": 2}), {"n_layers": 2})  # every size has its
    # parameter: a number for another is a setting

    def defaulted(d, nh, block_size, softcap=30):
        return None

    require_free_sizes(defaulted, read_signature(defaulted, {"softcap": 50}), {"softcap": 50})  # a setting


def test_a_required_parameter_without_a_value_is_told_with_the_bindings_to_copy():
    def layer(breite, koepfe, kontextlaenge):
        return None

    with pytest.raises(Unbindable) as e:
        require_bindable(read_signature(layer, {}), {})
    assert "e.g. --arg breite=@d_out --arg koepfe=@heads --arg kontextlaenge=@context_length" in str(e.value)
    assert "a plain number (NAME=8) fixes a size" in str(e.value)


def test_derived_constructor_fields_and_several_dropouts():
    s = _sig(lambda n_embd, n_head, head_size, block_size, attn_pdrop, resid_pdrop, n_kv_heads: None)
    assert s.accepts == {"width": "n_embd", "heads": "n_head", "context_length": "block_size", "dropout": "attn_pdrop"}
    assert s.derived == {"head_size": "head_width", "resid_pdrop": "dropout", "n_kv_heads": "kv_heads"}
    assert not s.unfillable


def test_a_parameter_mha_check_cannot_fill_is_its_limit_not_a_bug():
    s = _sig(lambda d_model, n_heads, vocab_size: None)
    with pytest.raises(Unbindable, match="vocab_size"):
        require_bindable(s)
    s = _sig(lambda d_model, n_heads, rope_theta: None)  # a rotary base is bound to 10000 (and reported)
    assert not s.unfillable and s.rope_theta == 10000.0 and s.derived == {"rope_theta": "rope_theta"}


@pytest.mark.parametrize("name,key", [
    ("input_dimension", "d_in"), ("output_dimension", "d_out"), ("number_of_heads", "heads"), ("head", "heads"),
    ("embeddings_size", "width"), ("model_dim", "width"), ("emb", "width"), ("dModel", "width"),
    ("numHeads", "heads"), ("nHeads", "heads"), ("maxSeqLen", "context_length"), ("window_size", "context_length"),
    ("context_window", "context_length"), ("n_positions", "context_length"), ("dim_per_head", "head_width"),
    ("head_dimension", "head_width"), ("num_kv_heads", "kv_heads"), ("dropoutRate", "dropout"), ("p", "dropout"),
    ("attn_p", "dropout"), ("use_bias", "all_bias"), ("qkvBias", "qkv_bias"), ("key_value_heads", "kv_heads"),
    ("inputSize", "d_in"), ("attention_dim", None),
    ("maximum_length", "context_length"), ("maximumSequenceLength", "context_length"),  # a trial's spelled-out names
    ("nx", "width"),  # OpenAI's GPT-1/GPT-2 ports: Attention(nx, n_ctx, cfg, scale=False), tests/realzoo/hf_openai_...
    ("n_feat", "width"),  # ESPnet's (and WeNet's, FunASR's) MultiHeadedAttention(n_head, n_feat, dropout_rate)
    ("depth_att", "width"), ("depth_out", "d_out"),  # Sockeye's MultiHeadSelfAttention(depth_att, heads, depth_out)
    ("depth", None),  # lucidrains' number of layers, not a width
    ("nh", "heads"), ("NH", "heads"),  # bio-attention's AttnLayer(dim, attn, nh=4) (tests/realzoo/bio_attention_...),
    # llm.c's B, T, C, NH
    # a word mha-check does not know: something else, left alone
    ("rope_theta", None), ("max_batch_size", None), ("n_local_heads", None), ("vocab_size", None),
    ("layer_idx", None), ("d_ff", None), ("out_proj_bias", None), ("key_dim", None), ("model", None),
    ("max", None), ("out", None), ("norm_eps", None), ("sliding_window", None), ("maximum", None),
    ("maximum_batch_size", None),
    # torch.nn.MultiheadAttention's (and fairseq's) learned bias appended to the key and value SEQUENCES, one more
    # attended position, not the Q/K/V projections' biases (SpeechBrain's wrapper, tests/realzoo/speechbrain_...)
    ("add_bias_kv", None), ("addBiasKV", None),
    # the WIDTH of a context attended to (a cross-attention memory: stable-audio-tools' Attention(dim, dim_heads,
    # dim_context=None, causal), lucidrains' context_dim), not its length: read as context_length, the self-attention
    # layer was built as a cross-attention one whose to_kv wanted inputs of the context's length as their width
    # (tests/realzoo/stable_audio_tools_...); a size word stays a length (d3rlpy's context_size, block_size)
    ("dim_context", None), ("context_dim", None), ("contextDim", None), ("context_hidden", None),
    ("seq_embedding", None), ("context_size", "context_length"), ("window_size", "context_length"),
])
def test_parameter_names_are_read_by_their_words(name, key):
    assert key_of(name) == key


def test_the_papers_value_width_d_v_is_a_head_width_as_d_k():
    """jadore801120's MultiHeadAttention(n_head, d_model, d_k, d_v) (tests/realzoo/jadore_mha_temperature_d_model_
    pre_fix.py): d_k and d_v are the paper's per-head widths; d_v unbound left the class unbuildable (cannot tell,
    "no value for required parameter(s) d_v")."""
    s = _sig(lambda n_head, d_model, d_k, d_v, dropout=0.1: None)
    assert not s.unfillable and s.derived == {"d_k": "head_width", "d_v": "head_width"}
    assert s.accepts == {"heads": "n_head", "width": "d_model", "dropout": "dropout"}


def test_bloems_k_is_the_embedding_width():
    """Peter Bloem's "Transformers from scratch" signature SelfAttention(k, heads=4, mask=False), copied into
    student and published code (tests/realzoo/bthesis_transformer_mhsa_scale_e_additive_mask.py): `k` is the
    embedding width (its `assert k % heads == 0`); unbound it left the class unbuildable (cannot tell, "no value for
    required parameter(s) k")."""
    s = _sig(lambda k, heads=4, mask=False: None)
    assert not s.unfillable and s.accepts == {"width": "k", "heads": "heads", "causal": "mask"}


def test_the_spelled_out_d_queries_and_d_values_are_head_widths_as_d_k_and_d_v():
    """sgrvinod's tutorial MultiHeadAttention(d_model, n_heads, d_queries, d_values, dropout, in_decoder=False)
    (its pattern: tests/zoo/ours/prenorm_sublayer_needs_context_lengths.py): "size of query vectors" per head, the
    paper's d_k and d_v spelled out; unbound they left the class unbuildable (cannot tell, "no value for required
    parameter(s) d_queries, d_values")."""
    s = _sig(lambda d_model, n_heads, d_queries, d_values, dropout, in_decoder=False: None)
    assert not s.unfillable and s.derived == {"d_queries": "head_width", "d_values": "head_width"}


def test_a_class_with_its_own_vocabulary_needs_no_arg():
    s = _sig(lambda input_dimension, output_dimension, number_of_heads, context_length, dropout=0.0: None)
    assert s.separate_widths and not s.unfillable
    assert s.accepts == {"d_in": "input_dimension", "d_out": "output_dimension", "heads": "number_of_heads",
                         "context_length": "context_length", "dropout": "dropout"}
    s = _sig(lambda embeddings_size, head=8, block=16: None)
    assert s.accepts == {"width": "embeddings_size", "heads": "head", "context_length": "block"}
    s = _sig(lambda emb, heads, model_dim=None: None)  # two widths, neither with a direction: the first is the one
    assert s.accepts["width"] == "emb" and not s.unfillable


def test_the_config_object_answers_names_by_their_words_and_says_which_it_lacks():
    from harness.wire.config import MAX_BATCH, Config

    bag = config_bag(Config(d_in=6, d_out=8, heads=2, context_length=7), {"rope_theta": 10000.0})
    assert (bag.embeddings_size, bag.number_of_heads, bag.input_dimension, bag["maxSeqLen"]) == (8, 2, 6, 7)
    assert bag.rope_theta == 10000.0
    with pytest.raises(AttributeError, match="softcap"):
        bag.softcap  # noqa: B018 - the attribute is the test
    with pytest.raises(KeyError, match="n_local_heads"):
        bag["n_local_heads"]
    assert getattr(bag, "softcap", 4) == 4 and not hasattr(bag, "rope_scaling")
    # Meta llama's args.max_batch_size sizes a cache: answered as the constructor parameter of that name is bound
    assert bag.max_batch_size == bag["max_bsz"] == MAX_BATCH and "maxBatchSize" in bag


def _refusal(factory, cfg, **overrides):
    """The constructor's exception for `cfg`, and what construct.ours makes of it."""
    sig = read_signature(factory, overrides)
    with pytest.raises(BaseException) as got:
        build(factory, cfg, overrides, sig)
    return ours(factory, cfg, overrides, sig, got.value, f"{type(got.value).__name__}: {got.value}")


class _GuardedByDefault(nn.Module):
    def __init__(self, d_model, max_len, n_h=4, layer_idx=0):
        super().__init__()
        if d_model % n_h:
            raise ValueError(f"d_model={d_model} is not divisible by n_h={n_h}")


class _InvertedGuard(nn.Module):
    def __init__(self, d_model, n_heads, max_len, layer_idx=0):
        super().__init__()
        assert d_model % n_heads != 0, "inverted: refuses every valid width"


def test_a_refusal_caused_by_a_default_mha_check_left_is_ours_with_the_arg_that_helps():
    from harness.wire.config import Config

    why = _refusal(_GuardedByDefault, Config(d_in=6, d_out=6, heads=3, context_length=4))
    assert "n_h left at its default 4" in why and why.endswith("--arg n_h=@heads")
    assert "ValueError: d_model=6 is not divisible by n_h=4" in why


def test_a_refusal_no_default_explains_stays_the_students():
    from harness.wire.config import Config

    assert _refusal(_InvertedGuard, Config(d_in=6, d_out=6, heads=3, context_length=4)) is None  # layer_idx: no help
    assert _refusal(_GuardedByDefault, Config(d_in=6, d_out=6, heads=4, context_length=4)) is None  # invalid sizes


class _Fwd(nn.Module):
    pass


def _calls(forward):
    cls = type("M", (nn.Module,), {"forward": forward})
    found = styles_for(cls())
    return [s.describe() for s in found.styles], found.problem


def test_forward_with_only_x_is_called_plainly():
    assert _calls(lambda self, x: x) == (["forward(x)"], "")


def test_forward_with_a_required_mask_gets_every_convention_then_none_and_no_plain_call():
    styles, _ = _calls(lambda self, x, mask: x)
    assert len(styles) == 17 and all("mask=causal mask" in s for s in styles[:16])
    assert styles[16] == "forward(x, mask=None)"


class _MaskObjectOrNone(nn.Module):
    """Autoformer's FullAttention (its pattern: tests/zoo/correct/inner_attention_module_argument.py): attn_mask is
    required,
    None means "build the causal mask yourself", and a given mask must be an object with a .mask attribute."""

    def forward(self, queries, keys, values, attn_mask):
        n = queries.shape[1]
        mask = torch.ones(n, n, dtype=torch.bool).triu(1) if attn_mask is None else attn_mask.mask
        return torch.softmax((queries @ keys.transpose(1, 2)).masked_fill(mask, float("-inf")), -1) @ values


def test_a_required_mask_that_takes_none_is_called_with_none_last():
    """Every tensor mask raised AttributeError ('Tensor' object has no attribute 'mask'), and output-shape blamed
    the student for a layer that is causal when given None, as its model calls it."""
    found = styles_for(_MaskObjectOrNone())
    x = torch.randn(2, 4, 3)
    ran = []
    for style in found.styles:
        args, kwargs = style.arguments(x)
        try:
            _MaskObjectOrNone()(*args, **kwargs)
        except AttributeError:
            continue
        ran.append((style.describe(), style.bare))
    assert ran == [("forward(x, x, x, attn_mask=None)", True)]


def test_forward_query_key_value_with_an_optional_mask():
    styles, _ = _calls(lambda self, query, key, value, attn_mask=None: query)
    assert styles[0] == "forward(x, x, x)" and len(styles) == 17


def test_forward_with_the_queries_input_and_one_keys_and_values_input_gets_x_for_both():
    """transformer-components-michaelkosmider 0.1.1 (Realzoo24): `forward(X_Q, X_KV, tgt_mask=None,
    key_padding_mask=None, kv_cache=None)`, X_KV = X_Q for self-attention: mha-check said "forward needs X_KV besides
    the input and a mask: mha-check cannot supply them" and judged nothing.  A second required input named for the
    keys (kv, key, memory, context, ...) is the same x, as query, key and value are."""
    styles, problem = _calls(lambda self, X_Q, X_KV, tgt_mask=None, key_padding_mask=None, kv_cache=None: X_Q)
    assert problem == "" and styles[0] == "forward(x, x)" and "forward(x, x, tgt_mask=causal mask" in styles[1], styles
    styles, _ = _calls(lambda self, query, key: query)
    assert styles == ["forward(x, x)"]
    _, problem = _calls(lambda self, x, memory, pos_emb=None: x)  # lucidrains' feedback memory: a (k, v) state
    assert "forward needs memory" in problem
    _, problem = _calls(lambda self, x, lengths: x)  # a second input not named for the keys is still not guessed
    assert "forward needs lengths" in problem

def test_a_mask_named_for_the_keys_is_padding_and_the_attention_mask_beside_it_is_the_causal_one():
    """FastNLP 1.0.1 (Realzoo22): `forward(query, key, value, key_mask=None, attn_mask=None)`, key_mask a [batch,
    seq] padding mask: taken for the causal mask, attn_mask was never tried and a correct layer was named no-mask."""
    styles, _ = _calls(lambda self, query, key, value, key_mask=None, attn_mask=None: query)
    assert all("key_mask" not in s for s in styles) and any("attn_mask=" in s for s in styles), styles
    styles, _ = _calls(lambda self, q, k, v, key_padding_mask=None, attn_mask=None: q)  # tsai's, as before
    assert all("key_padding_mask" not in s for s in styles) and any("attn_mask=" in s for s in styles), styles


class _MaskFoldedWithTheBatch(nn.Module):
    """sooftware/attentions' way (its pattern: tests/zoo/buggy/heads_batch_major_bool_mask_no_out_proj.py): the
    (B, n, n) mask is
    repeated over the heads and viewed as the (B*H, n, n) scores, so a mask without the batch axis cannot be used."""

    def forward(self, query, key, value, mask=None):
        scores = torch.bmm(query.repeat(2, 1, 1), key.repeat(2, 1, 1).transpose(1, 2))  # 2 heads folded in
        if mask is not None:
            scores.masked_fill_(mask.unsqueeze(1).repeat(1, 2, 1, 1).view(scores.size()), float("-inf"))
        return torch.bmm(scores.softmax(-1), value.repeat(2, 1, 1))[: query.shape[0]]


def test_a_mask_the_layer_folds_with_the_batch_is_also_offered_per_sequence():
    """Without a (B, n, n) style every masked call of such a layer raised for B > 1, only the maskless call ran, and
    its leak was blamed on the student (no-mask) though the layer masks the future right when given the mask."""
    found = styles_for(_MaskFoldedWithTheBatch())
    x = torch.randn(3, 4, 5)
    ran = []
    for style in found.styles:
        args, kwargs = style.arguments(x)
        try:
            _MaskFoldedWithTheBatch()(*args, **kwargs)
        except RuntimeError:
            continue
        ran.append(style.describe())
    assert ran == ["forward(x, x, x)", "forward(x, x, x, mask=causal mask (B, n, n), bool, True = masked)",
                   "forward(x, x, x, mask=causal mask (B, n, n), bool, True = keep)"]
    style = next(s for s in found.styles if s.describe() == ran[1])
    mask = style.arguments(x)[1]["mask"]
    assert mask.shape == (3, 4, 4) and all(torch.equal(m, torch.ones(4, 4, dtype=torch.bool).triu(1)) for m in mask)


def test_keyword_only_inputs_are_passed_by_keyword():
    def forward(self, *, query, key, value, mask=None):
        return query
    styles, _ = _calls(forward)
    assert styles[0] == "forward(query=x, key=x, value=x)"


def test_forward_needing_rotary_tables_cannot_be_driven():
    styles, problem = _calls(lambda self, x, cos, sin, mask=None: x)
    assert styles == [] and "cos, sin" in problem and "factory" in problem


def _fused(per_head: bool, d=8, heads=2):
    class Fused(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d)
            self.out = nn.Linear(d, d)
    return Fused()


def test_fused_qkv_is_read_both_ways_and_is_never_certain_by_structure():
    found, problem = discover(_fused(True), 8, 8, 2)
    assert problem == "" and len(found) == 2 and not any(lay.certain for lay in found)
    assert {lay.how for lay in found} == {"by parameter names (fused q/k/v)",
                                          "by parameter names (fused q/k/v, per head)"}
    per_head = next(lay for lay in found if "per head" in lay.how)
    assert per_head.describe()["wk"] == "qkv.weight[4:8] + qkv.weight[16:20]"  # [q_0; k_0; v_0; q_1; k_1; v_1]


def test_named_linear_layers_covering_every_parameter_are_certain_by_structure():
    class Named(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.out = (nn.Linear(6, 8) for _ in range(3)), None, None, None
    class Lesson(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v = (nn.Linear(6, 8) for _ in range(3))
            self.out = nn.Linear(8, 8)
    found, _ = discover(Lesson(), 6, 8, 2)
    assert len(found) == 1 and found[0].certain
    extra = Lesson()
    extra.gate = nn.Parameter(torch.zeros(8))
    found, _ = discover(extra, 6, 8, 2)
    assert len(found) == 1 and not found[0].certain  # a parameter with no role could change the output


def test_linear_like_module_with_a_matrix_named_w():
    class MyLinear(nn.Module):
        def __init__(self, i, o):
            super().__init__()
            self.W = nn.Parameter(torch.randn(i, o))
            self.b = nn.Parameter(torch.zeros(o))
    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.query, self.key, self.value, self.proj = MyLinear(6, 8), MyLinear(6, 8), MyLinear(6, 8), MyLinear(8, 8)
    found, problem = discover(Layer(), 6, 8, 2)
    assert problem == "" and found and found[0].describe()["wq"] == "query.W.T"


def _load(tmp_path, source: str, name: str | None = None):
    path = tmp_path / "student_file.py"
    path.write_text("import torch.nn as nn\n" + source)
    return load_target(f"{path}" + (f":{name}" if name else ""), str(tmp_path))


def test_a_file_with_a_block_and_a_feed_forward_picks_the_attention_class(tmp_path):
    loaded = _load(tmp_path, "class FeedForward(nn.Module): pass\nclass LayerNorm(nn.Module): pass\n"
                             "class Head(nn.Module): pass\nclass MultiHeadAttention(nn.Module):\n"
                             "    def f(self): return Head\n"
                             "class Block(nn.Module):\n    def f(self): return MultiHeadAttention, FeedForward\n")
    assert loaded.name == "MultiHeadAttention"


def test_two_unrelated_attention_classes_are_listed_not_guessed(tmp_path):
    with pytest.raises(TargetError, match="AttentionA, AttentionB") as e:
        _load(tmp_path, "class AttentionA(nn.Module): pass\nclass AttentionB(nn.Module): pass\n")
    assert e.value.kind == "ambiguous"


def test_a_stub_without_a_forward_is_neither_picked_nor_offered_as_the_example(tmp_path):
    loaded = _load(tmp_path, "class AAttentionStub(nn.Module): pass\n"
                             "class CausalAttention(nn.Module):\n    def forward(self, x): return x\n")
    assert loaded.name == "CausalAttention"
    with pytest.raises(TargetError, match=r"e\.g\. .*:BAttention$") as e:
        _load(tmp_path, "class AAttentionStub(nn.Module): pass\n"
                        "class BAttention(nn.Module):\n    def forward(self, x): return x\n"
                        "class CAttention(nn.Module):\n    def forward(self, x): return -x\n")
    assert "AAttentionStub" not in str(e.value)


def test_sizes_read_from_module_globals_are_found_in_the_class_and_the_classes_it_builds(tmp_path):
    loaded = _load(tmp_path, "n_embd = 384\nblock_size = 256\nEPS = 1e-5\n"
                             "class Head(nn.Module):\n    def __init__(self, head_size):\n        self.t = block_size\n"
                             "class MultiHeadAttention(nn.Module):\n    def __init__(self, num_heads, head_size):\n"
                             "        self.heads = [Head(head_size) for _ in range(num_heads)]\n"
                             "        self.p = n_embd * EPS\n", "MultiHeadAttention")
    found = settings_from_globals(loaded.obj)
    assert found == {"n_embd": "384", "block_size": "256"} and list(found) == ["block_size", "n_embd"]  # the
    # report names them in one order in every run (the order of a set of names changes with the process's hashes)


def test_a_fused_projection_named_with_map_is_read_both_ways_and_never_certain():
    """--map qkv=NAME says which parameter is fused, not how its rows are ordered: taking [Q; K; V] blocks as
    "certain" once let a per-head layout pass view-order under a wrong reading."""
    class Fused(nn.Module):
        def __init__(self):
            super().__init__()
            self.mix, self.out = nn.Linear(8, 24), nn.Linear(8, 8)

    found, problem = discover(Fused(), 8, 8, 2, mapping={"qkv": "mix", "o": "out"})
    assert problem == "" and len(found) == 2 and not any(lay.certain for lay in found)
    blocks, per_head = (lay.describe() for lay in found)
    assert blocks != per_head
    single, _ = discover(Fused(), 8, 8, 1, mapping={"qkv": "mix", "o": "out"})
    assert len(single) == 1 and single[0].certain  # one head: one reading


def test_a_list_of_one_linear_a_head_is_read_by_its_plural_name_and_by_map():
    """A student's trial: `self.qs = nn.ModuleList(Linear(d, dh) ...)` was read nowhere (every weight check
    cannot-tell), and `--map q=qs` answered "--map wq=qs: no parameter or module of that name" (a role the student
    never typed, for a module that is there)."""
    class Lists(nn.Module):
        def __init__(self, names=("qs", "ks", "vs")):
            super().__init__()
            for name in names:
                setattr(self, name, nn.ModuleList(nn.Linear(8, 4, bias=False) for _ in range(2)))
            self.out_proj = nn.Linear(8, 8)

    assert [role_of(n) for n in ("qs", "ks", "vs", "heads", "bs")] == ["q", "k", "v", None, None]
    plural, problem = discover(Lists(), 8, 8, 2)
    assert problem == "" and plural
    anonymous = Lists(("aa", "bb", "cc"))
    mapped, problem = discover(anonymous, 8, 8, 2, mapping={"q": "aa", "k": "bb", "v": "cc", "o": "out_proj"})
    assert problem == "" and len(mapped) == 1 and mapped[0].certain
    assert [p.name for p in mapped[0].roles["wq"]] == ["aa.0.weight", "aa.1.weight"]
    _, problem = discover(anonymous, 8, 8, 2, mapping={"q": "zz"})
    assert problem.startswith("--map q=zz: no parameter or module of that name"), problem


def test_a_generic_linear_inside_a_named_module_takes_the_modules_role():
    """labml's `self.query = PrepareForMultiHeadAttention(...)` keeps its weights in `.linear`: the role is in the
    module's name, one level up."""
    class Prepare(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(8, 8)

    class Labml(nn.Module):
        def __init__(self):
            super().__init__()
            self.key, self.query, self.value = Prepare(), Prepare(), Prepare()  # keys declared first
            self.output = nn.Linear(8, 8)

    found, problem = discover(Labml(), 8, 8, 2)
    assert problem == "" and len(found) == 1 and found[0].certain and found[0].how == "by parameter names"
    assert found[0].describe()["wq"] == "query.linear.weight" and found[0].describe()["wo"] == "output.weight"


def test_three_unnamed_projections_are_read_in_every_order_declared_first():
    """No name says which is which: each assignment of q, k, v is a plausible reading (a correct layer with keys
    declared first must be reproduced by one, not read as the mirror image of swapped-q-k); none is certain."""
    class Unnamed(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c, self.d = (nn.Linear(8, 8) for _ in range(4))

    found, _ = discover(Unnamed(), 8, 8, 2)
    orders = [(lay.describe()["wq"], lay.describe()["wk"], lay.describe()["wv"]) for lay in found]
    assert orders[0] == ("a.weight", "b.weight", "c.weight") and len(set(orders)) == 6
    assert all(lay.describe()["wo"] == "d.weight" for lay in found) and not any(lay.certain for lay in found)


class _Head(nn.Module):
    """One head of Karpathy's layer with names that say no role: `lin1`, `lin2`, `lin3` (`count` of them)."""

    def __init__(self, d_in=8, dh=4, count=3):
        super().__init__()
        for i in range(count):
            setattr(self, f"lin{i + 1}", nn.Linear(d_in, dh, bias=False))


class _Heads(nn.Module):
    def __init__(self, heads=2, count=3, extra=False):
        super().__init__()
        self.heads = nn.ModuleList(_Head(dh=8 // heads, count=count) for _ in range(heads))
        self.mix = nn.Linear(8, 8)
        if extra:
            self.gate = nn.Linear(8, 8)


def _orders(found) -> list[tuple[str, str, str]]:
    return [(lay.describe()["wq"], lay.describe()["wk"], lay.describe()["wv"]) for lay in found]


def test_per_head_modules_whose_names_say_nothing_are_read_in_every_order_declared_first():
    """Issue 28 item 1: Karpathy's ModuleList of heads, each with three Linear(d, d/H) named `a`, `b`, `c` or
    `lin1`..`lin3`, had no reading (every weight check cannot-tell), though three unnamed Linear(d, d) are read in
    every order.  Each order of the three per-head projections is a reading, declared order first, each stacked over
    the heads in list order; the output projection is the one Linear left; none is certain (the proof decides)."""
    layer = _Heads()
    found, problem = discover(layer, 8, 8, 2)
    slot = [" + ".join(f"heads.{h}.lin{i}.weight" for h in range(2)) for i in (1, 2, 3)]
    assert problem == "" and _orders(found)[0] == tuple(slot) and len(set(_orders(found))) == 6 == len(found)
    assert {tuple(sorted(o)) for o in _orders(found)} == {tuple(sorted(slot))}  # every role from the same three
    assert all(lay.describe()["wo"] == "mix.weight" and not lay.certain for lay in found)
    assert all("per-head modules" in lay.how for lay in found) and "declared as k, q, v" in found[1].how
    wq = found[0].read()["wq"]
    assert torch.equal(wq[4:], layer.heads[1].lin1.weight) and torch.equal(wq[:4], layer.heads[0].lin1.weight)
    found[1].write({"wq": torch.ones(8, 8), "wk": torch.zeros(8, 8), "wv": torch.zeros(8, 8), "wo": torch.eye(8),
                    "bo": torch.zeros(8)})
    assert torch.equal(layer.heads[1].lin2.weight, torch.ones(4, 8))  # kqv: the second projection is W_q
    one, _ = discover(_Heads(heads=1), 8, 8, 1)  # a list of one head: the same readings, under the same names (the
    # order proven with two heads is found again on a configuration with one: Context._same_layout)
    assert [lay.how for lay in one] == [lay.how for lay in found] and _orders(one)[1][0] == "heads.0.lin2.weight"


def test_per_head_lists_whose_names_say_nothing_are_read_in_every_order_with_their_biases():
    """Three ModuleLists of one Linear(d_in, d_out/H) a head, named `a`, `b`, `c`: the lists in every order, declared
    first, each list's Linear layers stacked in order, their biases too."""
    class Lists(nn.Module):
        def __init__(self):
            super().__init__()
            for name in "abc":
                setattr(self, name, nn.ModuleList(nn.Linear(6, 4) for _ in range(2)))
            self.o = nn.Linear(8, 8)

    found, problem = discover(Lists(), 6, 8, 2)
    assert problem == "" and len(set(_orders(found))) == 6 == len(found)
    first = found[0].describe()
    assert first["wq"] == "a.0.weight + a.1.weight" and first["bv"] == "c.0.bias + c.1.bias"
    assert first["wo"] == "o.weight"
    assert all("per-head lists" in lay.how for lay in found)


@pytest.mark.parametrize("layer,heads", [(_Heads(count=2), 2), (_Heads(extra=True), 2), (_Heads(heads=4), 2)],
                         ids=["two-projections-a-head", "a-linear-besides-the-output", "list-not-one-a-head"])
def test_per_head_modules_are_read_by_position_only_as_three_projections_a_head_and_one_output(layer, heads):
    """Two Linear a head, a Linear left over besides the output projection, a list that is not one module a head:
    no reading by position (what each would be is a guess)."""
    found, problem = discover(layer, 8, 8, heads)
    assert found == [] and "by position" in problem


def test_query_key_value_in_another_order_all_get_the_input():
    """OpenNMT-py's `forward(key, value, query, mask=None)`: self-attention gives x to each, whatever their order."""
    styles, problem = _calls(lambda self, key, value, query, mask=None: key)
    assert problem == "" and styles[0] == "forward(x, x, x)"


@pytest.mark.parametrize("names", [("x_query", "x_key", "x_value"), ("query_states", "key_states", "value_states"),
                                   ("input_q", "input_k", "input_v")])
def test_query_key_value_spelled_with_an_affix_all_get_the_input(names):
    """tfs-mt's `forward(x_query, x_key, x_value, attention_mask=None)` (realzoo8), HF's `key_states`: the role word
    with an `x_`, `input_` prefix or a `_states`, `_input`, `_tensor` suffix is still the key or the value."""
    forward = eval(f"lambda self, {', '.join(names)}, attention_mask=None: {names[0]}")  # a signature made here
    styles, problem = _calls(forward)
    assert problem == "" and styles[0] == "forward(x, x, x)"


def test_a_word_that_only_contains_key_is_not_the_key():
    """`monkey` or `keyframes` is no key input: a forward(x, monkey, values) still needs its monkey."""
    _, problem = _calls(lambda self, x, monkey, values: x)
    assert "needs monkey" in problem


def test_a_required_device_is_the_cpu_and_hid_dim_is_the_width():
    """bentrevett/pytorch-seq2seq's MultiHeadAttentionLayer(hid_dim, n_heads, dropout, device)."""
    s = _sig(lambda hid_dim, n_heads, dropout, device: None)
    assert s.accepts == {"width": "hid_dim", "heads": "n_heads", "dropout": "dropout"} and s.unfillable == []
    assert s.derived == {"device": "device"}
    assert _sig(lambda d, heads, device="cuda": None).derived == {}  # a default: the class's own choice stands


def test_a_required_norm_epsilon_is_torchs_layernorm_default():
    """RecBole's MultiHeadAttention(n_heads, hidden_size, hidden_dropout_prob, attn_dropout_prob, layer_norm_eps)
    (tests/realzoo/recbole_mha_additive_mask_arg_postln_inside.py): the epsilon of a normalisation kept inside is a
    setting with a usual value, not a blank mha-check must refuse; given a default, the class's own stands."""
    s = _sig(lambda n_heads, hidden_size, hidden_dropout_prob, attn_dropout_prob, layer_norm_eps: None)
    assert s.unfillable == [] and s.derived["layer_norm_eps"] == "norm_eps"
    assert _sig(lambda d, heads, eps: None).derived == {"eps": "norm_eps"}
    assert _sig(lambda d, heads, layer_norm_eps=1e-12: None).derived == {}
    assert Config(d_in=8, d_out=8, heads=2, context_length=6).value("norm_eps") == 1e-5


def test_a_fused_projection_is_also_read_with_its_rows_interleaved():
    """self-attention-cv's `rearrange(qkv, 'b t (d k h) -> k b h t d', k=3, h=H)`: the head fastest, then the role,
    so W_q's rows for head h are h, h + 3H, h + 6H, ...; with several heads or with one, the same name."""
    class Fused(nn.Module):
        def __init__(self):
            super().__init__()
            self.to_qvk = nn.Linear(8, 24, bias=False)
            self.W_0 = nn.Linear(8, 8, bias=False)

    for heads, wq in ((2, "to_qvk.weight[0:19:6] + to_qvk.weight[1:20:6]"), (1, "to_qvk.weight[0:22:3]")):
        found, _ = discover(Fused(), 8, 8, heads)
        dkh = [lay for lay in found if lay.how.endswith("interleaved as (dim role head))")]
        assert len(dkh) == 1 and dkh[0].describe()["wq"] == wq, [lay.how for lay in found]
        x = torch.randn(8, 8)
        dkh[0].write({"wq": x, "wk": x + 1, "wv": x + 2, "wo": torch.eye(8)})
        assert torch.equal(dkh[0].read()["wk"], x + 1)  # strided rows are written and read back in place


@pytest.mark.parametrize("name", ["to_kv", "kv", "W_kv", "kv_proj", "cast_keys_values"])
def test_a_fused_key_value_projection_is_named_by_its_role(name):
    """lucidrains' `to_kv` (chunked [K; V]) and sgrvinod's `cast_keys_values`: one Linear holding keys and values."""
    assert role_of(name) == "kv"


@pytest.mark.parametrize("name,role", [("cast_queries", "q"), ("cast_output", "o")])
def test_cast_is_a_prefix_like_to(name, role):
    assert role_of(name) == role


class _SeparateQueryFusedKeyValue(nn.Module):
    """lucidrains/memory-efficient-attention-pytorch's FlashAttention (tests/realzoo/
    lucidrains_flash_attention_backward_double_scale.py): to_q apart, to_kv = [W_k; W_v] chunked in two."""

    def __init__(self, d, kv_rows=None):
        super().__init__()
        self.to_q = nn.Linear(d, d, bias=False)
        self.to_kv = nn.Linear(d, 2 * (kv_rows or d), bias=False)
        self.to_out = nn.Linear(d, d)


def test_a_fused_key_value_projection_is_read_as_key_rows_then_value_rows_and_not_certain():
    found, problem = discover(_SeparateQueryFusedKeyValue(8), 8, 8, 2)
    assert problem == "" and len(found) == 1
    assert found[0].describe()["wk"] == "to_kv.weight[0:8]" and found[0].describe()["wv"] == "to_kv.weight[8:16]"
    assert not found[0].certain  # [K; V] is the usual order, not a proof: the output must be reproduced first


def test_a_fused_key_value_projection_of_one_shared_head_is_read_as_multi_query():
    found, problem = discover(_SeparateQueryFusedKeyValue(8, kv_rows=4), 8, 8, 2)
    assert problem == "" and found and found[0].kv_width == 4
    assert found[0].describe()["wv"] == "to_kv.weight[4:8]"


class _AllowedArgument(nn.Module):
    def forward(self, x, allowed):
        return x


class _CacheArgument(nn.Module):
    def forward(self, x, kv_cache):
        return x


def test_a_required_argument_that_may_be_the_mask_is_told_how_to_name_it():
    """A student trial: a sequence-first layer whose causal mask was the required argument `allowed` was told only to
    write a factory; renamed `mask`, it was checked (and its missing scale named).  An argument whose name says it
    is something else (a cache, positions, lengths) gets no such hint."""
    told = styles_for(_AllowedArgument()).problem
    assert "forward needs allowed besides the input" in told and "call it `mask`" in told and "factory" in told
    cache = styles_for(_CacheArgument()).problem
    assert "forward needs kv_cache" in cache and "call it `mask`" not in cache and "factory" in cache


def test_per_head_modules_each_with_a_fused_projection_name_their_own_rows():
    """A student's trial: a ModuleList of heads, each with its own `qkv = Linear(d, 3 * dh)` split by `chunk(3)`.
    The reading reproduced the layer, but its pieces were the whole layer's fused rows taken from each head's module
    (`heads.0.qkv (rows 12-15)` of a 12-row matrix: empty slices that happened to change nothing), and the report
    printed them.  Each head's module holds [q_h; k_h; v_h], dh rows each: that is the reading, offered once."""
    class OneHead(nn.Module):
        def __init__(self, d, dh):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * dh, bias=False)

    class MultiHead(nn.Module):
        def __init__(self, d=8, heads=2):
            super().__init__()
            self.heads = nn.ModuleList(OneHead(d, d // heads) for _ in range(heads))
            self.mix = nn.Linear(d, d)

    layer = MultiHead()
    found, problem = discover(layer, 8, 8, 2)
    assert problem == "" and len(found) == 1
    roles = found[0].describe()
    assert roles["wq"] == "heads.0.qkv.weight[0:4] + heads.1.qkv.weight[0:4]"
    assert roles["wk"] == "heads.0.qkv.weight[4:8] + heads.1.qkv.weight[4:8]"
    assert roles["wv"] == "heads.0.qkv.weight[8:12] + heads.1.qkv.weight[8:12]"
    w = found[0].read()
    assert w["wk"].shape == (8, 8)
    assert torch.equal(w["wk"][4:], layer.heads[1].qkv.weight[4:8])


def test_a_setting_kept_as_an_attribute_of_the_same_name_is_no_read_of_the_global(tmp_path):
    """trial8: a notebook's cell of settings (n_embd, n_head, block_size) beside a class that takes n_embd and
    n_head as arguments and keeps `self.n_head`: the attribute's name sits in the code's co_names as a global's
    does, and the report said the class "reads its sizes from module-level settings (block_size = 32, n_head = 6)".
    Only the global it reads (block_size) is a setting."""
    loaded = _load(tmp_path, "n_embd = 48\nn_head = 6\nblock_size = 32\n"
                             "class MultiHeadSelfAttention(nn.Module):\n    def __init__(self, n_embd, n_head):\n"
                             "        self.n_head = n_head\n        self.t = block_size\n"
                             "    def forward(self, x):\n        return x.view(*x.shape[:2], self.n_head, -1)\n",
                   "MultiHeadSelfAttention")
    assert settings_from_globals(loaded.obj) == {"block_size": "32"}


def test_a_required_state_and_cache_switch_are_given_no_cache():
    """dreamgonfly's transformer-pytorch MultiHeadAttention.forward(query, key, value, mask, state, cache) -> (out,
    state) (tests/realzoo/dreamgonfly_mha_state_cache_positional_masked_true.py): no defaults, the state an
    AttentionState read only when `cache: bool` is True.  mha-check said "forward needs state, cache besides the input
    and a mask: mha-check cannot supply them" (cannot tell); a call that starts a new sequence and keeps nothing gives
    the switch False and the state None, as the layer's own encoder does (cache=False)."""
    def forward(self, query, key, value, mask, state, cache: bool):
        return query
    styles, problem = _calls(forward)
    assert not problem and styles[0].startswith("forward(x, x, x, state=None, cache=False, mask=causal mask")
    assert all("state=None, cache=False" in s for s in styles)
    # a required parameter that is no cache stays one mha-check cannot supply
    styles, problem = _calls(lambda self, x, mask, vocab: x)
    assert not styles and "vocab" in problem
    # a required cache object alone, without a switch that turns it off: still one mha-check cannot make
    styles, problem = _calls(lambda self, x, layer_past: x)
    assert not styles and "layer_past" in problem


@pytest.mark.parametrize("name", ["max_batch_size", "max_batch", "max_bsz", "maxBatchSize"])
def test_a_max_batch_size_is_bound_to_a_batch_every_probe_fits_in(name):
    """Meta llama's Attention(..., max_batch_size=4) preallocates its cache for 4 sequences; reference-match's
    float32 probes send 8 to 16, the cache write raised and the check could not tell (fixes28 item 4).  Bound,
    default or not, unless --arg gives it."""
    from harness.wire.config import MAX_BATCH

    fn = eval(f"lambda dim, n_heads, max_seq_len, {name}=4: {{'{name}': {name}}}")
    s = _sig(fn)
    assert s.derived == {name: "max_batch"} and not s.unfillable
    cfg = Config(d_in=8, d_out=8, heads=2, context_length=7, batch=2, n=5)
    assert build(fn, cfg, {}, s) == {name: MAX_BATCH} and MAX_BATCH >= 16 * 3
    assert _sig(fn, **{name: 32}).derived == {}  # --arg max_batch_size=32: the user's value stands
    assert _sig(lambda d, heads, batch_size=4: None).derived == {}  # a batch size alone is no maximum


def test_widths_named_for_the_keys_or_values_are_guessed_one_heads_width_not_the_context_length():
    """FastNLP 0.5's MultiHeadAttention(input_size, key_size, value_size, num_head) (Realzoo22): the guess by order
    had been key_size=@context_length, which made the correct layer fail two checks when followed."""
    def layer(input_size, key_size, value_size, num_head, dropout=0.1):
        return None

    with pytest.raises(Unbindable) as e:
        require_bindable(read_signature(layer, {}), {})
    assert "e.g. --arg key_size=@head_width --arg value_size=@head_width (a guess from their names" in str(e.value)
    assert "@d_out, instead of one head's" in str(e.value)


def test_an_arg_that_nearly_spells_a_parameter_is_refused_with_that_parameter():
    """`--arg Breite=@d_out` for `breite` (a student's trial): breite, left without a value, had been taken for a
    config object, and the layer failed construct on our ConfigBag; now the name is refused, with the one it nearly
    spells, whether or not a config object or **kwargs would take names the signature does not list."""
    class Aufmerksamkeit(nn.Module):
        def __init__(self, breite, koepfe, kontext=128):
            super().__init__()

    class WithKwargs(nn.Module):
        def __init__(self, d_model, num_heads, **kwargs):
            super().__init__()

    overrides = {"Breite": "@d_out", "koepfe": "@heads"}
    signature = read_signature(Aufmerksamkeit, overrides)
    assert signature.unknown_overrides == ["Breite"]
    with pytest.raises(Unbindable, match=r"--arg Breite: the constructor has no such parameter .*did you mean "
                                         r"breite\?"):
        require_bindable(signature, overrides)
    assert read_signature(WithKwargs, {"num_haeds": 2}).unknown_overrides == ["num_haeds"]
    assert read_signature(WithKwargs, {"bias": True}).unknown_overrides == []  # **kwargs takes it
    assert read_signature(Aufmerksamkeit, {"breite": "@d_out", "koepfe": "@heads"}).unknown_overrides == []


def test_an_arg_naming_a_binding_without_its_at_is_a_usage_error(capsys):
    """`--arg breite=d_out` passed the text "d_out" to the constructor, which then failed as the student's code."""
    parser = argparse.ArgumentParser(prog="mha-check")
    with pytest.raises(SystemExit) as stop:
        constructor_args(["breite=d_out"], parser)
    assert stop.value.code == 2
    assert "write --arg breite=@d_out" in capsys.readouterr().err
    assert constructor_args(["breite='d_out'", "name=heads2"], parser) == {"breite": "d_out", "name": "heads2"}
