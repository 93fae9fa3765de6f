"""Child side: build the student's module for a requested configuration, whatever its constructor looks like.

Parameters are matched by name against a generous alias table; a single `config`/`cfg` parameter gets an object
that answers every usual attribute (and item) name; `--arg name=value` overrides anything, and `--arg name=@d_out`
binds a parameter to one of the configuration's values.  Some parameters are derived from the configuration: a
head width (`head_dim`, `head_size`: width / heads), a number of key/value heads (`n_kv_heads`, `num_kv_groups`:
the configuration's kv_heads, which the trusted side sets below the heads to check the grouping) or a group size
(`n_rep`: heads / kv_heads), and every dropout a layer takes (attention and residual) gets the same value.
An --arg for a key/value-heads parameter is its value where it divides the heads (the trusted side reads it).
"""
from __future__ import annotations

import dataclasses
import ast
import inspect
import linecache
import os
import re
import sys
import textwrap
import types

from harness.child.notebook import code_at, location
from harness.child.vocabulary import QKV as QKV_WORDS, WIDTH as WIDTH_WORDS, key_by_tokens, tokens
from harness.wire import names as our_names
from harness.wire.config import ROTARY_FRACTION, Config
from harness.wire.messages import Signature
from harness.wire.target import nearly

ALIASES: dict[str, tuple[str, ...]] = {
    "d_in": ("d_in", "din", "in_dim", "input_dim", "dim_in", "in_features", "d_input", "input_size", "in_channels"),
    "d_out": ("d_out", "dout", "out_dim", "output_dim", "dim_out", "out_features", "d_output", "output_size",
              "depth_out"),  # depth_out: Sockeye's MultiHeadSelfAttention(depth_att, heads, depth_out)
    "width": ("d", "d_model", "dmodel", "embed_dim", "emb_dim", "emb", "embed", "embedding", "model_dimension",
              "embedding_dim", "n_embd", "n_embed", "n_emb", "hidden_size", "hidden_dim", "dim", "width", "model_dim",
              "d_embed", "embed_size", "emb_size", "embedding_size", "d_hidden", "hidden", "num_hiddens", "n_hidden",
              "num_hidden", "hidden_units", "n_embedding", "channels", "n_state", "nx", "d_k_total", "n_feat",
              "depth_att", "k"),  # k: Bloem's "Transformers from scratch" SelfAttention(k, heads=8, mask=False), the
    # embedding width (a per-head key width is spelt d_k, dk, head_dim above); n_feat: ESPnet's MultiHeadedAttention(
    # n_head, n_feat, dropout_rate), copied by WeNet and FunASR; depth_att: Sockeye's attention depth, its input and
    # attention width ("depth" alone is not one: lucidrains' depth counts layers; "attention_dim" stays unread, see
    # harness.child.vocabulary)
    "heads": ("nheads", "num_heads", "n_heads", "n_head", "heads", "num_attention_heads", "h", "nhead",
              "head_count", "n_attn_heads", "num_head", "nb_heads", "attention_heads",
              "nh"),  # nh: bio-attention's AttnLayer(dim, attn, nh=4), llm.c's NH
    "context_length": ("context_length", "block_size", "max_len", "max_seq_len", "max_seq_length", "n_ctx",
                       "seq_len", "max_length", "context_size", "max_position_embeddings", "n_positions",
                       "ctx_len", "context_len", "max_tokens", "seq_length", "max_context", "block_len",
                       "max_sequence_length", "context", "n_ctx_max", "t_max", "maxlen", "ctx", "ctx_size",
                       "max_positions", "seq_size", "num_tokens", "max_tokens_len", "window", "max_t"),
    "dropout": ("dropout", "dropout_p", "p_drop", "attn_dropout", "attn_pdrop", "dropout_rate", "attention_dropout",
                "attn_drop", "drop", "drop_rate", "attention_probs_dropout_prob", "p_dropout", "dropout_prob",
                "attn_dropout_p", "resid_pdrop", "embd_pdrop", "resid_dropout", "proj_dropout", "proj_drop",
                "resid_drop", "hidden_dropout", "hidden_dropout_prob", "out_dropout", "attn_drop_rate",
                "proj_drop_rate", "dropout_attn", "dropout_rate_attn"),
    "head_width": ("head_dim", "head_size", "d_head", "dim_head", "head_width", "d_k", "dk", "d_v", "dv", "d_h", "dh",
                   "d_queries", "d_keys", "d_values", "d_query", "d_key", "d_value",
                   "attention_head_size", "kv_channels", "headdim", "hs"),
    "kv_heads": ("n_kv_heads", "num_kv_heads", "num_key_value_heads", "n_kv_head", "kv_heads", "num_kv_head",
                 "n_kv", "num_kv_groups_heads", "num_kv_groups", "n_kv_groups", "num_query_groups", "kv_groups",
                 "n_query_groups", "num_kv", "n_kv_group", "num_groups_kv", "kv_head_count", "n_head_kv",
                 "num_heads_kv", "nheads_kv", "n_kv_head_count", "num_key_value_head", "multi_query_group_num"),
    # query heads per key/value head (group size): heads // kv_heads (Llama's n_rep, HF's num_key_value_groups)
    "kv_group": ("n_rep", "num_rep", "kv_group_size", "num_key_value_groups", "q_per_kv", "queries_per_kv",
                 "num_queries_per_kv", "heads_per_kv", "heads_per_kv_group", "gq_ratio", "gqa_ratio"),  # not
    # `group_size`: GroupNorm's too (gq_ratio: tinyllama's query heads per group)
    "qkv_bias": ("qkv_bias", "qkv_biases", "use_qkv_bias", "proj_bias_qkv", "in_proj_bias", "qk_bias",
                 "bias_qkv"),
    # a flag that makes the layer causal (a class that can also attend both ways): always on
    "causal": ("causal", "is_causal", "mask", "masked", "autoregressive", "use_mask", "causal_mask", "use_causal_mask",
               "decoder"),
    # a flag for every bias at once (nanoGPT's `bias`): always on, since the lesson's output projection has one;
    # whether Q/K/V then have biases is read off the module itself
    "all_bias": ("bias", "use_bias", "add_bias", "attn_bias", "with_bias", "biases"),
}
THETA_NAMES = ("theta", "rope_theta", "base", "rope_base", "re_base", "lm_re_base", "theta_base", "rotary_base",
               "rope_freq_base", "freq_base", "rotary_emb_base", "rotary_theta", "pos_base")  # a rotary embedding's
