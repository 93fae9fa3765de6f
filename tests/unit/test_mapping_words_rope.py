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


def test_per_head_blocks_are_said_side_by_side_never_with_a_plus():
    """A student's trial (heads-first Parameters Wq (H, d_in, dh)): "matched your parameters Wq[0] + Wq[1]" read as
    a sum; the blocks of one matrix are side by side (per-head matrices) or stacked (rows of a fused one)."""
    layout = {"wq": "Wq[0].T + Wq[1].T", "wk": "Wk[0].T + Wk[1].T", "wv": "qkv.weight[4:8] + qkv.weight[16:20]",
              "wo": "Wo[0].T + Wo[1].T + Wo[2].T"}
    text = mapping_words(SimpleNamespace(mapping={"layout": layout, "proof": "reference", "call": "forward(x)"}))
    assert " + " not in text, text
    assert "matched your parameters Wq[0] and Wq[1] side by side; Wk[0] and Wk[1] side by side; qkv (rows 4-7 and " \
           "16-19, stacked); Wo[0], Wo[1] and Wo[2] side by side (matrices used as x @ W)" in text, text


def test_a_fused_matrix_read_per_head_is_one_phrase_a_role():
    """Student trial 20 (GPT-NeoX's per-head q, k, v rows): "query_key_value (rows 0-3) and query_key_value (rows
    12-15), stacked, query_key_value (rows 4-7) and ..." did not say which group was W_q."""
    layout = {"wq": "qkv.weight[0:4] + qkv.weight[12:16]", "wk": "qkv.weight[4:8] + qkv.weight[16:20]",
              "wv": "qkv.weight[8:12] + qkv.weight[20:24]", "wo": "out.weight"}
    text = mapping_words(SimpleNamespace(mapping={"layout": layout, "proof": "reference", "call": "forward(x)"}))
    assert "matched your parameters qkv (rows 0-3 and 12-15, stacked); qkv (rows 4-7 and 16-19, stacked); qkv (rows " \
           "8-11 and 20-23, stacked); out to the lesson's W_q, W_k, W_v, W_o" in text, text
