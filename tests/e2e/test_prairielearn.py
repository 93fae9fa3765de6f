"""PrairieLearn's external-grader results (`--format prairielearn`), against the fields its documentation lists
(docs/externalGrading.md in PrairieLearn/PrairieLearn): `gradable`, `score` in [0, 1], `message`, `output`,
`format_errors`, and per test `name`, `description`, `points`, `max_points`, `message`, `output`."""
import copy
import json
import re

from checks import needs_by_id
from conftest import ROOT, report_for
from harness.render import formats
from harness.render.rubric import Rubric, load_rubric, score

BUGGY = f"{ROOT / 'examples' / 'buggy_attention.py'}"
CORRECT = f"{ROOT / 'examples' / 'correct_attention.py'}"
BROKEN = f"{ROOT / 'tests' / 'notebooks' / 'broken.ipynb'}"
TOP_LEVEL = {"gradable", "score", "message", "output", "format_errors", "images", "tests",
             "mha_check_isolation", "mha_check_seed"}  # "any additional data": for staff, not rendered by
# <pl-external-grader-results>
TEST_FIELDS = {"name", "description", "points", "max_points", "message", "output", "images"}
MARKDOWN = re.compile(r"`|\*\*[^*\s][^*]*\*\*|\]\(")  # code, bold, a link: PrairieLearn shows messages in a <pre>


def results(target: str, rubric=None) -> dict:
    return json.loads(formats.render(report_for(target), "prairielearn", rubric))


def test_results_use_only_documented_fields_and_score_by_the_one_rule():
    for target in (BUGGY, CORRECT):
        data = results(target)
        assert set(data) <= TOP_LEVEL and data["gradable"] is True
        assert 0.0 <= data["score"] <= 1.0
        for test in data["tests"]:
            assert set(test) <= TEST_FIELDS
            assert all(isinstance(test[k], str) for k in ("name", "description", "message", "output"))
            assert test["points"] in (0.0, test["max_points"])
        got, total = score(report_for(target), Rubric())
        assert data["score"] == round(got / total, 6)
        assert sum(t["points"] for t in data["tests"]) == got
    assert results(CORRECT)["score"] == 1.0
    buggy = results(BUGGY)
    assert buggy["score"] < 1.0 and "view(B, n, H, dh)" in buggy["message"]  # the root cause reaches the student


def test_hidden_checks_are_one_aggregate_test_and_the_points_add_up_to_the_score(tmp_path):
    rubric_file = tmp_path / "rubric.toml"
    rubric_file.write_text("[checks.view-order]\nhidden = true\npoints = 4\n[checks.output-shape]\n"
                           'visibility = "after_due_date"\npoints = 3\n')
    report = report_for(BUGGY)
    assert (report["view-order"].status, report["output-shape"].status) == ("fail", "pass")
    rubric = load_rubric(str(rubric_file), {c.id for c in report.checks}, needs=needs_by_id())
    data = results(BUGGY, rubric)
    text = json.dumps(data)
    assert "view-order" not in text and "output-shape" not in text  # neither the check nor what it found
    aggregate = [t for t in data["tests"] if t["name"] == "hidden checks"]
    hidden = rubric.hidden([c.id for c in report.checks])  # the two, and every check that needs output-shape
    assert hidden > {"view-order", "output-shape"} and "reference-match" in hidden and "construct" not in hidden
    earned = sum(rubric.points_for(c.id) for c in report.checks if c.id in hidden and c.status == "pass")
    possible = sum(rubric.points_for(c.id) for c in report.checks if c.id in hidden)
    assert len(aggregate) == 1 and (aggregate[0]["points"], aggregate[0]["max_points"]) == (earned, possible)
    assert possible == 7.0 + len(hidden) - 2 and earned < possible
    assert set(aggregate[0]) <= TEST_FIELDS and f"{len(hidden)} checks" in aggregate[0]["message"]
    for words in (data["message"], aggregate[0]["message"]):
        assert "count toward the score and are not shown" in words and "later" not in words
    got, total = score(report, rubric)
    points, max_points = (sum(t[k] for t in data["tests"]) for k in ("points", "max_points"))
    assert (points, max_points) == (got, total)  # what the student sees adds up to the score
    assert round(points / max_points, 6) == data["score"]
    printing = copy.deepcopy(report)  # how much the code printed follows the checks that ran (red team 13)
    printing.student_output = "x" * 284
    assert "x" not in results_of(printing, rubric)["output"] and "xxx" in results_of(printing, None)["output"]


