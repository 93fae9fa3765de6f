"""param-count and a frozen parameter (issue 28 item 7, realzoo7): tsai's attention keeps its scale head_dim ** -0.5
as nn.Parameter(..., requires_grad=False), and param-count failed the correct layer by +1, "exactly sdp_attn.scale,
which plays no role".  A frozen parameter that no reading takes for a weight or a bias is a constant of the layer, as
a buffer is (parameters-used already lets it take no gradient): it is not counted.  A learned one still is, and a
frozen projection is still a projection."""
from conftest import ZOO
from harness.child.inprocess import InProcess
from harness.engine.runner import Options, run_checks
from harness.sandbox.subject import Subject

FROZEN = ZOO / "correct" / "frozen_temperature_parameter.py"


def _checks(path, only=("param-count",)):
    target = f"{path}:FrozenTemperatureAttention"
    opts = Options(only=list(only), examples=2, diagnose=False)
    return run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))


def test_a_frozen_scale_no_reading_takes_is_a_constant_not_a_parameter_of_the_count():
    got = _checks(FROZEN)["param-count"]
    assert got.status == "pass", got.message
    assert "temperature (requires_grad=False" in got.message


def test_a_learned_temperature_is_still_counted(tmp_path):
    path = tmp_path / "learned_temperature.py"
    path.write_text(FROZEN.read_text().replace(".sqrt(), requires_grad=False)", ".sqrt())"))
    assert path.read_text() != FROZEN.read_text()
    got = _checks(path)["param-count"]
    assert got.status == "fail" and "(difference +1)" in got.message and "exactly temperature" in got.message


def test_a_frozen_projection_is_counted_and_gradient_match_finds_it(tmp_path):
    path = tmp_path / "frozen_query.py"
    frozen_q = "        self.query.weight.requires_grad_(False)\n        self.register_buffer("
    path.write_text(FROZEN.read_text().replace("        self.register_buffer(", frozen_q, 1))
    assert "requires_grad_(False)" in path.read_text()
    report = _checks(path, only=("param-count", "gradient-match"))
    assert report["param-count"].status == "pass" and "query.weight" not in report["param-count"].message
    assert report["gradient-match"].status == "fail" and "W_q" in report["gradient-match"].message


ROPE = ZOO / "correct" / "frozen_rope_frequencies_parameter.py"


def _rope_checks(path):
    target = f"{path}:FrozenRopeFrequenciesAttention"
    opts = Options(only=["head-invariance"], examples=2, diagnose=False)
    return run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))


def test_a_frozen_table_of_the_head_width_does_not_make_the_count_change_with_the_heads():
    """labml's RETRO SelfAttention keeps its RoPE theta (dh / 2 elements) as a frozen parameter: with it counted, the
    total changed with the heads and head-invariance failed the correct layer."""
    got = _rope_checks(ROPE)["head-invariance"]
    assert got.status == "pass" and "not counted: inv_freq (requires_grad=False" in got.message, got.message


def test_a_learned_table_of_the_head_width_still_changes_the_count(tmp_path):
    path = tmp_path / "learned_frequencies.py"
    path.write_text(ROPE.read_text().replace(", requires_grad=False)", ")"))
    assert path.read_text() != ROPE.read_text()
    got = _rope_checks(path)["head-invariance"]
    assert got.status == "fail" and "not counted: inv_freq" not in got.message, got.message


def test_a_count_that_changes_only_through_a_parameter_no_reading_takes_says_so(tmp_path):
    """TimesFM 2.5's attention keeps a learned per-dimension scale of one head's width (tests/realzoo/timesfm_2p5_...):
    its count changes with the heads through that parameter alone, and head-invariance told it to "give every head its
    own queries, keys and values", which it has.  The failure stays (a learned parameter sized by the head width), its
    finding and fix name the parameter."""
    path = tmp_path / "learned_frequencies.py"
    path.write_text(ROPE.read_text().replace(", requires_grad=False)", ")"))
    got = _rope_checks(path)["head-invariance"]
    assert got.status == "fail" and got.details["finding"] == "count changes through unread parameters", got.message
    assert "only through inv_freq" in got.message and "queries, keys and values" not in (got.fix or ""), got.message
    assert "inv_freq" in got.fix


def test_the_traces_arithmetic_leaves_a_frozen_constant_out_and_says_so():
    """`mha-check trace` counted labml's frozen RoPE theta as a parameter of the module ("differs from the formula by
    +26" for 24 biases), where param-count leaves it out: the two now count alike."""
    from harness.frontends.trace import trace
    result = trace(f"{ROPE}:FrozenRopeFrequenciesAttention", make_subject=lambda spec, overrides, seed, weight_map:
                   Subject(spec, overrides, seed, start=InProcess()))
    a = result.arithmetic
    assert a["param_counted"] == a["param_formula"] + 3 * 8  # its Q/K/V biases (fused qkv with bias), and no theta
    assert "inv_freq (requires_grad=False" in a["counted_note"]


def test_the_biases_read_are_said_in_words():
    """Student trial 20: "3·8·8 + 8² + biases gives 256 with biases none" and "... with biases bo" read as typos."""
    from checks.param_count import _bias_list
    assert _bias_list(set()) == "no bias"
    assert _bias_list({"bo"}) == "the bias b_o alone"
    assert _bias_list({"bo", "bv", "bq"}) == "the biases b_q, b_v and b_o"
