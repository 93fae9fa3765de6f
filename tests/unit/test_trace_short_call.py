"""Red team 15, left open: `mha-check trace` shortens each operation's call (`linear(out_proj.weight,
out_proj.bias)` is `linear(out_proj + bias)`) in the trusted parent, and the names in it are the student's.  The
regex it used tried every position of a name and backtracked over the rest of it: a `ParameterDict` key of 40,000
characters (tests/hostile/long_parameter_name.py) took 6.4 s of the parent's CPU for each step naming it.  The
shortening is linear in the call now, and says the same of every call naming one module's weight and bias."""
import time

import pytest

from harness.render.trace_text import _short_call


@pytest.mark.parametrize("call, short", [
    ("linear(out_proj.weight, out_proj.bias)", "linear(out_proj + bias)"),
    ("linear(W_query.weight)", "linear(W_query)"),
    ("linear(heads.0.q.weight, heads.0.q.bias)", "linear(heads.0.q + bias)"),
    ("linear(P[0].weight, P[0].bias)", "linear(P[0] + bias)"),
    ("addmm(c_attn.bias, x, c_attn.weight.T)", "addmm(c_attn.bias, x, c_attn.T)"),
    ("matmul(W_q.weight[0:4], 2.0)", "matmul(W_q[0:4], 2.0)"),
    ("linear(a.weight, a.bias, b.weight, b.bias)", "linear(a + bias, b + bias)"),
])
def test_a_modules_weight_and_bias_are_shortened_as_before(call, short):
    assert _short_call(call) == short


def test_a_bias_of_another_module_is_not_told_as_the_weights_own():
    """The old regex could start inside a name: `c_attn.weight, attn.bias` read as c_attn's weight and bias."""
    assert _short_call("linear(c_attn.weight, attn.bias)") == "linear(c_attn, attn.bias)"
    assert _short_call("linear(heads.0.q.weight, q.bias)") == "linear(heads.0.q, q.bias)"


@pytest.mark.parametrize("make", [
    lambda n: f"linear(P.{'q' * n})",  # the hostile file's call: the quadratic case, no `.weight, ` after it
    lambda n: f"matmul(P.{'q' * n}, x)",
    lambda n: f"linear(P.{'q' * n}.weight, P.{'q' * n}.bia)",  # the back-reference compared once, not per position
    lambda n: "linear(" + "a.weight, " * (n // 10) + ")",
    lambda n: "x" + "[" * n,
])
def test_shortening_a_call_with_a_40000_character_name_takes_no_time(make):
    call = make(40_000)
    start = time.thread_time()
    _short_call(call)
    assert time.thread_time() - start < 0.25  # 6.2 s before for the first two, on this machine
