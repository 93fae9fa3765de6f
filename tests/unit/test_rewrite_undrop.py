"""The line that passed the causal mask through a dropout, corrected (harness.engine.rewrite, kind "undrop"): trace
points at the dropout for dropout-on-mask, and the fix is that line with the dropout left out, in the student's
own names; the dropout on the weights, on a line of its own, stays."""
import pytest

from harness.engine.rewrite import own_line_fix


@pytest.mark.parametrize("line, fixed", [
    ("hide = self.attn_dropout(self.hide[:n, :n]) > 0", "hide = self.hide[:n, :n] > 0"),
    ("mask_bool = self.dropout(self.mask).bool()[:num_tokens, :num_tokens]  # dropout zeroes some mask entries",
     "mask_bool = self.mask.bool()[:num_tokens, :num_tokens]"),
    ("mask = self.dropout(self.mask)[:n, :n].bool()  # BUG", "mask = self.mask[:n, :n].bool()"),
    ("s = s.masked_fill(F.dropout(self.m[:T, :T], self.p, self.training) > 0, float('-inf'))",
     "s = s.masked_fill(self.m[:T, :T] > 0, float('-inf'))"),
])
def test_the_dropout_around_the_mask_is_left_out(line, fixed):
    assert own_line_fix("undrop", line) == fixed


@pytest.mark.parametrize("line", [
    "m = self.drop(self.drop(self.mask))",  # two dropouts: which one is not the line's to say
    "mask = self.mask[:n, :n].bool()",  # no dropout on the line: the mistake is elsewhere
])
def test_no_rewrite_where_the_line_leaves_it_open(line):
    assert own_line_fix("undrop", line) is None
