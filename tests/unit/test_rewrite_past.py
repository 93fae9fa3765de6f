"""The line that made a mask hiding the past, corrected (harness.engine.rewrite, kind "past"): trace points at the
tril(..., diagonal=-1) that made it for mask-hides-past, and the fix is that line with the future's triangle,
triu(..., diagonal=1), in the student's own names and spelling."""
import pytest

from harness.engine.rewrite import own_line_fix


@pytest.mark.parametrize("line, fixed", [
    ('self.register_buffer("blocked", torch.ones(window, window).tril(-1).bool())  # 1 = blocked',
     'self.register_buffer("blocked", torch.ones(window, window).triu(1).bool())'),
    ('self.register_buffer("mask", torch.tril(torch.ones(context_length, context_length), diagonal=-1))',
     'self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))'),
    ("m = torch.tril(torch.ones(T, T, device=x.device), -1).bool()",
     "m = torch.triu(torch.ones(T, T, device=x.device), 1).bool()"),
    ("m = torch.ones(n, n).tril_(diagonal=-1)", "m = torch.ones(n, n).triu_(diagonal=1)"),
])
def test_a_past_triangle_becomes_the_future_one(line, fixed):
    assert own_line_fix("past", line) == fixed


@pytest.mark.parametrize("line", [
    'self.register_buffer("mask", torch.tril(torch.ones(L, L)))',  # the diagonal is not -1: another mistake
    "m = torch.triu(torch.ones(T, T), diagonal=-1)",  # a triu: not the past's triangle
    "m = torch.tril(torch.ones(T, T), -1) | torch.triu(torch.ones(T, T), 2)",  # two triangles: open
    "s = s.masked_fill(self.mask[:n, :n], float('-inf'))",  # the mask is made elsewhere
])
def test_no_rewrite_where_the_line_leaves_it_open(line):
    assert own_line_fix("past", line) is None
