"""param-count's fix in the student's own names (issue 28, gap 3 of the last trial): on jadore's post-LN sublayer
(tests/realzoo) the count is +16, which is exactly its LayerNorm's weight and bias, and the fix printed was the check's
general one ("three nn.Linear(d_in, d_out, bias=qkv_bias) ... split the width among the heads"), which names
arguments the class does not have and a change it does not need.  The fix must name the student's parameters, and
following it (taking the LayerNorm out) must make the check pass."""
from conftest import REALZOO
from harness.child.inprocess import InProcess
from harness.engine.runner import Options, run_checks
from harness.sandbox.subject import Subject

JADORE = REALZOO / "jadore_mha_temperature_d_model_pre_fix.py"


def _param_count(path):
    target = f"{path}:MultiHeadAttention"
    opts = Options(only=["param-count"], examples=2, diagnose=False)
    report = run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))
    return report["param-count"]


def test_the_fix_names_the_parameters_that_make_the_difference_and_following_it_passes(tmp_path):
    got = _param_count(JADORE)
    assert got.status == "fail" and "(difference +16)" in got.message
    assert "layer_norm.weight (8), layer_norm.bias (8)" in got.fix
    assert "qkv_bias" not in got.fix and "d_in" not in got.fix  # the class has d_model and no qkv_bias
    assert "exactly layer_norm.weight, layer_norm.bias" in got.message
    src = JADORE.read_text()
    fixed = src.replace("        self.layer_norm = nn.LayerNorm(d_model)\n", "").replace(
        "output = self.layer_norm(output + residual)", "output = output")
    assert fixed != src and "self.layer_norm" not in fixed
    path = tmp_path / "jadore_fixed.py"
    path.write_text(fixed)
    assert _param_count(path).status == "pass"


def test_a_difference_the_spare_parameters_do_not_make_keeps_the_general_fix(tmp_path):
    """A LayerNorm inside a layer whose query projection is also twice as wide: the count is not the LayerNorm's
    alone (and no reading of the parameters is left to say which play no role), so nothing is pinned on it."""
    src = JADORE.read_text().replace("nn.Linear(d_model, n_head * d_k)\n", "nn.Linear(d_model, 2 * n_head * d_k)\n", 1)
    assert src != JADORE.read_text()
    path = tmp_path / "jadore_wide_q.py"
    path.write_text(src)
    got = _param_count(path)
    assert got.status == "fail" and "layer_norm" not in got.fix and "play no role" not in got.message
