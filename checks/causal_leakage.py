"""causal-leakage: through the gradient of every output position with respect to every input position.

For each batch element b and output position t, the child computes d(r·y[b, t]) / d x[b, s] for all s; the
verdict needs every s > t to be exactly zero (float64: a fill value of -10 or -100 instead of -inf leaves a small
but non-zero gradient) and every s <= t to be non-zero (so that a detached or constant output cannot pass).  It is
measured in eval() mode and again in train() mode with dropout 0 (a forgotten is_causal=True in the training
branch leaks only there), then in train() mode with dropout 0.5 (`_dropout_verdict`), where a causal layer's output
is random but finite and its gradient with respect to every future token still exactly zero: dropout multiplies
the weights, and the future's stay 0.  Dropout applied to the masked scores (0 * -inf is NaN) or to the mask (a
zeroed entry hides nothing) shows only there, so the probe with dropout 0 had given both full marks; it judges
the future and finiteness only, never the past, which dropout silences at random.

Where the weights are mapped with certainty, the output projection is restricted to one head at a time so that
every head is checked on its own.  Train mode, single heads, and the enormous and negative perturbations below
run on the short sequences (n <= 10): the 64-token one is there for a mask of hard-coded size, which the eval
gradient over every pair of positions and the ordinary perturbations already see, and it would cost as much as all
the others together.  For the same reason its ordinary perturbations split it after every fourth position and the
last (`_splits`), not after each of its 63.

The gradient is reported by the child; the forward values cross-check it from the parent's side: perturbing the
tokens after each split point must leave earlier outputs bit-identical, with ordinary perturbations and, where
weights are mapped, with scores pushed to about -5e4 (a fill such as -1e4 then wins over the real scores).  Enormous
perturbations (1e30) are sent too: when only they move earlier outputs, the mask is a finite number added to the
scores (`+ where(mask, -1e9, 0)`), which holds at every magnitude a model reaches; with the -5e4 probe and the
reference passing, that is the lesson's rule `mask-fill`, not a leak of the math, and unmapped it is cannot-tell.

All of that is the child's answers agreeing with each other: evidence enough to fail, never to pass.  A child that
memoises the output at each position by the prefix of tokens up to it replays earlier outputs bit for bit whatever
follows, and can forge its Jacobian (tests/hostile/replay_fill_prefix.py).  So a pass rests on the parent's own
reference where the weights are mapped (`_against_reference`): on weights and inputs the child has never answered
for, the output must equal the reference's with ordinary weights, and position 0, which may attend only to itself,
must equal it with real scores near -5e4, where any fill above them gives the masked future weight.  Where no
mapping exists, or the module's output differs from the reference's anyway, the pass message says that it rests on
the child's own answers.
"""
import dataclasses

import numpy as np

from checks import Status, cannot_tell, check, failed, passed
from checks._dropout import TRAIN_DROPOUT, dropout_instance
from checks.contiguity import VIEW_FIX, is_view_error
from checks.output_shape import output_shape, tokens_axes
from harness.engine.compare import compare
from harness.engine.leakage import CAUSAL, INFLUENCE, LEAKS, MASKS_SOME, influence_from_jacobian, judge, only_head
from harness.engine.mapping import map_help
from harness.wire.errors import CannotDrive, HarnessFailure, TargetFailure, WorkerDied
from harness.wire.masks import CONVENTIONS, SHAPES
from reference import grouped, numpy_ref

HUGE = 1e30  # future tokens this large: exp(-100) * 1e30 is far above float64 rounding of an output near 1
DEEP_MAX_N = 10  # train mode, each head alone, 1e30 and -5e4 probes: only up to this length (see the docstring)
LONG_SPLIT_STRIDE = 4  # beyond DEEP_MAX_N, tokens are perturbed after every 4th position (and the last): _splits
NEGATIVE_SCORES = 300.0  # W_k = -W_q scaled: real scores of about -5e4, the size fp16 activations reach; a fill of
# -1e4 then outweighs them (a leak), while fills of -1e6 and below (d2l, the annotated transformer) still act as -inf


HUGE_WHY = (" where a causal layer changes nothing at all; the future keeps a tiny weight, as a fill of -100 instead "
            "of -inf leaves")
HUGE_NAN_WHY = (" where a causal layer changes nothing at all; NaN: the future's values reach arithmetic that "
                "overflows before a mask hides them (the exponential of an unmasked score is inf, and inf · 0 is NaN) "
                "or keep a tiny weight, as a fill of -100 instead of -inf leaves")

LEAK_PATTERNS = {  # finding code -> what it looks like, in plain words
    "nan": ("a row of scores with every entry masked gives NaN after the softmax (a mask that hides the diagonal "
            "too, or an inverted one: a token must always see itself), and so does any NaN the forward makes"),
    "inverted": ("the mask is inverted: it hides the past and shows the future (as tril where triu belongs would, "
                 "or masked_fill with ~mask)"),
    "small-leak": ("a small leak: the future's influence is tiny but not exactly zero, as it is behind a "
                    "float('-inf') mask; the usual cause is a finite fill such as -10 or -100 (or a softmax written "
                    "by hand whose row maximum is taken before the mask, or no mask at all, where the weights' effect "
                    "almost cancels)"),
    "one-future": "the mask lets exactly one future token through: use torch.triu(..., diagonal=1)",
    "all-future": "no causal mask is applied (or it is applied after the softmax, or its result is discarded)",
    "future": ("the future leaks into the past: check the mask (triu(..., diagonal=1), sliced [:n, :n], applied "
               "before a softmax over the last axis) and the reshapes (a wrong view mixes tokens)"),
    "no-gradient": "the output does not depend on the input at all through autograd (detached, or no_grad?)",
    "hides-diagonal": "the mask also hides the diagonal: a token must see itself (use triu(..., diagonal=1))",
    "dead-past": "some allowed positions have no influence: is the mask or the softmax axis wrong?",
    "train-only": ("the layer leaks only in train() mode: the training branch attends to the future (a forgotten "
                   "is_causal=True, or a mask applied only in eval)"),
    "train-nan": ("dropout is applied to the masked scores before the softmax: it multiplies some -inf by 0, which is "
                  "NaN (each sequence has NaN at tokens of its own: a draw per sequence, as on the scores)"),
    "train-nan-mask": ("dropout is applied to the mask: every sequence has NaN at the same tokens, so one draw serves "
                       "the whole batch, as a mask's does; a token whose allowed entries it zeroes has nothing left "
                       "to attend to (and an additive mask's -inf times 0 is NaN)"),
    "train-nonfinite": ("dropout is applied before the softmax, to the masked scores or to the mask: it multiplies "
                        "some -inf by 0, which is NaN, or leaves a token nothing to attend to"),
    "dropout-mask": ("the future leaks only in train() mode with dropout > 0 (with dropout 0 it does not): dropout "
                     "is applied to the mask, and every mask entry it zeroes no longer hides its future position"),
}

