"""reference-match: with the same weights, the output equals the lesson's CausalMHA (float64 in, relative 1e-5), and
in float32, as the layer is trained, it equals the float64 reference within float32's own tolerance.

The float32 probe.  Every other configuration mha-check sends is float64 with a batch of at most 3 and at most 64
tokens, so a layer right in float64 and wrong in float32 (a branch on `x.dtype`, a mask or a constant made for one
dtype) would pass everything.  Two more configurations, asked in the same frames as the others and judged after
them: the first required one's widths and heads, module and input in float32 and torch's default dtype float32 while
it is built and run, with a batch and a length drawn from the seed (`float32_probes`): a full context (a batch of 8
to 16, n = context_length from 40 to 63: a training batch of context_length tokens; heads 16, 32 or 64 wide, as a
model's are, where every other configuration's are at most 8) and a shorter one (a batch of 4
to 7, 11 to 39 of 64 tokens).  Until red team 9 it was one public shape, a batch of 4 and 48 of 64 tokens: a layer
wrong in float32 except at that shape, or only where n equals its context_length, had full marks; a grade's seed is
secret, so a layer that is right in float32 only at the probe's shapes must now be right at every shape the draws
reach.  A batch and a length the float64 set never uses, but not more than 64 tokens: the longest float64
configuration (64 of 64) is what proves a layer holds that many, and a layer whose mask is made for 64 tokens
whatever context_length says (tests/unit/test_grouped_config.py has one) is not wrong for it; 80 tokens would make
it raise, and that is no evidence about float32.  Its weights and input are rounded to float32 by the trusted side,
so the float64 reference computes on exactly the numbers the module holds and only the module's own float32
arithmetic lies between them.

The float32 tolerance, FLOAT32_RTOL and FLOAT32_ATOL (relative 1e-4 + absolute 1e-4 of the largest expected
magnitude).  float32 rounds each operation to a relative u = 2^-24 ~ 6e-8.  An output is reached through sums of
at most k = d_in (projections) + head width (scores) + n (softmax and weights @ values) + d_out (output projection)
terms, about 70 for the probe (k ~ 170 for d = 64 and n = 128); the first-order error bound is k·u ~ 1e-5 of the
magnitudes summed.  A factor of 10 covers what the bound leaves out: cancellation (terms larger than their sum),
other summation orders and fused kernels, and a rotary angle computed in float32 (position × frequency rounded: up
to n·u of a radian).  Measured: the lesson's layer in float32 against this reference, 30 draws each of nine sizes
up to d = 64, n = 128: at most 3.4e-7 of the largest magnitude, 300 times below the tolerance.  Every float32-only
mistake of the hostile suite is 0.02 or more (tests/hostile/float32_only.py).

The float32 module is also run as a training step runs it (train() mode with every nn.Dropout at 0, autograd on:
`_as_trained`), against the same reference: a layer may tell the eval() probe from training by its grad mode.  Its
input there is the output of an operation (a sum with zeros, in the worker), as every attention layer's input in a
model is, not a leaf (red team 9: a layer without its mask wherever x.grad_fn was set had full marks); and its
gradients are judged too (`_trained_gradients`: a backward negated in float32 only had full marks).  The eval()
probe's module is built with dropout 0.5 (EVAL_DROPOUT), which eval() must switch off: dropout left on in eval() in
float32 only had full marks; where the float64 module leaves it on too, that is eval-determinism's to judge.

A float32 probe that raises (or a constructor that refuses float32) is cannot tell, never a failure: the float64
configurations passed, and it was mha-check that chose float32 and the probe's larger sizes (a KV cache preallocated
for a batch of 4 raises at a batch of 8: the report says so, not float32 alone; a constructor's max_batch_size,
Meta llama's, is bound to a batch every probe fits in, harness.wire.config.MAX_BATCH).

Its cost (measured with the one probe of before; the second probe travels in the same frames): one round trip
more per target (26 instead of 25 for examples/correct_attention.py), the float32 module's
Build, whose readings of the parameters the transplant needs before its weights can be written; its transplant and
forward then go alone.  Taking the readings from the float64 module with the same constructor arguments would save
it, on the child's word that a float32 build has the same parameters.  Measured side by side: a single run's median
1.93 s against 2.01 s before (31 runs each, alternating), `grade` of 30 submissions 10.27 s against 10.25 s.
"""
import dataclasses

