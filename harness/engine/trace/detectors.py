"""Every detector of a known mistake in a recorded forward, in the order they run, and the one module that imports
them all, so that the registry is complete wherever this is imported: by the analysis, and by `MutantInfo`, which
checks each mutant's `trace=` ids against it.  By module, the marks each may set:

- detect_layout: split-without-transpose; merge-without-transpose; merge-moves-batch (the heads' outputs transposed
  so that the batch leaves the front, then viewed back to B, n, d); queries-split-without-transpose,
  keys-split-without-transpose, values-split-without-transpose, queries-and-keys-split-without-transpose,
  queries-and-values-split-without-transpose, keys-and-values-split-without-transpose (the split without transpose
  on those projections only, read from the data flow into the scores q @ kᵀ and the mixing weights @ v);
  split-strided, merge-strided, values-split-strided (heads on strided features, a view to B, n, dh, H, where the
  rest of the layer does not undo them);
  keys-from-query-weights (a second call of the queries' projection made the keys); queries-and-keys-swapped (the
  queries projected with the key projection and the keys with the query projection, read from their names);
  values-from-keys (the attention weights applied to the keys: the values operand is the keys' tensor);
  kv-heads-tiled (a grouped-query layer's key/value heads copied with .repeat along the heads axis);
  kv-features-repeated (its flat key/value projections widened with repeat_interleave along the features);
  view-on-transposed, split-order-on-slice, view-on-slice, mask-size-not-n, keys-transposed-wrong,
  kv-heads-expanded, raised (the operation that raised, and what its tensors say of why);
  view-on-transposed-in-training (a view that raised only in the forward recorded in training mode);
  input-changed-in-place;
  values-rotated (the values multiplied by the rotary embedding's positions, as the queries or keys are);
  merge-view-to-input-width (read from the forward recorded with the widths apart)
- detect_rope: keys-not-rotated, keys-rotated-out-of-step, rotated-before-split, frequencies-from-model-width (read
  from the rotary tables' values); rotation-pairs-mismatched (a rotation's partner pairing its features one way, its
  tables the other: read from the tables and the features' prints)
- detect_scores: softmax-not-last-axis; weights-without-grad; sdpa-without-causal, sdpa-mask-keeps-future;
  scores-not-scaled, scaled-by-dh, scaled-by-sqrt-d, scaled-by-sqrt-heads, scaled-by-sqrt-n, wrong-scale;
  scaled-after-softmax (the attention weights multiplied by the scale the scores lack);
  dropout-always-on
- detect_mask: mask-after-softmax, mask-result-unused, no-mask-applied; mask-on-some-heads (the mask on a slice of
  the heads' scores only); fill-leaks-visibly, fill-leaks-invisibly, fill-below-probe;
  mask-includes-diagonal, mask-keeps-future, mask-hides-past, mask-one-token-late, mask-hides-nothing, mask-wrong;
  mask-multiplied, mask-added; mask-made-without-device; mask-kept-as-attribute; mask-kept-in-container;
  mask-made-too-short (read from the forward recorded with as many tokens as the context length);
  mask-only-in-eval (read from the forward recorded in training mode too); dropout-before-softmax;
  mask-dropped-out (both read from the training forward's NaN and mask beside the eval one's); additive-finite-mask;
  exp-before-mask (a softmax written by hand whose mask is applied to the exponentials, not to the scores)
- detect_output: heads-not-projected; out-proj-without-bias; residual-inside
- detect_params: layer-made-in-forward; layer-in-plain-list; layer-never-used (read from where the constructor made
  the parameters forward never touched); query-bias-left-out, key-bias-left-out, value-bias-left-out (a projection
  applied by its weight alone while its bias goes unread: read from the forward of a build with qkv_bias=True)
- detect_widths: heads-full-width, heads-full-width-unprojected (every head's scores summed over the layer's whole
  width d, not d / H);
  head-width-from-input (read from the forward recorded with the widths apart); guard-refuses-divisible (read from
  the worked example's refusal, beside a width the heads do not divide that the constructor builds);
  single-scaled-by-input-width, built-to-input-width (read from the forward recorded with the widths apart);
  kv-projections-full-width (a grouped-query layer's keys and values projected as wide as its queries);
  built-indivisible (read from the module the constructor builds for heads that do not divide the width)
- detect_cache: cache-append-wrong-axis; cache-mask-not-offset, cache-position-set; cache-chunk-unmasked;
  cache-rope-from-zero; cache-not-reset; cache-empty-slots-read; cache-keys-rotated-twice (all read from the worked
  example decoded with the layer's KV cache)

(a test holds this list to the registry).  Which known mistake (mutant) an id stands for is declared by the mutants
themselves (`MutantInfo.trace`) and read from the catalogue: no detector names a mutant.
"""
from __future__ import annotations

from harness.engine.trace import (detect_cache, detect_layout, detect_mask, detect_output, detect_params,
                                  detect_rope, detect_scores, detect_widths)
from harness.engine.trace.naming import Namer
from harness.engine.trace.registry import DETECTORS, ORDER, Detector, Findings, run

__all__ = ["DETECTORS", "MODULES", "UNCATALOGUED", "find", "in_order"]

