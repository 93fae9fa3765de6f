"""The adapter end to end: no bug absorbed by the weight mapping, what mha-check cannot map is cannot tell (with
the option that helps), --map, and the smallest failing configuration."""
import pytest

from conftest import ROOT, report_for

pytestmark = pytest.mark.usefixtures("warm_single_runs")  # see conftest


def test_mapping_never_absorbs_a_bug():
    """query-for-keys computes k with W_q: the mapping stays by name, so the module fails instead of passing."""
    report = report_for(f"{ROOT / 'mutants' / 'query_for_keys.py'}:CausalMHA")
    mapping = report.adapter.mapping
    assert mapping["layout"]["wq"] == "q.weight" and mapping["layout"]["wk"] == "k.weight"
    assert mapping["proof"] == "mistake" and mapping["mistakes"] == ["query-for-keys"]
    assert report["reference-match"].status == "fail"


def test_unmappable_weights_are_cannot_tell_and_say_how_to_help():
    report = report_for(str(ROOT / "tests" / "fixtures" / "odd_names.py"))
    assert report["reference-match"].status == "cannot_tell"
    assert "--map" in report["reference-match"].help and "tried" in report["reference-match"].details
    assert report["causal-leakage"].status == "pass"  # weight-free checks still run
    assert not report.passed


def test_explicit_map_makes_an_odd_module_checkable():
    from harness.engine.runner import Options, run_checks

    good = run_checks(str(ROOT / "tests" / "fixtures" / "odd_names.py"),
                      Options(weight_map={"q": "a.T", "k": "b.T", "v": "c.T", "o": "mix"}))
    assert [(c.id, c.message) for c in good.checks if c.kind == "correctness" and c.status != "pass"] == []
    assert good.adapter.mapping["proof"] == "reference"


def test_smallest_failing_configuration_is_reported():
    report = report_for(f"{ROOT / 'mutants' / 'split_view_order.py'}:CausalMHA")
    cfg = report["view-order"].config
    assert report["view-order"].status == "fail" and "view(B, H, n, dh)" in report["view-order"].message
    assert cfg["heads"] == 2 and cfg["n"] == 2 and cfg["batch"] == 2  # the smallest shape that can show it


@pytest.mark.parametrize("file, named", [("correct/einsum_fused_qkv_4d.py", None),
                                         ("buggy/einsum_fused_qkv_4d_scale_by_d.py", "scale-by-sqrt-d")])
def test_map_names_a_fused_4d_parameter(file, named):
    """--map qkv=NAME on a 4-D fused per-head parameter (3, H, d, dh): read by its axes, proven on every
    configuration (with 3 heads the role and heads axes are both 3 long), the correct layer passes and its
    sqrt(d)-scaled twin is named."""
    from harness.engine.runner import Options, run_checks

    report = run_checks(f"{ROOT / 'tests' / 'zoo' / file}:FusedEinsumHeads",
                        Options(weight_map={"qkv": "w_qkv", "o": "w_o", "bo": "b_o"}))
    assert report.adapter.mapping["layout"]["wq"] == "w_qkv[0][0].T + w_qkv[0][1].T"
    assert report.adapter.mapping["proof"] == ("mistake" if named else "reference")
    assert (report.diagnosis.mutant if report.diagnosis else None) == named
    assert report.passed == (named is None)


def test_a_map_that_leaves_the_output_bias_unread_is_no_failed_rule():
    """--map names W_o (a raw matrix) but not its bias, and a parameter of the bias's size stays unread: whether the
    output projection has a bias is then unknown to mha-check, not the student's broken rule; naming it settles it."""
    from harness.engine.runner import Options, run_checks

    target = str(ROOT / "tests" / "fixtures" / "raw_params_biases.py")
    matrices = {"q": "P1.T", "k": "P2.T", "v": "P3.T", "o": "P4.T"}
    unread = run_checks(target, Options(weight_map=matrices))["out-proj-bias"]
    assert unread.status == "cannot_tell" and "c4" in unread.message and "--map bo=c4" in unread.help
    assert run_checks(target, Options(weight_map={**matrices, "bo": "c4"}))["out-proj-bias"].status == "pass"
