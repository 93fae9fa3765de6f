"""kv-cache: with the layer's KV cache, a prefix run followed by token-by-token decoding equals the full forward.

A cache changes nothing a plain forward can see: the keys and values of the tokens already seen are kept, and each
new token attends to them.  Its classic bugs (a mask not offset by the cached tokens, keys appended on the wrong
axis, a cache or position pointer not reset between sequences, a pointer not advanced) only show while generating.
So the child finds how the cache is driven (harness.child.cache: `use_cache=True` with `reset_cache()`, a cache
argument handed back and forth, or a `start_pos`), decodes two sequences (a prefix, then one token at a time, with
a reset between them), then the first again with a chunk of two new tokens after the prefix (chunked prefill,
speculative decoding: a mask that is right for one new token, whose row sees every cached key, may not be for two,
where the first must not see the second), and the outputs are compared with the numpy reference computed here on
the weights and inputs sent, never with the child's own full forward (which a child replaying its answers could
copy).  The chunk is sent only where forward is called with its input alone: a causal mask mha-check gives a call
is the chunk's own (n, n) one, which fits a prompt and a single token but not two tokens after cached ones.

The way of driving the cache is proved by reproduction, never assumed: the first call, on an empty cache, must give
the reference's outputs for the prefix, and a cache handed back by forward must hold every token fed so far.  A
layer without a cache passes with "does not apply"; a cache mha-check cannot drive is *cannot tell*, with what helps.

Where nothing can be compared with the reference (no reading of the weights: a residual scaled inside the layer,
realzoo17's qsa-attention), a leak within the chunk is still evidence whatever the weights (`_chunk_leak`): the
chunk's first token moving with its second, both fed in one call after a cached prefix, fails.  Never a pass: the
layer agreeing with itself is no comparison with the reference.  Nor is one token per call (`_decode_disagrees`):
token t decoded after a cache of tokens 0..t-1 sees what the layer's own forward sees on tokens 0..t alone, so its
output must be that forward's last one, whatever the weights and whether or not the layer is causal; a difference
fails (realzoo19's transformer-toolkit MLAttention: the cached keys rotated at the newest token's position).
"""
import numpy as np

from checks import Status, cannot_tell, check, does_not_apply, failed, passed, skipped
from checks.output_shape import output_shape
from harness.engine.compare import compare
from harness.wire import messages as m
from harness.wire.errors import CannotDrive, HarnessFailure, TargetFailure, WorkerDied
from harness.wire.config import Config
from reference import grouped, numpy_ref, variants
from reference.rotary import rotate, with_rope

HELP = ("check a factory (`def make(d, heads, context_length): ...`) that returns a module whose forward(x, "
        "use_cache=True) appends to the cache and whose reset_cache() empties it")
NO_CACHE = "does not apply: the layer shows no KV cache (its forward takes no use_cache, cache or start_pos argument)"
FRESH = "kv-cache"  # a module of the check's own: what decoding leaves in the cache (keys, values, a position past
# the tokens fed) is never the state another check's plain forward starts from (trial8: a layer whose mask rows are
# cut from its position counter in every call, right from an empty cache, failed mask-buffer, reference-match,
# view-order and parameters-used with a shape error, since they ran the module kv-cache had left at position 5)
APPEND_ERROR = "must match except in dimension"  # torch.cat's message when the shapes differ off the appended axis


def _plans(ctx) -> list[tuple[Config, int, int]]:
    """(configuration, prefix of the first sequence, prefix of the second): two configurations of the required
    ones (the 64-token one would decode 60 tokens one call at a time for nothing new)."""
    first, second = ctx.required_configs()[:2]
    return [(first, 2, 3), (second, 1, 2)]


def _chunks(n: int, prefix: int) -> list[int]:
    return [prefix] + [1] * (n - prefix)


CHUNK = 2  # new tokens in the one call after the prefix that feeds several: the first must not see the second


def _chunked(n: int, prefix: int) -> list[int] | None:
    """The prefix, then CHUNK new tokens in one call, then one per call (None when the sequence is too short)."""
    return [prefix, CHUNK] + [1] * (n - prefix - CHUNK) if n - prefix >= CHUNK else None


def _alone(inst) -> bool:
    """forward is called with its input alone (no mask, no flag): a chunk of several new tokens can be fed."""
    bare = inst.info.call_bare  # (a style index past them, x sequence first: not driven through the cache)
    return 0 <= inst.style < len(bare) and bare[inst.style]