DROPOUT_FIX = ("Apply dropout only to the attention weights, after the softmax: `w = self.dropout(torch.softmax("
               "scores.masked_fill(mask[:n, :n], float('-inf')), dim=-1))`. Never apply it to the mask (in training "
               "it zeroes some of its entries, and those future tokens leak) nor to the masked scores (it multiplies "
               "some -inf by 0, which is NaN); the mask must stay whole in every mode.")
TRAIN_DROPOUT_DRAWS = 8  # forwards in train mode with that dropout, each a new draw: a 0/1 mask that dropout hits
# makes a row NaN only where it zeroes a whole row (token 0's: probability 0.5 a draw); 8 draws miss it rarely
DRAWS_BATCH = 8  # sequences in each of those forwards: dropout drawn per sequence (on the scores) gives them NaN at
# different tokens, one draw for the batch (on the mask) at the same ones; with 8 the two cannot be mistaken


def _dead(G: np.ndarray, past: np.ndarray) -> np.ndarray:
    """The allowed cells (b, t, s) with no influence at all, in output positions that depend on some input: a whole
    row without influence is an output that does not move with any input there (a ReLU after the projection that
    clamps every feature of a token at 0), which says nothing of which positions the mask lets through; the other
    checks compare that output (a student's ReLU-ended layer was told to look at its mask)."""
    return (G == 0) & past & (G.max(axis=2, keepdims=True) > 0)


def describe_leak(G: np.ndarray) -> tuple[str, str]:
    """Name the pattern: (what is wrong, the finding code of LEAK_PATTERNS)."""
    B, n, _ = G.shape
    future = np.triu(np.ones((n, n), bool), 1)
    past = ~future
    scale = np.nanmax(G) if np.isfinite(G).any() else 1.0
    if not np.all(np.isfinite(G)):
        b, t, s = np.argwhere(~np.isfinite(G))[0]
        return f"the gradient is NaN/inf (batch {b}, output {t}, input {s})", "nan"
    leaks = np.argwhere((G > 0) & future)
    dead = np.argwhere((G <= INFLUENCE * max(scale, 1e-300)) & past)  # to name a leak's pattern (inverted)
    if len(leaks):
        b, t, s = leaks[0]
        what = f"output position {t} depends on future input position {s} (batch {b}, gradient {G[b, t, s]:.3g})"
        rel = G[:, future].max() / max(G[:, past].max(), 1e-300)
        strict_past = np.tril(np.ones((n, n), bool), -1)
        strict_past[-1] = False  # the last token hides every position: a finite fill averages them all
        if len(dead) and np.all(G[:, future] > 0) and np.all(G[:, strict_past] <= INFLUENCE * max(scale, 1e-300)):
            return what, "inverted"  # every earlier token without influence and every later one with: as many dead
            # cells in a scramble of the heads' tokens (a fused split in the wrong order) were told "inverted mask"
        if rel < 1e-2:
            return what, "small-leak"
        next_only = np.triu(np.ones((n, n), bool), 1) & ~np.triu(np.ones((n, n), bool), 2)
        if n >= 3 and np.all(G[:, next_only] > 0) and not np.any(G[:, future & ~next_only] > 0):
            return what, "one-future"
        if n >= 3 and np.all(G[:, future] > 0) and not len(dead):
            return what, "all-future"
        return what, "future"
    if np.all(G == 0):
        return "no output position depends on any input position", "no-gradient"
    dead = np.argwhere(_dead(G, past))  # without a leak, only an influence that is exactly none (see _leak_verdict)
    b, t, s = dead[0]
    what = f"output position {t} does not depend on input position {s} <= {t} (batch {b})"
    if all(t2 == s2 for _, t2, s2 in dead):
        return what, "hides-diagonal"
    return what, "dead-past"


@check(
    id="causal-leakage",
    claim="each output position depends on every input position up to it and on none after it",
    explanation="""A causal layer predicts token t+1 from tokens 0..t only. If the output at t depends on a later
    input, training cheats by looking ahead and generation breaks. Measured by the gradient of each output position
    with respect to each input position, per sequence and per head, in eval() and in train() mode (with dropout 0,
    and with dropout 0.5: dropout belongs on the weights after the softmax, never on the mask or the scores).""",
    fix="""Mask the scores before the softmax with `scores.masked_fill(mask[:n, :n], float("-inf"))`, where
    `mask = torch.triu(torch.ones(L, L), diagonal=1).bool()`, over the last axis (or pass is_causal=True to
    scaled_dot_product_attention in every branch, training included).""",
    needs=(output_shape,),
    example="""x: (2, 3, 8); Jacobian of r·y[b, t] with respect to x: (B, n, B, n, d_in) = (2, 3, 2, 3, 8)
    G[b, t, s] = norm over the 8 features of d (r·y[b, t]) / d x[b, s]: one 3 × 3 map per sequence, which
      must be [[+, 0, 0], [+, +, 0], [+, +, +]] (+ = non-zero): for t = 0, s = 1, 2 exactly 0, s = 0 not
    fill -10 instead of -inf leaves exp(-10) ≈ 4.5e-5 of weight on each future token: G[b, 0, 2] of order 1e-5
    fill -100: y equals the reference to every digit, yet G[b, 0, 2] is of order 1e-44, still > 0 in float64
    measured again in train() mode with dropout 0: `if self.training: sdpa(q, k, v)` without is_causal leaks
    and with dropout 0.5: `self.dropout(scores)` after masked_fill turns some -inf into NaN (0 * -inf), and
      `self.dropout(self.mask)` zeroes some mask entries, so those future tokens get weight
    repeated per head (W_o keeps only that head's 4 columns); then x[:, 1:] is perturbed and y[:, 0] must stay
      bit-identical (likewise x[:, 2:] and y[:, :2]), also with perturbations of size 1e30""",
)
def causal_leakage(ctx):
    unreferenced = set()  # why some deep configuration's pass rests on the child's answers alone
    huge_only = []  # configurations where only future tokens of size 1e30 moved earlier outputs (an additive mask)
    off_shape = {"judged": [], "unclear": []}  # outputs of the wrong shape: judged by their token axis, or not

    def holds(cfg):
        inst = ctx.build(cfg)
        x = ctx.input(cfg)
        r = ctx.rng("r", cfg).standard_normal(cfg.d_out)
        inputs, labels = perturbed(x, cfg, ctx, ("ordinary", "huge") if cfg.n <= DEEP_MAX_N else ("ordinary",))
        jacobian, *outputs = inst.calls([inst.jacobian_request(x, r)] + [inst.forward_request(v) for v in inputs])
        outputs = [o.y for o in outputs]
        if outputs[0].shape != (cfg.batch, cfg.n, cfg.d_out):  # output-shape failed: measured by the token axis
            return _by_token_axis(ctx, inst, x, cfg, outputs, labels, off_shape)
        leak = _leak_verdict(jacobian, cfg)
        if leak is not None and leak.details.get("finding") == "leak:inverted" and cfg.n < 3:
            leak = _inverted_on_three(ctx, cfg, leak)
        outcome = leak or moved(outputs, labels, kinds=("ordinary",))
        huge = moved(outputs, labels, kinds=("huge",)) if outcome is None else None
        if leak is None and (outcome is not None or huge is not None) and not answers_again(inst, x, outputs[0]):
            return None  # moved between two calls on the same input: no evidence of the future (see answers_again)
        if huge is not None and _future_won(outputs, labels):
            huge_only.append(cfg)  # the future's scores passed a finite mask: decided by the realistic probes
        elif huge is not None:  # said so: a change of 1e-14 reads as rounding to a student, yet causal code gives 0
            outcome = moved(outputs, labels, kinds=("huge",), why=HUGE_WHY)
            # a sliver of the future's values got through: a real weight on the future, not a mask
            # that only huge scores pass (a -100 fill behind a forged Jacobian shows here)
        if outcome or cfg not in ctx.required_configs() or cfg.n > DEEP_MAX_N:  # why not deep: the docstring
            return outcome
        return _deep(ctx, inst, x, r, cfg, unreferenced)

    outcome = (ctx.find_failure(holds) or _own_mask_leaks(ctx) or _flag_with_a_mask(ctx)
               or _built_flag_not_applied(ctx) or _default_mask_broken(ctx))
    if outcome is None and (off_shape["judged"] or off_shape["unclear"]):
        outcome = _off_shape_verdict(off_shape)
    outcome = outcome or _only_huge(huge_only, unreferenced, ctx) or _passed(unreferenced)
    return _how_called(outcome, ctx.call_evidence)


