"""A KV cache's lines corrected (harness.engine.rewrite, kinds "advance" and "cat-axis"): the count of cached tokens
set to the call's length is advanced by it instead; the torch.cat that raised appending the new keys or values is
given the tokens' axis, which the trace mark reads from the shapes it could not join (detect_cache)."""
import pytest

from harness.engine.rewrite import own_line_fix
from harness.engine.trace.detect_cache import TOKENS_AXIS, _tokens_axis


@pytest.mark.parametrize("line, fixed", [
    ("self.offset = n", "self.offset += n"),
    ("self.ptr_current_pos = n  # BUG: set", "self.ptr_current_pos += n"),
    ("self.pos = T + 0", "self.pos += T + 0"),
])
def test_a_count_set_is_advanced(line, fixed):
    assert own_line_fix("advance", line) == fixed


@pytest.mark.parametrize("line", [
    "self.pos = self.pos + n",  # reads itself: already advanced, another way
    "self.a, self.b = n, n",  # two targets
    "pos = n",  # no attribute of the module
])
def test_no_advance_where_the_line_is_not_a_count_set(line):
    assert own_line_fix("advance", line) is None


TOLD = f"decoding a token ... raised here; append along {TOKENS_AXIS}2"


@pytest.mark.parametrize("line, fixed", [
    ("k = torch.cat((past_kv[0], k), dim=1)", "k = torch.cat((past_kv[0], k), dim=2)"),
    ("self.cache_k = torch.cat([self.cache_k, k], 1)  # BUG", "self.cache_k = torch.cat([self.cache_k, k], 2)"),
    ("k = torch.cat([cache, k])", "k = torch.cat([cache, k], dim=2)"),
])
def test_the_append_takes_the_tokens_axis_the_mark_tells(line, fixed):
    assert own_line_fix("cat-axis", line, TOLD) == fixed


def test_no_axis_told_or_two_cats_is_no_rewrite():
    assert own_line_fix("cat-axis", "k = torch.cat([c, k], dim=1)", "append along the tokens' axis") is None
    assert own_line_fix("cat-axis", "k, v = torch.cat([a, k], 1), torch.cat([b, v], 1)", TOLD) is None


def test_the_tokens_axis_is_the_one_the_shapes_differ_on():
    op = {"op": "cat", "raised": "RuntimeError", "in": [{"shape": [2, 2, 2, 4]}, {"shape": [2, 2, 1, 4]}]}
    assert _tokens_axis([{"op": "linear", "in": []}, op]) == 2
    op["in"][1]["shape"] = [2, 1, 1, 4]
    assert _tokens_axis([op]) is None
