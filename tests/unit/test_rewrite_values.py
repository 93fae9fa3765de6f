"""keys-as-values' own line: the keys' variable, where it is what the attention weights multiply, replaced by the
values' variable, both named by the trace mark (a student's trial, trials/18 f09: `ctx = probs @ k`, where the
report's fix had been the lesson's whole recipe)."""
import pytest

from harness.engine.rewrite import own_line_fix


def told(keys: str, values: str) -> str:
    return (f"the attention weights multiply `{keys}` (the keys), not `{values}` (the values): each output is a "
            "weighted average of the keys")


@pytest.mark.parametrize("line, keys, values, fixed", [
    ("ctx = probs @ k", "k", "v", "ctx = probs @ v"),
    ("out = torch.matmul(attn, key)", "key", "value", "out = torch.matmul(attn, value)"),
    ("y = F.scaled_dot_product_attention(q, k, k, is_causal=True)", "k", "v",
     "y = F.scaled_dot_product_attention(q, k, v, is_causal=True)"),
    ("h = (w @ keys).transpose(1, 2)  # mix", "keys", "values", "h = (w @ values).transpose(1, 2)"),
])
def test_the_keys_mixed_become_the_values(line, keys, values, fixed):
    assert own_line_fix("values", line, told(keys, values)) == fixed


@pytest.mark.parametrize("line, text", [
    ("ctx = probs @ k", "the attention weights multiply the keys, not the values"),  # no names: said in words
    ("ctx = probs @ k + probs @ k", told("k", "v")),  # two such operands: which one is meant is not one call
    ("ctx = probs @ self.k", told("k", "v")),  # not the variable the mark names
])
def test_no_rewrite_where_the_names_or_the_line_leave_it_open(line, text):
    assert own_line_fix("values", line, text) is None
