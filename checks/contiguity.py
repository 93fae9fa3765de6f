"""contiguity: no view() on a non-contiguous tensor, neither after a transpose nor on a non-contiguous input.

It runs before output-shape: a forward that raises the view error is reported here, once, and the checks that need
a working forward are skipped.  A forward that raises something else is not judged here (output-shape reports it).
"""
from checks import Outcome, Status, check, failed, passed
from checks._dropout import TRAIN_DROPOUT, dropout_instance
from checks.construct import construct
from harness.engine.compare import same, worst_difference
from harness.engine.trace.detect_layout import SLICE_DETECTORS
from harness.wire.errors import TargetFailure

VIEW_ERROR = ("view size is not compatible with input tensor", "use .reshape(...) instead")


SLICE_FIX = """Split a (B, n, d) projection (or a slice of a fused one) into heads with `.view(B, n, H, dh)` and
    then `.transpose(1, 2)`. Adding `.contiguous()` would only hide the error: the view would still put the tokens
    where the heads belong."""


VIEW_FIX = """Call `.contiguous()` before `.view(...)` after a transpose (`ctx.transpose(1, 2).contiguous().view(B, n,
    d)`), or use `.reshape(...)`, which copies when it must."""


INPUT_FIX = """Read the input with `.reshape(...)` where your forward (or a layer it calls) views it: a caller may
    hand in a non-contiguous x (a slice, or a transpose back from another layer), which `.view` refuses; or call
    `x = x.contiguous()` first."""  # no transpose of the layer's own to put .contiguous() after (realzoo20: OpenAI
# GPT's Conv1D views its input, and the fix told of a transpose the line did not have)


def is_view_error(message: str) -> bool:
    return any(s in message for s in VIEW_ERROR)


AFTER_TRANSPOSE = "`view` after `transpose` without `contiguous()`: forward raised "
TRANSPOSE_FINDING = "view after transpose without contiguous()"


def _on_slice(outcome, ctx):
    """A view error that no view of the input explains, said as what the recorded forward shows it is: a view of a
    slice (`_raised_on_slice`), read once the search is over (the recorded forward is the lesson's worked example,
    the same for every configuration, and its round trips are not the configurations' to share)."""
    if outcome is None or not outcome.message.startswith(AFTER_TRANSPOSE):
        return outcome
    on_slice = _raised_on_slice(ctx)
    if on_slice:
        raised = outcome.message[len(AFTER_TRANSPOSE):]
        outcome.message = f"`view` on a slice (no transpose before it) raised {raised}: {on_slice}"
        outcome.observed, outcome.fix = "RuntimeError from view() on a slice", SLICE_FIX
        if outcome.details.get("finding") == TRANSPOSE_FINDING:
            outcome.details["finding"] = "view of a slice"
    return outcome


def _training(ctx):
    """The view error that shows only in train() mode with dropout: scaled_dot_product_attention with dropout_p > 0
    takes another path on the CPU, whose output is laid out otherwise, so `y.transpose(1, 2).view(B, n, d)` that ran
    in eval() mode raises there (a student's trial: causal-leakage's train-mode probe met it, and the report blamed
    the dropout).  One forward of the base configuration, built with dropout on, in train() mode."""
    cfg = ctx.base
    inst = dropout_instance(ctx, ctx.build(cfg), cfg, "contiguity-train")
    if inst is None or cfg.heads < 2 or cfg.n < 2:
        return None
    try:
        inst.forward(ctx.input(cfg, "contiguity-train"), "train")
    except TargetFailure as e:
        if e.stage == "forward" and is_view_error(e.message):
            return failed(f"{AFTER_TRANSPOSE}{e.message} in train() mode with dropout {TRAIN_DROPOUT}, though not in "
                          "eval() mode: the tensor before the view is laid out otherwise there (scaled_dot_product_"
                          "attention with dropout returns its output so), and a view needs it contiguous",
                          observed="RuntimeError from view() in train() mode", expected="a result",
                          finding=TRANSPOSE_FINDING, usable=True)  # eval() mode runs: the other checks can
    return None


