"""Two own-line fixes of issue 28 item 6 (harness.engine.rewrite): the output projection built with bias=False,
corrected on the line that built it (trace points there: the child notes where the constructor made each
parameter), kind "bias"; and the heads merged back to the input's width, corrected on the merge line (trace finds it
recording the forward with d_in below d_out), kind "merge-width".  Each zoo line corrected was pasted into a copy of
its file and mha-check passed the copy (tests/e2e/test_own_fix.py)."""
import pytest

from harness.engine.rewrite import own_line_fix


@pytest.mark.parametrize("line, fixed", [
    ("self.c_proj = nn.Linear(n_embd, n_embd, bias=False)", "self.c_proj = nn.Linear(n_embd, n_embd)"),
    ("self.out_proj = nn.Linear(d_out, d_out, bias=False, dtype=dtype)  # combine heads",
     "self.out_proj = nn.Linear(d_out, d_out, dtype=dtype)"),
    ("self.o = torch.nn.Linear(d, d, bias = False)", "self.o = torch.nn.Linear(d, d)"),
    ("self.o = nn.Linear(d, d)", None),  # it has its bias: the mistake is elsewhere
    ("self.q, self.o = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)", None),  # which one is W_o: not
    # the line's to say
    ("self.o = nn.Linear(d, d, bias=qkv_bias)", None),  # not a constant False
    ("self.out_proj = nn.Linear(", None),  # the first line of a call written over several: not the call
])
def test_an_output_projection_built_without_its_bias_gets_it_back_on_its_own_line(line, fixed):
    assert own_line_fix("bias", line) == fixed


@pytest.mark.parametrize("line, fixed", [
    ("y = (self.dropout(att) @ v).transpose(1, 2).contiguous().view(B, T, C)",
     "y = (self.dropout(att) @ v).transpose(1, 2).contiguous().view(B, T, -1)"),
    ("values = values.reshape(batch_size, seq_length, embed_dim)",
     "values = values.reshape(batch_size, seq_length, -1)"),
    ("y = y.reshape(B, T, -1)", None),  # the heads' own width already
    ("y = y.view(B, T, 8)", None),  # a number: not read off x
    ("y = torch.cat([a.view(B, T, C), b.view(B, T, C)], -1)", None),  # two: which one is the merge is not clear
])
def test_heads_merged_to_the_input_width_are_merged_to_their_own(line, fixed):
    assert own_line_fix("merge-width", line) == fixed


@pytest.mark.parametrize("line, fixed", [
    ("return z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)",
     "return z.view(b, t, self.n_head, -1).transpose(1, 2)"),
    ("q = q.unflatten(-1, (self.h, int(C / self.h)))", "q = q.unflatten(-1, (self.h, -1))"),
    ("q = q.view(B, T, H, self.head_dim)", None),  # computed elsewhere: not this line's to change
    ("q, k = q.view(B, T, H, C // H), k.view(B, T, H, C // H)", None),  # two: one line, two changes
])
def test_a_head_width_computed_on_the_split_line_is_left_to_the_projection(line, fixed):
    """Kind "head-width": the heads split with `c // self.n_head`, c read off x (trace finds it recording the
    forward with d_in below d_out): -1, the projection's own width divided among the heads."""
    assert own_line_fix("head-width", line) == fixed


@pytest.mark.parametrize("line, fixed", [
    ('assert dim % heads, f"dim={dim} must be divisible by heads={heads}"',
     'assert dim % heads == 0, f"dim={dim} must be divisible by heads={heads}"'),
    ("assert d_out % n_head != 0", "assert d_out % n_head == 0"),
    ("assert d_out % n_head > 0, 'indivisible'", "assert d_out % n_head == 0, 'indivisible'"),
    ('if d_out % nheads == 0: raise ValueError("not divisible")', 'if d_out % nheads != 0: raise ValueError("not '
                                                                  'divisible")'),
    ("if not d % h: raise ValueError('no')", "if d % h: raise ValueError('no')"),
    ("assert d_out % n_head == 0", None),  # right already
    ('raise ValueError(f"d_out={d_out} is not divisible")', None),  # the condition is on another line
    ("if d % h == 0: print('fine')", None),  # no guard
])
def test_a_divisibility_guard_the_wrong_way_round_refuses_only_a_remainder(line, fixed):
    assert own_line_fix("divisible", line) == fixed
