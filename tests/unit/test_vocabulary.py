"""The closed vocabulary (issue 30 item 6): a check's `Status`, and the records of a report read back from JSON as
they were written."""
import json
from pathlib import Path

import pytest

from checks import cannot_tell, failed, passed, skipped
from harness.engine.records import Adapter, Diagnosis, Form, Isolation, Leakage, ProcessEvent
from harness.engine.report import CheckResult, Report
from harness.wire.errors import ChildEnd, WorkerDied
from harness.wire.status import STATUSES, Status


def test_status_is_written_and_compared_as_its_word():
    """JSON, CSV cells, f-strings and the literals of older code all see the word: nothing changes for a reader."""
    assert [str(s) for s in STATUSES] == ["pass", "fail", "cannot_tell", "skip"]
    assert json.dumps({Status.CANNOT_TELL: [Status.PASS]}) == '{"cannot_tell": ["pass"]}'
    assert f"{Status.SKIP}" == "skip" and Status.FAIL == "fail" and {"fail": 1}[Status.FAIL] == 1
    assert [o.status for o in (passed("ok"), failed("no"), cannot_tell("?"), skipped("later"))] == list(Status)


def test_a_report_read_back_has_statuses_not_strings():
    """A saved report's statuses come back as members (an unknown word is refused, not carried as a new outcome)."""
    original = Report("a.py:A", [CheckResult("construct", Status.PASS, "it builds", "ok"),
                                 CheckResult("causal-leakage", Status.FAIL, "no leak", "leaks")])
    data = json.loads(original.to_json())
    again = Report.from_dict(data)
    assert [type(c.status) for c in again.checks] == [Status, Status]
    assert again.summary() == {"pass": 1, "fail": 1, "cannot_tell": 0, "skip": 0, "not_applicable": 0}
    assert json.loads(again.to_json()) == data
    data["checks"][0]["status"] = "error"
    with pytest.raises(ValueError, match="error"):
        Report.from_dict(data)


def test_how_a_child_ended_is_one_closed_list_with_its_consequences():
    """The limits, what is ours and what ends a run, as the runner reads them; an unknown word is refused at the
    door (a typo in `WorkerDied("tiem", ...)` must not become a student's failure)."""
    limits = {"time", "cpu", "memory", "output", "disk"}
    assert {k for k in ChildEnd if k.is_limit} == limits
    assert {k for k in ChildEnd if k.is_ours} == limits | {"startup", "killed-outside", "interrupted", "grader error"}
    assert {k for k in ChildEnd if k.ends_run} == limits | {"startup", "channel", "interrupted", "grader error"}
    assert not any(ChildEnd(k).is_ours for k in ("crash", "killed", "exit", "channel"))  # the code's doing
    died = WorkerDied("time", "time limit")
    assert died.kind is ChildEnd.TIME and died.ours and json.dumps({"kind": died.kind}) == '{"kind": "time"}'
    with pytest.raises(ValueError, match="tiem"):
        WorkerDied("tiem", "a typo")


SNAPSHOT = Path(__file__).resolve().parents[1] / "e2e" / "golden" / "behaviour"


@pytest.mark.parametrize("path", sorted(SNAPSHOT.glob("*.json")), ids=lambda p: p.stem)
def test_every_recorded_report_reads_back_as_it_was_written(path):
    """The behaviour snapshot's reports (every zoo, mutant, broken and hostile target: every shape of adapter,
    diagnosis, process event and leakage block mha-check writes) through from_dict and to_dict: the same JSON,
    the derived fields (passed, summary, needs_review) included."""
    data = json.loads(path.read_text())
    for check in data["checks"]:
        check.setdefault("claim", "")
        check.setdefault("explanation", "")
    again = json.loads(json.dumps(Report.from_dict(data).to_dict(), default=str))
    assert again.pop("isolation") == {}
    assert again == data


def test_the_blocks_are_records_written_in_their_old_order():
    """Attributes to read, the JSON keys in the order the dicts had (an absent part left out), and what older
    reports lack (fix_is_code, a mapping) read as they meant."""
    adapter = Adapter(("CPU 120 s",), "MyAttn", "MyAttn(d=8)", ("a note",), Form("single-head", "one head"),
                      {"proof": "reference"}, (ProcessEvent.of(WorkerDied("killed-outside", "SIGTERM")),), ("look",))
    assert list(adapter.to_dict()) == ["protections", "class", "construction", "notes", "form", "mapping", "process",
                                       "review"]
    assert Adapter.from_dict(json.loads(json.dumps(adapter.to_dict()))) == adapter
    assert Adapter().to_dict() == {} and Adapter.from_dict({}) == Adapter()
    old = {"mutant": "no-scale", "match": "trace", "title": "t", "symptom": "s", "fix": "f", "lesson": "l",
           "evidence": "e", "at": None, "code": None, "follows": ["reference-match"], "failing": ["reference-match"],
           "findings": []}
    read = Diagnosis.from_dict(old)
    assert read.named and read.fix_is_code and read.follows == ("reference-match",)
    assert list(read.to_dict()) == ["mutant", "match", "title", "symptom", "fix", "fix_is_code", "lesson", "evidence",
                                    "at", "code", "follows", "failing", "findings"]
    none = Diagnosis.from_dict({"mutant": None, "match": "none", "message": "m", "failing": [], "findings": []})
    assert not none.named and "marks" not in none.to_dict()
    block = {"summary": "bubblewrap: uid 61001", "mechanism": "bwrap", "uid": 61001, "full_policy": False,
             "short_of_policy": ["no seccomp"], "unfit_to_grade": "", "submission_copy": {"copied_files": 1}}
    isolation = Isolation.from_dict(block)
    assert isolation.measured == {"mechanism": "bwrap", "uid": 61001} and not isolation.full_policy
    assert json.dumps(isolation.to_dict()) == json.dumps(block)
    assert Leakage.from_dict({"error": "no leakage map: x"}).to_dict() == {"error": "no leakage map: x"}