def _raised_on_slice(ctx) -> str:
    """When the view that raised worked on a slice that no transpose made (a fused projection's part), what the
    recorded forward says of it, else "".  Such an error is not a missing `.contiguous()`: a view of a slice raises
    when its sizes do not keep the axes in order, and on a contiguous tensor the same view would have run and given
    wrong numbers.  When the forward cannot be read, the common case (a view after a transpose) stands."""
    return next((m["text"] for m in ctx.recorded().mistakes if m["id"] in SLICE_DETECTORS), "")


@check(
    id="contiguity",
    claim="no view() on a non-contiguous tensor: forward works after transposes and on non-contiguous inputs",
    explanation="""After transpose(1, 2) a tensor is no longer laid out contiguously in memory, and view() then
    raises "view size is not compatible with input tensor's size and stride". It only shows when H > 1 and n > 1,
    so a quick test with one head or one token misses it. A forward that calls view() on its input also breaks
    for a sliced or transposed input.""",
    fix=VIEW_FIX,
    needs=(construct,),
    example="""H = 2, n = 3: w @ v (2, 2, 3, 4) -> .transpose(1, 2) -> (2, 3, 2, 4), strides (24, 4, 12, 1):
      not contiguous
    view(2, 3, 8) on it raises 'view size is not compatible with input tensor's size and stride': a token's
      8 features sit at offsets 0-3 and 12-15, not at 8 evenly spaced places
    with H = 1 or n = 1 the same view works, so the check uses H ≥ 2 and n ≥ 2
    second run: the same x (2, 3, 8) as x.transpose(0, 1).contiguous().transpose(0, 1), same values with
      strides (8, 16, 1): forward must not raise and must give the same y""",
)
def contiguity(ctx):
    if ctx.mapping.style is None:
        return Outcome(Status.SKIP, "not judged: mha-check could not tell how to call your forward (see output-shape)",
                       details={"usable": True})
    others: list[str] = []  # errors that are not the view error: output-shape reports them

    def holds(cfg):
        inst = ctx.build(cfg)
        x = ctx.input(cfg)
        try:
            y, y2 = (r.y for r in inst.calls([inst.forward_request(x), inst.forward_request(x, noncontig=True)]))
        except TargetFailure as e:
            if e.stage == "construct":  # the constructor refused the configuration: not a forward to judge here
                raise
            if not is_view_error(e.message):
                others.append(e.message)
                return None
            if e.answered:  # the plain forward ran: the one on a non-contiguous input raised
                return failed("forward calls view() on its (non-contiguous) input: " + e.message,
                              observed="RuntimeError from view() on a non-contiguous input", expected="a result",
                              fix=INPUT_FIX, finding="view on the input", usable=True)
            return failed(AFTER_TRANSPOSE + e.message, observed="RuntimeError from view()", expected="a result",
                          finding=TRANSPOSE_FINDING)
        if not same(y2, y):
            y3, y4 = (r.y for r in inst.calls([inst.forward_request(x), inst.forward_request(x, noncontig=True)]))
            # each input once more: the strides' doing only where both answers repeat (instructor trial 9: dropout
            # left on dropped nothing in two contiguous calls and something in the one between, a fail under one
            # seed and a pass under another)
            if same(y3, y2) or not same(y3, y) or not same(y4, y2):  # the output changes from call to call
                return None  # whatever the strides (a cache rewritten by the first call, randomness):
                # eval-determinism's to report
            return failed("the output changes when the same input is given with non-contiguous strides: "
                          + worst_difference(y2, y, ("non-contiguous", "contiguous")), usable=True)
        return None

    outcome = _on_slice(ctx.find_failure(holds, min_heads=2, min_n=2), ctx) or (None if others else _training(ctx))
    if outcome is None and others:
        return Outcome(Status.SKIP, f"not judged where your forward raises {others[0][:200]} (reported by "
                               "output-shape)", details={"usable": True})
    return outcome or passed("forward works with several heads and tokens, and on non-contiguous inputs")