# base: its default, else 10000 (re_base: nanoVLM's lm_re_base)
THETA = 10000.0
DEVICE_NAMES = ("device", "dev", "torch_device")  # a required one gets "cpu" (Config.value)
NORM_EPS_NAMES = ("layer_norm_eps", "layernorm_eps", "norm_eps", "ln_eps", "eps", "layer_norm_epsilon",
                  "norm_epsilon", "rms_norm_eps", "epsilon")  # a required one gets 1e-5, torch's LayerNorm
# default (Config.value): RecBole's MultiHeadAttention(..., layer_norm_eps), its LayerNorm kept inside
def is_max_batch(name: str) -> bool:
    """`max_batch_size`, `max_batch`, `max_bsz`, `maxBatchSize`: the most sequences a layer preallocates for."""
    words = set(tokens(name))
    return bool(words & {"batch", "bsz", "bs", "batches"}) and bool(words & {"max", "maximum"})


CONFIG_PARAMS = ("config", "cfg", "conf", "args", "hparams", "params", "settings", "opt", "opts", "options", "hp", "c")
_BY_ALIAS = {alias: key for key, names in ALIASES.items() for alias in names}


class Unbindable(TypeError):
    """mha-check has no value for a constructor parameter (or was given one the constructor does not take): the
    module cannot be built by mha-check, which says nothing about the student's code."""


class MissingSetting(AttributeError):
    """The class read a setting mha-check's config object does not hold (`config.rope_theta`): our stand-in lacks
    it, which says nothing about the student's code (worker.build turns it into cannot-tell, naming the --arg)."""

    def __init__(self, message: str, setting: str):
        super().__init__(message)
        self.setting = setting


class MissingItem(KeyError):
    """The same, read as an item (`cfg["rope_theta"]`)."""

    def __init__(self, message: str, setting: str):
        super().__init__(message)
        self.setting = setting


def missing_setting(exc: BaseException | None) -> str | None:
    """The setting our config object lacked, when it is what made `exc` happen (anywhere in its chain)."""
    seen = set()
    while exc is not None and id(exc) not in seen:  # read through BaseException's own slots: no code of theirs runs
        seen.add(id(exc))
        if type(exc) in (MissingSetting, MissingItem):
            return exc.setting
        exc = _CAUSE.__get__(exc) or _CONTEXT.__get__(exc)
    return None


_CAUSE, _CONTEXT = BaseException.__dict__["__cause__"], BaseException.__dict__["__context__"]


