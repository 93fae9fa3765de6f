"""A head width taken from d_in is told by the numbers of the error the split raised, whichever call split: view or
reshape ("shape '[B, n, H, d_in/H]' is invalid") and, from a student trial (issue 28), unflatten ("Provided sizes
[H, d_in/H] don't multiply up to the size of dim 2 (d_out)"), which was told "no known mistake matches"."""
from checks.output_shape import _raised_finding
from harness.wire.config import Config

CFG = Config(d_in=6, d_out=8, heads=2, context_length=7)


def test_a_view_to_the_input_widths_heads_is_a_head_width_from_d_in():
    message = "RuntimeError: shape '[2, 5, 2, 3]' is invalid for input of size 80 (at attn.py:20 in forward)"
    assert _raised_finding(message, CFG) == "head width from d_in"


def test_an_unflatten_to_the_input_widths_heads_is_a_head_width_from_d_in():
    message = ("RuntimeError: unflatten: Provided sizes [2, 3] don't multiply up to the size of dim 2 (8) in the "
               "input tensor (at attn.py:20 in forward: q = self.W_query(x).unflatten(-1, (self.h, self.dh)))")
    assert _raised_finding(message, CFG) == "head width from d_in"


def test_an_unflatten_that_fails_otherwise_is_said_as_raised():
    message = "RuntimeError: unflatten: Provided sizes [3, 3] don't multiply up to the size of dim 2 (8) in the input"
    assert _raised_finding(message, CFG).startswith("raised: ")  # 3 is not the number of heads
    same_widths = Config(d_in=8, d_out=8, heads=2, context_length=7)
    message = "RuntimeError: unflatten: Provided sizes [2, 3] don't multiply up to the size of dim 2 (8) in the input"
    assert _raised_finding(message, same_widths).startswith("raised: ")  # d_in // H is the head width here
