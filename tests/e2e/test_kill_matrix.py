"""The kill matrix and the catalogue: every mutant fails each check it declares, the reference fails none, every
check kills at least one mutant, every mutant is diagnosed as itself, and what is derived from the mutants (the
catalogue, the tables of docs/checks.md) is current.  The suite fails the moment a check gets weaker."""
import pytest

import checks
import mutants
from conftest import ROOT
from harness.frontends import catalogue

pytestmark = pytest.mark.slow
MUTANT_TARGETS = catalogue.mutant_targets()
REFERENCE = f"{ROOT / 'reference' / 'causal_mha.py'}:CausalMHA"
ROTARY_REFERENCE = f"{ROOT / 'reference' / 'rotary_mha.py'}:CausalMHA"  # the rope-* mutants' reference
CHECK_IDS = [c.id for c in checks.all_checks()]


@pytest.fixture(scope="module", autouse=True)
def _want(reports):
    reports.want([REFERENCE, ROTARY_REFERENCE, *MUTANT_TARGETS.values()])


def test_reference_passes_every_check(reports):
    report = reports(REFERENCE)
    assert [(c.id, c.status, c.message) for c in report.checks if c.status != "pass"] == []
    assert report.passed and [c.id for c in report.checks] == CHECK_IDS and report.diagnosis is None
    assert report.adapter.mapping["proof"] == "reference"


def test_rotary_reference_passes_every_check_with_its_convention_found(reports):
    report = reports(ROTARY_REFERENCE)
    assert [(c.id, c.status, c.message) for c in report.checks if c.status != "pass"] == []
    assert report.passed and report.diagnosis is None
    assert report.adapter.mapping["proof"] == "reference" and "interleaved" in report.adapter.mapping["rope"]


@pytest.mark.parametrize("mutant_id", sorted(MUTANT_TARGETS))
def test_mutant_is_killed_by_its_declared_checks(mutant_id, reports):
    info = mutants.get(mutant_id).INFO
    statuses = {c.id: c for c in reports(MUTANT_TARGETS[mutant_id]).checks}
    assert set(info.killed_by) <= set(CHECK_IDS), "killed_by names an unknown check"
    not_failed = {cid: (statuses[cid].status, statuses[cid].message) for cid in info.killed_by
                  if statuses[cid].status != "fail"}
    assert not not_failed  # a failure on evidence: not skipped, not undecided


def test_every_check_kills_at_least_one_mutant(reports):
    killers = {cid: [] for cid in CHECK_IDS}
    for target in MUTANT_TARGETS.values():
        for c in reports(target).checks:
            if c.status == "fail":
                killers[c.id].append(target)
    assert [cid for cid, killed in killers.items() if not killed] == []


def test_at_least_twenty_mutants():
    assert len(MUTANT_TARGETS) >= 20


@pytest.mark.parametrize("mutant_id", sorted(MUTANT_TARGETS))
def test_mutant_is_diagnosed_as_itself(mutant_id, reports):
    diagnosis = reports(MUTANT_TARGETS[mutant_id]).diagnosis
    assert diagnosis.mutant == mutant_id, diagnosis
    assert diagnosis.match in ("numbers", "signature", "trace")


def test_catalogue_and_doc_tables_are_current(reports):
    """mutants/catalogue.json and the tables of docs/checks.md are derived: `python -m harness.frontends.catalogue`."""
    measured = {mid: reports(t) for mid, t in MUTANT_TARGETS.items()}  # the catalogue reads symptoms, not diagnoses
    fresh = catalogue.build_catalogue(measured)
    stored = mutants.catalogue()
    stale = sorted(mid for mid in set(stored) | set(fresh) if stored.get(mid) != fresh.get(mid))
    assert not stale, f"stale catalogue entries {stale}: run `python -m harness.frontends.catalogue`"
    page = catalogue.TABLES.read_text()
    assert catalogue.with_tables(page, catalogue.doc_tables(fresh)) == page, \
        "the tables of docs/checks.md are stale: run `python -m harness.frontends.catalogue`"


def test_signatures_name_one_mistake_each():
    """A signature (the specific findings a mistake leaves) that two mutants share could name neither: the
    catalogue keeps them apart, or the numbers and the trace must."""
    seen = {}
    for mid, entry in mutants.catalogue().items():
        if entry["signature"] and not entry.get("variant") and not entry.get("trace"):
            key = tuple(entry["signature"])
            assert key not in seen, (mid, seen.get(key))
            seen[key] = mid
