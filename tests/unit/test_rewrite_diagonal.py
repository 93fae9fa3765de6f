"""The line that made a mask with the wrong diagonal, corrected (harness.engine.rewrite, kind "diagonal"): trace
points at it for mask-hides-diagonal and mask-lets-one-future when the mask is made wrongly (a buffer in __init__, a
tril in forward).  Each corrected zoo line was pasted into a copy of its file and mha-check passed the copy (every
check; the CS224n layer, which has no output projection, fails param-count only)."""
import pytest

from harness.engine.rewrite import own_line_fix


@pytest.mark.parametrize("line, fixed", [
    ('self.register_buffer("mask", torch.triu(torch.ones(max_seq_len, max_seq_len)).bool())',
     'self.register_buffer("mask", torch.triu(torch.ones(max_seq_len, max_seq_len), diagonal=1).bool())'),
    ('self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size), diagonal=-1))',
     'self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size), diagonal=0))'),
    ("keep = torch.tril(torch.ones(max_len, max_len), diagonal=1)  # 1 = may look",
     "keep = torch.tril(torch.ones(max_len, max_len), diagonal=0)"),
    ('self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 2).bool())  # BUG',
     'self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())'),
    ("mask = torch.ones(T, T).triu(2)", "mask = torch.ones(T, T).triu(1)"),
    ("mask = torch.ones(T, T).triu()", "mask = torch.ones(T, T).triu(diagonal=1)"),
    ("m = torch.triu(x, 1)", None),  # right already: the mistake is elsewhere
    ("m = torch.tril(x)", None),
    ('scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))', None),  # no tril or triu on the line
    ("m = torch.tril(torch.triu(x, 2))", None),  # two: which one is meant is not clear
    # positions compared into a mask that hides the diagonal (student trial 21): the comparison made strict
    ('additive = torch.where(j >= i, float("-inf"), 0.0).to(x.dtype)',
     'additive = torch.where(j > i, float("-inf"), 0.0).to(x.dtype)'),
    ("hide = i <= j", "hide = i < j"),
    ("keep = i > j", None),  # strict already: what may be seen, the diagonal left out, is told in words
    ("m = (a >= b) & (c <= d)", None),  # two comparisons
])
def test_a_wrong_diagonal_is_set_to_the_one_its_convention_needs(line, fixed):
    assert own_line_fix("diagonal", line) == fixed
