"""The sentence under a report that says how the parameters were read: a rotary layer is reproduced by the lesson's
layer with that rotary embedding on q and k, not by the lesson's layer alone (speculative-decoding 0.2.0's
CausalAttention, tests/realzoo/lucidrains_speculative_decoding_*: the report said "with them the lesson's layer
reproduces your output" of a rotate-half RoPE layer)."""
from types import SimpleNamespace

from harness.render.view import mapping_words

LAYOUT = {"wq": "to_qkv.weight[0:8]", "wk": "to_qkv.weight[8:16]", "wv": "to_qkv.weight[16:24]", "wo": "to_out.weight"}


def _adapter(**extra):
    return SimpleNamespace(mapping={"layout": LAYOUT, "proof": "reference", "call": "forward(x)", **extra})


def test_a_rotary_reading_says_the_rotary_embedding_is_part_of_what_reproduces_the_output():
    rope = "rotary position embedding, rotate-half pairs (x_i, x_i+dh/2), theta = 10000"
    text = mapping_words(_adapter(rope=rope))
    assert f"the lesson's layer, with your {rope} on q and k, reproduces your output" in text, text


def test_a_plain_reading_is_unchanged():
    text = mapping_words(_adapter())
    assert "(checked: with them the lesson's layer reproduces your output)" in text, text
