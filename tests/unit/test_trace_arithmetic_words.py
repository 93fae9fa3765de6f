"""The trace's arithmetic (harness.render.trace_text): a count that differs from the lesson's formula by exactly the
Q/K/V biases says so, as param-count accepts them."""
from harness.engine.trace.result import arithmetic
from harness.render.trace_text import _arithmetic_text


def _count_row(qkv_bias: bool, counted: int, biases: int | None = None) -> str:
    text = " ".join(" ".join(_arithmetic_text(arithmetic(8, 2, 1024, qkv_bias=qkv_bias, counted=counted,
                                                         counted_biases=biases))).split())
    return text[text.index("in your module"):text.index("score tensor")]


def test_a_count_of_three_biases_more_than_the_formula_is_said_to_be_the_qkv_biases():
    """trial6: a GPT-2 layer (c_attn with a bias) was told "288 parameters ...: differs from the formula by +24"
    under a formula "no Q/K/V biases", while param-count passed it; a student reads a bug there."""
    row = _count_row(False, 288)
    assert "differs from the formula by +24 = 3·8, what Q/K/V biases add" in row and "--qkv-bias" in row, row
    assert "what Q/K/V biases add, counted here" in _count_row(True, 264)
    assert _count_row(False, 264).strip().endswith("matches the formula")
    assert "biases" not in _count_row(False, 336)  # another difference: no story told


def test_three_widths_more_from_what_is_no_bias_are_not_called_the_qkv_biases():
    """rela-transformer 0.0.7's ReLA: 288 = 264 + 24 from its two gated norms (norm: 2·8, norm_values: 2·4), its only
    bias the output's (8): "what Q/K/V biases add" named a difference the layer does not have."""
    assert "biases" not in _count_row(False, 288, biases=8)
    assert "what Q/K/V biases add (--qkv-bias" in _count_row(False, 288, biases=32)  # c_attn's 24 and c_proj's 8
    assert "counted here" not in _count_row(True, 264, biases=32)  # the module has them: -24 is something else
    assert "counted here" in _count_row(True, 264, biases=8)
