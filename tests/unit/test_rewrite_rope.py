"""Rotary frequencies from the model width corrected on the student's own line (harness.engine.rewrite, kind
"rope-width"): the exponent `arange(0, dh, 2) / d` is divided by the width its arange runs to.  trial8: the report
told a student's `inv_freq = 1.0 / (theta ** (torch.arange(0, self.head_dim, 2).float() / d_model))` to "compute the
rotary frequencies from the head width, not the model width", in words, where the line corrected says it."""
import pytest

from harness.engine.rewrite import own_line_fix


@pytest.mark.parametrize("line, fixed", [
    ("inv_freq = 1.0 / (theta ** (torch.arange(0, self.head_dim, 2).float() / d_model))",
     "inv_freq = 1.0 / (theta ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))"),
    ("inv_freq = theta ** (-torch.arange(0, self.dh, 2) / d_out)  # BUG: frequencies from the model width",
     "inv_freq = theta ** (-torch.arange(0, self.dh, 2) / self.dh)"),
    ("inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / dim))",
     "inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))"),
])
def test_the_exponent_is_divided_by_the_width_its_arange_runs_to(line, fixed):
    assert own_line_fix("rope-width", line) == fixed


@pytest.mark.parametrize("line", [
    "inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))",  # right already
    "inv_freq = 1.0 / (base ** (torch.arange(head_dim // 2).float() * 2 / dim))",  # no arange of step 2
    "f = torch.arange(0, a, 2) / b + torch.arange(0, c, 2) / d",  # two of them: which one is meant is not said
    "inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / (dim // 1)))",  # not a plain name
])
def test_no_rewrite_where_the_line_is_not_this_mistakes(line):
    assert own_line_fix("rope-width", line) is None
