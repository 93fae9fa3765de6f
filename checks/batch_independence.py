"""batch-independence: each sequence's output depends only on that sequence."""
from checks import check, failed, passed
from checks.eval_determinism import STATE_FIX
from checks.output_shape import output_shape
from harness.engine.compare import same, worst_difference


@check(
    id="batch-independence",
    claim="each sequence's output depends only on that sequence, not on the others in the batch",
    explanation="""The batch axis only stacks independent sequences. A reshape or transpose that swaps the batch
    and sequence axes (view(n, B, ...), transpose(0, 1)) mixes tokens of different sequences: the shapes still
    agree when B and n happen to be equal, and the output of one sequence changes with its neighbours.""",
    fix="""Keep the batch axis first everywhere: (B, n, d) -> (B, n, H, dh) -> (B, H, n, dh); never view or
    transpose across axis 0.""",
    example="""x: (2, 3, 8): y = model(x) must give y[0] == model(x[0:1])[0] and y[1] == model(x[1:2])[0]
      (each sequence alone: input (1, 3, 8))
    then x[1] is replaced by new random values: y[0] must not change
    merging with transpose(0, 2) instead of transpose(1, 2): y[0, 0] features 4-7 = head 0 of sequence 1,
      token 0, so y[0] changes with x[1]; with B = 1 the same code is right, so a batch of one never shows it""",
    needs=(output_shape,),
)
def batch_independence(ctx):
    def holds(cfg):
        inst = ctx.build(cfg)
        x = ctx.input(cfg)
        others = x.copy()
        others[1:] = ctx.rng("others", cfg).standard_normal(others[1:].shape)
        asked = [x, others] + [x[b:b + 1] for b in range(cfg.batch)]
        y, y2, *alone = answers = inst.forward_many(asked)
        for b, single in enumerate(alone):
            if single.shape != (1,) + y[b].shape or not same(single[0], y[b]):
                return _unless_random(inst, asked, answers, failed(
                    f"sequence {b} gives a different output when run alone than inside the batch: "
                    + worst_difference(single, y[b:b + 1], ("alone", "in the batch")),
                    observed="output depends on the other sequences", expected="the same output",
                    finding="batch mixed"))
        if not same(y2[0], y[0]):
            return _unless_random(inst, asked, answers, failed(
                "changing sequences 1.. of the batch changed the output of sequence 0: "
                + worst_difference(y2[0], y[0], ("after", "before")), observed="output of sequence 0 changed",
                expected="no change", finding="batch mixed"))
        return None

    return ctx.find_failure(holds) or passed("every sequence's output is independent of the rest of the batch")


def _unless_random(inst, asked, answers, mixed):
    """A difference between two calls proves the batch mixed only if each call gives its answer again: a forward
    that draws something at every call (a mask entry skipped at random, weights made in forward) differs between
    any two calls, alone or in the batch, and its failure is that, not a batch axis swapped (which would name a
    mistake the layer does not have).  Every call is asked once more, in one frame."""
    again = inst.forward_many(asked)
    moved = next((i for i, (first, second) in enumerate(zip(answers, again))
                  if first.shape != second.shape or not same(second, first)), None)
    if moved is None:
        return mixed
    return failed("the same input gave different outputs in two calls (call "
                  f"{moved + 1} of {len(asked)}, asked twice): " + worst_difference(again[moved], answers[moved],
                                                                                  ("second time", "first time"))
                  + "; forward changes from one call to the next (something random drawn at every call, or state "
                  "kept between calls), so no sequence's output depends only on that sequence",
                  observed="different outputs for one input", expected="identical outputs",
                  finding="differs between calls", fix=STATE_FIX)
