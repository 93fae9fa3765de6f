"""Child side: how to call the student's forward, which may want more than `x`.

The lesson's layer is `forward(x)`.  Real code also writes `forward(x, mask)` and `forward(query, key, value,
attn_mask)`, leaving the causal mask to the caller.  For those, mha-check offers a list of *styles*: ways to call
forward with a causal mask in one of the usual conventions (boolean True = masked or True = keep, additive -inf,
1/0 keep) and shapes ((n, n), (1, n, n), (1, 1, n, n)).  Which style is right is never guessed here: the trusted
side uses a style only once the reference (or a known mistake) reproduces the module's output with it.

A forward that turns masking on with a flag (`forward(x, causal_mask=False)`, `is_causal=False`) is also offered with
the flag set: the layer's contract is the caller's to choose, and the proof decides as for a mask.

A rotary layer whose forward takes the token positions (`forward(x, token_positions)`, CS336) is given 0..n-1 in
each usual layout ((n,), (1, n), (B, n)); which one is right is proved like a mask convention.

A forward that needs anything else (rotary cos/sin tables, a freqs_cis, a cache object) cannot be driven:
`describe()` says so.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, replace

import torch

from harness.wire.masks import CONVENTIONS, SHAPES

MASK_NAMES = {"mask", "attn_mask", "attention_mask", "causal_mask", "mask_", "src_mask", "tgt_mask", "self_attn_mask",
              "attn_bias", "bias_mask", "masks"}  # and any other name with "mask" in it but not padding
FLAG_WORDS = ("causal", "mask", "decoder", "future", "autoregressive")  # a bool forward flag that turns masking on
KEY_NAMES = {"k", "key", "keys", "key_input", "memory", "context", "xa", "kv", "k_input"}
VALUE_NAMES = {"v", "value", "values", "value_input", "v_input", "memory_values"}
KV_INPUT_NAMES = {"k", "key", "keys", "kv", "key_value", "keys_values"}  # a second required input that is the
# keys' and values' input, x again in self-attention; not `memory` or `context`, which may be a state (lucidrains'
# feedback Attention: forward(x, memory), memory a (keys, values) tuple of earlier segments, tests/realzoo)
NOT_A_MASK = ("cache", "past", "state", "pos", "len", "rope", "freq", "cos", "sin", "key", "value", "kv", "memory",
              "context", "lengths", "seq")  # a required argument so named is no mask, whatever it holds
POSITION_NAMES = {"token_positions", "positions", "pos", "position_ids", "input_pos", "pos_ids", "positions_ids",
                  "token_pos", "position", "seq_pos", "position_idx", "pos_idx"}  # a rotary layer's positions
POS_SHAPES = ("(n,)", "(1, n)", "(B, n)")


@dataclass(frozen=True)
class Style:
    """One way to call forward: the input given once or as (query, key, value), positionally or by keyword, and a
    causal mask in one convention, or none."""

    data: tuple[tuple[str, bool], ...]  # (parameter name, keyword-only?) that receive x
    convention: int | None  # index in CONVENTIONS, None: no mask argument given
    shape: int = 0  # index in SHAPES
    mask: tuple[str, bool] | None = None  # (parameter name, keyword-only?); with convention None: given None
    flag: str | None = None  # a boolean forward parameter given as True (forward(x, causal_mask=True))
    positions: str | None = None  # a parameter given the token positions 0..n-1 (by keyword)
    pos_shape: int = 0  # index in POS_SHAPES
    spare: tuple[str, bool] | None = None  # a flag style's optional mask parameter, left out (forward(x, causal=True))
    off: tuple[tuple[str, object], ...] = ()  # required parameters given "no cache" by keyword: a bool switch False,
    # a state or cache object None (forward(query, key, value, mask, state, cache): state=None, cache=False)

    @property
    def bare(self) -> bool:
        """Gives forward no mask and no flag (the token positions, if any, are not a mask)."""
        return self.convention is None and self.flag is None

    def describe(self) -> str:
        inputs = ", ".join(f"{name}=x" if kw else "x" for name, kw in self.data)
        inputs += "".join(f", {name}={value!r}" for name, value in self.off)
        if self.positions is not None:
            inputs += f", {self.positions}=arange(n) {POS_SHAPES[self.pos_shape]}"
        if self.flag is not None:
            return f"forward({inputs}, {self.flag}=True)"
        if self.convention is None:
            return f"forward({inputs}, {self.mask[0]}=None)" if self.mask is not None else f"forward({inputs})"
        return f"forward({inputs}, {self.mask[0]}=causal mask {SHAPES[self.shape]}, {CONVENTIONS[self.convention]})"

    def arguments(self, x: torch.Tensor, seq_first: bool = False, hide_nothing: bool = False,
                  spare_mask: int | None = None) -> tuple[tuple, dict]:
        """forward's arguments for the input x (B, n, d); `seq_first`: the data given as (n, B, d), for a layer
        that reads its input sequence first (the mask and positions are the same: they are about the n tokens);
        `hide_nothing`: the mask in the same convention and shape, hiding no position (as a padding mask without
        padding does), so that a layer's own mask shows alone (checks.causal_leakage); `spare_mask`: a flag style
        also given its optional mask, hiding no position, in convention and shape `divmod(spare_mask, len(SHAPES))`
        (as a caller with a padding mask without padding passes both: checks.causal_leakage)."""
        data = sequence_first_input(x) if seq_first else x
        args = tuple(data for _, kw in self.data if not kw)
        kwargs = {name: data for name, kw in self.data if kw}
        kwargs.update(self.off)
        if self.convention is None and self.mask is not None:
            kwargs[self.mask[0]] = None  # a required mask parameter given None: the layer's own default
        elif self.convention is not None:
            kwargs[self.mask[0]] = causal_mask(x.shape[1], self.convention, self.shape, x.device, x.dtype, x.shape[0],
                                               hide_nothing)
        if self.flag is not None:
            kwargs[self.flag] = True
            if self.spare is not None and spare_mask is not None:
                convention, shape = divmod(spare_mask, len(SHAPES))
                kwargs[self.spare[0]] = causal_mask(x.shape[1], convention, shape, x.device, x.dtype, x.shape[0],
                                                    hide_nothing=True)
        if self.positions is not None:  # only the layout asked for: each operation shows in a recorded forward
            shape = [(x.shape[1],), (1, x.shape[1]), (x.shape[0], x.shape[1])][self.pos_shape]
            pos = torch.arange(x.shape[1], device=x.device)
            kwargs[self.positions] = pos if self.pos_shape == 0 else pos.expand(shape)
        return args, kwargs


def causal_mask(n: int, convention: int, shape: int, device, dtype, batch: int = 1,
                hide_nothing: bool = False) -> torch.Tensor:
    """The causal mask in one convention and shape; with `hide_nothing`, the same convention hiding no position."""
    future = torch.ones(n, n, dtype=torch.bool, device=device).triu(1)
    if hide_nothing:
        future.zero_()
    mask = [future, ~future, torch.zeros(n, n, dtype=dtype, device=device).masked_fill(future, float("-inf")),
            (~future).to(dtype)][convention]
    if SHAPES[shape] == "(B, n, n)":
        return mask.expand(batch, n, n).clone()
    return mask.reshape((1,) * shape + (n, n))


@dataclass(frozen=True)
class Way:
    """A call style as one index picks it (`Calling.pick`): the style, and what mha-check does around the call."""

    style: Style
    seq_first: bool = False  # x given as (n, B, d), the output read back as (B, n, d)
    norms_off: bool = False  # the layer's normalisations (harness.child.norms) return their input during the call
    residual: bool = False  # the input taken away from the output (a sublayer's x + attention(...)), with norms_off


FAMILIES = 4  # the plain call, sequence first, the norms switched off, and those with the residual taken away too


@dataclass
class Calling:
    """The styles, each offered four times: index i < len(styles) gives forward x as (B, n, d); len(styles) + i the
    same call with x as (n, B, d), sequence first, and the output read back as (B, n, d) (nn.MultiheadAttention's
    batch_first=False, labml's and open_clip's layers); 2 * len(styles) + i the plain call with the layer's
    normalisations switched off (harness.child.norms: a pre-norm inside the layer), and 3 * len(styles) + i that
    with the input taken away from the output too (a whole sublayer, x + attention(LayerNorm(x)), or a post-LN
    LayerNorm(x + attention(x))).  The trusted side tries the others only where the plain call proves nothing and
    the layer shows it reads its input so (or keeps a normalisation), and uses one only once the reference, or a
    known mistake, reproduces its output."""
    styles: list[Style]
    problem: str = ""  # why forward cannot be driven (then `styles` is empty)

    def pick(self, index: int) -> Way | None:
        """The way a call style index calls forward, or None when there is no such style."""
        count = len(self.styles)
        if count == 0 or not 0 <= index < FAMILIES * count:
            return None
        family, i = divmod(index, count)
        return Way(self.styles[i], seq_first=family == 1, norms_off=family >= 2, residual=family == 3)


def sequence_first_input(x: torch.Tensor) -> torch.Tensor:
    """x (B, n, d) given sequence first, (n, B, d).  (A function of its own: a trace names it by it.)"""
    return x.transpose(0, 1)


def seq_first_output(y: torch.Tensor) -> torch.Tensor:
    """A sequence-first layer's output (n, B, ...) read back as (B, n, ...)."""
    return y.transpose(0, 1) if y.dim() >= 2 else y