class ConfigBag(dict):
    """A config object with every usual spelling, readable as attributes or items (`cfg.n_embd`, `cfg["emb_dim"]`),
    and any other name whose words say what it carries (`cfg.number_of_heads`, harness.child.vocabulary)."""

    def __init__(self, values: dict, cfg: Config | None = None, reads: set | None = None):
        super().__init__(values)
        object.__setattr__(self, "_cfg", cfg)
        object.__setattr__(self, "_reads", set() if reads is None else reads)  # every setting name asked for

    def __getitem__(self, name):
        if isinstance(name, str):
            self._reads.add(name)
        return dict.__getitem__(self, name)

    def __missing__(self, name):
        key = _config_key(name) if isinstance(name, str) and self._cfg is not None else None
        if key is None:
            raise MissingItem(_lacks(name), name)
        return self._cfg.value(key)

    def __contains__(self, name):
        return dict.__contains__(self, name) or (isinstance(name, str) and _config_key(name) is not None)

    def get(self, name, default=None):
        return self[name] if name in self else default

    def __getattr__(self, name):
        if name.startswith("__"):  # copy, pickle and friends ask for these: not settings
            raise AttributeError(name)
        try:
            return self[name]
        except MissingItem:
            raise MissingSetting(_lacks(name), name) from None

    def __setattr__(self, name, value):
        self[name] = value


def _config_key(name: str) -> str | None:
    """The key a config object's setting stands for: key_of's, or the maximum batch (`args.max_batch_size`, Meta
    llama's cache preallocated for that many sequences, bound as the constructor parameter of that name is)."""
    return key_of(name) or ("max_batch" if is_max_batch(name) else None)


def _lacks(name) -> str:
    return (f"config has no attribute {name!r}: mha-check's config object holds only the width, heads, context "
            f"length, dropout and bias settings; pass --arg {name}=VALUE to add it")


def key_of(name: str) -> str | None:
    """The configuration key a parameter (or setting) name stands for: 'n_embd' -> 'width', 'block_size' ->
    'context_length', 'head_size' -> 'head_width', and by its words a name no table lists ('number_of_heads' ->
    'heads', 'input_dimension' -> 'd_in', harness.child.vocabulary); None for a name mha-check does not know."""
    return _BY_ALIAS.get(name.lower()) or key_by_tokens(name)


FRACTION_NAMES = ("partial_rotary_factor", "rotary_pct", "rope_percentage", "rotary_emb_fraction")  # on a config
MULTIPLE = ("dropout",)  # keys that several parameters may carry at once (attn_pdrop and resid_pdrop)
DERIVED = ("head_width", "kv_heads", "kv_group")  # keys computed from the configuration, never a free choice
GROUPED = ("kv_heads", "kv_group")  # a parameter for these makes the layer grouped-query (Config.kv_heads)


def config_bag(cfg: Config, overrides: dict, reads: set | None = None) -> ConfigBag:
    """The config object for `cfg`; the names the class reads off it are added to `reads` (config_reads).  An --arg
    for a key/value-heads setting (num_key_value_heads=2) is a preference, as for a parameter (read_signature): the
    bag answers the configuration's kv_heads, which the trusted side sets to it where it divides the heads."""
    bag = ConfigBag({alias: cfg.value(key) for alias, key in _BY_ALIAS.items() if key != "d_in"}, cfg, reads)
    bag.update({name: THETA for name in THETA_NAMES if name != "base"})  # a rotary base (read_signature reports it)
    bag.update({name: 1.0 for name in FRACTION_NAMES})  # every feature of each head turned (ROTARY_FRACTION)
    bag.update({a: cfg.d_in for a in ALIASES["d_in"]})
    bag.update({k: cfg.value(key_of(k)) if key_of(k) in GROUPED and _whole(v) else _resolve(v, cfg)
                for k, v in overrides.items()})
    return bag


def config_reads(reads: set) -> dict[str, str]:
    """The settings a class read off its config object that mha-check knows, each with the configuration key it
    stands for (`num_key_value_heads` -> kv_heads): a class that read a number of key/value heads is grouped-query
    attention, though no constructor parameter says so (harness.engine.grouped)."""
    return {name: key for name in sorted(reads) if (key := key_of(name)) is not None}


def _resolve(value, cfg: Config):
    return cfg.value(value[1:]) if isinstance(value, str) and value.startswith("@") else value


