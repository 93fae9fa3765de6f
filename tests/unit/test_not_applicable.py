"""A check that does not apply (no KV cache to check, no heads to split in a single-head layer) is not a verified
pass: every format shows it with its own mark and counts it apart, while it keeps its status "pass" (a JSON consumer
reading `status` sees what it always saw) and its points (a check that does not apply is never the student's loss).
"""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from checks import all_checks
from checks.kv_cache import NO_CACHE
from harness.engine.report import CheckResult, Report
from harness.frontends.grader import graded
from harness.render import formats, text, view
from harness.wire.form import SINGLE_HEAD
from harness.wire.status import Status

FORM_WHY = SINGLE_HEAD.not_applicable["view-order"]


def _report(failing: str | None = None, cannot_tell: str | None = None) -> Report:
    """Every check passes except `failing` (and `cannot_tell`); kv-cache and view-order do not apply, the one
    with its check's own words, the other as the engine's form-dependent not-applicable outcome."""
    checks = []
    for c in all_checks():
        status, message, details = Status.PASS, "message", {}
        if c.id == "kv-cache":
            message, details = NO_CACHE, {"not_applicable": True}
        elif c.id == "view-order":
            message, details = FORM_WHY, {"form": "single-head", "not_applicable": True}
        elif c.id == failing:
            status, message = Status.FAIL, "it is wrong"
        elif c.id == cannot_tell:
            status, message = Status.CANNOT_TELL, "could not tell"
        checks.append(CheckResult(c.id, status, c.claim, message, c.kind, fix="fix", details=details))
    return Report("attention.py:MyAttn", checks)


def test_the_report_record_counts_a_check_that_does_not_apply_apart():
    report = _report()
    total = len(report.checks)
    assert report["kv-cache"].not_applicable and report["view-order"].not_applicable
    assert not report["construct"].not_applicable
    assert report.summary() == {"pass": total - 2, "fail": 0, "cannot_tell": 0, "skip": 0, "not_applicable": 2}
    assert report.passed  # it does not stop a layer from passing: it is not the student's loss


def test_json_keeps_the_status_and_says_not_applicable_explicitly():
    data = json.loads(formats.to_json(_report()))
    kv = next(c for c in data["checks"] if c["id"] == "kv-cache")
    assert kv["status"] == "pass" and kv["not_applicable"] is True
    assert all(c["not_applicable"] is False for c in data["checks"] if c["id"] not in ("kv-cache", "view-order"))
    assert data["summary"]["not_applicable"] == 2
    assert sum(data["summary"].values()) == len(data["checks"])
    again = Report.from_dict(data)
    assert again["kv-cache"].not_applicable and again.summary() == _report().summary()


def test_a_saved_report_from_before_the_field_is_read_with_it():
    """A report saved before `not_applicable` existed: the engine's flag in details, or the check's own words."""
    data = _report().to_dict()
    for c in data["checks"]:
        del c["not_applicable"]
    data["checks"][[c["id"] for c in data["checks"]].index("kv-cache")]["details"] = {}  # only the words say it
    again = Report.from_dict(json.loads(json.dumps(data, default=str)))
    assert again["kv-cache"].not_applicable and again["view-order"].not_applicable
    assert not again["construct"].not_applicable


def test_a_pass_that_checked_something_else_is_not_counted_as_not_applying():
    """mask-buffer's "does not apply to the mask: ...; checked instead: ..." verified the other tensors: a pass."""
    c = all_checks()
    mask = next(x for x in c if x.id == "mask-buffer")
    got = CheckResult.of(mask, __import__("checks").passed("does not apply to the mask: the caller's; checked "
                                                           "instead: nothing else stays behind"))
    assert not got.not_applicable


def test_text_report_marks_it_aligned_and_counts_it_apart_when_all_pass():
    out = text.render(view.build(_report()), cols=80)
    total = len(all_checks())
    assert f"{total - 2} passed, 0 failed, 2 do not apply" in out
    kv = next(ln for ln in out.splitlines() if " kv-cache " in ln)
    construct = next(ln for ln in out.splitlines() if " construct " in ln)
    assert kv.startswith(f"  {view.NOT_APPLICABLE_LABEL:<10} kv-cache")
    assert kv.index("kv-cache") == construct.index("construct")  # aligned with the others
    assert not re.search(r"PASS\s+kv-cache", out)


def test_text_report_lists_it_apart_from_the_passes_when_something_failed():
    out = text.render(view.build(_report(failing="mask-fill")), cols=80)
    total = len(all_checks())
    assert f"{total - 3} passed, 1 failed, 2 do not apply" in out
    passes = " ".join(ln for ln in out.splitlines() if ln.startswith("  PASS"))
    assert "kv-cache" not in passes and "view-order" not in passes
    assert any(ln.startswith(f"  {view.NOT_APPLICABLE_LABEL:<10} ") and "kv-cache" in ln for ln in out.splitlines())


def test_one_that_does_not_apply_is_said_in_the_singular():
    report = _report()
    report["view-order"].not_applicable = False
    assert view.build(report).summary.endswith(", 1 does not apply")


def test_quiet_and_html_show_the_mark():
    quiet = text.render(view.build(_report()), quiet=True, cols=80)
    assert any(ln.startswith(view.NOT_APPLICABLE_LABEL) and "kv-cache" in ln for ln in quiet.splitlines())
    from harness.render import html
    page = html.render(view.build(_report()))
    assert f">{view.NOT_APPLICABLE_LABEL}</b>" in page and "2 do not apply" in page


def test_gradescope_and_prairielearn_keep_the_points_and_say_it():
    report = _report(failing="mask-fill")
    gs = formats.gradescope(report)
    kv = next(t for t in gs["tests"] if t["name"].startswith("kv-cache"))
    assert kv["status"] == "passed" and kv["score"] == kv["max_score"] > 0
    assert "does not apply" in kv["name"] and kv["extra_data"] == {"not_applicable": True}
    assert "full points" in kv["output"].lower()
    assert all("extra_data" not in t for t in gs["tests"] if not t["name"].startswith(("kv-cache", "view-order")))
    pl = formats.prairielearn(report)
    kv = next(t for t in pl["tests"] if t["name"].startswith("kv-cache"))
    assert kv["points"] == kv["max_points"] > 0 and "does not apply" in kv["name"]


def test_junit_passes_it_with_a_property_saying_so():
    root = ET.fromstring(formats.junit(_report()))
    assert (root.get("failures"), root.get("errors"), root.get("skipped")) == ("0", "0", "0")
    kv = next(t for t in root.iter("testcase") if t.get("name") == "kv-cache")
    assert kv.find("failure") is None and kv.find("error") is None and kv.find("skipped") is None
    props = {p.get("name"): p.get("value") for p in kv.iter("property")}
    assert props == {"not_applicable": "true"}
    assert "does not apply" in kv.find("system-out").text
    construct = next(t for t in root.iter("testcase") if t.get("name") == "construct")
    assert construct.find("properties") is None


def test_the_summary_row_counts_it_apart_with_the_points_unchanged():
    report = _report(cannot_tell="mask-fill")
    row = graded("alice", "attention.py:MyAttn", report, {"format": "json"}, 0.0)["row"]
    total = len(report.checks)
    assert (row["pass"], row["not_applicable"], row["cannot_tell"]) == (total - 3, 2, 1)
    assert row["score"] == total - 1 and row["max_score"] == total
    assert row["kv-cache"] == "pass"  # the per-check column keeps the status, as the JSON's `status` does
    assert row["not_applicable_checks"] == "kv-cache view-order"  # which ones, for the class view's pass rates
