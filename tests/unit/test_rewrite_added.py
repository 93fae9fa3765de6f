"""An added 0/1 mask, corrected (harness.engine.rewrite, kind "added"): the student's line with the scores filled by
masked_fill where the trace says the mask's 1s hide (`.bool()`: they mark the future) or do not (`== 0`: they mark
what a token may see).  Told only "masked_fill", a student passed the float mask itself, which raises."""
import pytest

from harness.engine.rewrite import own_line_fix
from harness.engine.trace.vocabulary import ONES_ON_ALLOWED, ONES_ON_FUTURE

TOLD = "a mask of finite values (0s and 1s) is added to the scores ... (masked_fill) instead"


@pytest.mark.parametrize("line, told, fixed", [
    ("att = att + self.causal_mask[:N, :N]", ONES_ON_FUTURE,
     'att = att.masked_fill(self.causal_mask[:N, :N].bool(), float("-inf"))'),
    ("wei = self.tril[:T, :T] + wei  # mask it", ONES_ON_ALLOWED,
     'wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))'),
    ("scores = scores + (1 - self.keep[:n, :n])", ONES_ON_FUTURE,
     'scores = scores.masked_fill((1 - self.keep[:n, :n]).bool(), float("-inf"))'),
])
def test_the_added_mask_becomes_a_fill_where_it_hides(line, told, fixed):
    assert own_line_fix("added", line, TOLD + told) == fixed


@pytest.mark.parametrize("line, told", [
    ("att = att + self.causal_mask[:N, :N]", ""),  # which positions the 1s mark is not known: words
    ("out = att + self.mask[:N, :N]", ONES_ON_FUTURE),  # not the scores assigned back: the line says no more
    ("att = att + 1.0", ONES_ON_FUTURE),
])
def test_no_rewrite_where_the_line_or_the_trace_leaves_it_open(line, told):
    assert own_line_fix("added", line, TOLD + told) is None