def results_of(report, rubric) -> dict:
    return json.loads(formats.render(report, "prairielearn", rubric))


def test_without_hidden_checks_there_is_no_aggregate():
    assert all(t["name"] != "hidden checks" for t in results(BUGGY)["tests"])


def test_a_file_that_cannot_be_imported_is_not_gradable():
    data = results(BROKEN)
    assert set(data) <= TOP_LEVEL and data["gradable"] is False and "score" not in data
    assert "broken.ipynb is not a readable notebook" in data["format_errors"][0]
    assert data["message"].startswith("Not graded: mha-check could not load your file"), data["message"]


def test_messages_are_plain_text():
    data = results(BUGGY)
    words = [data["message"]] + [t[k] for t in data["tests"] for k in ("message", "description")]
    assert "view(B, n, H, dh)" in data["message"]
    assert not [w for w in words if MARKDOWN.search(w)], [w for w in words if MARKDOWN.search(w)]


def test_plain_keeps_code_and_drops_markup():
    assert formats.plain("Fix: `x.view(B, n, H, dh)` (**view-order**), see [the lesson](https://example.org)") == \
        "Fix: x.view(B, n, H, dh) (view-order), see the lesson (https://example.org)"
    assert formats.plain("scores = q @ k.T / dh**0.5") == "scores = q @ k.T / dh**0.5"  # a power is not bold


def test_long_output_and_messages_are_cut_with_a_marker_that_says_how_much():
    report = copy.deepcopy(report_for(BUGGY))
    report.student_output = "A" * 5000 + "B" * formats.PL_OUTPUT_LIMIT
    report["view-order"].message = "long " * 5000
    data = json.loads(formats.render(report, "prairielearn"))
    assert data["output"].endswith("B" * 1000) and "A" not in data["output"]
    assert "5000 characters" in data["output"] and "cut" in data["output"]
    assert len(data["output"]) < formats.PL_OUTPUT_LIMIT + 200
    message = next(t["message"] for t in data["tests"] if t["name"].startswith("view-order"))
    assert message.startswith("long long") and "cut" in message and "characters were left off" in message
    assert len(message) < formats.PL_MESSAGE_LIMIT + 200
    left_off = int(re.search(r"(\d+) characters were left off", message)[1])
    assert left_off > 25000 - formats.PL_MESSAGE_LIMIT - 200


def test_a_target_that_cannot_be_found_is_not_gradable():
    """A wrong class name, a file with no nn.Module, or several candidate classes: as with an import failure there
    is nothing to grade, and the student is told what to change."""
    bad = ROOT / "tests" / "bad"
    for target, words in [(f"{CORRECT}:MultiHeadAtention", "has no 'MultiHeadAtention'. Did you mean "
                                                           "MultiHeadAttention?"),
                          (f"{bad / 'not_a_module.py'}", "defines no torch.nn.Module subclass"),
                          (f"{bad / 'two_unrelated.py'}", "AttentionA, AttentionB")]:
        data = results(target)
        assert set(data) <= TOP_LEVEL and data["gradable"] is False and "score" not in data, data
        assert words in data["format_errors"][0] and words in data["message"], data
        assert data["message"].startswith("Not graded: ") and not MARKDOWN.search(data["message"]), data["message"]
