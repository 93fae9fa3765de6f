"""Our own inputs never blamed on the student (tests/zoo/ours/): a correct layer that what mha-check gives it can
break (a parameter left at its default, a config object lacking a setting, a head width refused by design, a kernel
torch cannot run here) is *cannot tell* where that happens, with what would help; never a failing check, never a
named mistake; and the --arg it names makes the layer pass."""
import pytest

from conftest import ZOO, zoo_constants

pytestmark = pytest.mark.slow
ENTRIES = sorted((ZOO / "ours").glob("[a-z]*.py"))
HELPED = [p for p in ENTRIES if zoo_constants(p)["ARG"] is not None]
PARTIAL = [p for p in ENTRIES if "PARTIAL" in zoo_constants(p)]  # rotary on part of each head, by --arg


def target(path):
    return f"{path}:{zoo_constants(path)['TARGET']}"


@pytest.fixture(scope="module", autouse=True)
def _want(reports):
    reports.want([target(p) for p in ENTRIES])


@pytest.mark.parametrize("path", ENTRIES, ids=[p.stem for p in ENTRIES])
def test_our_own_input_is_cannot_tell_never_a_failure_nor_a_named_mistake(path, reports):
    want = zoo_constants(path)
    report = reports(target(path))
    status = {c.id: c.status for c in report.checks}
    assert {cid: s for cid, s in status.items() if s == "fail"} == {}, [c.message for c in report.checks
                                                                         if c.status == "fail"]
    assert report.diagnosis is None
    assert {cid: status[cid] for cid in want["CANNOT_TELL"]} == {cid: "cannot_tell" for cid in want["CANNOT_TELL"]}
    assert {cid for cid, s in status.items() if s == "cannot_tell"} == set(want["CANNOT_TELL"])
    said = " ".join([f"{c.message} {c.help}" for c in report.checks] + list(report.adapter.notes))
    assert [s for s in want["SAYS"] if s not in said] == [], said


@pytest.mark.parametrize("path", HELPED, ids=[p.stem for p in HELPED])
def test_the_arg_it_names_makes_the_layer_pass(path, reports):
    want = zoo_constants(path)
    report = reports(target(path), overrides=want["ARG"])
    assert report.passed, [(c.id, c.status, c.message[:200]) for c in report.checks if c.status != "pass"]


@pytest.mark.parametrize("path", PARTIAL, ids=[p.stem for p in PARTIAL])
def test_a_partial_rotary_share_given_by_arg_is_cannot_tell_and_says_why(path, reports):
    """mha-check gives a rotary fraction 1.0 by itself; asked for part of each head by --arg, it has no reference:
    the weight checks are cannot tell, none fails, and the report says the layer is rotary and what checks the rest."""
    want = zoo_constants(path)
    (name, _), = want["PARTIAL"].items()
    report = reports(target(path), overrides=want["PARTIAL"])
    status = {c.id: c.status for c in report.checks}
    assert "fail" not in status.values() and report.diagnosis is None
    assert status["reference-match"] == "cannot_tell"
    said = " ".join(c.message for c in report.checks)
    assert "rotary embedding" in said and f"without that --arg mha-check gives {name}=1.0" in said, said