def residual_removed(y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """A sublayer's output without the input it adds back (x + attention(...)): y - x.  (A function of its own: a
    trace names it by it.)"""
    return y - x


def styles_for(module: torch.nn.Module) -> Calling:
    """The ways mha-check can call `module`'s forward, the plain ones first."""
    call = module.__call__ if type(module).__call__ is not torch.nn.Module.__call__ else module.forward
    try:
        params = list(inspect.signature(call).parameters.values())
    except (TypeError, ValueError):
        return Calling([Style((("x", False),), None)])
    named = [p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    flags = [p for p in named if p.default is False and any(w in p.name.lower() for w in FLAG_WORDS)]
    mask = next((p for p in named if _is_mask_name(p.name) and p not in flags), None)
    pos = next((p for p in named if p.name.lower() in POSITION_NAMES and p is not mask and p is not named[0]
                and (p.default is p.empty or p.default is None)), None)  # the token positions: given 0..n-1
    required = [p for p in named if p.default is p.empty and p is not mask and p is not pos]
    if not required:
        first = next((p for p in named if p is not mask and p.kind != p.KEYWORD_ONLY), None)
        if first is None and not any(p.kind == p.VAR_POSITIONAL for p in params):
            return Calling([], "forward takes no input argument")
        required = [first] if first is not None else []
    first3 = [p.name.lower() for p in required[:3]]  # (query, key, value) in any order: OpenNMT's (key, value, query)
    qkv = len(required) >= 3 and any(_role_word(n) in KEY_NAMES for n in first3) and any(
        _role_word(n) in VALUE_NAMES for n in first3)
    paired = not qkv and len(required) >= 2 and _role_word(required[1].name.lower()) in KV_INPUT_NAMES  # (queries,
    # keys and values): forward(X_Q, X_KV), X_KV = X_Q in self-attention (transformer-components-michaelkosmider)
    inputs = required[:3] if qkv else required[:2] if paired else required[:1]
    off = tuple((p.name, _no_cache(p)) for p in required if p not in inputs and _no_cache(p) is not NOTHING)
    off = off if any(value is False for _, value in off) else ()  # only beside a switch that turns the cache off
    needed = [p.name for p in required if p not in inputs and p.name not in dict(off)]
    if needed:
        tables = [n for n in needed if _is_rotary_table(n)]
        why = (f" ({', '.join(tables)}: rotary tables in a layout of your own, which mha-check cannot make up)"
               if tables else "")
        maybe_mask = mask is None and len(needed) == 1 and not tables and not any(
            word in needed[0].lower() for word in NOT_A_MASK)  # a student trial: a mask named `allowed`
        named = (f"; if {needed[0]} is the causal mask, call it `mask` (or any name with \"mask\" in it, "
                 "attn_mask, causal_mask) and mha-check passes one in each usual form; else" if maybe_mask else ";")
        return Calling([], f"forward needs {', '.join(needed)} besides the input"
                           + (" and a mask" if mask is not None else "") + why
                           + ": mha-check cannot supply them" + named + " check a factory that wraps your class, "
                             "e.g. `def make(d, heads, context_length): ...` returning a module whose forward takes x"
                           + (" and builds the tables itself (positions 0..n-1)" if tables else ""))
    data = tuple((p.name, p.kind == p.KEYWORD_ONLY) for p in inputs) or (("x", False),)
    if off:
        return replace_all(_with_positions(_styles(data, mask, flags), pos), off)
    return _with_positions(_styles(data, mask, flags), pos)


def _styles(data, mask, flags) -> Calling:
    """The styles for the data parameters `data`, the mask parameter `mask` (or None) and the forward flags."""
    if mask is None:
        flagged = [Style(data, None, flag=p.name) for p in flags]
        return Calling([Style(data, None)] + flagged)
    where = (mask.name, mask.kind == mask.KEYWORD_ONLY)
    flagged = [Style(data, None, flag=p.name, spare=where if mask.default is not mask.empty else None) for p in flags]
    last = SHAPES.index("(B, n, n)")  # tried last: a layer that takes a shared mask proves its style first, as before
    with_mask = ([Style(data, c, s, where) for c in range(len(CONVENTIONS)) for s in range(len(SHAPES)) if s != last]
                 + [Style(data, c, last, where) for c in range(len(CONVENTIONS))])
    if mask.default is mask.empty:  # required, yet None may be its "build the causal mask yourself" (Autoformer's
        # FullAttention wants an object with a .mask, not a tensor): offered last, used only once the proof holds
        return Calling(flagged + with_mask + [Style(data, None, mask=where)])
    return Calling([Style(data, None)] + flagged + with_mask)


NOTHING = object()  # _no_cache: a parameter that is no cache switch or state
NO_CACHE_WORDS = {"cache", "state", "past", "incr", "present"}  # a state carried between calls (its words)


def _no_cache(p: inspect.Parameter):
    """What a required forward parameter beside the data gets for a call that starts a new sequence and keeps
    nothing: False for a switch (annotated bool: `cache: bool`), None for a state or cache object (`state`,
    `layer_past`, `incr_state`); NOTHING for any other parameter.  Used only where such a switch is among the required
    parameters (a required cache object alone is still one mha-check cannot make): the call with the switch off is the
    layer without its cache, as its callers make it (dreamgonfly's transformer-pytorch: forward(query, key, value,
    mask, state, cache), state read only when cache is True, tests/realzoo/dreamgonfly_mha_state_cache_positional_
    masked_true.py); a layer that needs more raises, and that style is not used."""
    words = set(p.name.lower().split("_"))
    if not words & NO_CACHE_WORDS or p.kind == p.POSITIONAL_ONLY:
        return NOTHING
    return False if p.annotation in (bool, "bool") else None


def replace_all(calling: Calling, off: tuple) -> Calling:
    """`calling` with every style also giving the no-cache arguments `off`."""
    return Calling([replace(s, off=off) for s in calling.styles], calling.problem)


ROLE_PREFIXES = ("x_", "input_")  # tfs-mt's forward(x_query, x_key, x_value, attention_mask)
ROLE_SUFFIXES = ("_states", "_input", "_tensor")  # HF's key_states, value_states


def _role_word(name: str) -> str:
    """A forward parameter's name without the affixes that only say it is an input: `x_key`, `key_states` -> `key`
    (only one prefix and one suffix come off; a name that merely contains a role word, `monkey`, stays itself)."""
    name = name.lower()
    name = next((name[len(p):] for p in ROLE_PREFIXES if name.startswith(p) and len(name) > len(p)), name)
    return next((name[:-len(s)] for s in ROLE_SUFFIXES if name.endswith(s) and len(name) > len(s)), name)


def _with_positions(calling: Calling, pos) -> Calling:
    """Every style once per layout of the positions, when forward takes them; when they are optional (None: the
    layer makes its own, or needs them after all), the styles without them come first."""
    if pos is None:
        return calling
    given = [replace(s, positions=pos.name, pos_shape=i) for i in range(len(POS_SHAPES)) for s in calling.styles]
    return Calling((calling.styles if pos.default is not pos.empty else []) + given)


ROTARY_TABLES = ("cos", "sin", "freqs", "freq", "cis", "rope", "rotary", "position_embeddings", "pos_emb")


def _is_rotary_table(name: str) -> bool:
    """A rotary embedding's precomputed table passed to forward (cos, sin, freqs_cis, rope_cache,
    position_embeddings)."""
    lower = name.lower()
    return any(lower == w or lower.startswith(w + "_") or lower.endswith("_" + w) or w in lower.split("_")
               for w in ROTARY_TABLES) or lower == "position_embeddings"


def _is_mask_name(name: str) -> bool:
    """A causal mask's parameter: the usual names, or any with "mask" in it (future_mask, look_ahead_mask) except a
    padding mask, which says which keys are padding, not which are in the future: key_padding_mask, pad_mask, and a
    mask named for the keys (FastNLP's `forward(query, key, value, key_mask=None, attn_mask=None)`: its [batch, seq]
    key_mask had been taken for the causal mask, attn_mask never tried, and a correct layer named no-mask)."""
    lower = name.lower()
    return lower in MASK_NAMES or ("mask" in lower and "pad" not in lower and not lower.startswith(("key", "src_key")))