def _single_head_width(params: list[inspect.Parameter], accepts: dict, also: dict, overrides: dict,
                       config_param: str | None) -> None:
    """A head width and one width, and nothing that could carry a number of heads (the single-head form,
    harness.wire.form): the head width is the one head's own width, d_out, and the width the input's, d_in
    (the lecture's `Head(n_embd, head_size, block_size)`).  Read as a head width derived from the width, both were
    the same number, and a scale taken from the input's width (`C ** -0.5`), wrong only where they differ, passed.
    In place: the head width moves from `also` to `accepts` as d_out, the width is read as d_in."""
    head = [name for name, key in also.items() if key == "head_width"]  # one, or the keys' and values' (d_k, d_v)
    bound = set(accepts.values()) | set(also) | set(overrides)
    carried = set(accepts) | set(also.values()) | {v[1:] for v in overrides.values() if isinstance(v, str) and
                                                  v.startswith("@")}
    if not head or len(head) > 2 or set(head) & set(overrides) or config_param or \
            carried & {"heads", "kv_heads", "kv_group"} or \
            [k for k in ("d_in", "d_out", "width") if k in accepts] not in (["d_in"], ["width"]) or \
            any(p.name not in bound for p in params):
        return
    for name in head:
        del also[name]
    also.update({name: "d_out" for name in head[1:]})  # Head(d_in, d_k, d_v): each as wide as the one head, d_out
    # (both had been d_in with one head, and a scale by the input's width, sqrt(d_in), passed)
    read = {**accepts, "d_in": accepts.get("d_in", accepts.get("width")), "d_out": head[0]}
    read.pop("width", None)
    order = {p.name: i for i, p in enumerate(params)}  # as the constructor lists them ("built as")
    accepts.clear()
    accepts.update(sorted(read.items(), key=lambda item: order.get(item[1], len(order))))


def _parameters(factory) -> tuple[list[inspect.Parameter], bool]:
    """The named parameters, and whether the constructor also takes **kwargs."""
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return [], True
    params = list(sig.parameters.values())
    return ([p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)],
            any(p.kind == p.VAR_KEYWORD for p in params))


def _var_keyword(factory) -> str:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return ""
    return next((p.name for p in params if p.kind == p.VAR_KEYWORD), "")


def kwargs_keys(factory) -> list[str]:
    """The keys a constructor taking `**cfg` reads off it in its own source (`cfg.get("d_model", 64)`,
    `cfg["n_heads"]`, `cfg.pop(...)`, `cfg.setdefault(...)`), in order; [] where it reads none or has no source."""
    name = _var_keyword(factory)
    init = factory.__init__ if isinstance(factory, type) else factory
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return []
    keys: list[str] = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == name:
            key = node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args and \
                node.func.attr in ("get", "pop", "setdefault") and isinstance(node.func.value, ast.Name) and \
                node.func.value.id == name:
            key = node.args[0]
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value not in keys:
            keys.append(key.value)
    return keys if name else []


def read_signature(factory, overrides: dict) -> Signature:
    params, takes_kwargs = _parameters(factory)
    accepts: dict[str, str] = {}
    also: dict[str, str] = {}  # further parameters with a value from the configuration: name -> key
    config_param, unfillable = None, []
    rope_theta = None
    for p in params:
        key = key_of(p.name)
        if p.name.lower() in THETA_NAMES and rope_theta is None:
            rope_theta = _theta(p, overrides)
            if p.name not in overrides and rope_theta is not None and p.default is inspect.Parameter.empty:
                also[p.name] = "rope_theta"  # bound to 10000 (build)
            if rope_theta is not None:
                continue
        setting = _setting(p, overrides)
        if setting:
            also[p.name] = setting
            continue
        if p.name in overrides and key in GROUPED and _whole(overrides[p.name]):
            also[p.name] = key  # --arg num_kv_groups=2: bound per configuration, 2 where it divides the heads
            continue
        if p.name in overrides:  # given with --arg: a literal, or @key bound to the configuration, never a slot
            continue
        if key in DERIVED and key not in GROUPED and p.default is None:
            continue  # head_dim=None: the class derives it itself (and may check that the heads divide the width)
        if key in DERIVED or (key in MULTIPLE and key in accepts):
            also[p.name] = key
        elif key and key not in accepts:
            accepts[key] = p.name
        elif p.name.lower() in CONFIG_PARAMS and config_param is None:
            config_param = p.name
        elif p.default is inspect.Parameter.empty:
            unfillable.append(p.name)
    if config_param is None and not accepts and len(unfillable) == 1:
        config_param = unfillable.pop()  # a single unknown required parameter: most likely a config object
    if takes_kwargs and config_param is None and not accepts and not unfillable and not also and kwargs_keys(factory):
        config_param = "**" + _var_keyword(factory)  # `def __init__(self, **cfg)` reading cfg.get("d_model", 64):
        # given the keys it reads (a student's layer had been built with its defaults, d_model=64, fed inputs of
        # width 8, and failed)
    _single_head_width(params, accepts, also, overrides, config_param)
    widths = [k for k in ("d_in", "d_out", "width") if k in accepts]
    bound = {overrides[p.name][1:] for p in params if overrides.get(p.name) in ("@d_in", "@d_out")}  # --arg
    # d_in=@d_in: a width of its own still (bound so, it had made the layer single-width, and a scale taken from
    # x.shape, wrong only where d_in != d_out, passed)
    separate = len(set(widths) | bound) >= 2
    if separate and "width" in accepts:  # (d, d_out): d is the input width; (d, d_in): d is the output width
        accepts["d_out" if "d_in" in accepts or "d_in" in bound else "d_in"] = accepts.pop("width")
    elif not separate and len(widths) == 1 and widths[0] != "width":  # a single width, whatever its name
        accepts["width"] = accepts.pop(widths[0])
    names = [p.name for p in params]
    unknown = [k for k in overrides if k not in names and (not (takes_kwargs or config_param) or
                                                          misspelt(k, names, overrides))]
    # (a config object's fields and **kwargs take names the signature does not list, but not a near-miss of one it
    # does: `--arg Breite=@d_out` for `breite` had left breite unbound, taken for a config object, and the layer
    # failed construct with "unsupported operand type(s) for //: 'ConfigBag' and 'int'", a student's trial)
    if rope_theta is None and config_param:  # the config object answers rope_theta, theta, base... with 10000
        rope_theta = _number(overrides.get("rope_theta", overrides.get("theta", THETA)))
    return Signature(names, separate, accepts, config_param, unfillable, unknown, derived=also, rope_theta=rope_theta)