def _inverted_on_three(ctx, cfg, leak):
    """An inverted mask's pattern on two tokens (token 0 moved by token 1 alone) is also a scramble's: a fused
    projection viewed in the wrong order (`view(B, 3, n, H, dh)` where the roles are the last axis) gives token 0
    the query, key and value of other tokens, and on two tokens that reads as a mask hiding the past (a student's
    trial was told to fix a mask that SDPA's is_causal=True made right).  The pattern is named only where three
    tokens show it too, or NaN where every position is hidden (one Jacobian more, on this configuration with three
    tokens); otherwise the leak is said as a leak, with the mask and the reshapes to check."""
    three = dataclasses.replace(cfg, n=3, context_length=max(3, cfg.context_length))
    try:
        inst = ctx.build(three)
        r = ctx.rng("r", three).standard_normal(three.d_out)
        again = _leak_verdict(inst.call(inst.jacobian_request(ctx.input(three, "inverted-on-three"), r)), three)
    except TargetFailure:  # the checks of three tokens say what it raises
        return leak
    if again is not None and again.details.get("finding") in ("leak:inverted", "leak:nan"):
        return leak
    leak.message = leak.message.replace(LEAK_PATTERNS["inverted"], LEAK_PATTERNS["future"])
    leak.details["finding"] = "leak:future"
    return leak


def _own_mask_leaks(ctx):
    """A layer called with a causal mask (its forward wants one, the proof chose the convention) may mask by itself
    too, and wrongly: the mask passed hides what its own lets through (`tril(..., diagonal=1)` of its own, plus the
    caller's -inf), so every check saw a causal layer.  Called with the same convention's mask hiding nothing (a
    padding mask without padding, as its callers will pass), a layer that leaves masking to its caller lets the whole
    future through, and one whose own mask is right none of it.  One that still hides some later position in every
    sequence (or an earlier one), yet lets a later one through, masks by itself and leaks (leakage.judge's
    MASKS_SOME, what the plain call of a layer with an optional mask is judged by): a failure whatever a caller
    passes (a student's trial: `forward(x, attn_mask)` with its own keep-mask one diagonal off passed every
    check)."""
    cfg = ctx.base
    inst = ctx.build(cfg)
    masked = inst.info.call_masked
    if not masked or inst.style < 0 or not masked[inst.style % len(masked)]:
        return None
    x = ctx.input(cfg, "own-mask")
    r = ctx.rng("own-mask-r", cfg).standard_normal(cfg.d_out)
    result = inst.call(inst.jacobian_request(x, r, hide_nothing=True))
    if judge(result, cfg) != MASKS_SOME:
        return None  # causal by itself, or masking left to the caller (the whole future through): no evidence
    G = influence_from_jacobian(result.jac)
    what, code = describe_leak(G)
    call = inst.info.call_styles[inst.style % len(inst.info.call_styles)]
    return failed(f"{what}, called as {call} but with a mask that hides nothing: your layer hides some "
                  f"positions by itself and lets another through, so its own mask leaks wherever a caller's does not "
                  f"hide the future (the causal mask mha-check passes covered it); {LEAK_PATTERNS[code]}",
                  observed=what, expected="zero for s > t",
                  leakage_map=(G[0] > INFLUENCE * G.max()).astype(int).tolist(), finding="leak:" + code)