import numpy as np

from checks import cannot_tell, check, failed, passed
from checks.output_shape import output_shape
from harness.engine.compare import compare
from harness.wire import messages as m
from harness.wire.config import FLOAT32, FLOAT64
from harness.wire.errors import TargetFailure
from reference import numpy_ref

FLOAT32_RTOL, FLOAT32_ATOL = 1e-4, 1e-4  # see the module's docstring for the derivation
FLOAT32_GRAD_ATOL = 1e-3  # a weight's gradient sums over every token of the batch (up to 16 x 63): ten times looser
GRAD_NAMES = {"x": "the input", "wq": "W_q", "wk": "W_k", "wv": "W_v", "wo": "W_o", "bq": "b_q", "bk": "b_k",
              "bv": "b_v", "bo": "the output bias"}
EVAL_DROPOUT = 0.5  # the float32 eval() probe's module: the rate eval-determinism's first module has
PROBE = {"batch": 4, "n": 48, "context_length": 64}  # one probe shape, for the unit tests; the check draws its own
PROBE_FULL = {"batch": (8, 16), "n": (40, 63)}  # drawn, both ends included: n = context_length, a training batch
PROBE_SHORT = {"batch": (4, 7), "n": (11, 39)}  # n below a context_length of 64 (PROBE_CONTEXT); the float64 set's
# batch is at most 3 (8 for batch-independence) and its n is 1..10 or 64.  Each range meets the other's end: a layer
# wrong in float32 from some length (or batch) on is seen by the full probe, one wrong below it by the short one
PROBE_CONTEXT = 64  # a mask made for 64 tokens, hard-coded, still holds every drawn n
MAX_FLOAT64_HEAD_WIDTH = 8  # the widest heads of every other configuration (harness.engine.search)
PROBE_HEAD_WIDTHS = (16, 32, 64)  # the full probe's head width, drawn: a model's (64, 128), where every other
# configuration's is at most 8 (red team 9: a layer without its mask from a head width of 16 on had full marks)


