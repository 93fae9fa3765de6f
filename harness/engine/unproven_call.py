"""How to call a forward that takes a mask (or a causal flag) when no reading of the parameters proved how: by the
one piece of evidence that needs no weights, whether the future leaks (issue 28, "cannot tell" only where there is
truly no evidence).

The mapping proof (`harness.engine.mapping`) uses a way of calling forward only once the reference, or a known
mistake, reproduces the module's output with it.  A layer it cannot map (no output projection, as CS224n-style
course code writes it, or a reading it does not know) whose forward also takes an optional mask was left with no
way to call it at all: output-shape said "cannot tell how to call your forward" and every check after it was
skipped, so a layer that multiplies its scores by the mask and the same layer fixed got the same verdict.

Yet batch independence, eval determinism, input untouched, mask device, output shape and leakage judge only what
the module does when called, not its weights.  Here each way of calling it (`info.call_styles`, the plain call
first where the mask is optional) is asked for the eval-mode gradient of every output position with respect to
every input position on the base configuration, and:

- when the plain call (no mask given, where the mask is optional) hides some positions (later ones, or earlier
  ones: `triu` where `tril` was meant) but lets later ones through, the layer masks by itself, wrongly
  (`tril(..., diagonal=1)` as its default): the plain call is used, and causal-leakage fails there, whatever a
  caller's mask would do;
- else the first under which the output has the expected shape, depends on every earlier position and on no later one
  is used (a layer that masks by itself: the plain call; one that leaves the mask to its caller: the first
  convention under which it is causal).  That is no proof of the convention, and the mapping's note says so;
- else, where no way is causal so, the first under which the output depends on no later position and on each
  earlier one only within a window of k >= 1 positions (a sliding window: `leakage.judge`'s WINDOW) is used, and
  causal-leakage fails there for the earlier positions without influence;
- when every way that ran lets the future through (or gives no gradient at all), the first is used: causal-leakage
  then fails there and says that every way of calling forward tried leaks, a bug whatever the caller was meant to
  pass;
- when every way that ran gives an output of another shape than (B, n, d_out), the first is used, and output-shape
  fails with the shape it got.

Otherwise the calls disagree without one being causal, or earlier positions have no influence where no later one
has any (a layout of the module's own, such as sequence-first, reads our axes otherwise): that is no evidence, and
the proof's outcome stands, as it does when forward raises whichever way it is called.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from harness.engine.leakage import (  # noqa: F401 - and for readers
    CAUSAL, LEAKS, MASKS_SOME, UNCLEAR, WINDOW, WRONG_SHAPE, judge)
from harness.engine.mapping import Mapping
from harness.wire.errors import CannotDrive, TargetFailure

UNDECIDED_CALL = "; and mha-check could not tell how to pass the causal mask"  # the proof's words for no call


@dataclass(frozen=True)
class CallEvidence:
    """How forward is called without a proof, and why: each way tried with what it showed (None: it raised)."""

    style: int
    tried: tuple[tuple[str, str | None], ...]  # (the call, what it showed: judge(); None: it raised)
    default: str = ""  # the leaking call the plain one reproduces exactly: the layer's own default mask

    @property
    def every_call_leaks(self) -> bool:
        shown = [seen for _, seen in self.tried if seen is not None]
        return bool(shown) and all(seen in (LEAKS, MASKS_SOME) for seen in shown)

    @property
    def first_leaks(self) -> bool:
        """The first way of calling forward (the plain call, where the mask is optional) lets the future through."""
        return self.tried[0][1] in (LEAKS, MASKS_SOME)

    @property
    def masks_itself(self) -> bool:
        """Called without a mask, forward hides some positions (later or earlier) and lets a later one through: it
        masks by itself, wrongly."""
        return self.style == 0 and self.tried[0][1] == MASKS_SOME

    def ran(self) -> str:
        """The calls that ran, in a few words: "forward(x), forward(x, mask=...) and 11 more; 2 others raised"."""
        calls = [call for call, seen in self.tried if seen is not None]
        raised = len(self.tried) - len(calls)
        return (", ".join(calls[:2]) + (f" and {len(calls) - 2} more" if len(calls) > 2 else "")
                + (f"; {raised} other{'s' if raised > 1 else ''} raised" if raised else ""))

    def note(self) -> str:
        call, seen = self.tried[self.style]
        if seen == WINDOW:
            return (f"how to pass the mask is not proven (no reading of your parameters reproduced your output): "
                    f"forward was called as {call}, the first way tried under which no output depends on a later "
                    f"input; called so, each output also ignores every input more than a few positions before it (a "
                    f"sliding window), and no way tried let every earlier input count")
        if seen == CAUSAL:
            passed_over = [c for c, s in self.tried[:self.style] if s is not None]
            others = f" or {len(passed_over) - 1} other way{'s' if len(passed_over) > 2 else ''} before it" \
                if len(passed_over) > 1 else ""
            after = f" (called as {passed_over[0]}{others}, some output depends on a later input)" if passed_over \
                else ""
            return (f"how to pass the mask is not proven (no reading of your parameters reproduced your output): "
                    f"forward was called as {call}, the first way tried under which no output depends on a later "
                    f"input{after}")
        if self.default:
            return (f"forward was called as {call}: called so, it computes exactly what it computes as {self.default}, "
                    "so that is its own default mask, and some output depends on a later input (another way of "
                    "calling it is causal, but a caller who relies on the default gets the leak)")
        if self.masks_itself:
            return (f"forward was called as {call}: called so, it hides some positions and lets a later one through, "
                    "so it masks by itself, and some output depends on a later input")
        if self.every_call_leaks:
            return (f"forward was called as {call}: under every way of calling it that ran ({self.ran()}), some "
                    "output depends on a later input")
        return (f"forward was called as {call}: no way of calling it that ran ({self.ran()}) gave an output of shape "
                "(B, n, d_out)")


def _own_default(inst, x, seen: list, bare: list) -> int | None:
    """A way of calling forward with a mask whose output the plain call (no mask given) reproduces exactly, though it
    leaks and another convention is causal: the layer's own default mask is a causal mask in that convention, which
    its code mishandles (`att + mask` with a 0/1 `tril` as its default: called without a mask, +1 on the past).  A
    layer that leaves the mask to its caller attends to everything when called without one, which no mask tried
    reproduces; one whose default is right is causal called so.  None: no such evidence."""
    if not bare or not bare[0] or seen[0] != LEAKS:
        return None
    outputs = {}
    for style in [0] + [i for i, s in enumerate(seen) if s in (LEAKS, MASKS_SOME) and not bare[i]]:
        inst.style = style
        try:
            outputs[style] = inst.forward(x)
        except (TargetFailure, CannotDrive):
            continue
    plain = outputs.pop(0, None)
    if plain is None or not np.isfinite(plain).all():
        return None
    return next((i for i, y in outputs.items() if y.shape == plain.shape and np.array_equal(y, plain)), None)


def settle(ctx, proof: Mapping) -> tuple[Mapping, CallEvidence | None]:
    """`proof`, with a way of calling forward chosen by leakage evidence where the proof found none but there are
    several to choose from; and that evidence (None: the proof's own choice, or nothing could be chosen)."""
    if proof.style is not None or proof.certain:
        return proof, None
    cfg = ctx.base
    inst = ctx.subject.build(cfg)
    calls = inst.info.call_styles
    if len(calls) < 2:
        return proof, None
    x = ctx.input(cfg, "call-evidence")
    r = ctx.rng("call-evidence-r", cfg).standard_normal(cfg.d_out)
    seen: list[str | None] = []
    for style in range(len(calls)):
        inst.style = style
        try:
            seen.append(judge(inst.jacobian(x, r), cfg))
        except (TargetFailure, CannotDrive):  # it raised (a mask of a type the code does not take), or torch
            seen.append(None)  # cannot differentiate it here (a platform limit): no evidence either way
    ran = [i for i, s in enumerate(seen) if s is not None]
    shown = {seen[i] for i in ran}
    bare = inst.info.call_bare or [False] * len(calls)
    default = _own_default(inst, x, seen, bare) if CAUSAL in shown else None
    if seen[0] == MASKS_SOME and bare[0]:  # no mask given, yet some of the future hidden: its own mask leaks
        style = 0
    elif default is not None:  # no mask given, it computes what a leaking mask convention computes: its default
        style = 0
    elif CAUSAL in shown:
        style = seen.index(CAUSAL)
    elif WINDOW in shown:  # no call lets every earlier position count, and one hides only those beyond a window
        style = seen.index(WINDOW)
    elif ran and (shown <= {LEAKS, MASKS_SOME} or shown == {WRONG_SHAPE}):  # the same under every call that
        style = ran[0]  # ran: the module's, not our choice
    else:  # nothing ran, or calls disagree without one being causal: no evidence, the proof's outcome stands
        return proof, None
    evidence = CallEvidence(style, tuple(zip(calls, seen)), calls[default] if default is not None else "")
    note = "; ".join(n for n in (proof.note, evidence.note()) if n)
    problem = proof.problem.partition(UNDECIDED_CALL)[0]  # the call is decided now: what is left undecided
    return dataclasses.replace(proof, style=style, style_text=calls[style], note=note, problem=problem), evidence