def _built_flag_not_applied(ctx):
    """A layer built with its constructor's causal flag on (`MultiHeadAttention(d, h, causal=True)`: harness.child.
    construct binds every causal flag to True) and called with a causal mask (its forward's optional `mask`, the proof
    chose it) was made causal by the caller's mask alone, whatever the flag does.  Called as forward(x), the mask
    left out as its default allows, a layer whose flag makes it causal stays causal; one that lets every later
    position through has a flag that does nothing (openlanguagemodel 2.0's MultiHeadAttention stored `causal` and
    never read it, tests/realzoo/olm_mha_causal_flag_ignored_pre_fix.py).  Only the whole future through is evidence
    (leakage.judge's LEAKS): a layer that masks some positions by itself is _own_mask_leaks's subject."""
    flag = ctx.signature.accepts.get("causal")
    cfg = ctx.base
    inst = ctx.build(cfg) if flag else None
    if inst is None or flag not in getattr(inst.info, "unread_flags", []):
        return None  # no flag, or one the layer reads (ESPnet's, in its flash path alone): no evidence here
    masked, bare = inst.info.call_masked, inst.info.call_bare
    if not masked or inst.style < 0 or not masked[inst.style % len(masked)] or len(bare) != len(masked):
        return None  # called without a mask already: the ordinary probes judged the flag
    plain = next((i for i, b in enumerate(bare) if b), None)
    if plain is None:
        return None
    style = inst.style - inst.style % len(bare) + plain  # the same family (sequence first, norms off), no mask
    x = ctx.input(cfg, "flag-alone")
    r = ctx.rng("flag-alone-r", cfg).standard_normal(cfg.d_out)
    try:
        result = inst.call(dataclasses.replace(inst.jacobian_request(x, r), style=style))
    except TargetFailure:
        return None  # a mask it needs after all: no evidence
    if result.jac is None or judge(result, cfg) != LEAKS:
        return None
    G = influence_from_jacobian(result.jac)
    what, code = describe_leak(G)
    call = inst.info.call_styles[inst.style % len(inst.info.call_styles)]
    return failed(f"{what}, built with {flag}=True and called as {inst.info.call_styles[plain]}, the mask left out "
                  f"as your forward allows: `{flag}` is stored and never read by your class, so it does not "
                  f"make your layer causal (called as {call}, it was the mask mha-check passed that hid the future); "
                  f"{LEAK_PATTERNS[code]}",
                  observed=what, expected=f"zero for s > t with {flag}=True and no mask",
                  leakage_map=(G[0] > INFLUENCE * G.max()).astype(int).tolist(), finding="leak:flag-not-applied",
                  fix=f"Make `{flag}` do what it says: when it is True, mask the scores above the diagonal yourself "
                      f"(scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1), "
                      f"float('-inf'))), whether or not a mask is also passed.")


def _default_mask_broken(ctx):
    """A layer called with a causal mask (the proof chose its forward's optional `mask`) whose forward builds a
    causal mask of its own when the mask is left out (`if mask is None: mask = torch.tril(...)`): every check saw
    the mask mha-check passed, never the one the layer's own callers get by default.  Called as forward(x), the mask
    left out as its forward allows, on a few batch sizes and lengths: where it is causal on one of them (so masking
    by default is the layer's own job, not its caller's) and on another it raises or lets a later position through,
    its default mask is wrong - a student's trial built it from x.size(0), the batch, where x.size(1) belongs: causal
    when B = n, an error for other batches and no mask at all for B = 1, yet every check passed.  A layer that is
    never causal without a mask leaves masking to its caller: no evidence here."""
    base = ctx.base
    inst = ctx.build(base)
    masked, bare = inst.info.call_masked, inst.info.call_bare
    if not masked or inst.style < 0 or not masked[inst.style % len(masked)] or len(bare) != len(masked):
        return None  # called without a mask already: the ordinary probes judged it
    plain = next((i for i, b in enumerate(bare) if b), None)
    if plain is None:
        return None
    style = inst.style - inst.style % len(bare) + plain  # the same family (sequence first, norms off), no mask
    n = max(base.n, 3)
    shapes = sorted({(base.batch, base.n), (1, n), (2, n), (n, n), (2, base.context_length)})
    causal, broken = [], []
    for batch, length in shapes:
        cfg = dataclasses.replace(base, batch=batch, n=length, context_length=max(base.context_length, length))
        one = ctx.build(cfg)
        x = ctx.input(cfg, "default-mask")
        r = ctx.rng("default-mask-r", cfg).standard_normal(cfg.d_out)
        try:
            result = one.call(dataclasses.replace(one.jacobian_request(x, r), style=style))
        except TargetFailure as e:
            broken.append((batch, length, f"raises {str(e).splitlines()[0] if str(e) else type(e).__name__}"))
            continue
        verdict = judge(result, cfg)
        if verdict == CAUSAL:
            causal.append((batch, length))
        elif verdict in (LEAKS, MASKS_SOME):
            what, _ = describe_leak(influence_from_jacobian(result.jac)) if result.jac is not None else (
                "no autograd graph", None)
            broken.append((batch, length, f"leaks: {what}"))
    if not causal or not broken:
        return None
    call = inst.info.call_styles[plain]
    fine = ", ".join(f"(B={b}, n={t})" for b, t in causal)
    shown = [next(c for c in broken if c[2].startswith(kind)) for kind in ("leaks", "raises")
             if any(c[2].startswith(kind) for c in broken)]  # one of each: the first leak, the first error
    bad = "; ".join(f"on (B={b}, n={t}) it {how}" for b, t, how in shown)
    made = _default_mask_made(ctx, base, style, [c for c in broken if c in shown] + [c for c in broken
                                                                                   if c not in shown])
    where = (f": the mask your forward builds when none is given, at {made['at']} (`{made['code']}`), is "
             f"{made['shape']} on (B={made['batch']}, n={made['n']}), where the scores it meets are "
             f"({made['n']}, {made['n']}), so it is wrong for some inputs" if made else
             ": the mask your forward builds when none is given is wrong for some inputs")
    return failed(f"called as {call}, the mask left out as your forward allows, your layer masks the future by "
                  f"itself on {fine}, but {bad}{where} (every other check called it with the causal mask mha-check "
                  f"passed, as {inst.info.call_styles[inst.style % len(inst.info.call_styles)]})",
                  observed="; ".join(f"(B={b}, n={t}): {how.split(':')[0]}" for b, t, how in broken),
                  expected="causal for every batch size and length, as on " + fine,
                  fix="Build the default mask from the number of tokens, the size of x's second axis "
                      "(n = x.size(1), not x.size(0), the batch), on x.device: "
                      "`torch.tril(torch.ones(n, n, device=x.device))` as a keep-mask, or slice a registered "
                      "buffer with [:n, :n].",
                  finding="leak:default-mask")


MASK_MAKERS = {"tril", "triu", "tril_", "triu_", "ones", "ones_like", "new_ones", "full", "full_like", "zeros",
               "zeros_like", "new_zeros", "empty", "eye", "arange"}  # what makes a mask in forward


