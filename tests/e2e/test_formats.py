"""Grading formats: Gradescope's results.json against its documented fields, JUnit XML, the rubric, shards."""
import csv
import io
import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from checks import all_checks
from conftest import ROOT, report_for
from harness.engine.report import CheckResult, Report
from harness.frontends.shards import in_shard, merge
from harness.render import formats, view
from harness.render.rubric import RubricError, load_rubric

BUGGY = f"{ROOT / 'examples' / 'buggy_attention.py'}"
CHECK_IDS = {c.id for c in report_for(BUGGY).checks}

# Gradescope's autograder specification: top-level and per-test fields, and the visibility values it accepts
TOP_LEVEL = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
             "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
TEST_FIELDS = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format", "tags",
               "visibility", "extra_data"}
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}


def test_gradescope_results_json_uses_only_documented_fields():
    data = json.loads(formats.render(report_for(BUGGY), "gradescope"))
    assert set(data) <= TOP_LEVEL and isinstance(data["score"], float)
    assert data["visibility"] in VISIBILITY and data["stdout_visibility"] in VISIBILITY
    assert len(data["tests"]) == len(CHECK_IDS)
    for test in data["tests"]:
        assert set(test) <= TEST_FIELDS
        assert isinstance(test["name"], str) and isinstance(test["output"], str)
        assert isinstance(test["score"], float) and isinstance(test["max_score"], float)
        assert test["status"] in ("passed", "failed") and test["visibility"] in VISIBILITY
        assert test["score"] == (test["max_score"] if test["status"] == "passed" else 0.0)
    report = report_for(BUGGY)
    passed = sum(c.status == "pass" for c in report.checks)
    assert data["score"] == sum(t["score"] for t in data["tests"]) == float(passed)  # one point a passed check
    assert "view(B, n, H, dh)" in data["output"]  # the root cause reaches the student
    assert data["output_format"] == "md" and all(t["output_format"] == "md" for t in data["tests"])


def test_rubric_points_visibility_and_validation(tmp_path):
    rubric_file = tmp_path / "rubric.toml"
    rubric_file.write_text('default_points = 0.5\ntarget = "attention.py:MyAttn"\n'
                           '[checks.view-order]\npoints = 4\nvisibility = "after_due_date"\n'
                           '[checks.gradient-match]\nhidden = true\n')
    rubric = load_rubric(str(rubric_file), CHECK_IDS)
    assert rubric.target == "attention.py:MyAttn"
    data = formats.gradescope(report_for(BUGGY), rubric)
    tests = {t["name"].split()[0]: t for t in data["tests"]}
    assert tests["view-order"]["max_score"] == 4.0 and tests["view-order"]["visibility"] == "after_due_date"
    assert tests["gradient-match"]["visibility"] == "hidden" and tests["construct"]["max_score"] == 0.5
    report = report_for(BUGGY)
    assert data["score"] == 0.5 * sum(c.status == "pass" for c in report.checks)  # view-order (4 points) fails
    # nothing visible names what a hidden or not-yet-visible check found: the root cause here rests on view-order
    # (after the due date) and gradient-match (hidden) too, so the summary must not reveal it through them
    assert "gradient-match" not in data["output"]
    for bad, words in [('[checks.view-ordr]\npoints = 1\n', "no check called 'view-ordr'"),
                       ('default_points = -1\n', "must be a number >= 0"),
                       ('[checks.view-order]\nvisibility = "secret"\n', "must be one of"),
                       ('[checks.view-order]\nhidden = true\nvisibility = "visible"\n', "keep one of them"),
                       ('[checks.view-order]\nhidden = "yes"\n', "must be true or false"),
                       ('points = 3\n', "unknown keys"), ('= broken', "not valid TOML")]:
        rubric_file.write_text(bad)
        with pytest.raises(RubricError, match=words):
            load_rubric(str(rubric_file), CHECK_IDS)


def test_junit_xml_is_well_formed_and_counts_failures():
    root = ET.fromstring(formats.render(report_for(BUGGY), "junit"))
    assert root.tag == "testsuite" and root.get("tests") == str(len(CHECK_IDS))
    failed = [case.get("name") for case in root.iter("testcase") if case.find("failure") is not None]
    report = report_for(BUGGY)
    assert root.get("failures") == str(len(failed)) == str(sum(c.status in ("fail", "skip") for c in report.checks))
    assert "view-order" in failed


