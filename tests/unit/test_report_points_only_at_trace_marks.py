"""The report's "mha-check trace marks the step that looks wrong (file:line)" points at a mark the trace makes
(harness.engine.diagnosis._marks).  Where mha-check could not tell how to call the forward, the trace withholds
what its guessed call shows (harness.engine.trace.drive.withhold_under_a_guessed_call); the diagnosis withholds the
same marks: rela-transformer 0.0.7's ReLA (tests/realzoo/lucidrains_rela_relu_attention_gated_rmsnorm.py) was
reported with "trace marks the step that looks wrong (...:108)" while its trace marked nothing."""
from types import SimpleNamespace

from harness.engine import diagnosis
from harness.engine.trace.drive import withhold_under_a_guessed_call
from harness.engine.trace.result import TraceResult

MARK = {"id": "no-divisibility-check", "mutant": "no-divisibility-check", "text": "no check that H divides d",
        "step": None}


class _Ctx:
    def __init__(self, style, raised=False):
        self._mapping = SimpleNamespace(style=style, raised=raised)
        self.result = TraceResult("layer.py:Layer", "Layer(8, 2)", {}, mistakes=[dict(MARK)], call="forward(x)",
                                  call_ways=5)

    def recorded(self):
        return self.result


def test_a_mark_the_trace_withholds_under_a_guessed_call_is_not_pointed_at():
    ctx = _Ctx(style=None)
    marks, recorded = diagnosis._marks(ctx)
    assert recorded and marks == []
    assert ctx.result.mistakes == [MARK]  # the recorded pass is read, not changed (contiguity reads it too)
    withhold_under_a_guessed_call(ctx, ctx.result)  # and the trace says so
    assert ctx.result.mistakes == [] and "not marked as a mistake" in ctx.result.notes[-1]


def test_a_mark_under_a_proven_call_is_kept():
    marks, _ = diagnosis._marks(_Ctx(style="x"))
    assert [m["id"] for m in marks] == ["no-divisibility-check"]