def init_at(cls: type) -> dict[str, str]:
    """{"at", "code"} of the `def __init__` line of a module's class (the nearest class in its order that defines
    one: the class a factory of the student's built, not the factory), where it is the student's code (not torch's
    nn.Module.__init__, nor a library's, nor ours); {} otherwise."""
    try:
        init = next((c.__dict__["__init__"] for c in cls.__mro__ if "__init__" in c.__dict__), None)
        code = init.__code__ if isinstance(init, types.FunctionType) else None
    except Exception:  # noqa: BLE001 - a class of the student's own making: no line rather than no module
        return {}
    if code is None or not isinstance(code.co_filename, str) or code.co_filename.startswith("<"):
        return {}
    path = os.path.abspath(code.co_filename)
    if our_names.is_ours(path) or any(p in path.split(os.sep) for p in ("site-packages", "dist-packages")) or \
            path.startswith(os.path.abspath(sys.base_prefix) + os.sep):
        return {}
    lines = linecache.getlines(path)
    line = code.co_firstlineno
    while line < len(lines) and lines[line - 1].lstrip().startswith("@"):  # its decorators: the def after them
        line += 1
    return {"at": location(path, line), "code": code_at(path, line)}


def _setting(p: inspect.Parameter, overrides: dict) -> str | None:
    """The configuration key of a setting mha-check gives a value of its own (not --arg): a rotary fraction (1.0,
    default or not: no reference turns part of each head, config.py), a required device (bentrevett's
    MultiHeadAttentionLayer(hid_dim, n_heads, dropout, device)), a maximum batch (a default too small for the probes,
    or none), a required normalisation epsilon (a setting with a usual value, not a blank)."""
    if p.name in overrides:
        return None
    name, required = p.name.lower(), p.default is inspect.Parameter.empty
    if ROTARY_FRACTION.search(name):
        return "rope_fraction"
    if name in DEVICE_NAMES and required:
        return "device"
    if is_max_batch(p.name):
        return "max_batch"
    if name in NORM_EPS_NAMES and required:
        return "norm_eps"
    return None


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _theta(p: inspect.Parameter, overrides: dict) -> float | None:
    """The rotary base a theta-like parameter gets: --arg, else its numeric default, else 10000 (a required one);
    None when it is no number (then it is no rotary base, and is bound as any other parameter)."""
    if p.name in overrides:
        return _number(overrides[p.name])
    if p.default is inspect.Parameter.empty:
        return THETA
    return _number(p.default)


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def misspelt(name: str, names: list[str], overrides: dict) -> str | None:
    """The constructor's parameter that `name` (an --arg not among them) nearly spells, when that one is given no
    value itself: `Breite` for `breite`; None otherwise (harness.wire.target.nearly, the trusted side's rule too)."""
    return nearly(name, [n for n in names if n not in overrides])


def require_bindable(signature: Signature, overrides: dict | None = None) -> None:
    """Raise Unbindable when mha-check cannot call the constructor at all (before any of the student's code runs)."""
    if signature.unknown_overrides:
        near = [(k, m) for k in signature.unknown_overrides if (m := misspelt(k, signature.params, overrides or {}))]
        near = [m for _, m in near] if len(near) == 1 else [f"{m} for {k}" for k, m in near]
        raise Unbindable(f"--arg {', '.join(signature.unknown_overrides)}: the constructor has no such parameter "
                         f"(it takes {', '.join(signature.params) or 'none'})" +
                         (f"; did you mean {', '.join(near)}?" if near else ""))
    if signature.unfillable:
        names = ", ".join(signature.unfillable)
        guesses = _guesses(signature, overrides or {}, signature.unfillable)
        raise Unbindable(f"mha-check has no value for required parameter(s) {names}: " +
                         _binding_hint(guesses, signature.unfillable[len(guesses):]))


