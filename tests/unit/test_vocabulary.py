"""The closed vocabulary (issue 30 item 6): a check's `Status`, and the records of a report read back from JSON as
they were written."""
import json

import pytest

from checks import cannot_tell, failed, passed, skipped
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
    assert again.summary() == {"pass": 1, "fail": 1, "cannot_tell": 0, "skip": 0}
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
