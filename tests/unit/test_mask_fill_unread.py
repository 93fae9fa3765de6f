"""mask-fill where no reading of the weights is proven (issue 28, realzoo8): labml-nn's NeoX layer fills the future
with -10,000, a partial rotary keeps every reading from being proven, and mask-fill PASSED ("the masked scores are
-inf, not a finite value"): its first probe (future tokens of size 1e30) cannot see a fill, and its second (W_k = -W_q,
scores below any fill) needs the weights set.  Without that probe the rule is not decided: cannot tell, saying why."""
from conftest import ROOT
from harness.child.inprocess import InProcess
from harness.engine.runner import Options, run_checks
from harness.sandbox.subject import Subject

ODD = ROOT / "tests" / "fixtures" / "odd_names.py"


def _mask_fill(path):
    target = f"{path}:Odd"
    opts = Options(only=["mask-fill"], examples=2, diagnose=False)
    return run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))["mask-fill"]


def test_a_finite_fill_in_a_layer_whose_weights_are_not_read_is_not_passed(tmp_path):
    path = tmp_path / "odd_fill.py"
    path.write_text(ODD.read_text().replace('float("-inf")', "-1e9"))
    assert path.read_text() != ODD.read_text()
    got = _mask_fill(path)
    assert got.status == "cannot_tell" and "could not set your weights" in got.message, got.message


def test_a_minus_inf_fill_in_a_layer_whose_weights_are_not_read_is_not_decided_either():
    """The same words for -inf: without the second probe mha-check cannot tell the two fills apart (a reading, or
    --map, decides it: tests/realzoo's transformerkit entry fails with its -1e9, the lesson's -inf passes)."""
    got = _mask_fill(ODD)
    assert got.status == "cannot_tell" and "--map" in got.help, (got.message, got.help)
