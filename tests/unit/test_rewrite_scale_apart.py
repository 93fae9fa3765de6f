"""Scores scaled on a line of their own, corrected (harness.engine.rewrite, kind "scale" with `scores_code`): the
line that divides `scores` by sqrt(hidden_size) names no queries, so the line that made the scores, which the trace
mark carries, says whose last axis is the head width (a student's trial, HF-style: the fix was words).  And a
baddbmm whose scale went to its mask (beta) instead of the scores (alpha): the beta goes (another trial)."""
import pytest

from harness.engine.rewrite import own_line_fix

MADE = "scores = torch.matmul(q, k.transpose(-1, -2))"


@pytest.mark.parametrize("line, made, fixed", [
    ("scores = scores / math.sqrt(self.hidden_size)", MADE, "scores = scores / math.sqrt(q.size(-1))"),
    ("att = att * self.d_model ** -0.5", "att = query @ key.transpose(-2, -1)",
     "att = att * query.size(-1) ** -0.5"),
    ("w = w / (C ** 0.5)", "w = torch.einsum('bhid,bhjd->bhij', q, k)", "w = w / (q.size(-1) ** 0.5)"),
])
def test_the_scale_takes_the_width_of_the_queries_the_scores_were_made_from(line, made, fixed):
    assert own_line_fix("scale", line, "", made) == fixed


@pytest.mark.parametrize("line, made", [
    ("scores = scores / math.sqrt(self.hidden_size)", "scores = self.score(q, k)"),  # no product: no queries named
    ("scores = scores / math.sqrt(a) / math.sqrt(b)", MADE),  # two roots: which one is the width is open
    ("scores = scores / self.scale", MADE),  # no root nor power written: the value is elsewhere
    ("scores = scores / math.sqrt(d)", "scores = (q * 2) @ k.transpose(-1, -2)"),  # queries not a plain name
])
def test_no_rewrite_where_the_lines_leave_it_open(line, made):
    assert own_line_fix("scale", line, "", made) is None


@pytest.mark.parametrize("line, fixed", [
    # the scale given to the mask instead of the scores (a student's trial): alpha set, the mask added as it is
    ("scores = torch.baddbmm(bias, q, k.transpose(1, 2), beta=1.0 / math.sqrt(self.hs), alpha=1.0)",
     "scores = torch.baddbmm(bias, q, k.transpose(1, 2), alpha=q.size(-1) ** -0.5)"),
    ("w = mask.baddbmm(q, k.transpose(1, 2), beta=0.5)",
     "w = mask.baddbmm(q, k.transpose(1, 2), alpha=q.size(-1) ** -0.5)"),
    # beta=0 discards an uninitialised input (GPT-2's): it stays
    ("w = torch.baddbmm(empty, q, k.transpose(1, 2), beta=0, alpha=1.0)",
     "w = torch.baddbmm(empty, q, k.transpose(1, 2), beta=0, alpha=q.size(-1) ** -0.5)"),
])
def test_a_baddbmm_scale_goes_to_alpha_and_a_scaled_mask_loses_its_beta(line, fixed):
    assert own_line_fix("scale", line) == fixed