SIZES = (("width", "@d_out"), ("heads", "@heads"), ("context_length", "@context_length"))  # what mha-check sets per
# configuration, in the order a constructor usually takes them (the lesson's: d_out, num_heads, context_length)
FIXED_BY_NUMBER = {"d_in": "@d_in", "d_out": "@d_out", "width": "@d_out", "heads": "@heads",
                   "context_length": "@context_length"}  # a number for these fixes what mha-check changes
LONGEST_INPUT = 64  # the most tokens a configuration feeds (harness.engine.context.required_configs): a context
# length given as a number at least this long holds every input


def _guesses(signature: Signature, overrides: dict, names: list[str]) -> list[str]:
    """`NAME=@size` for parameters mha-check cannot read (`names`, in the constructor's order), each bound to a size
    no parameter carries yet, in the usual order (width, heads, context length): a guess to show, never applied (a
    student's trial had read "--arg NAME=VALUE" first, passed numbers, and every check then built the layer at one
    size and fed it others)."""
    carried = set(signature.accepts) | set(signature.derived.values()) | {
        v[1:] for v in overrides.values() if isinstance(v, str) and v.startswith("@")}
    if carried & {"d_in", "d_out", "width"}:
        carried.add("width")
    free = [ref for key, ref in SIZES if key not in carried]
    out = []
    for name in names:
        if _role_width(name):  # key_size, kdim, value_dim: a width of the queries', keys' or values' own
            out.append(f"{name}=@head_width")
        elif free:
            out.append(f"{name}={free.pop(0)}")
        else:
            break
    return out


def _role_width(name: str) -> bool:
    """A width named for the queries, keys or values (key_size, value_size, kdim, qk_dim): per head in most code
    that leaves it unbound (FastNLP's MultiHeadAttention(input_size, key_size, value_size, num_head), Realzoo22),
    the full width in some (nn.MultiheadAttention's kdim); guessed the context length by its place, the correct layer
    then failed two checks."""
    words = set(tokens(name))
    return bool(words & QKV_WORDS) and bool(words & WIDTH_WORDS) and words <= QKV_WORDS | WIDTH_WORDS | {"d"}


def _binding_hint(guesses: list[str], rest: list[str], plain: bool = True) -> str:
    """The --arg to copy for parameters mha-check cannot read: the guessed sizes, then a value for the others;
    `plain`: and why a number will not do."""
    per_role = any(g.endswith("=@head_width") for g in guesses)
    said = [f"bind each to the size mha-check sets for every configuration it builds, e.g. "
            f"{' '.join('--arg ' + g for g in guesses)} (a guess from their names and order"
            + ("; a width named for the keys or values may be the full width, @d_out, instead of one head's"
               if per_role else "") + "; also @d_in, @dropout, @qkv_bias)"] if guesses else []
    said += [f"give {', '.join(rest)} a value with --arg NAME=VALUE"] if rest else []
    return ", and ".join(said) + ("; a plain number (NAME=8) fixes a size that mha-check changes from one "
                                  "configuration to the next" if guesses and plain else "")


def require_free_sizes(factory, signature: Signature, overrides: dict) -> None:
    """Raise Unbindable when --arg gives a number to a size that mha-check chooses for each configuration: a width
    (it feeds inputs of that width: a fixed d_in=6 met inputs of width 8, and the student's first Linear was
    blamed), a number of heads other than 1, a context length (it feeds as many tokens: a fixed 16 met 17 and 64,
    and a correct layer was told its mask was made too short), or a required parameter mha-check cannot read while
    one of these sizes has no parameter (`breite=8, koepfe=2, kontextlaenge=16`: a student's trial, every check
    then failing on the shapes).  A size bound to the configuration (@d_in) is fine; so is a number for a parameter
    mha-check reads as no size, or one with a default (a setting), or any where a config object carries the sizes."""
    params = _parameters(factory)[0]
    fixed = [(p.name, overrides[p.name]) for p in params if _number(overrides.get(p.name)) is not None]
    for name, value in fixed:
        key = key_of(name)
        if key in FIXED_BY_NUMBER and not (key == "heads" and value == 1) and \
                not (key == "context_length" and value >= LONGEST_INPUT):
            raise Unbindable(f"{name} is a {KEY_WORDS.get(key, key)} that mha-check chooses itself for each "
                             f"configuration (it builds the layer at several and feeds inputs to match): bind it "
                             f"with --arg {name}={FIXED_BY_NUMBER[key]}, or leave it out; a number ({name}={value!r}) "
                             "fixes it")
    if signature.config_param:
        return
    unread = [name for name, value in fixed if key_of(name) is None and _whole(value) and
              any(p.name == name and p.default is inspect.Parameter.empty for p in params)]
    guesses = _guesses(signature, overrides, unread)
    if guesses:
        given = ", ".join(f"{name}={overrides[name]!r}" for name in unread)
        raise Unbindable(f"--arg {given}: a number fixes {'this parameter' if len(unread) == 1 else 'these'} for "
                         "every configuration, while mha-check builds the layer at several widths, numbers of heads "
                         "and context lengths and feeds inputs to match; " +
                         _binding_hint(guesses, unread[len(guesses):], plain=False))


