"""rewrite's "repeat" for key/value heads shared with expand() group-first (gqa-repeat-not-interleave): the new axis
moved after the key/value heads and the two sizes swapped, in the student's own line (student11: the remedy had
been words about repeat_interleave for a line with no repeat in it)."""
import pytest

from harness.engine import rewrite

NOTE = rewrite.KINDS["repeat"]


@pytest.mark.parametrize(("line", "fixed"), [
    ("return t[:, None, :, :, :].expand(b, self.group_size, G, n, dh).reshape(b, self.num_heads, n, dh)",
     "return t[:, :, None, :, :].expand(b, G, self.group_size, n, dh).reshape(b, self.num_heads, n, dh)"),
    ("t = t.unsqueeze(1).expand(B, self.h // self.kv, kv, T, dh)",
     "t = t.unsqueeze(2).expand(B, kv, self.h // self.kv, T, dh)" + NOTE),
    ("k = k[:, None].expand(B, g, kv, T, dh).reshape(B, H, T, dh)",
     "k = k[:, :, None].expand(B, kv, g, T, dh).reshape(B, H, T, dh)" + NOTE),
    ("k = k.expand(B, H, T, dh)", None),  # multi-query's broadcast: no new axis to move
    ("k = k.unsqueeze(2).expand(B, kv, g, T, dh)", None),  # already after the key/value heads
    ("k = k[:, None, 0].expand(B, g, T, dh)", None),  # not a plain slice after the None
])
def test_an_expand_group_first_is_turned_to_key_value_heads_first(line, fixed):
    assert rewrite.own_line_fix("repeat", line) == fixed