def _default_mask_made(ctx, base, style: int, broken: list[tuple]) -> dict | None:
    """Where the default mask that `_default_mask_broken` found wrong was made, on the evidence of a recorded
    forward (called the same way, the mask left out) on a batch and length where it leaks or raises: an operation
    that meets (.., n, n) scores with a tensor made in forward (tril, triu, ones, full ...) whose last two axes are
    square but not (n, n) (x.size(0), the batch, where the tokens belong).  {"at", "code", "shape", "batch", "n"},
    or None where no recorded forward shows that (the report then gives no line rather than a guess; fixes28)."""
    for batch, length, _ in broken:
        cfg = dataclasses.replace(base, batch=batch, n=length, context_length=max(base.context_length, length))
        try:
            ops = ctx.build(cfg, fresh="default-mask-trace").trace(ctx.input(cfg, "default-mask"), style=style).ops
        except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied):
            continue
        for op in ops:
            ins = [t for t in op.get("in") or [] if t.get("shape")]
            if not any(list(t["shape"][-2:]) == [length, length] for t in ins):
                continue  # no scores here
            for t in ins:
                shape = list(t["shape"])
                if shape[-2:] == [length, length]:
                    continue
                made = _made_in_forward(ops, t, length)
                if made is not None:
                    return {"at": made["at"], "code": (made.get("code") or "").strip(), "batch": batch, "n": length,
                            "shape": tuple((made.get("out") or {}).get("shape") or ())}
    return None


def _made_in_forward(ops: list[dict], tensor: dict, n: int) -> dict | None:
    """The last operation before `tensor` (following the data flow back) that made a square tensor of another size
    than (n, n) in the student's forward, or None."""
    seen, todo = set(), [tensor.get("src")]
    found = []
    while todo:
        i = todo.pop()
        if i is None or i in seen or not 0 <= i < len(ops):
            continue
        seen.add(i)
        op = ops[i]
        shape = list((op.get("out") or {}).get("shape") or [])
        if op["op"] in MASK_MAKERS and len(shape) >= 2 and shape[-1] == shape[-2] != n and \
                op.get("at") not in (None, "?", "mha-check"):
            found.append(op)
        todo += [t.get("src") for t in op.get("in") or []]
    return max(found, key=lambda o: o.get("i", 0)) if found else None


def _flag_with_a_mask(ctx):
    """A layer called with a causal flag (`forward(x, causal=True)`, the proof chose it) whose forward also takes an
    optional mask: its callers pass both (bio-attention's TransformerDecoder gives every layer causal=True and the
    caller's padding mask).  Given also a mask that hides nothing (a padding mask without padding), the layer must
    stay causal with every earlier position counting.  Tried in every convention and in the (n, n) and (B, n, n)
    shapes: where every one that runs leaves some position at or before a query without influence (and none leaks,
    which would be a mask that replaces the flag, a contract of its own), the flag and a mask together hide what the
    flag alone does not (bio-attention's `triu(diagonal=0)`: every token loses its own key, token 0 sees none).
    Where one of them is causal, or none runs, there is no evidence."""
    cfg = ctx.base
    inst = ctx.build(cfg)
    spare = getattr(inst.info, "call_spare", None)
    if not spare or inst.style < 0 or inst.style >= len(spare) or not spare[inst.style]:
        return None  # (a sequence-first or norms-off family: not this probe's)
    x = ctx.input(cfg, "flag-and-mask")
    r = ctx.rng("flag-and-mask-r", cfg).standard_normal(cfg.d_out)
    seen, hidden = [], None
    for convention in range(len(CONVENTIONS)):
        for shape in (SHAPES.index("(n, n)"), SHAPES.index("(B, n, n)")):
            try:
                result = inst.call(inst.jacobian_request(x, r, spare_mask=convention * len(SHAPES) + shape))
            except TargetFailure:
                continue
            if result.jac is None:
                continue
            verdict = judge(result, cfg)
            if verdict in (CAUSAL, LEAKS, MASKS_SOME):
                return None  # causal (a convention it reads), or the mask replaces the flag: no evidence here
            G = influence_from_jacobian(result.jac)
            seen.append(verdict)
            floor = INFLUENCE * G.max() if G.max() > 0 else 0.0  # (B, t, s): lost in every sequence
            lost = [(t, s) for t in range(cfg.n) for s in range(t + 1) if (G[:, t, s] <= floor).all()]
            hidden = lost if hidden is None else [p for p in hidden if p in lost]
    if not seen or not hidden:
        return None
    call = inst.info.call_styles[inst.style]
    shown = ", ".join(f"output {t} on input {s}" for t, s in hidden[:4]) + (" ..." if len(hidden) > 4 else "")
    return failed(f"called as {call} the layer is causal, but given also a mask that hides nothing (as a caller "
                  f"with a padding mask without padding passes both; in every convention and shape mha-check knows "
                  f"that your forward accepted) some output position no longer depends on an earlier or its own input "
                  f"position ({shown}): the flag and a mask together hide what the flag alone does not",
                  observed=f"no influence: {shown}", expected="every input s <= t counts for output t",
                  fix="Where the causal flag and a mask are combined, hide only the future: the causal part is "
                      "True (or -inf) strictly above the diagonal, torch.triu(..., diagonal=1), not diagonal=0, "
                      "which hides each token's own key and leaves the first token none.",
                  finding="leak:flag-and-mask-hide-the-past")