UNCATALOGUED = {  # the marks no mutant declares (`MutantInfo.trace`): what `mha-check explain ID` says of each,
    # and the catalogued mistakes nearest to it (a test holds every mark either declared or here)
    "key-bias-left-out": (
        "The key projection applied by its weight alone (F.linear(x, self.k_proj.weight), x @ self.W_k.weight.T) "
        "while the layer was built with a key bias: the bias is made, counted and saved, but never added nor "
        "trained (parameters-used finds it without a gradient). No output shows it: a key bias adds q·b_k to every "
        "score of a row alike, which the softmax ignores. Apply the layer whole, self.k_proj(x), or build the keys' "
        "projection with bias=False.",
        ("query-bias-not-added", "value-bias-not-added")),
    "cache-empty-slots-read": (
        "A KV cache preallocated (with zeros) for more tokens than were fed, read back whole: a decoded token's "
        "attention reads every slot, the empty ones after the tokens fed too, and nothing hides them, so they take "
        "weight from the real keys (kv-cache finds the decoded token equal to its output with those zero keys and "
        "values attended). Read the cache up to the tokens fed so far (cache[:, :, :ptr + n]), or mask the rest.",
        ("kvcache-mask-not-offset", "kvcache-position-not-advanced")),
    "cache-keys-rotated-twice": (
        "The cached keys, which went into the cache already rotated, are joined with the new keys and rotated again "
        "with them at every call: key j is turned by twice its angle (kv-cache finds the first decoded token equal "
        "to its output so). Rotate the new keys alone, at their positions, before they join the cache; or cache "
        "them unrotated and rotate them all at every call, never both.",
        ("kvcache-rope-positions-not-advanced", "rope-keys-shifted")),
    "rotation-pairs-mismatched": (
        "A rotary embedding whose rotation pairs the features one way and whose cos/sin tables are laid out the other: "
        "rotate_half (x_i with x_i+dh/2) with tables whose every frequency is repeated twice in a row "
        "(repeat_interleave, the interleaved layout), or rotate-every-two (x0 with x1, x2 with x3, ...) with tables "
        "holding the frequencies twice over (torch.cat((freqs, freqs)), rotate-half's layout). The two features of a "
        "pair then turn by different angles: no rotation, and the scores depend on where the tokens sit, not on t - s "
        "only (reference-match finds the output equal to that computation, and different from the rotary reference "
        "of the layer's own pairs). Lay the tables out for the pairs the rotation turns.",
        ("rope-keys-shifted", "rope-model-width-freqs")),
    "mask-wrong": ("The masks applied before the softmax do not hide exactly the future positions (s > t), and not "
                   "in one of the catalogued ways (the diagonal too, one token late, inverted, the past): the mark "
                   "shows what they hide, row by row, beside what the causal mask hides (.xx; ..x; ...).",
                   ("mask-hides-diagonal", "mask-lets-one-future", "mask-inverted", "mask-hides-past")),
    "queries-and-keys-split-without-transpose": (
        "The queries and the keys are split into heads with view(B, H, n, dh) straight from (B, n, d) instead of "
        "view(B, n, H, dh).transpose(1, 2); the values are split right.", (
            "split-view-order-queries", "split-view-order-keys", "split-view-order")),
    "queries-and-values-split-without-transpose": (
        "The queries and the values are split into heads with view(B, H, n, dh) straight from (B, n, d) instead of "
        "view(B, n, H, dh).transpose(1, 2); the keys are split right.", (
            "split-view-order-queries", "split-view-order-values", "split-view-order")),
    "raised": ("The forward raised an exception at this operation, and its tensors' shapes say nothing more of why: "
               "the mark gives the exception; `mha-check trace` shows the shapes that reached it.", ()),
    "exp-before-mask": (
        "The softmax is written by hand (exp, the future's exponentials zeroed by a mask, divided by their sum), and "
        "the exponentials are taken of the scores before the mask hides the future. The mask cancels them, so "
        "ordinary outputs are right, but the future's score is still in the arithmetic: without a row maximum, a "
        "future score large enough (about 89 in float32) makes its exponential inf, and inf times the mask's 0 is "
        "NaN; with a row maximum taken over every key, a future score far above the past ones (about 100 in "
        "float32, 17 in float16) underflows every allowed weight to 0 (0/0 is NaN), and by rounding the future "
        "reaches the past. Hide the future in the scores first (masked_fill with float('-inf')), then "
        "torch.softmax.", ("finite-fill-100", "zero-after-softmax")),
    "split-order-on-slice": (
        "view(B, H, n, dh) straight from (B, n, d) on a slice of a fused projection raised: the order of the sizes "
        "puts the tokens where the heads belong, and .contiguous() would only hide the error; split with "
        ".view(B, n, H, dh).transpose(1, 2).", ("split-view-order",)),
    "view-on-slice": ("view() on a slice of a larger tensor (not a transpose) raised: a view of a slice works only "
                      "when it keeps the axes in their order; check the order of the view's sizes.", ()),
}

MODULES = (detect_layout, detect_rope, detect_scores, detect_mask, detect_output, detect_params,
           detect_widths, detect_cache)  # the order they
# run in (see the docstring)


def in_order() -> list[Detector]:
    """The registered detectors by MODULES, and in each module in the order it declares them: the order does not
    depend on which module some other import loaded first."""
    rank = {m.__name__: k for k, m in enumerate(MODULES)}
    strays = [d.name for d in ORDER if d.find.__module__ not in rank]
    if strays:
        raise RuntimeError(f"detectors registered outside {[m.__name__ for m in MODULES]}: {strays}")
    return sorted(ORDER, key=lambda d: rank[d.find.__module__])


def find(namer: Namer, ops: list[dict], cfg: dict, complete: bool, output: dict | None = None) -> Findings:
    """Every detector on one named forward (`complete`: it ran to the end; `output`: what it returned)."""
    return run(namer, ops, cfg, complete, in_order(), output)
