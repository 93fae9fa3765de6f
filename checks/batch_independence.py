from checks import check, failed, passed
from checks._context import same, worst_difference
from checks._search import find_failure


@check(
    id="batch-independence",
    claim="each sequence's output depends only on that sequence, not on the others in the batch",
    explanation="""The batch axis only stacks independent sequences. A reshape or transpose that swaps the batch
    and sequence axes (view(n, B, ...), transpose(0, 1)) mixes tokens of different sequences: the shapes still
    agree when B and n happen to be equal, and the output of one sequence changes with its neighbours.""",
    fix="""Keep the batch axis first everywhere: (B, n, d) -> (B, n, H, dh) -> (B, H, n, dh); never view or
    transpose across axis 0.""",
)
def run(ctx):
    def prop(cfg):
        inst = ctx.build(cfg)
        x = ctx.input(cfg)
        y = inst.forward(x)
        for b in range(cfg.batch):
            alone = inst.forward(x[b:b + 1])
            if alone.shape != (1,) + y[b].shape or not same(alone[0], y[b]):
                return failed(f"sequence {b} gives a different output when run alone than inside the batch: "
                              + worst_difference(alone, y[b:b + 1], ("alone", "in the batch")),
                              observed="output depends on the other sequences", expected="the same output")
        others = x.copy()
        others[1:] = ctx.rng("others", cfg).standard_normal(others[1:].shape)
        y2 = inst.forward(others)
        if not same(y2[0], y[0]):
            return failed("changing sequences 1.. of the batch changed the output of sequence 0: "
                          + worst_difference(y2[0], y[0], ("after", "before")), observed="output of sequence 0 changed",
                          expected="no change")
        return None

    return find_failure(ctx, prop) or passed("every sequence's output is independent of the rest of the batch")