def _by_token_axis(ctx, inst, x, cfg, outputs, labels, off_shape: dict):
    """An output of the wrong shape (output-shape fails: (B, H, n, dh) returned before the heads are merged, a width
    other than d_out) still shows a leak where its tokens' axis is known: the batch first and exactly one other axis
    as long as the sequence.  The gradient of each token's slice (every other axis flattened) with respect to every
    input token, in eval and in train mode, and the forward perturbations read along that axis: a leak there is the
    layer's whatever its output should look like (issue 28: a wrong shape must not hide a leak).  Where no single
    axis is the tokens' (n equal to another size), this configuration judges nothing."""
    shape = tuple(outputs[0].shape)
    axes = tokens_axes(shape, cfg)
    if len(axes) != 1:
        off_shape["unclear"].append(shape)
        return None
    axis = axes[0]
    r = ctx.rng("r-token-axis", cfg).standard_normal(int(np.prod(shape)) // (cfg.batch * cfg.n))
    train = ctx.build(cfg, force_dropout=0.0)
    (jacobian,), (in_train,) = ctx.frame_or_raise([(inst, [inst.jacobian_request(x, r, token_axis=axis)]),
                                                   (train, [train.jacobian_request(x, r, "train", axis)])])
    outcome = _leak_verdict(jacobian, cfg) or moved([np.moveaxis(y, axis, 1) for y in outputs], labels,
                                                    kinds=("ordinary",)) \
        or _leak_verdict(in_train, cfg, mode="train")
    if outcome is None:
        off_shape["judged"].append(shape)
        return None
    outcome.message += (f" (your output has shape {shape}, not (B, n, d_out): measured with its axis {axis} as the "
                        "tokens', every other axis flattened)")
    return outcome


def along_tokens(outputs: list, cfg) -> list | None:
    """Outputs with their tokens' axis second: as they are when of the shape (B, n, d_out); an output of another
    shape by its one token axis (`tokens_axes`); None where no single axis is the tokens'."""
    shape = tuple(outputs[0].shape)
    if shape == (cfg.batch, cfg.n, cfg.d_out):
        return outputs
    axes = tokens_axes(shape, cfg)
    return [np.moveaxis(y, axes[0], 1) for y in outputs] if len(axes) == 1 else None


def _off_shape_verdict(off_shape: dict):
    """No leak found on outputs of the wrong shape: a pass where their token axis was read on some configuration
    (resting on the module's own answers: no reference has that shape), cannot tell where it never was."""
    if not off_shape["judged"]:
        return cannot_tell(f"your output has shape {off_shape['unclear'][0]}, not (B, n, d_out), and no single axis of "
                           "it is the tokens' (the batch first, one axis as long as the sequence): no leak could be "
                           "measured (output-shape reports the shape)")
    return passed(f"no leak along the token axis of your output (shape {off_shape['judged'][0]}, not (B, n, d_out)): "
                  "gradients in eval and train mode and forward perturbations; this rests on the module's answers "
                  "agreeing with each other (output-shape reports the shape)")


def _how_called(outcome, evidence):
    """The verdict, saying how forward was called where no proof chose it (harness.engine.unproven_call): a leak
    under every way of calling it tried is the module's whatever the caller was meant to pass; a pass holds for
    the call it names."""
    if evidence is None:
        return outcome
    call = evidence.tried[evidence.style][0]
    if outcome.status == Status.FAIL and evidence.masks_itself:
        outcome.message += (f"; called as {call}, your layer hides some positions and lets a later one through: it "
                            "masks by itself, so this leak is its own whatever mask a caller would pass")
    elif outcome.status == Status.FAIL and evidence.default:  # its default mask is one convention's, mishandled
        outcome.message += (f"; called as {call}, your layer computes exactly what it computes as {evidence.default}: "
                            "that is its own default mask, so this leak is its own (a caller's mask in another "
                            "convention would hide it, but nobody should have to)")
    elif outcome.status == Status.FAIL and evidence.every_call_leaks:
        outcome.message += f"; the same under every way of calling forward that ran ({evidence.ran()})"
    elif outcome.status == Status.PASS:
        outcome.message += (f"; called as {call}, the first way tried under which no output depends on a later "
                            "input (how to pass the mask is not proven without a reading of your parameters)")
        if evidence.style and evidence.first_leaks:  # said, not judged: a layer may leave the mask to its caller
            outcome.message += (f"; called as {evidence.tried[0][0]} it lets the future through, as a layer that "
                                "leaves the mask to its caller does (one meant to mask by itself must not)")
    return outcome


FUTURE_WON = 1e-10 * HUGE  # a movement this large is the future's own value, not a sliver of it


def _future_won(outputs, labels) -> bool:
    """Whether earlier outputs moved by about the size of the 1e30 tokens (their values won the softmax: scores
    above a finite mask's size) rather than by a sliver of them (e^-100 · 1e30 ≈ 4e-14: the future had a real,
    tiny weight all along).  Not finite: not this case."""
    y, *perturbed = outputs
    moves = [np.abs(y2[:, :split + 1] - y[:, :split + 1]).max() for (split, kind), y2 in zip(labels, perturbed)
             if kind == "huge"]
    return bool(moves) and all(np.isfinite(moves)) and max(moves) >= FUTURE_WON


def _only_huge(huge_only: list, unreferenced: set, ctx):
    """Future tokens of size 1e30 moved earlier outputs, nothing smaller did: a finite mask added to the scores
    (`scores + where(mask, -1e9, 0)`).  With the weights mapped, real scores near -5e4 were probed and the reference
    agreed, so the math holds at every magnitude a model reaches and the finite mask is the lesson's rule
    (`mask-fill`); unmapped, nothing probed realistic magnitudes, and mha-check cannot tell."""
    if not huge_only:
        return None
    if "unmapped" in unreferenced or "differs" in unreferenced:
        return cannot_tell(
            "future tokens of size 1e30 changed earlier outputs, smaller ones did not: a finite mask (such as "
            "-1e9 added to the scores) that holds until scores pass its size; whether it holds at the magnitudes a "
            "trained model reaches needs the probe with real scores near -5e4, which needs your weights mapped",
            help=map_help(ctx))
    return passed("no leak at any realistic magnitude (gradients in eval and train mode, every batch element and "
                  "head; forward perturbations; real scores near -5e4; the output equals the reference's on weights "
                  "and inputs of mha-check's choosing); only future tokens of size 1e30 reach the past, through a "
                  "finite mask: mask-fill reports that rule")


def _passed(unreferenced: set):
    """The pass, saying what it rests on: the reference where it could be used, else the child's own answers."""
    if not unreferenced:
        return passed("every output depends on all earlier and no later positions (gradients in eval and train "
                      "mode, every batch element and head; forward perturbations; with weights and inputs of "
                      "mha-check's choosing, the output equals the reference's, and position 0 also with real "
                      "scores near -5e4)")
    why = ("the weights could not be mapped, so nothing was compared with the reference" if "unmapped" in
           unreferenced else "the output differs from the reference's (reference-match reports that)")
    return passed("no leak in the gradients of its outputs (computed in the process that runs your code; eval and "
                  "train mode, every batch element) nor in its outputs under forward perturbations; "
                  f"{why}: this rests on the module's answers agreeing "
                  "with each other")


def _deep(ctx, inst, x, r, cfg, unreferenced: set):
    """Train mode (dropout 0), train mode with dropout TRAIN_DROPOUT, then each head alone, then real scores near
    -5e4, then the reference: one round trip, judged in that order.  `unreferenced` learns why a pass here rests on
    the child's answers alone."""
    train = ctx.build(cfg, force_dropout=0.0)
    groups = [(train, [train.jacobian_request(x, r, "train")])]
    heads, labels = range(cfg.heads if cfg.heads > 1 else 0), []
    if inst.layout is not None:
        w = ctx.weights_for(inst, "leak")
        wq, wk = grouped.opposed(w.wq, w.wk.shape[0], cfg.heads)  # W_k = -W_q, per key/value head when grouped
        negative = w.__class__(**{**w.as_dict(), "wq": wq * NEGATIVE_SCORES, "wk": wk * NEGATIVE_SCORES,
                                  "bq": None, "bk": None})
        x_negative = ctx.input(cfg, "leak-negative")  # never answered for before: nothing to replay
        inputs, labels = perturbed(x_negative, cfg, ctx, ("ordinary",))
        requests = []
        for h in heads:
            requests += [inst.write_request(ctx.transplanted(inst, only_head(w, h, cfg.head_width))),
                         inst.jacobian_request(x, r)]
        requests.append(inst.write_request(ctx.transplanted(inst, negative)))
        requests += [inst.forward_request(v) for v in inputs]
        ordinary, x_ordinary = ctx.weights_for(inst, "leak-reference"), ctx.input(cfg, "leak-reference")
        requests += [inst.write_request(ctx.transplanted(inst, ordinary)), inst.forward_request(x_ordinary)]
        groups.append((inst, requests))
    dropping = dropout_instance(ctx, inst, cfg, "train-dropout")
    if dropping is not None:  # last: what it raises (its build refusing the rate, its forward) stops no other probe
        x_draws = ctx.input(dataclasses.replace(cfg, batch=DRAWS_BATCH), "train-dropout")
        groups.append((dropping, [dropping.jacobian_request(x, r, "train")] +
                       [dropping.forward_request(x_draws, "train") for _ in range(TRAIN_DROPOUT_DRAWS)]))
    entries = ctx.frame(groups)
    if isinstance(entries[0], BaseException):
        raise entries[0]
    dropped = entries.pop(len(groups) - 1) if dropping is not None and len(entries) == len(groups) else None
    outcome = _leak_verdict(entries[0][0], cfg, mode="train") or \
        (_dropout_verdict(dropped, cfg) if dropped is not None else None)
    if outcome or inst.layout is None:
        if inst.layout is None:
            unreferenced.add("unmapped")
        return outcome
    if isinstance(entries[1], BaseException):
        raise entries[1]
    replies = entries[1]
    for h in heads:
        outcome = _leak_verdict(replies[2 * h + 1], cfg, head=h)  # each head's Jacobian follows its transplant
        if outcome:
            return outcome
    start = 2 * len(heads) + 1
    outputs = [o.y for o in replies[start:start + len(inputs)]]
    outcome = moved(outputs, labels, why=" with real scores near -5e4 (a finite fill such as -1e4 then outweighs "
                     "them)")
    if outcome:
        return outcome
    return _against_reference(cfg, (x_negative, negative, outputs), (x_ordinary, ordinary, replies[-1].y),
                              unreferenced, ctx.rope)


def _dropout_verdict(replies, cfg):
    """Train mode with dropout > 0, judged on what dropout cannot change in a causal layer: it multiplies the
    attention weights, so the output stays finite and a future token, whose weight is 0, keeps a gradient of exactly
    0.  The past is not judged (dropout silences some of it at random).  Several forwards, each a new draw, for
    finiteness, of a batch of DRAWS_BATCH sequences: NaN at tokens that differ between sequences is a draw per
    sequence (dropout on the masked scores, a catalogued mistake); at the same tokens in every sequence, one draw for
    the batch (dropout on the mask: a 0/1 tril mask empties a row, an additive one turns -inf into NaN), which no
    mutant is, so it is never named as the scores' mistake.  The Jacobian of one draw for the future.  A probe that
    raised while being built decides nothing here (a constructor that refuses the rate, say): eval-determinism builds
    the layer with dropout too and reports what it raises.  A forward that raised fails: the layer cannot train
    (`self.dropout(mask)` on a boolean mask raises at any rate above 0, and hands the mask back unchanged at 0)."""
    if isinstance(replies, TargetFailure) and replies.stage == "forward":
        view = is_view_error(replies.message)  # not the dropout's fault: a view the tensor's layout in training
        # refuses (scaled_dot_product_attention with dropout returns its output laid out otherwise), contiguity's
        return failed(f"your code raised {replies.message} in train() mode with dropout {TRAIN_DROPOUT}, while in "
                      "eval() mode and in train() mode with dropout 0 it runs: a layer that cannot be trained"
                      + ("; the dropout is not to blame: a view() after a transpose needs .contiguous() (contiguity "
                         "reports it)" if view else ""),
                      finding="raised at forward in train mode with dropout", fix=VIEW_FIX if view else DROPOUT_FIX)
    if isinstance(replies, BaseException):
        return None
    jacobian, *forwards = replies
    draws = [reply.y for reply in forwards if reply.y.shape == (DRAWS_BATCH, cfg.n, cfg.d_out)]
    broken = [y for y in draws if not np.isfinite(y).all()]
    if broken:
        bad = np.argwhere(~np.isfinite(broken[0]))
        positions = sorted({int(t) for t in bad[:, 1]})
        rows = [~np.isfinite(y).all(axis=-1) for y in broken]  # (sequence, token): a row with a NaN/inf
        code = "train-nan-mask" if all((row == row[:1]).all() for row in rows) else "train-nan"
        what = (f"in train() mode with dropout {TRAIN_DROPOUT}, {len(broken)} of {len(draws)} forwards of the same "
                f"{DRAWS_BATCH} sequences give NaN/inf ({len(bad)} values in the first, at token positions "
                f"{positions}), while in eval() mode and in train() mode with dropout 0 the output is finite")
        return failed(f"{what}; {LEAK_PATTERNS[code]}", observed=f"{len(bad)} NaN/inf values",
                      expected="finite values (dropout only zeroes and rescales weights)",
                      finding="leak:" + code, fix=DROPOUT_FIX)
    return _leak_verdict(jacobian, cfg, mode="train-dropout")


def _against_reference(cfg, negative, ordinary, unreferenced: set, rope=None):
    """The parent's own evidence: the output for ordinary weights equals the reference's (else the module is wrong
    whatever its mask, and the pass rests on its own answers); then position 0, which attends to itself alone, must
    equal the reference's with real scores near -5e4 for the input and each of its perturbations."""
    x_ordinary, w_ordinary, y_ordinary = ordinary
    if compare(y_ordinary, numpy_ref.forward(x_ordinary, cfg.heads, w_ordinary, rope=rope)) is not None:
        unreferenced.add("differs")
        return None
    x_negative, w_negative, outputs = negative
    expected = numpy_ref.forward(x_negative, cfg.heads, w_negative, rope=rope)[:, :1]
    for y in outputs:
        if not np.isfinite(y[:, :1]).all() and np.isfinite(expected).all():
            bad = "nan" if np.isnan(y[:, :1]).any() else "inf"
            return failed("with real scores near -5e4 (W_k = -300 W_q), output position 0, which may attend only to "
                          f"itself, is not finite ({bad}) while the reference's is, and changing the later tokens "
                          "did not move it: not a leak of the future, but a softmax that divides 0 by 0 or "
                          "overflows once real scores are that large (a shift other than the row's maximum)",
                          observed=f"position 0 = {bad}", expected="position 0 as the reference's (finite)",
                          finding="non-finite-at-large-scores",
                          fix="Subtract each row's own maximum (over its unmasked scores) before exp, as "
                              "torch.softmax does, or call torch.softmax on the masked scores.")
        mismatch = compare(y[:, :1], expected)
        if mismatch is not None:
            what = mismatch.describe()
            return failed("with real scores near -5e4 (W_k = -300 W_q), output position 0, which may attend only to "
                          f"itself, differs from the reference's: {what}; the masked future positions got weight, "
                          "as they do behind a finite fill (such as -100 or -1e4) that outweighs the real scores",
                          observed=what, expected="position 0 as the reference's",
                          finding="leak:small-leak")
    return None


def _leak_verdict(result, cfg, head=None, mode="eval"):
    """The child's Jacobian judged: exactly zero for every future position, non-zero for every allowed one."""
    where = (f" in head {head}" if head is not None else "") + {
        "train": " in train() mode (dropout 0)", "train-dropout": f" in train() mode with dropout {TRAIN_DROPOUT}",
    }.get(mode, "")
    if result.jac is None:
        if result.no_graph:
            return failed("the output is not connected to the input in the autograd graph (detached, computed "
                          "under torch.no_grad, or rebuilt from numbers): no position influences any other",
                          finding="leak:no-gradient")
        return failed(f"output has shape {tuple(result.shape)}{where}: cannot measure leakage")
    G = influence_from_jacobian(result.jac)
    future = np.triu(np.ones((cfg.n, cfg.n), bool), 1)
    scale = np.nanmax(G) if np.isfinite(G).any() else 0
    leak = (~np.isfinite(G)).any() or (G[:, future] > 0).any()
    # in train mode a dropout the module hard-codes may silence past positions at random: judge only the future.
    # An allowed position counts as dead only where its influence is exactly zero, as a mask or a detach makes it:
    # a softmax saturated by large scores (no scaling, a seed's larger inputs) gives an earlier token a weight of
    # e^-30, a gradient 1e-13 times the largest, present all the same; read as dead, a causal layer was told its mask
    # or softmax axis was wrong, at some grading seeds and not others
    dead = mode == "eval" and _dead(G, ~future).any()  # (an output that moves with no input at all, where the
    # autograd graph reaches the input: a ReLU that clamps every feature; no evidence about the mask, so not judged)
    if not (leak or dead):
        return None
    what, code = describe_leak(G)
    if mode == "train-dropout":  # right with dropout 0 (judged first): the dropout is to blame
        code = "train-nonfinite" if code == "nan" else "dropout-mask"
    elif mode == "train":
        code = "train-only"
    return failed(f"{what}{where}; {LEAK_PATTERNS[code]}", observed=what,
                  expected="zero for s > t" + (", non-zero for s <= t" if mode != "train-dropout" else ""),
                  leakage_map=(G[0] > INFLUENCE * max(scale, 1e-300)).astype(int).tolist(), finding="leak:" + code,
                  fix=DROPOUT_FIX if mode == "train-dropout" else "")


def _splits(n: int) -> list[int]:
    """Every split point of a short sequence; on the long one, every LONG_SPLIT_STRIDE-th and the last.  There the
    eval gradient already covers every pair of positions, and a leak that moves outputs (the only kind an ordinary
    perturbation sees) also fails reference-match; a mask of hard-coded size leaks from its size on, past several
    of these points.  All 63 cost as much as the rest of the check's perturbations together."""
    if n <= DEEP_MAX_N:
        return list(range(n - 1))
    return sorted(set(range(0, n - 1, LONG_SPLIT_STRIDE)) | {n - 2})


def perturbed(x, cfg, ctx, kinds, splits=None):
    """x and its perturbations: the tokens after each split point (`splits`, else every one `_splits` gives)
    changed (ordinary noise, or noise of size 1e30), with what each one is."""
    inputs, labels = [x], []
    for split in _splits(cfg.n) if splits is None else splits:
        for kind in kinds:
            x2 = x.copy()
            noise = ctx.rng("perturb", cfg, split, kind).standard_normal(x2[:, split + 1:].shape)
            x2[:, split + 1:] = x2[:, split + 1:] + noise if kind == "ordinary" else noise * HUGE
            inputs.append(x2)
            labels.append((split, kind))
    return inputs, labels


def answers_again(inst, x, y) -> bool:
    """Whether the module gives `y` again for `x`.  A forward that draws something at every call (a layer created in
    forward, weights drawn anew) moves every output between any two calls, perturbed or not: the perturbations'
    changes are then no evidence of the future (its one call's gradient, judged first, found none), and a student's
    SDPA layer with is_causal=True was told its future leaks and to mask its scores; batch-independence and
    eval-determinism say what is wrong.  Asked only after a change was seen."""
    (again,) = inst.forward_many([x])
    return np.array_equal(again, y, equal_nan=True)


def moved(outputs, labels, why="", kinds=("ordinary", "huge")):
    """Outputs of `perturbed`'s inputs: those up to each split point must not have moved at all (judged for the
    perturbations of the given kinds)."""
    y, *perturbed = outputs
    for (split, kind), y2 in zip(labels, perturbed):
        if kind not in kinds:
            continue
        before, after = y[:, : split + 1], y2[:, : split + 1]
        same = (after == before) | (np.isnan(after) & np.isnan(before))  # a nan that stays a nan has not moved
        moved = np.where(same, 0.0, np.abs(after - before)).max()
        if not np.isfinite(moved) or moved > 0:
            size = " to values of size 1e30" if kind == "huge" else ""
            if np.isnan(moved) and why == HUGE_WHY:  # a NaN is no tiny weight: the future's values overflowed
                # something before a mask hid them (a softmax by hand, exp(scores) * tril: inf times 0), trial6
                why = HUGE_NAN_WHY
            return failed(f"changing the tokens after position {split}{size} changed the outputs at positions "
                          f"0..{split} (by up to {moved:.3g}){why}: the future leaks into the past",
                          observed=f"change {moved:.3g}", expected="no change",
                          finding="leak:small-leak" if kind == "huge" or why else "leak:future")
    return None
