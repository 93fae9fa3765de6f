"""Constructor parameter names read by their words, for the names no alias table lists.

A student's class speaks its own vocabulary: `input_dimension`, `number_of_heads`, `embeddings_size`, `head`,
`maxSeqLen`.  Splitting a name into its tokens (on `_`, digits and camelCase) and reading the tokens tells what it
carries: a width (dim, size, emb, model, hidden ...), with a direction (input / output), a number of heads (head,
heads), a head width (head + a width word: head_dim, dim_per_head), a context length (block, context, window, seq,
len, max, maximum ...), a dropout rate (drop, pdrop, p) or a bias flag (bias; qkv_bias for Q/K/V only).

The rule that keeps this safe: every token of the name must be a word mha-check knows.  A name with one word it does
not know (`rope_theta`, `max_batch_size`, `n_local_heads`, `vocab_size`, `layer_idx`, `d_ff`) means something else,
and is left alone: better a parameter at its default, or an --arg asked for, than a value given in the wrong place.
"""
from __future__ import annotations

import re

WIDTH = frozenset({"dim", "dims", "dimension", "dimensions", "size", "width", "emb", "embd", "embed", "embedding",
                   "embeddings", "model", "hidden", "hid", "hiddens", "features", "channels", "units", "d"})
AMBIGUOUS_WIDTH = frozenset({"size", "d"})  # also a length's word: context_size, block_size, window_size
HEAD = frozenset({"head", "heads", "nhead", "nheads"})
CONTEXT = frozenset({"block", "context", "ctx", "window", "seq", "sequence", "len", "length", "maxlen", "positions",
                     "tokens", "max", "maximum"})
DROP = frozenset({"drop", "dropout", "pdrop", "dropouts"})
BIAS = frozenset({"bias", "biases"})
IN = frozenset({"in", "input", "inp", "inputs"})
OUT = frozenset({"out", "output", "outputs"})
QKV = frozenset({"q", "k", "v", "qk", "qkv", "kv", "query", "key", "value", "queries", "keys", "values"})
FILLER = frozenset({"n", "num", "number", "of", "nb", "count", "total", "use", "is", "has", "with", "add", "enable",
                    "attn", "attention", "att", "self", "mha", "per", "the", "a", "my", "p", "rate", "prob",
                    "probability", "all"})
KNOWN = WIDTH | HEAD | CONTEXT | DROP | BIAS | IN | OUT | QKV | FILLER
# torch.nn.MultiheadAttention's (and fairseq's) add_bias_kv: a learned bias appended to the key and value SEQUENCES (one
# more attended position), not the Q/K/V projections' biases; read as qkv_bias, SpeechBrain's wrapper was built with
# it on for a layer with Q/K/V biases and failed reference-match on the extra position
SEQUENCE_BIAS = (["add", "bias", "kv"],)
# names of one word that say too little alone
ALONE_UNCLEAR = frozenset({"model", "max", "maximum", "len", "length", "out", "a", "the", "n", "k", "v", "q"})


def tokens(name: str) -> list[str]:
    """'numberOfHeads' -> ['number', 'of', 'heads']; 'n_embd' -> ['n', 'embd']; 'dModel' -> ['d', 'model']."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return [t.lower() for t in re.split(r"[^A-Za-z]+", spaced) if t]


def key_by_tokens(name: str) -> str | None:
    """The configuration key `name` carries by its words (see the module docstring), or None."""
    toks = tokens(name)
    words = set(toks)
    if not toks or not words <= KNOWN or (len(toks) == 1 and toks[0] in ALONE_UNCLEAR) or toks in SEQUENCE_BIAS:
        return None
    if words & BIAS:
        if words & QKV:
            return "qkv_bias"
        return "all_bias" if words - BIAS <= FILLER else None
    if words & DROP or (words & {"p"} and words - {"p"} <= {"attn", "attention", "att"}):
        return "dropout"
    if words & HEAD:
        if "kv" in words or {"key", "value"} <= words:
            return "kv_heads"
        if words & (WIDTH | {"per"}):
            return "head_width"
        return "heads"
    if words & CONTEXT:
        if words & (WIDTH - AMBIGUOUS_WIDTH):  # dim_context, context_dim: the width of a context attended to (a
            return None  # cross-attention memory), not its length; a size word stays a length (context_size)
        return "context_length"
    if words & QKV:  # key_dim, qk_dim: a per-head width in some libraries, the full width in others
        return None
    direction = ("d_in" if words & IN else None, "d_out" if words & OUT else None)
    if all(direction) or words & {"attention", "attn", "att"}:  # attention_dim: the full width in some code, the
        return None  # head width in other (FuxiCTR's), so neither
    if words & WIDTH or any(direction):
        return direction[0] or direction[1] or "width"
    return None
