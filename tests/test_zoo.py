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
