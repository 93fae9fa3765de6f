"""parameters-used and a Q/K/V bias forward never adds (a student's trial, trials/17 f10): `q_proj = nn.Linear(E, E,
bias=qkv_bias)` with the queries computed as `F.linear(x, self.q_proj.weight)`.  mha-check builds the layer with
qkv_bias=False first, where there is no bias to miss, and parameters-used asked that build only: it passed, while
reference-match failed at qkv_bias=True with no word of b_q.  It now asks the layer built with qkv_bias=True too
(where the constructor takes the flag), and names the parameter in the student's words.  What it must still not
fail: a layer whose biases are all used, a layer without Q/K/V biases, and a parameter forward uses in training only
(a training step is where a gradient is wanted; eval is where the other checks run)."""
import pytest

from conftest import ZOO
from harness.child.inprocess import InProcess
from harness.engine.runner import Options, run_checks
from harness.sandbox.subject import Subject

PROBE = ZOO / "buggy" / "query_bias_never_added.py"
UNUSED_Q = "F.linear(x, self.q_proj.weight)"


def _report(path, cls="BatchedHeadsAttention", **options):
    target = f"{path}:{cls}"
    opts = Options(examples=2, **options)
    return run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))


def _used(path, cls="BatchedHeadsAttention"):
    return _report(path, cls, only=["parameters-used"], diagnose=False)["parameters-used"]


def _variant(tmp_path, *edits) -> str:
    text = PROBE.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "variant.py"
    path.write_text(text)
    return path


def test_a_query_bias_never_added_fails_by_its_name_at_qkv_bias_true():
    got = _used(PROBE)
    assert got.status == "fail", got.message
    assert "q_proj.bias" in got.message and "b_q" in got.message and "qkv_bias=True" in got.message, got.message
    assert got.details["finding"] == "unused query bias", got.details
    assert "self.q_proj(x)" in got.fix, got.fix  # the projection applied whole, weight and bias


def test_a_key_bias_never_added_fails_though_no_output_shows_it(tmp_path):
    """softmax ignores a constant added to a row of scores, so no output shows a missing b_k: only its gradient."""
    path = _variant(tmp_path, (UNUSED_Q, "self.q_proj(x)"), ("self.k_proj(x)", "F.linear(x, self.k_proj.weight)"))
    got = _used(path)
    assert got.status == "fail", got.message
    assert "k_proj.bias" in got.message and got.details["finding"] == "unused key bias", got.message


def test_the_same_layer_with_every_bias_used_passes(tmp_path):
    assert _used(_variant(tmp_path, (UNUSED_Q, "self.q_proj(x)"))).status == "pass"
    path = _variant(tmp_path, (UNUSED_Q, "F.linear(x, self.q_proj.weight, self.q_proj.bias)"))
    assert _used(path).status == "pass"


@pytest.mark.parametrize("path,cls", [(ZOO / "correct" / "book_style.py", "MultiHeadAttention"),  # qkv_bias=False
                                      (ZOO / "correct" / "nanogpt_verbatim.py", None)])
def test_correct_layers_with_and_without_a_qkv_bias_flag_pass(path, cls):
    from conftest import zoo_constants
    got = _used(path, cls or zoo_constants(path)["TARGET"])
    assert got.status == "pass", got.message


def test_a_layer_without_qkv_biases_and_no_flag_passes(tmp_path):
    path = _variant(tmp_path, ("max_seq_len=1024, qkv_bias=True,", "max_seq_len=1024,"),
                    ("bias=qkv_bias)", "bias=False)"))
    assert _used(path).status == "pass"


def test_a_parameter_used_in_training_only_is_not_failed(tmp_path):
    """A gain forward applies only while training gets its gradient where gradients are taken: not unused."""
    path = _variant(tmp_path, (UNUSED_Q, "self.q_proj(x)"),
                    ("self.attn_drop = nn.Dropout(attn_dropout)",
                     "self.attn_drop = nn.Dropout(attn_dropout)\n        self.gain = nn.Parameter(torch.ones(1))"),
                    ("\n        w = self.attn_drop(", "\n        if self.training:\n            scores = scores * "
                                                    "self.gain\n        w = self.attn_drop("))
    got = _used(path)
    assert got.status == "pass", got.message



def test_the_mistake_is_named_from_its_numbers_with_the_fix_in_the_students_names():
    """query-bias-not-added's numbers are the reference's at every required configuration (qkv_bias=False): the
    diagnosis asks the layer built with qkv_bias=True too where parameters-used found a Q/K/V bias unused, and there
    the outputs are the mistake's; its fix is parameters-used's, in the student's names."""
    root = _report(PROBE).diagnosis
    assert (root.mutant, root.match) == ("query-bias-not-added", "numbers"), root
    assert root.fix.startswith("Use self.q_proj(x) (weight and bias) where forward computes the queries"), root.fix


def test_the_query_bias_left_out_is_told_at_the_students_line_and_trace_builds_with_the_biases():
    """The line exists only in a build with the biases (mha-check's own configurations have none): the diagnosis
    records one with qkv_bias=True where parameters-used found a bias without a gradient, and the trace command it
    gives builds that way too, so that trace marks the same line (issue 28: every named mistake with its line)."""
    root = _report(PROBE).diagnosis
    assert root.at.endswith("query_bias_never_added.py:37") and UNUSED_Q in root.code, (root.at, root.code)
    assert root.trace_options == " --arg qkv_bias=True", root.trace_options


def test_a_value_bias_never_added_is_named_with_its_line(tmp_path):
    """value-bias-not-added: every output off by the same W_o b_v; named from the numbers of the biased build."""
    path = _variant(tmp_path, (UNUSED_Q, "self.q_proj(x)"), ("self.v_proj(x)", "F.linear(x, self.v_proj.weight)"))
    root = _report(path).diagnosis
    assert (root.mutant, root.match) == ("value-bias-not-added", "numbers"), root
    assert root.at.endswith("variant.py:39") and "F.linear(x, self.v_proj.weight)" in root.code, root.at
    assert root.fix.startswith("Use self.v_proj(x) (weight and bias) where forward computes the values"), root.fix


def test_a_key_bias_never_added_is_no_named_mistake_but_its_line_is_given(tmp_path):
    """A key bias changes no output (the softmax ignores it): parameters-used alone fails, its fix says so, and the
    line the biased trace marks is where to look, with what trace needs to mark it."""
    path = _variant(tmp_path, (UNUSED_Q, "self.q_proj(x)"), ("self.k_proj(x)", "F.linear(x, self.k_proj.weight)"))
    report = _report(path)
    assert report.diagnosis.mutant is None
    assert "mha-check trace (with --arg qkv_bias=True) marks the step that looks wrong (variant.py:38)" in \
        report.diagnosis.message, report.diagnosis.message
    assert "a key bias changes no output" in report["parameters-used"].fix


def test_a_linear_without_bias_applied_by_its_weight_is_no_mistake(tmp_path):
    """`F.linear(x, self.q_proj.weight)` of a Linear made with bias=False leaves nothing out: no mark, a pass."""
    path = _variant(tmp_path, ("max_seq_len=1024, qkv_bias=True,", "max_seq_len=1024,"),
                    ("bias=qkv_bias)", "bias=False)"))
    report = _report(path)
    assert report.diagnosis is None and report["parameters-used"].status == "pass", report.diagnosis