def test_shards_partition_the_batch_deterministically():
    names = [f"student{i:03d}" for i in range(200)]
    shards = [[n for n in names if in_shard(n, (i, 4))] for i in range(1, 5)]
    assert sorted(sum(shards, [])) == names and all(shards)  # every submission in exactly one shard
    assert shards == [[n for n in names if in_shard(n, (i, 4))] for i in range(1, 5)]  # same split every time


def test_merge_joins_shard_summaries_and_refuses_duplicates(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("submission,passed\nbob,True\n")
    b.write_text("submission,passed\nalice,False\n")
    out = io.StringIO()
    assert merge([str(a), str(b)], out) == 0
    assert [r["submission"] for r in csv.DictReader(io.StringIO(out.getvalue()))] == ["alice", "bob"]
    assert merge([str(a), str(a)], io.StringIO()) == 2


MIXED = {"view-order": "fail", "gradient-match": "skip", "causal-leakage": "cannot_tell"}  # the rest pass
MAKE_MIXED = f"""
from checks import all_checks
from harness.engine.report import CheckResult, Report


def mixed_report(*args, **options):
    return Report("attention.py:MyAttn", [CheckResult(c.id, {MIXED!r}.get(c.id, "pass"), c.claim, "message", c.kind,
                                                      fix="fix", help="help") for c in all_checks()])
"""


def test_one_scoring_rule_in_every_format(tmp_path):
    """Points only for passed checks: skipped and cannot-tell checks count as not passed in Gradescope, JUnit, the
    pytest plugin, the CSV row and the JSON report alike, and cannot-tell marks the submission for review."""
    from harness.frontends.grader import graded

    made = {}
    exec(MAKE_MIXED, made)
    report = made["mixed_report"]()
    passed, total = len(report.checks) - len(MIXED), float(len(report.checks))
    data = formats.gradescope(report)
    assert data["score"] == passed and sum(t["max_score"] for t in data["tests"]) == total
    assert sum(t["status"] == "failed" for t in data["tests"]) == len(MIXED)
    root = ET.fromstring(formats.junit(report))
    assert (root.get("failures"), root.get("errors")) == ("2", "1")  # fail and skip; cannot tell
    assert json.loads(formats.to_json(report, load_rubric(None, CHECK_IDS)))["score"] == passed
    row = graded("alice", "attention.py:MyAttn", report, {"format": "json"}, 0.0)["row"]
    assert (row["score"], row["max_score"], row["needs_review"], row["passed"]) == (passed, total, True, False)
    # the pytest plugin, on the same report (its run replaced by this one): the three not passed fail their items
    (tmp_path / "conftest.py").write_text(MAKE_MIXED + "\nimport harness.frontends.pytest_items as items\n"
                                          "items.run = mixed_report\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--mha-target", "x.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert f"{len(MIXED)} failed, {passed} passed" in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]


def test_a_students_words_never_render_as_markdown_on_gradescope():
    """An exception message is the student's text: a heading, a remote image, a link or HTML in it stays inert."""
    evil = "your code raised ValueError('\n# Score: 100/100 (instructor override)\n![x](http://e/x.png) <img src=x>')"
    report = Report("attention.py:MyAttn", [CheckResult(c.id, "fail" if c.id == "construct" else "skip", c.claim,
                                                        evil if c.id == "construct" else "skipped", c.kind, fix="f")
                                            for c in all_checks()])
    data = formats.gradescope(report)
    shown = "\n".join([data["output"]] + [t["output"] for t in data["tests"]])
    assert "\n# Score" not in shown and "](http" not in shown and "<img" not in shown
    assert "\\# Score: 100/100" in shown  # shown, as text


def test_junit_keeps_every_character_of_a_message():
    """Quotes, apostrophes, markup, ampersands, line breaks and tabs in a check's message and in the student's output
    come back from an XML parser exactly as the shared view shows them (a carriage return, which would overwrite a
    line on a terminal, is shown as \\x0d in both)."""
    made = {}
    exec(MAKE_MIXED, made)
    report = made["mixed_report"]()
    tricky = 'a "quoted" it\'s <b>&amp;</b> & <\nsecond line\tand a tab\r'
    failing = next(c for c in report.checks if c.status == "fail")
    failing.message = report.student_output = tricky
    shown = next(line.text for line in view.build(report).lines if line.id == failing.id)
    assert "<b>&amp;</b>" in shown and "\n" in shown and "\t" in shown
    root = ET.fromstring(formats.junit(report))
    case = next(c for c in root.iter("testcase") if c.get("name") == failing.id)
    assert case.find("failure").get("message") == shown[:500]
    assert root.find("system-out").text == shown == tricky.replace("\r", "\\x0d")
