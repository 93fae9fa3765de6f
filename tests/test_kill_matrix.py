"""The kill matrix: every mutant fails each check it declares, the reference fails none, and every check kills at
least one mutant.  The suite fails the moment a check gets weaker."""
import pytest

import checks
import mutants
from conftest import ROOT, prewarm, report_for

MUTANT_TARGETS = {m.INFO.id: f"{mutants.source_path(m.INFO.id)}:CausalMHA" for m in mutants.all_mutants()}
REFERENCE = f"{ROOT / 'reference' / 'causal_mha.py'}:CausalMHA"
CHECK_IDS = [c.id for c in checks.all_checks()]
KILLED = ("fail", "error")  # the check did not pass; the reference passing everything rules out spurious errors


@pytest.fixture(scope="module", autouse=True)
def _all_reports():
    prewarm([REFERENCE, *MUTANT_TARGETS.values()])


def test_reference_passes_every_check():
    report = report_for(REFERENCE)
    assert [(c.id, c.status, c.message) for c in report.checks if c.status != "pass"] == []
    assert report.passed and [c.id for c in report.checks] == CHECK_IDS


@pytest.mark.parametrize("mutant_id", sorted(MUTANT_TARGETS))
def test_mutant_is_killed_by_its_declared_checks(mutant_id):
    info = mutants.get(mutant_id).INFO
    statuses = {c.id: c for c in report_for(MUTANT_TARGETS[mutant_id]).checks}
    assert set(info.killed_by) <= set(CHECK_IDS), "killed_by names an unknown check"
    survived = {cid: (statuses[cid].status, statuses[cid].message) for cid in info.killed_by
                if statuses[cid].status not in KILLED}
    assert not survived
    # the first declared check is the one made for this mistake: it must fail outright, not just error
    assert statuses[info.killed_by[0]].status == "fail", statuses[info.killed_by[0]].message


def test_every_check_kills_at_least_one_mutant():
    killers = {cid: [] for cid in CHECK_IDS}
    for mutant_id, target in MUTANT_TARGETS.items():
        for c in report_for(target).checks:
            if c.status == "fail":
                killers[c.id].append(mutant_id)
    assert [cid for cid, killed in killers.items() if not killed] == []


def test_at_least_twenty_mutants():
    assert len(MUTANT_TARGETS) >= 20


def test_fingerprints_file_is_current():
    """mutants/fingerprints.json is what diagnosis reads; regenerate with `python -m harness.engine.diagnosis`."""
    from harness.engine.diagnosis import load_fingerprints, record

    stored = load_fingerprints()
    fresh = record({mid: report_for(t) for mid, t in MUTANT_TARGETS.items()})
    stale = sorted(mid for mid in set(stored) | set(fresh) if stored.get(mid) != fresh.get(mid))
    assert not stale, f"stale fingerprints for {stale}: run `python -m harness.engine.diagnosis`"


@pytest.mark.parametrize("mutant_id", sorted(MUTANT_TARGETS))
def test_mutant_is_diagnosed_as_itself(mutant_id):
    diagnosis = report_for(MUTANT_TARGETS[mutant_id]).diagnosis
    assert diagnosis["mutant"] == mutant_id, diagnosis
    assert diagnosis["match"] in ("exact", "symptoms")
