"""Red team 15: the lines the trusted side parses (to write a one-line fix, to read a line the trace recorded) are
the child's text, and CPython's parser raises MemoryError on `- - - ... 1` 6,100 deep and RecursionError on `a[0]`
3,000 times; neither was caught, and a single run crashed with a traceback before any report was written.  Such a
line is no Python we can read: a SyntaxError like any other, and the next parse works as before."""
import pytest

from harness.engine import rewrite
from harness.engine.trace.detect_widths import _names, _width_passed_in


@pytest.mark.parametrize("line", ["scores = " + "-" * 6100 + "1", "a" + "[0]" * 3000, "lambda:" * 3000 + "1"])
def test_a_line_too_deep_for_the_parser_is_a_syntax_error_and_no_crash(line):
    with pytest.raises(SyntaxError, match="too deeply nested"):
        rewrite.parse(line)
    assert rewrite.own_line_fix("scale", line, "the scores are never divided by sqrt(d_head)") is None
    assert _names(line) == {None} and _width_passed_in(line, ["head_size"]) is False
    assert type(rewrite.parse("x = f(a, b)").body[0]).__name__ == "Assign"
