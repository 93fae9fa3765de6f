"""A forward that raises with every causal mask mha-check gives its required mask parameter, a different error for
different masks, raised on mha-check's input, not on the student's code alone: the mapping says it cannot tell how
to call forward (Realzoo23's d3rlpy layer, whose required attention_mask is a padding mask (B, T) viewed as
(B, 1, 1, T), had output-shape FAIL a correct layer: "your code raised")."""
from harness.engine.mapping import _raised_on_our_masks

STYLES = ["forward(x, attention_mask=causal mask (n, n), bool, True = masked)",
          "forward(x, attention_mask=causal mask (1, n, n), bool, True = masked)",
          "forward(x, attention_mask=None)"]


def test_errors_that_follow_the_mask_given_are_ours_to_say():
    raised = {0: "RuntimeError: shape '[2, 1, 1, 5]' is invalid for input of size 25",
              1: "AssertionError: Expects (B, T), but got torch.Size([1, 5, 5])",
              2: "AttributeError: 'NoneType' object has no attribute 'dim'"}
    assert _raised_on_our_masks(STYLES, raised) == "attention_mask"


def test_the_same_error_whatever_the_mask_is_the_student_s():
    same = "RuntimeError: shape '[2, 5, 3, 2]' is invalid for input of size 80"  # a split's view, before any mask
    assert _raised_on_our_masks(STYLES, dict.fromkeys(range(3), same)) == ""


def test_a_call_without_a_mask_of_ours_that_raised_too_is_the_student_s():
    styles = ["forward(x)", *STYLES[:2]]
    raised = {0: "RuntimeError: a", 1: "RuntimeError: b", 2: "RuntimeError: c"}
    assert _raised_on_our_masks(styles, raised) == ""


def test_a_style_that_ran_means_no_such_verdict():
    assert _raised_on_our_masks(STYLES, {0: "RuntimeError: a", 1: "RuntimeError: b"}) == ""