def float32_probes(ctx):
    """The float32 configurations: the first required configuration (its widths, heads, form and grouping) with
    batches and lengths the float64 configurations never use, drawn from the seed (red team 9: the one probe of a
    batch of 4 and 48 of 64 tokens was public, and a layer wrong in float32 everywhere else, or only where n equals
    its context_length, as in every training batch of context_length tokens, had full marks).  Two: a full
    context (n = context_length, both drawn) and a shorter one (n below a context_length of 64); a grade's seed is
    secret, so a layer cannot know either shape."""
    rng = ctx.rng("float32-probe")
    draw = lambda span: int(rng.integers(span[0], span[1] + 1))
    full, short = draw(PROBE_FULL["n"]), draw(PROBE_SHORT["n"])
    base = ctx.base
    wide = int(rng.choice(PROBE_HEAD_WIDTHS))  # the same heads (and key/value heads), each as wide as a model's
    d_out = base.heads * wide
    d_in = d_out if base.d_in == base.d_out else base.heads * (3 * wide // 2)
    return [ctx.fitted(dataclasses.replace(base, dtype=FLOAT32, batch=draw(PROBE_FULL["batch"]), n=full,
                                           context_length=full, d_out=d_out, d_in=d_in)),
            dataclasses.replace(ctx.base, dtype=FLOAT32, batch=draw(PROBE_SHORT["batch"]), n=short,
                                context_length=PROBE_CONTEXT)]


def _as_trained(ctx, inst, cfg, x, gy, trained, expected):
    """The float32 probe as a training step runs the layer: train() mode (every nn.Dropout at 0), autograd on.
    A layer may tell mha-check's probes from training by the dtype and the grad mode together: red team 7's layer
    was the lesson's in float64 and wherever autograd was off, and left out the mask and the scale only in float32
    with autograd on, every training step; the eval() probe, run without autograd, gave it full marks.  Equal to the
    reference within float32's tolerance, or a failure.  Where it differs, a second step on the same input: outputs
    that change from one step to the next are no evidence where float64 training changes them too (a dropout rate of
    the layer's own, `F.dropout(w, 0.1, ...)`, that dropout 0 does not reach); where float64 training does not, the
    change appears only in float32 training, and is a failure too."""
    mismatch = compare(trained, expected, FLOAT32_RTOL, FLOAT32_ATOL)
    if mismatch is None:
        return None
    try:  # two more training steps, asked only here: is the difference a draw of its own?
        drawn = _draws(lambda xs: inst.vjp(xs, np.concatenate([gy] * COPIES), "train").y, x)
    except TargetFailure:
        return None
    if drawn:
        if _random_in_float64_training(ctx, cfg, x):
            return None
        what = ("in float32 train() mode with autograd on (as in training) the output changes from one call to the "
                "next, though dropout is 0 and in float64 train() mode it does not; against the float64 reference "
                "with the same weights: " + mismatch.describe())
    else:
        what = ("in float32 train() mode with autograd on and dropout 0 (as a training step runs it) the output "
                "differs from the float64 reference with the same weights, which it matches in eval() mode: "
                + mismatch.describe())
    return failed(what, observed=mismatch.describe(),
                  expected=f"in float32, difference below {FLOAT32_RTOL:g} relative + {FLOAT32_ATOL:g}·scale",
                  fix="make the forward the same computation in every mode and dtype: no branch on x.dtype, "
                      "self.training or torch.is_grad_enabled() that changes the mask, the scale or the fill",
                  mismatch=mismatch.to_dict(), dtype=FLOAT32, mode="train")


def _gradients_off(got, want: dict) -> list:
    """(role, Mismatch) for each gradient of `got` (an m.Gradients) beyond float32's tolerance of `want`'s; a role
    without a gradient in either is parameters-used's to judge, not compared here."""
    mine = {"x": got.gx, **got.grads}
    off = []
    for key, expected in want.items():
        if mine.get(key) is None or expected is None:
            continue
        mismatch = compare(mine[key], expected, FLOAT32_RTOL, FLOAT32_GRAD_ATOL)
        if mismatch is not None:
            off.append((key, mismatch))
    return off


def _trained_gradients(ctx, cfg, x, gy, w, step):
    """The float32 training step's gradients (its output already equal to the reference): a layer may be right in
    every forward and wrong only in float32's backward (red team 9: a custom autograd Function that passed the
    upstream gradient on in float64 and its negative in float32, gradient ascent in every training step, had full
    marks; gradient-match asks float64 only).  Against the float64 reference's gradients; where they differ, the
    module's own float64 gradients for the same weights, input and upstream gradient: if the float32 ones equal
    those, the difference is the same in both dtypes and gradient-match's to judge (a detach, no_grad); only a
    difference of float32's own is a failure here."""
    if step.no_graph:
        got = None
    else:
        cache = {}
        numpy_ref.forward(x, cfg.heads, w, cache=cache, rope=ctx.rope)
        off = _gradients_off(step, numpy_ref.backward(gy, w, cache))
        if not off:
            return None
        got = step
    try:  # the same step in float64, asked only here
        wide = ctx.build(dataclasses.replace(cfg, dtype=FLOAT64), force_dropout=0.0)
        ctx.transplant(wide, w)
        own = wide.vjp(x, gy, "train")
    except TargetFailure:
        return None  # what it raises there is not this probe's to judge
    if not isinstance(own, m.Gradients) or own.no_graph:
        return None
    if got is None:
        return failed("in float32 train() mode with autograd on (as in training) the output does not require grad, "
                      "though in float64 it does: the layer cannot learn in float32", observed="no gradient in float32",
                      expected="gradients for the input and the weights", dtype=FLOAT32, mode="train",
                      fix="keep the forward differentiable in every dtype: no branch on x.dtype that detaches it")
    own_off = _gradients_off(step, {"x": own.gx, **own.grads})
    if not own_off:
        return None
    try:  # a dropout of the layer's own (F.dropout(y, 0.1, training=self.training)): each step draws its own mask
        if _draws(lambda xs: wide.forward_many([xs], "train")[0], x):
            return None
    except TargetFailure:
        return None
    key, mismatch = own_off[0]
    names = ", ".join(GRAD_NAMES.get(k, k) for k, _ in own_off)
    return failed(f"in float32 train() mode with autograd on (as in training) the gradients for {names} differ "
                  f"from those of float64 with the same weights, input and upstream gradient (the output equals the "
                  f"reference's in both): for {GRAD_NAMES.get(key, key)} " + mismatch.describe(),
                  observed=f"float32 gradients differ: {names}",
                  expected=f"in float32, difference below {FLOAT32_RTOL:g} relative + {FLOAT32_GRAD_ATOL:g}·scale",
                  fix="make the backward the same computation whatever the dtype: no custom autograd Function or "
                      "hook that changes the gradient for one dtype",
                  mismatch=mismatch.to_dict(), dtype=FLOAT32, mode="train")


def _wide_in_float64(ctx, cfg, w, x, expected):
    """The float32 probe's heads are as wide as a model's, which no float64 configuration's are: a float32 failure
    there is asked once more in float64, and one that holds in float64 too is told as what it is, a mistake at that
    width (red team 9: a layer without its mask from a head width of 16 on), not one of float32's."""
    try:
        inst = ctx.build(dataclasses.replace(cfg, dtype=FLOAT64))
        ctx.transplant(inst, w)
        mismatch = compare(inst.forward(x), expected)
    except TargetFailure:
        return None
    if mismatch is None:
        return None
    return failed(f"with heads {cfg.head_width} wide, as a model's (every other configuration's are at most "
                  f"{MAX_FLOAT64_HEAD_WIDTH}), the output differs from the reference with the same weights, in float64 "
                  "as in float32: " + mismatch.describe(), observed=mismatch.describe(),
                  expected="difference below 1e-5 relative", mismatch=mismatch.to_dict(),
                  fix="make the forward the same computation whatever the widths: no branch on the head width or "
                      "d_out, no constant made for narrow heads only")


def _eval_dropout_in_float64(ctx, cfg, w, x, expected) -> bool:
    """The float64 module built with dropout 0.5 differs from the reference in eval() mode too (or raises there):
    dropout left on in eval() whatever the dtype, eval-determinism's to judge."""
    try:
        inst = ctx.build(dataclasses.replace(cfg, dtype=FLOAT64, dropout=EVAL_DROPOUT))
        ctx.transplant(inst, w)
        return compare(inst.forward(x), expected) is not None
    except TargetFailure:
        return True


COPIES = 16  # the input side by side this many times where a draw is looked for: a shrunk configuration's 4 values
# came out of F.dropout(p=0.1) untouched in two steps in turn often enough (0.9^8) to call a random layer a fixed one


def _draws(run, x) -> bool:
    """Two runs of `run` on COPIES copies of `x` (one batch) differ: the layer draws something of its own."""
    many = np.concatenate([x] * COPIES)
    return not np.array_equal(run(many), run(many), equal_nan=True)


def _random_in_float64_training(ctx, cfg, x) -> bool:
    """The float64 module of the same configuration gives two different outputs for one input in train() mode with
    every nn.Dropout at 0."""
    wide = dataclasses.replace(cfg, dtype=FLOAT64)
    try:
        inst = ctx.build(wide, force_dropout=0.0)
        return _draws(lambda xs: inst.forward_many([xs], "train")[0], x)
    except TargetFailure:
        return True  # what it raises there is not this probe's to judge


def _mixed_tables_fix(convention: str) -> str:
    """The fix of a rotary layer whose pairs and cos/sin tables are of different conventions (harness.engine.mapping.
    _mixed_tables), in words: which layout the tables need for the pairs it turns, or the other pairs."""
    if convention == "half":
        return ("your rotation pairs x_i with x_i+dh/2 (rotate_half), so each cos/sin table must hold the dh/2 "
                "frequencies twice over: torch.cat((freqs, freqs), dim=-1), not repeat_interleave(2, dim=-1); or keep "
                "the interleaved tables and rotate the pairs (x0, x1), (x2, x3), ...: stack((-x[..., 1::2], "
                "x[..., ::2]), dim=-1).flatten(-2)")
    return ("your rotation pairs (x0, x1), (x2, x3), ... (interleaved), so each cos/sin table must hold every "
            "frequency "
            "twice in a row: repeat_interleave(2, dim=-1), not torch.cat((freqs, freqs), dim=-1); or keep those "
            "tables and rotate with rotate_half: torch.cat((-x2, x1), dim=-1) of the two halves")


@check(
    id="reference-match",
    claim="with the same weights, the output equals the lesson's CausalMHA (float64 in, relative 1e-5; in float32, "
          "relative 1e-4)",
    explanation="""mha-check copies the same Q, K, V and output-projection weights into your module and into the
    reference, feeds both the same input and compares. Any difference beyond rounding is a bug: scaling, masking,
    softmax axis, reshapes, a missing projection or a wrong role. It does so in float64, and once more with your
    module and input in float32 (as a layer is trained), against the same float64 reference within float32's
    rounding (relative 1e-4 of the largest value).""",
    fix="""Follow the lesson: project, view(B, n, H, dh).transpose(1, 2), scores = q @ k.transpose(-2, -1) / dh**0.5,
    masked_fill with -inf, softmax over the last axis, @ v, transpose back, contiguous().view, output projection.""",
    needs=(output_shape,),
    weights=True,
    example="""d = 8, H = 2: the same W_q, W_k, W_v, W_o (8 × 8 each) and b_o (8) go into your module and the reference
    x: (2, 3, 8) -> y: (2, 3, 8); every value must agree within 1e-5 relative (float32 rounding)
    largest differences seen with random weights (three draws): scores / sqrt(8) instead of / sqrt(4) 0.02-0.07,
      no scaling 0.07-0.18, Q and K swapped 0.17-0.46, no mask 0.56-0.91
    fill -10 instead of -inf: about 1e-4, still caught; fill -100: exactly 0 (only causal-leakage sees it)
    float32: module and x (B, n, 8) in float32 (B and n drawn from the seed: 8-16 and 40-63 of as
      many, heads 16 to 64 wide; 4-7 and 11-39 of 64), compared with the float64 reference within 1e-4 relative
      (the lesson's layer in float32: at most 3.4e-7)""",
)
def reference_match(ctx):
    def holds(cfg):
        in_float32 = cfg.dtype == FLOAT32
        dropping = None
        try:
            inst = ctx.build(cfg, force_dropout=0.0) if in_float32 else ctx.build(cfg)
            w = ctx.weights_for(inst)
            ctx.transplant(inst, w)
            x = ctx.input(cfg)
            if in_float32:  # eval() mode, and as a training step runs it (see _as_trained): what the
                # second group raises (an input changed in place, a leaf that requires grad; a kernel without a CPU
                # backward) leaves the eval() probe to judge alone
                gy = ctx.rng("float32-gy", cfg).standard_normal((cfg.batch, cfg.n, cfg.d_out))
                # eval() mode on a module built with dropout 0.5, which eval() must switch off (red team 9: dropout
                # applied in eval() in float32 only had full marks, every float32 module being built with 0)
                try:
                    dropping = ctx.build(dataclasses.replace(cfg, dropout=EVAL_DROPOUT))
                    ctx.transplant(dropping, w)
                except TargetFailure:  # a constructor that refuses dropout 0.5 is eval-determinism's to judge:
                    dropping = inst  # eval() mode on the module built with dropout 0
                entries = ctx.frame([(dropping, [dropping.forward_request(x)]),
                                     (inst, [inst.vjp_request(x, gy, "train")])])
                if isinstance(entries[0], BaseException) and dropping is not inst:
                    entries = [[m.Output(inst.forward(x))], *entries[1:]]
                if isinstance(entries[0], BaseException):
                    raise entries[0]
                y = entries[0][0].y
                step = inst.gradients(entries[1][0]) if len(entries) > 1 and isinstance(entries[1], list) else None
                trained = step.y if isinstance(step, m.Gradients) else None
            else:
                y = inst.forward(x)
        except TargetFailure as e:
            if not in_float32:
                raise
            return cannot_tell(f"your code passed in float64 but raised when mha-check built and ran it in float32 "
                               f"({cfg.describe()}): {e.message}; mha-check chose float32 and these sizes (a batch of "
                               f"{cfg.batch}, {cfg.n} tokens, heads {cfg.d_out // max(cfg.heads, 1)} wide, larger "
                               "than the float64 configurations': a cache or table sized for fewer, as a "
                               "max_batch_size, raises there), so it cannot tell whether the layer is wrong there",
                               dtype=FLOAT32)
        tolerance = (FLOAT32_RTOL, FLOAT32_ATOL) if in_float32 else ()
        expected = numpy_ref.forward(x, cfg.heads, w, rope=ctx.rope)
        mismatch = compare(y, expected, *tolerance)
        if mismatch is not None and in_float32 and dropping is not inst:
            try:
                plain = compare(inst.forward(x), expected, *tolerance)  # eval() mode on the module built with 0
            except TargetFailure:
                plain = mismatch
            if plain is None:  # the difference is the dropout's, 0.5 left on in eval() mode
                if not _eval_dropout_in_float64(ctx, cfg, w, x, expected):
                    return failed("in float32 eval() mode your module built with dropout 0.5 differs from the "
                                  "reference with the same weights, which it matches when built with dropout 0 and "
                                  "in float64 eval() mode: dropout stays on in eval() in float32 only: "
                                  + mismatch.describe(), observed=mismatch.describe(),
                                  expected="in eval() mode, no dropout in any dtype",
                                  fix="apply dropout only in training (nn.Dropout, or F.dropout(..., "
                                      "training=self.training)), whatever the dtype",
                                  mismatch=mismatch.to_dict(), dtype=FLOAT32)
                mismatch = None  # on in float64 too: eval-determinism's to judge; the training step is still asked
        if mismatch is None:
            if not in_float32 or trained is None:
                return None
            return _as_trained(ctx, inst, cfg, x, gy, trained, expected) or _trained_gradients(ctx, cfg, x, gy, w, step)
        if in_float32 and cfg.head_width > MAX_FLOAT64_HEAD_WIDTH:  # a width no float64 configuration had
            wider = _wide_in_float64(ctx, cfg, w, x, expected)
            if wider is not None:
                return wider
        if in_float32:
            return failed("in float32 (your module and its input in float32, as in training) the output differs "
                          "from the float64 reference with the same weights, which it matches in float64: "
                          + mismatch.describe(), observed=mismatch.describe(),
                          expected=f"in float32, difference below {FLOAT32_RTOL:g} relative + {FLOAT32_ATOL:g}·scale",
                          fix="make the forward the same computation whatever the dtype: no branch on x.dtype, no "
                              "mask, fill value or scale made for one dtype only",
                          mismatch=mismatch.to_dict(), dtype=FLOAT32)
        if ctx.mapping.how == "mixed-rotary":  # pairs of one rotary convention turned by tables of the other
            return failed("output differs from the rotary reference with the same weights, its cos/sin tables laid "
                          "out for the pairs your rotation turns (" + ctx.rope.describe() + "): "
                          + mismatch.describe(), observed=mismatch.describe(), expected="difference below 1e-5 "
                          "relative", fix=_mixed_tables_fix(ctx.rope.convention), mismatch=mismatch.to_dict(),
                          finding="rotary tables of the other convention")
        return failed("output differs from the reference with the same weights: " + mismatch.describe(),
                      observed=mismatch.describe(), expected="difference below 1e-5 relative",
                      mismatch=mismatch.to_dict())

    single = ctx.form.single  # one head: the previous lesson's CausalAttention (no output projection), or one head
    # followed by W_o (the lesson's layer with H = 1)
    which = ("single-head reference (the previous lesson's CausalAttention: one head of width d_out, no output "
             "projection) " if single and not ctx.form.out_proj else "reference with one head (the lesson's layer "
             "with H = 1: one head, then the output projection) " if single else "grouped-query reference (query "
             "heads sharing key/value heads) " if ctx.grouped else "reference ")
    rope = f"with {ctx.rope.describe()} " if ctx.rope else ""
    return ctx.find_failure(holds, after=float32_probes(ctx)) or passed(
        f"equals the {which}{rope}for every configuration tried",
        **({"form": ctx.form.name if single else "grouped" if ctx.grouped else "rotary"}
           if single or ctx.grouped or ctx.rope else {}))  # the report shows what was judged, not the plain claim