def _nullable(factory, name: str) -> bool:
    return any(p.name == name and "None" in str(p.annotation) for p in _parameters(factory)[0])


def own_config_check(factory, name: str, bag: ConfigBag) -> None:
    """Build the config dataclass the constructor's parameter `name` is annotated with (`config: EKAConfig`, a
    class of the submission's module) from the stand-in's values: a width check in its __post_init__ then raises
    here, as it does for the class's own caller before the class is built.  Nothing happens when the annotation is
    no dataclass, when a field without default has no value, or when building it fails another way."""
    own = _annotated_dataclass(factory, name)
    if own is None:
        return
    fields = [f for f in dataclasses.fields(own) if f.init]
    if any(f.name not in bag and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
           for f in fields):
        return
    try:
        own(**{f.name: bag[f.name] for f in fields if f.name in bag})
    except (ValueError, AssertionError):
        raise
    except Exception:  # noqa: BLE001 - a config that cannot be built from the stand-in's values says nothing
        return


def _annotated_dataclass(factory, name: str):
    """The dataclass a constructor parameter is annotated with (a string under `from __future__ import
    annotations`, looked up in the factory's module), or None."""
    for p in _parameters(factory)[0]:
        if p.name != name:
            continue
        note = p.annotation
        if isinstance(note, str):
            module = sys.modules.get(getattr(factory, "__module__", None) or "")
            note = getattr(module, note.strip(), None) if module is not None else None
        return note if isinstance(note, type) and dataclasses.is_dataclass(note) else None
    return None


def build(factory, cfg: Config, overrides: dict, signature: Signature, reads: set | None = None):
    """Call the class or factory with the configuration spelt the way it asks (`reads`: gets the names the class
    reads off a config object, see config_reads)."""
    kwargs = {}
    for key, pname in signature.accepts.items():
        kwargs[pname] = cfg.value(key)
    for pname, key in signature.derived.items():
        indivisible = key == "head_width" and cfg.d_out % cfg.heads != 0  # no head width exists: `head_size: int |
        # None` lets the class derive it (and refuse the width), as it would for its own caller
        kwargs[pname] = None if indivisible and _nullable(factory, pname) else cfg.value(key)
    if signature.config_param:
        if cfg.heads > 0 and cfg.d_out % cfg.heads:  # the class's own config may refuse this width before the class
            own_config_check(factory, signature.config_param, config_bag(cfg, overrides))  # is built
        bag = config_bag(cfg, overrides, reads)
        if signature.config_param.startswith("**"):  # the keys it reads, each a keyword of the call
            kwargs.update({k: bag[k] for k in kwargs_keys(factory) if k in bag})
        else:
            kwargs[signature.config_param] = bag
    kwargs.update({k: _resolve(v, cfg) for k, v in overrides.items()
                   if (k in signature.params or not signature.params) and k not in signature.derived})
    return factory(**kwargs)


TRIAL_KEYS = ("heads", "width", "context_length", "d_in", "head_width")  # what a parameter left at its default
# may have been meant to carry (in this order: a stray number of heads is the usual case)
KEY_WORDS = {"d_in": "input width", "d_out": "output width", "width": "width", "heads": "number of heads",
             "context_length": "context length", "head_width": "head width"}


def left_at_default(factory, signature: Signature, overrides: dict) -> dict[str, int]:
    """Parameters mha-check gave no value (nor --arg did) whose default is a whole number: `head=8`."""
    bound = set(signature.accepts.values()) | set(signature.derived) | {signature.config_param} | set(overrides)
    return {p.name: p.default for p in _parameters(factory)[0] if p.name not in bound and
            isinstance(p.default, int) and not isinstance(p.default, bool)}


_UNEXPECTED = re.compile(r"got an unexpected keyword argument '(\w+)'")


