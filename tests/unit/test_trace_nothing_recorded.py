"""A trace that recorded no operation says so, never "no known mistake shows" (a student's trial, issue 28: a factory
returning torch.jit.script(layer) runs where the recorder cannot see, and its mask one diagonal off, which the
checks find, was traced as showing no mistake)."""
from harness.engine.trace.result import TraceResult
from harness.engine.trace.vocabulary import WORKED
from harness.render.trace_text import render


def test_nothing_recorded_is_said_not_taken_for_no_mistake():
    text = " ".join(render(TraceResult("attn.py:build", "build(d_model=8)", dict(WORKED))).split())
    assert "no operation of your forward could be recorded" in text and "no known mistake shows" not in text
    assert "run `mha-check attn.py:build` for the full checks" in text