def _chunk_unmasked(x: np.ndarray, heads: int, w, rope, prefix: int) -> np.ndarray:
    """What the chunk's first token gives when it sees the chunk's second token too (nothing of the chunk masked):
    attention over every key up to prefix + CHUNK - 1."""
    return variants.forward(x[:, :prefix + CHUNK], heads, w, **with_rope({"mask": "none"}, rope))[:, prefix]


def _first_key_only(x: np.ndarray, w: numpy_ref.Weights) -> np.ndarray:
    """What every query gives when the mask lets it see the first token only: that token's value, projected out."""
    v0 = x[:, 0] @ w.wv.T + w.bias("bv")
    return v0 @ w.wo.T + (w.bo if w.bo is not None else 0.0)


def _rotated_from_zero(x: np.ndarray, heads: int, w: numpy_ref.Weights, rope, t: int) -> np.ndarray:
    """What token t gives when its query and key are rotated as position 0 (a call's tokens turned from 0, not from
    the cached tokens' count), the cached keys 0..t-1 keeping their own positions."""
    B, d = x.shape[0], w.d_out
    dh, kv = d // heads, w.kv_heads(heads)
    split = lambda a, h: a.reshape(B, -1, h, dh).transpose(0, 2, 1, 3)  # (B, h, tokens, dh)
    q = split(x[:, t:t + 1] @ w.wq.T + w.bias("bq"), heads)
    k, v = (split(x[:, :t + 1] @ m.T + w.bias(b), kv) for m, b in ((w.wk, "bk"), (w.wv, "bv")))
    q = rotate(q, rope.convention, rope.theta, positions=np.zeros(1))
    k = rotate(k, rope.convention, rope.theta, positions=np.r_[np.arange(t), 0.0])
    k, v = grouped.expand(k, heads), grouped.expand(v, heads)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(dh)  # (B, H, 1, t + 1): every key is at or before token t
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    ctx = ((p / p.sum(axis=-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(B, d)
    return ctx @ w.wo.T + w.bias("bo")


def _decoded_with(x: np.ndarray, heads: int, w: numpy_ref.Weights, rope, t: int, key_turns: np.ndarray,
                  empty: int = 0) -> np.ndarray:
    """What token t, decoded after t cached tokens, gives when its cached keys are rotated by `key_turns` positions
    (its own at t, its query at t) and `empty` slots of zeros (keys and values) follow the keys: a cache
    preallocated with zeros and read whole, where no mask hides the slots not yet filled (fixes28)."""
    B, d = x.shape[0], w.d_out
    dh, kv = d // heads, w.kv_heads(heads)
    split = lambda a, h: a.reshape(B, -1, h, dh).transpose(0, 2, 1, 3)  # (B, h, tokens, dh)
    q = split(x[:, t:t + 1] @ w.wq.T + w.bias("bq"), heads)
    k, v = (split(x[:, :t + 1] @ m.T + w.bias(b), kv) for m, b in ((w.wk, "bk"), (w.wv, "bv")))
    if rope is not None:
        q = rotate(q, rope.convention, rope.theta, positions=np.array([float(t)]))
        k = rotate(k, rope.convention, rope.theta, positions=np.asarray(key_turns, float))
    if empty:
        zeros = np.zeros(k.shape[:2] + (empty, dh))
        k, v = np.concatenate([k, zeros], axis=2), np.concatenate([v, zeros], axis=2)
    k, v = grouped.expand(k, heads), grouped.expand(v, heads)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(dh)  # (B, H, 1, keys): no mask, as the decoded token's call had none
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    ctx = ((p / p.sum(axis=-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(B, d)
    return ctx @ w.wo.T + w.bias("bo")


def _wrong_positions(y: np.ndarray, ref: np.ndarray) -> list[int]:
    return [t for t in range(y.shape[1]) if compare(y[:, t], ref[:, t]) is not None]


def _fits(reply: m.CacheResult, cfg: Config) -> bool:
    """The decoded outputs cover the tokens the child says it fed: every token, or those before the call that
    raised (the worker checks each call's output; this holds whatever a child sends)."""
    if reply.y is None:
        return reply.raised_at in (-1, 0) or not reply.api
    tokens = cfg.n if reply.raised_at == -1 else reply.y.shape[1] if reply.y.ndim == 3 else -1
    return reply.y.ndim == 3 and reply.y.shape[:2] == (cfg.batch, tokens) and tokens <= cfg.n


FIX_BY_KIND = {  # the check's fix speaks of ptr and reset_cache(): a layer whose cache is handed back and forth, or
    # written at start_pos, has neither (student11: a tuple cache whose keys were rotated twice was told to reset ptr)
    "argument": ("Take the number of cached tokens, past, from the cache you are handed; append the new keys and "
                 "values to it along the tokens' axis and return it. The new queries are positions past .. past + n "
                 "- 1: they take rows past .. past + n - 1 of the causal mask over all past + n keys and, with rotary "
                 "embeddings, those positions; rotate each key once, before it goes into the cache, never the cached "
                 "keys again."),
    "positions": ("Write the new keys and values at start_pos .. start_pos + n - 1 and attend over the cache up to "
                  "start_pos + n only, never its empty slots; the new queries take rows start_pos .. start_pos + n "
                  "- 1 of the causal mask and, with rotary embeddings, those positions; rotate each key once, before "
                  "it goes into the cache."),
}


def _fix(kind: str) -> str:
    """The fix for a cache driven as `kind` where no finding says more: "" for the check's own (use_cache=True,
    reset_cache(), a pointer), which speaks of ptr and reset_cache()."""
    return FIX_BY_KIND.get(kind, "")


@check(
    id="kv-cache",
    claim="with a KV cache, a prefix then one token at a time gives the full forward's output at every position, "
          "and so do a second sequence after the cache is reset and a call of two new tokens after the prefix",
    explanation="""Generation feeds the prompt once, then one token per call, with the keys and values of the
    tokens seen kept in a cache. Every decoded position must equal what the full forward gives there: the new
    query sits at position ptr (the number of cached tokens), so it takes row ptr of the causal mask and attends to
    every cached key; the cache grows along the tokens' axis; and reset_cache() empties the keys, the values and the
    position before the next sequence. Several new tokens in one call (a chunk after the prompt) take rows
    ptr .. ptr + n - 1: each sees the cached keys and the chunk's tokens up to itself, not those after it.
    mha-check finds how your layer's cache is driven (use_cache=True and reset_cache(), a cache argument that
    forward returns, or start_pos) and compares the decoded outputs with the reference on the same weights.""",
    fix="""Append the new keys and values along the tokens' axis; mask with rows ptr .. ptr + n - 1 of the causal
    mask (self.mask[ptr:ptr + n, :n_keys]) and then advance ptr by n; in reset_cache() set the cached keys and
    values to None and ptr back to 0.""",
    needs=(output_shape,),  # not reference-match: a layer without a cache says so whatever its other mistakes
    example="""CausalMHA(6, 2, 7) with a cache, x: (2, 5, 6): forward(x[:, :2], use_cache=True), then x[:, 2:3],
    x[:, 3:4], x[:, 4:5] one call each: joined along the tokens, (2, 5, 8) must equal forward(x) (relative 1e-5)
    token 2 alone: its query is position 2, the cache holds keys 0, 1, 2
      right: mask row 2 -> [F, F, F]: it attends to all three
      mask not offset: row 0 -> [F, T, T]: it sees token 0 only
    then reset_cache() and a second sequence of 5 (prefix 3): must equal its own full forward
    then the first again: x[:, :2], x[:, 2:4] in one call, x[:, 4:5]: token 2 must not see token 3 (mask rows 2, 3)""",
)
def kv_cache(ctx):
    outcome = _kv_cache(ctx)
    if outcome.status == Status.CANNOT_TELL:  # no comparison with the reference: a leak among a chunk's tokens needs
        # none (realzoo17's qsa: x + 0.9 * attention, which no reading of the weights reproduces, and a chunk of two
        # new tokens attended with no mask ended with no failing check at all)
        return _chunk_leak(ctx) or _decode_disagrees(ctx) or outcome
    return outcome


def _kv_cache(ctx):
    if not ctx.mapping.certain:  # without weights nothing can be compared; whether there is a cache can be asked
        inst = ctx.build(ctx.base, fresh=FRESH)
        x = ctx.input(ctx.base, "kv-cache-a")
        (reply,) = inst.calls([m.CacheRun(inst.handle, x, _chunks(ctx.base.n, 2), True, inst.style)])
        if not reply.api and not reply.problem:
            return does_not_apply(NO_CACHE)
        return cannot_tell("mha-check could not tell with certainty which of your parameters are W_q, W_k, W_v and "
                           f"W_o ({ctx.mapping.problem}), so it does not judge your KV cache on a guess",
                           help="--map ROLE=NAME (see reference-match)")
    groups, kept = [], []
    for cfg, prefix, prefix2 in _plans(ctx):
        inst = ctx.build(cfg, fresh=FRESH)
        w = ctx.weights_for(inst, "kv-cache")
        ctx.transplant(inst, w)
        xa, xb = ctx.input(cfg, "kv-cache-a"), ctx.input(cfg, "kv-cache-b")
        chunked = _chunked(cfg.n, prefix) if _alone(inst) else None
        groups.append((inst, [inst.forward_request(xa),
                              m.CacheRun(inst.handle, xa, _chunks(cfg.n, prefix), True, inst.style),
                              m.CacheRun(inst.handle, xb, _chunks(cfg.n, prefix2), True, inst.style)]
                       + ([m.CacheRun(inst.handle, xa, chunked, True, inst.style)] if chunked else [])))
        kept.append((cfg, prefix, prefix2, w, xa, xb, ctx.rope))  # a rotary layer: decoded against its rotary form
    tried = []
    for (plain, first, second, *chunk), entry in zip(ctx.frame_or_raise(groups), kept):
        verdict = _judge(entry, plain, first, second) or (_judge_chunk(entry, first, chunk[0]) if chunk else None)
        if verdict is not None:
            return verdict
        tried.append(bool(chunk))
    chunks = (f", and a chunk of {CHUNK} new tokens in one call after the prefix is right too" if all(tried) else
              "" if any(tried) else
              f" (a chunk of {CHUNK} new tokens in one call was not tried: forward is called with a mask or flag "
              "of mha-check's, which fits only one new token after cached ones)")
    return passed("a prefix, then one token per call, equals the reference at every position, and so does a second "
                  f"sequence after the reset, for every configuration tried (driven as {first.api}){chunks}")


def _judge(entry, plain: m.Output, first: m.CacheResult, second: m.CacheResult):
    """None when this configuration's two sequences decode right; else the outcome."""
    cfg, prefix, prefix2, w, xa, xb, rope = entry
    if not first.api:
        if first.problem:
            return cannot_tell(first.problem, help=HELP)
        return does_not_apply(NO_CACHE)
    if first.problem:
        return cannot_tell(f"found a cache, driven as {first.api}, but {first.problem}", help=HELP)
    ref_a = numpy_ref.forward(xa, cfg.heads, w, rope=rope)
    if compare(plain.y, ref_a) is not None:  # wrong without its cache: reference-match's to report
        return skipped("skipped: the layer's output differs from the reference without its cache (reference-match "
                       "reports it), so decoding with the cache is not judged")
    if not (_fits(first, cfg) and _fits(second, cfg)):
        return cannot_tell(f"{first.api}: the child's answer does not have the shape of the decoded outputs "
                           f"({cfg.batch}, tokens fed, d_out)", help=HELP)
    if first.raised_at == 0:
        return cannot_tell(f"{first.api} on an empty cache raised: {first.raised}; mha-check cannot tell whether it "
                           "drives your cache the way your layer expects", help=HELP)
    start = first.y[:, :prefix] if first.y is not None else None
    if start is not None and prefix > 1 and compare(start, ref_a[:, :prefix]) is not None and compare(
            start, variants.forward(xa[:, :prefix], cfg.heads, w, **with_rope({"mask": "none"}, rope))) is None:
        return failed(f"{cfg.describe()}, prefix of {prefix} with {first.api}: on an empty cache, the prefix's tokens "
                      "attend to every token of the prefix, later ones included (its output equals attention with no "
                      "causal mask): with the cache on, the causal mask is not applied, or its rows are cut past "
                      "the tokens of this call", config=cfg, observed="the prefix unmasked",
                      expected="each token attending to itself and the tokens before it", finding="prefix unmasked",
                      fix=("with the cache on, the new queries take rows start .. start + n - 1 of the causal mask, "
                           "where start is the number of tokens cached before this call: read it before the new "
                           "keys are appended (0 on an empty cache), and slice the mask's columns to every key"))
    if start is None or compare(start, ref_a[:, :prefix]) is not None:
        why = (compare(start, ref_a[:, :prefix]).describe(("cached", "reference")) if start is not None
               else "no output")
        return cannot_tell(f"{first.api}: the first call, on an empty cache, does not reproduce the reference for "
                           f"the prefix ({why}), so mha-check does not know how your layer wants its cache driven",
                           help=HELP)
    if first.kind == "argument" and not first.grows:
        return does_not_apply(f"does not apply: forward takes a cache argument ({first.api}), but what it returns "
                              "does not hold the tokens fed so far: the layer keeps no KV cache of its own")
    where = f"{cfg.describe()}, prefix of {prefix} then one token per call, with {first.api}"
    if first.raised_at > 0:
        position = prefix + first.raised_at - 1
        appended = APPEND_ERROR in first.raised
        return failed(f"{where}: decoding token {position} raised: {first.raised}"
                      + ("; torch.cat could not append the new keys or values to the cache: they differ from it on "
                         "an axis other than the one appended along, so the cache is appended on the wrong axis"
                         if appended else ""), config=cfg, observed="an exception while decoding",
                      expected="the full forward's output", finding="append shapes" if appended else "decode raised",
                      fix="" if appended else _fix(first.kind))
    wrong = _wrong_positions(first.y, ref_a)
    if wrong:
        t = wrong[0]
        mismatch = compare(first.y[:, t], ref_a[:, t])
        said = (f"{where}: decoded token {t} differs from the full forward's: "
                + mismatch.describe(("cached", "reference")))
        if t == prefix and compare(first.y[:, t], _first_key_only(xa, w)) is None:
            return failed(said + f"; it equals token 0's value alone: the new query at position {t} was masked "
                          "with row 0 of the causal mask, not row " + str(t) + " (the mask is not offset by the "
                          "cached tokens)", config=cfg, observed="attends to token 0 only",
                          expected="attends to tokens 0.." + str(t), finding="mask not offset")
        if t == prefix and rope is not None and compare(first.y[:, t], _rotated_from_zero(xa, cfg.heads, w, rope,
                                                                                         t)) is None:
            return failed(said + f"; it equals token {t}'s output with its query and key rotated as position 0: the "
                          "rotary positions of a call start from 0, not from the number of cached tokens (its keys "
                          "go into the cache at the wrong positions too)", config=cfg,
                          observed=f"token {t} rotated as position 0", expected=f"token {t} rotated as position {t}",
                          finding="rotary positions from 0")
        if t == prefix and rope is not None and compare(first.y[:, t], _decoded_with(
                xa, cfg.heads, w, rope, t, np.r_[2.0 * np.arange(t), t])) is None:
            return failed(said + f"; it equals token {t}'s output with each cached key rotated twice (key j turned "
                          "by the angle of position 2j, its own key once): the keys went into the cache rotated, "
                          "and were rotated again with the new ones", config=cfg,
                          observed="cached keys rotated twice", expected="each key rotated once, at its position",
                          finding="cached keys rotated twice",
                          fix=_fix(first.kind) or (
                              "Rotate each key once: rotate the new keys at their positions (from the number of "
                              "cached tokens on) before they join the cache, and never rotate the keys read back "
                              "from it (or cache the keys unrotated and rotate them all at every call, never both)."))
        empty = cfg.context_length - t - 1
        if t == prefix and empty > 0 and compare(first.y[:, t], _decoded_with(
                xa, cfg.heads, w, rope, t, np.arange(t + 1.0), empty)) is None:
            return failed(said + f"; it equals token {t}'s output with {empty} more keys and values of zeros "
                          f"attended: the {cfg.context_length} slots of a cache preallocated for context_length "
                          f"tokens are read whole, the {empty} not filled yet too, and nothing hides them",
                          config=cfg, observed=f"{empty} empty cache slots attended",
                          expected=f"the {t + 1} tokens fed attended, no more", finding="empty cache slots read",
                          fix=_fix(first.kind) or (
                              "Read the filled part of the cache only: keys = self.cache_k[:, :, :ptr + n] (and the "
                              "values alike), where ptr + n is the number of tokens fed so far, or mask the slots "
                              "after it."))
        if t == prefix:
            return failed(said + "; the first decoded token is already wrong", config=cfg,
                          observed=f"positions {wrong} wrong", expected="every position right", finding="decode wrong",
                          fix=_fix(first.kind))
        return failed(said + f"; the prefix and the first decoded token(s) are right, from token {t} on they are not: "
                      "what the cache or its position counts stops following the tokens fed (a position pointer "
                      "not advanced by the tokens of each call)", config=cfg, observed=f"positions {wrong} wrong",
                      expected="every position right", finding="decode drifts", fix=_fix(first.kind))
    ref_b = numpy_ref.forward(xb, cfg.heads, w, rope=rope)
    if second.raised or second.y is None or _wrong_positions(second.y, ref_b):
        what = (f"raised: {second.raised}" if second.raised else
                f"token {_wrong_positions(second.y, ref_b)[0]} differs from its full forward: "
                + compare(second.y, ref_b).describe(("cached", "reference")) if second.y is not None else "no output")
        reset = "after the reset" if "between sequences" in first.api else "starting from an empty cache"
        return failed(f"{cfg.describe()}: the first sequence decodes right, but a second one {reset} (prefix of "
                      f"{prefix2}, then one token per call) {what}: the cache, or its position, still holds the first "
                      "sequence", config=cfg, observed="the second sequence wrong",
                      expected="each sequence equal to its own full forward", finding="not reset")
    return None


def _judge_chunk(entry, first: m.CacheResult, chunk: m.CacheResult):
    """None when the first sequence, fed again as the prefix, CHUNK new tokens in one call, then one per call,
    equals the reference (judged only after one token per call was right: what differs is the chunk)."""
    cfg, prefix, _, w, xa, _, rope = entry
    where = (f"{cfg.describe()}, prefix of {prefix}, then {CHUNK} new tokens in one call (then one per call), with "
             f"{first.api}")
    if chunk.raised and chunk.raised_at >= 1:  # never "append shapes": one token per call appended right
        call = f"the call with {CHUNK} new tokens" if chunk.raised_at == 1 else f"a call after the one with {CHUNK}"
        return failed(f"{where}: {call} raised: {chunk.raised}; one token per call decodes right, so what raises "
                      f"follows from a chunk of several new tokens after cached ones (its mask must be rows "
                      f"ptr .. ptr + {CHUNK - 1} of the causal mask, over every cached key)", config=cfg,
                      observed=f"an exception for {CHUNK} new tokens in one call",
                      expected="the full forward's output", finding="chunk raised")
    if chunk.raised or not _fits(chunk, cfg) or chunk.y is None:
        return cannot_tell(f"{where}: " + (f"the first call, on an empty cache, raised: {chunk.raised}" if
                                           chunk.raised else "the child's answer does not have the shape of the "
                                           "decoded outputs") + "; decoding one token per call was right", help=HELP)
    ref_a = numpy_ref.forward(xa, cfg.heads, w, rope=rope)
    wrong = _wrong_positions(chunk.y, ref_a)
    if not wrong:
        return None
    t = wrong[0]
    said = f"{where}: token {t} differs from the full forward's: " + compare(chunk.y[:, t], ref_a[:, t]).describe(
        ("cached", "reference"))
    if t == prefix and compare(chunk.y[:, t], _chunk_unmasked(xa, cfg.heads, w, rope, prefix)) is None:
        return failed(said + f"; it equals what token {t} gives when it also sees token {t + 1}: the new tokens of a "
                      "call are not masked among themselves once the cache holds tokens (one new token per call has "
                      "nothing after it to hide, which is why decoding one token at a time is right)", config=cfg,
                      observed=f"token {t} sees token {t + 1}", expected=f"token {t} sees tokens 0..{t}",
                      finding="chunk unmasked")
    return failed(said + f"; one token per call is right, so the mask (or the positions) of a call with {CHUNK} new "
                  f"tokens after cached ones is wrong: they must take rows ptr .. ptr + {CHUNK - 1} of the causal "
                  "mask", config=cfg, observed=f"positions {wrong} wrong", expected="every position right",
                  finding="chunk wrong", fix=_fix(first.kind))


LEAK = "kv-cache-leak"  # the module of the weight-free probe: its own weights, whatever any other check wrote


def _chunk_leak(ctx):
    """A failure where the first token of a chunk of CHUNK new tokens, fed in one call after a cached prefix, moves
    with the chunk's later token: evidence of a leak whatever the weights, so it needs no reading of them; None
    where there is none (or no evidence either way).  Cached decoding as the check drives it, on the module's own
    weights: the first sequence decoded twice with the chunk (its cache reset before each), once with the chunk's
    last token replaced by another.  The two runs on the same tokens must agree (the decode is repeatable and the
    reset resets), and the prefix, on an empty cache, must give the layer's own forward (the cache is driven as the
    layer expects); then the chunk's first token must give the same output in both runs, since all it may see is the
    same.  Never a pass: the layer agreeing with itself is no proof it agrees with the reference."""
    for cfg, prefix, _ in _plans(ctx):
        chunked = _chunked(cfg.n, prefix)
        if chunked is None:
            continue
        try:
            inst = ctx.build(cfg, fresh=LEAK)
            if not _alone(inst):
                return None
            xa = ctx.input(cfg, "kv-cache-a")
            later = xa.copy()
            later[:, prefix + 1:prefix + CHUNK] = ctx.input(cfg, "kv-cache-leak")[:, prefix + 1:prefix + CHUNK]
            plain, base, moved, again = inst.calls([inst.forward_request(xa),
                                                    m.CacheRun(inst.handle, xa, chunked, True, inst.style),
                                                    m.CacheRun(inst.handle, later, chunked, True, inst.style),
                                                    m.CacheRun(inst.handle, xa, chunked, True, inst.style)])
        except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied):  # no evidence: the cannot-tell stands
            return None
        if not _ran(cfg, base, moved, again):
            continue
        own = getattr(plain, "y", None)
        if own is None or own.shape != base.y.shape or compare(base.y[:, :prefix], own[:, :prefix]) is not None:
            continue  # the prefix on an empty cache is not the layer's own forward: not driven as it expects
        if compare(again.y, base.y, nan_equal=True) is not None or not np.isfinite(base.y).all():
            continue  # the same tokens decode differently: no perturbation can be read
        t = prefix
        if compare(moved.y[:, :t], base.y[:, :t], nan_equal=True) is not None:
            continue  # the prefix moved with a token fed after it: not a leak within the chunk
        mismatch = compare(moved.y[:, t], base.y[:, t])
        if mismatch is None:
            continue
        where = (f"{cfg.describe()}, prefix of {prefix}, then {CHUNK} new tokens in one call (then one per call), "
                 f"with {base.api}")
        own_too = compare(base.y[:, t], own[:, t])
        beside = ("; its cached output for token {t} also differs from the layer's own forward on the whole "
                  "sequence ({d})".format(t=t, d=own_too.describe(("cached", "own forward"))) if own_too is not None
                  else "")
        return failed(f"{where}: token {t}'s output changes when only token {t + 1}, fed in the same call after it, "
                      f"changes ({mismatch.describe(('changed', 'first'))}): the new tokens of a call are not masked "
                      "among themselves once the cache holds tokens, so the first sees the second. This needs no "
                      f"reading of your weights: with any weights, token {t} may see tokens 0..{t} only{beside}",
                      config=cfg, observed=f"token {t} sees token {t + 1}", expected=f"token {t} sees tokens 0..{t}",
                      finding="chunk unmasked", fix=_fix(base.kind), weight_free=True)
    return None


def _decode_disagrees(ctx):
    """A failure where decoding one token per call after a cached prefix gives, for token t, another output than the
    layer's own forward on tokens 0..t alone at its last position (which sees exactly the tokens the decode sees):
    evidence whatever the weights, so it needs no reading of them; None where there is none.  As `_chunk_leak`:
    the module's own weights, the decode run twice (repeatable, its cache reset before each), the prefix on an empty
    cache the layer's own forward; and the first decoded token must move with the prefix (a third decode, the prefix
    replaced), or the layer reads no cache at all and there is none to judge.  Never a pass."""
    for cfg, prefix, _ in _plans(ctx):
        if cfg.n <= prefix:
            continue
        try:
            inst = ctx.build(cfg, fresh=LEAK)
            xa = ctx.input(cfg, "kv-cache-a")
            chunks = _chunks(cfg.n, prefix)
            past = xa.copy()
            past[:, :prefix] = ctx.input(cfg, "kv-cache-leak")[:, :prefix]
            replies = inst.calls([m.CacheRun(inst.handle, xa, chunks, True, inst.style),
                                  m.CacheRun(inst.handle, xa, chunks, True, inst.style),
                                  m.CacheRun(inst.handle, past, chunks, True, inst.style)]
                                 + [inst.forward_request(xa[:, :t + 1]) for t in range(prefix - 1, cfg.n)])
        except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied):  # no evidence: the cannot-tell stands
            return None
        base, again, other, owns = replies[0], replies[1], replies[2], replies[3:]
        raised = _decode_raised(cfg, prefix, base, again, owns[0])
        if raised is not None:
            return raised
        if not _ran(cfg, base, again, other):
            continue
        if compare(other.y[:, prefix], base.y[:, prefix], nan_equal=True) is None:
            continue  # the first decoded token does not move with the prefix: it reads no cache (a forward that
            # takes positions and keeps nothing, realzoo's torchtune layer built without its KVCache), none to judge
        if any(getattr(o, "y", None) is None or o.y.shape[0] != cfg.batch for o in owns):
            continue
        if compare(again.y, base.y, nan_equal=True) is not None or not np.isfinite(base.y).all():
            continue  # the same tokens decode differently: nothing can be read
        if compare(base.y[:, :prefix], owns[0].y[:, :prefix]) is not None:
            continue  # the prefix on an empty cache is not the layer's own forward: not driven as it expects
        for t, own in zip(range(prefix, cfg.n), owns[1:]):
            mismatch = compare(base.y[:, t], own.y[:, t])
            if mismatch is None:
                continue
            where = f"{cfg.describe()}, prefix of {prefix}, then one token per call, with {base.api}"
            return failed(f"{where}: decoded with the cache, token {t} gives another output than your layer's own "
                          f"forward on tokens 0..{t} alone at its last position "
                          f"({mismatch.describe(('cached', 'own forward'))}), though both see the same tokens. This "
                          "needs no reading of your weights: with any weights, the cache must hold the keys and "
                          "values the forward would compute for the tokens seen, at their own positions",
                          config=cfg, observed=f"token {t} decoded differs from the forward on tokens 0..{t}",
                          expected=f"token {t} decoded = the forward on tokens 0..{t}, at its last position",
                          finding="decode differs from own forward", fix=_fix(base.kind), weight_free=True)
    return None


def _decode_raised(cfg, prefix: int, base: m.CacheResult, again: m.CacheResult, own: m.Output):
    """A failure where decoding raised after the prefix, on an empty cache, gave the layer's own forward (the cache
    is driven as the layer expects), the same way both times: the student's code raising whatever the weights
    (Realzoo22's trinix, an ALiBi layer no reading of the weights reproduces, had kv-cache cannot tell, though its
    decode raises at `out.reshape(bs, seq_len, -1)`; its sibling without ALiBi, read, failed for it).  None
    otherwise."""
    if not base.api or base.problem or not base.raised or base.raised_at < 1 or \
            (again.raised, again.raised_at) != (base.raised, base.raised_at):
        return None
    own_y = getattr(own, "y", None)
    if base.y is None or own_y is None or base.y.shape[:2] != (cfg.batch, prefix + base.raised_at - 1) or \
            own_y.shape[:2] != (cfg.batch, prefix) or compare(base.y[:, :prefix], own_y) is not None:
        return None
    position = prefix + base.raised_at - 1
    appended = APPEND_ERROR in base.raised
    return failed(f"{cfg.describe()}, prefix of {prefix} then one token per call, with {base.api}: decoding token "
                  f"{position} raised: {base.raised}"
                  + ("; torch.cat could not append the new keys or values to the cache: they differ from it on an "
                     "axis other than the one appended along, so the cache is appended on the wrong axis"
                     if appended else "")
                  + ". The prefix, on an empty cache, gave your layer's own forward, so the cache is driven as your "
                    "layer expects; this needs no reading of your weights", config=cfg,
                  observed="an exception while decoding", expected="the full forward's output",
                  finding="append shapes" if appended else "decode raised", fix="" if appended else _fix(base.kind),
                  weight_free=True)


def _ran(cfg, base, *others) -> bool:
    """Every cached run of the weight-free probes (`_chunk_leak`, `_decode_disagrees`) went through a cache
    mha-check found (`base.api`), raised nothing and gave a (B, n, ...) output."""
    return bool(base.api) and not any(r.problem or r.raised or r.y is None or r.y.shape[:2] != (cfg.batch, cfg.n)
                                      for r in (base, *others))