def unpacked_spelling(exc: BaseException | None, cfg: Config, overrides: dict, signature: Signature) -> str | None:
    """The spelling of mha-check's stand-in config object that the constructor refused as a keyword argument, when
    that is what `exc` is: a TypeError "got an unexpected keyword argument 'd_out'" raised while the class was
    given the stand-in (a dict) and `d_out` is one of the stand-in's own keys, which only reach a call through
    `**config` (TransformerLens's `cfg = HookedTransformerConfig.from_dict(cfg)` is `cls(**config_dict)`).  A
    keyword the student's code spells out itself is no key of the stand-in's unless the class also takes it: a
    parameter of the constructor is left out.  None otherwise."""
    if not signature.config_param or type(exc) is not TypeError:
        return None
    found = _UNEXPECTED.search(str(exc))
    if found is None or found.group(1) in signature.params:
        return None
    return found.group(1) if dict.__contains__(config_bag(cfg, overrides), found.group(1)) else None


def ours(factory, cfg: Config, overrides: dict, signature: Signature, exc: BaseException, said: str) -> str | None:
    """Why the constructor's failure for `cfg` comes from mha-check's own inputs, not from the student's code, or
    None when it does not.  Three cases, each on evidence: the class read a setting our config object lacks
    (`config.rope_theta`); or it unpacked our config object into a call that refused one of its spellings
    (unpacked_spelling); or a parameter left at its default made it refuse a valid configuration, shown by
    building it again with that parameter set from the configuration (`head=8` refused d=6 with the class's own,
    correct, divisibility guard; with head = the number of heads it builds).  `said`: the exception as already
    described, safely (harness.child.target.describe_exception).  Runs the student's constructor again: only in
    the child."""
    setting = missing_setting(exc)
    if setting is not None:
        return (f"your class reads the setting {setting!r} of its config object, which mha-check's stand-in for it "
                f"does not hold (it holds the width, heads, context length, dropout and bias flags): pass "
                f"--arg {setting}=VALUE with the value your model uses")
    spelling = unpacked_spelling(exc, cfg, overrides, signature)
    if spelling is not None:
        return (f"your class unpacks its config object as keyword arguments (`**config`, into a class that takes "
                f"no {spelling!r}): mha-check's stand-in for it holds every usual spelling of the width, heads and "
                f"context length, so it cannot stand in for a config your code rebuilds from it")
    if cfg.heads <= 0 or cfg.d_out % cfg.heads or cfg.d_in % cfg.heads:  # an invalid configuration may be refused
        return None
    for name, default in left_at_default(factory, signature, overrides).items():
        for key in TRIAL_KEYS:
            if cfg.value(key) == default:
                continue
            try:
                build(factory, cfg, {**overrides, name: "@" + key}, signature)
            except BaseException:  # noqa: BLE001 - the student's constructor: any exception means "not this"
                continue
            raised = said.split(" (at ")[0][:200]
            return (f"it raised with {name} left at its default {default} ({raised}), and builds with "
                    f"{name} = the {KEY_WORDS[key]} ({cfg.value(key)}): mha-check did not know what {name} is; if "
                    f"it is the {KEY_WORDS[key]}, pass --arg {name}=@{key}")
    return None



def unread_flag(module, name: str) -> bool:
    """Whether the constructor parameter `name` of the module's class (or of a base class of the student's) is only
    stored, `self.X = name`, and no method of those classes ever reads self.X (nor the parameter itself otherwise:
    passed to a submodule, tested in __init__).  openlanguagemodel 2.0's MultiHeadAttention stored `causal` and never
    read it (tests/realzoo/olm_mha_causal_flag_ignored_pre_fix.py); ESPnet's reads its own in the flash path alone,
    which is a use.  Unsure (no source, no such parameter, a getattr by a computed name): False."""
    trees = []
    for cls in type(module).__mro__:
        if cls.__module__.split(".")[0] in ("torch", "builtins", "abc", "typing"):
            continue
        try:
            trees.append(ast.parse(textwrap.dedent(inspect.getsource(cls))))
        except (OSError, TypeError, SyntaxError, IndentationError):
            return False
    stored, taken = set(), False
    for tree in trees:
        for init in ast.walk(tree):
            if not isinstance(init, (ast.FunctionDef, ast.AsyncFunctionDef)) or init.name != "__init__":
                continue
            if name not in [a.arg for a in init.args.args + init.args.kwonlyargs]:
                continue
            taken = True
            kept = set()
            for node in ast.walk(init):
                if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id == name
                        and all(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                                and t.value.id == "self" for t in node.targets)):
                    stored.update(t.attr for t in node.targets)
                    kept.add(id(node.value))
            if any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) and id(n) not in kept
                   for n in ast.walk(init)):
                return False  # used otherwise than stored
    if not taken or not stored:
        return False
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in stored and isinstance(node.ctx, ast.Load):
                return False
            if isinstance(node, ast.Constant) and node.value in stored:
                return False  # getattr(self, "causal")
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("getattr", "vars") and not all(
                    isinstance(a, ast.Constant) for a in node.args[1:2]):
                return False
    return True
