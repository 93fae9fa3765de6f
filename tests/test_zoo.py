"""Independently written implementations: correct ones in many layouts pass every check (no false alarm), buggy
ones fail the check named for their mistake."""
import pytest

from conftest import ZOO, prewarm, report_for, zoo_constants

CORRECT = sorted((ZOO / "correct").glob("*.py"))
BUGGY = sorted((ZOO / "buggy").glob("*.py"))


def target(path):
    return f"{path}:{zoo_constants(path)['TARGET']}"


@pytest.fixture(scope="module", autouse=True)
def _all_reports():
    prewarm([target(p) for p in CORRECT + BUGGY])


def test_zoo_is_big_enough():
    assert len(CORRECT) >= 6 and len(BUGGY) >= 14


@pytest.mark.parametrize("path", CORRECT, ids=[p.stem for p in CORRECT])
def test_correct_implementation_passes_every_check(path):
    report = report_for(target(path))
    assert [(c.id, c.status, c.message) for c in report.checks if c.status != "pass"] == []
    assert report.adapter["mapping"]["proven"], report.adapter


@pytest.mark.parametrize("path", BUGGY, ids=[p.stem for p in BUGGY])
def test_buggy_implementation_fails_the_check_made_for_its_mistake(path):
    expect = zoo_constants(path)["EXPECT"]
    assert expect, "a buggy zoo file must name the checks that catch it"
    statuses = {c.id: c.status for c in report_for(target(path)).checks}
    assert {cid: statuses[cid] for cid in expect if statuses[cid] != "fail"} == {}


def test_unseen_buggy_implementations_are_diagnosed_as_their_mistake():
    """The zoo was written independently of the mutants; the diagnosis must name the right mistake for nearly all
    of them (measured: 23 of 23 when this test was written; the bar leaves room for a miss)."""
    right, wrong = [], []
    for path in BUGGY:
        want = zoo_constants(path)["DIAGNOSIS"]
        got = report_for(target(path)).diagnosis
        (right if got and got["mutant"] == want else wrong).append((path.stem, want, got and got["mutant"]))
    assert len(right) >= 0.9 * len(BUGGY), wrong
