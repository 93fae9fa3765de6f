"""A context-length mask cut to the sequence on its rows only, `self.bias[:T] == 0` (student trial 21): the report
named mask-not-sliced with no line, and trace marked only the raise.  The mark is now mask-size-not-n at that line,
and the fix cuts both axes with the line's own bound."""
import pytest

from harness.engine.rewrite import own_line_fix


@pytest.mark.parametrize("line, fixed", [
    ('att = att.masked_fill(self.bias[:T] == 0, float("-inf"))',
     'att = att.masked_fill(self.bias[:T, :T] == 0, float("-inf"))'),
    ("w = w.masked_fill(~self.keep[:n], -1e30)", "w = w.masked_fill(~self.keep[:n, :n], -1e30)"),
    ('att = att.masked_fill(self.bias[:T, :T] == 0, float("-inf"))', None),  # both cut: the mistake is elsewhere
    ('att = att.masked_fill(self.bias[1:T] == 0, float("-inf"))', None),  # not a cut to the first T
])
def test_a_mask_cut_on_its_rows_only_is_cut_on_both(line, fixed):
    assert own_line_fix("slice", line) == fixed
