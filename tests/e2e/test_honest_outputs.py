"""Outputs that stay honest whatever the student's code prints or raises: JUnit is always well-formed XML, control
and bidi characters are shown as visible escapes in every text format, and the student's words never render as
Markdown formatting on Gradescope's page (issue 27, item 6)."""
import html
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from markdown_it import MarkdownIt

from checks import all_checks
from conftest import ROOT, report_for
from harness.engine.records import Adapter, Diagnosis
from harness.engine.report import CheckResult, Report
from harness.engine.trace.result import TraceResult
from harness.frontends.batch_files import write_summary
from harness.frontends.grader import graded
from harness.render import formats, trace_text, view
from harness.render import html as html_report
from harness.render.rubric import RubricError, load_rubric

UNPRINTABLE = ROOT / "tests" / "hostile" / "unprintable.py"
# what XML 1.0 forbids in a document: C0 controls but tab, newline and carriage return; lone surrogates; U+FFFE/FFFF
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
EVERY_BAD = "".join(chr(i) for i in range(32)) + "\x7f\x85\x9b\ud800\udfff\ufffe\uffff"


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "harness.frontends.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def report_saying(message: str, output: str = "", target: str = "attention.py:MyAttn") -> Report:
    """A report whose output-shape check failed with `message` (the student's exception text) and whose code printed
    `output`; the checks that need output-shape skipped, the others passed."""
    results = [CheckResult(c.id, "fail" if c.id == "output-shape" else "pass", c.claim,
                           message if c.id == "output-shape" else "fine", c.kind, fix="fix it") for c in all_checks()]
    report = Report(target, results)
    report.student_output = output
    return report


def test_junit_is_valid_xml_whatever_a_message_or_the_output_holds():
    """Every character XML forbids, in a check's message, the printed output and the target's name, comes out as a
    visible escape: the document encodes as UTF-8 and parses."""
    report = report_saying(f"forward raised ValueError: a{EVERY_BAD}b", output=f"printed{EVERY_BAD}",
                           target=f"att{EVERY_BAD}.py:MyAttn")
    document = formats.junit(report)
    assert NOT_XML.search(document) is None
    root = ET.fromstring(document.encode("utf-8"))
    failure = next(c for c in root.iter("testcase") if c.get("name") == "output-shape").find("failure")
    for shown in ("\\x00", "\\x1b", "\\x7f", "\\ud800", "\\ufffe", "\\uffff"):
        assert shown in failure.get("message") and shown in failure.text and shown in root.find("system-out").text
    assert "\\x0d" in failure.get("message")  # a carriage return is shown, never a line that overwrites another


def test_junit_from_a_hostile_submission_parses():
    """The hostile submission prints, raises and names a parameter with every such character (a lone surrogate
    included): `--format junit` writes a document that an XML parser reads, and no traceback."""
    run = run_cli(f"{UNPRINTABLE}:MyAttn", "--format", "junit")
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr[-3000:]
    root = ET.fromstring(run.stdout.encode("utf-8"))
    failure = next(c for c in root.iter("testcase") if c.get("name") == "output-shape").find("failure")
    assert "\\x1b" in failure.get("message") and "\\x00" in failure.text
    assert "\\x1b" in root.find("system-out").text


BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
HOSTILE = f"\x1b[2J\x1b[32mPASS\x1b[0m\x9b31m \u202egnp.exe{BIDI}\rPASS"
# what no text format may show as it is: controls a terminal obeys, the bidi controls that reorder what is on screen
# (a line that reads differently from what it holds), and what no UTF-8 or XML output can carry
OBEYED = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff"
                    "\ufffe\uffff]")


def strings(value):
    """Every string in a decoded JSON document."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def hostile_report() -> Report:
    """Student text everywhere a report takes it from: an exception message, the printed output, the file's name,
    the line the root cause points at, the parameters' names in the mapping, a note and the construction."""
    report = report_saying(f"forward raised ValueError: {HOSTILE}", output=HOSTILE, target=f"a{HOSTILE}.py:MyAttn")
    report.adapter = Adapter.from_dict({"notes": [f"note {HOSTILE}"], "construction": f"MyAttn({HOSTILE})",
                                        "mapping": {"layout": {"wq": f"W_q{BIDI}.weight", "wk": "W_k.weight",
                                                               "wv": "W_v.weight", "wo": "out.weight"},
                                                    "proof": "reference"}})
    report.diagnosis = Diagnosis.from_dict({"mutant": "no-scale", "title": "the scores are not scaled",
                                            "evidence": f"e {HOSTILE}", "fix": "divide by dh**0.5", "symptom": "s",
                                            "lesson": "l", "at": f"a{HOSTILE}.py:3",
                                            "code": f"scores = q @ k.T  # {HOSTILE}", "follows": ["output-shape"]})
    return report


def test_control_and_bidi_characters_are_shown_never_obeyed_in_every_format():
    """In the text report (every density), Gradescope's and PrairieLearn's results, JUnit and the HTML of a notebook,
    every control or bidi character the student's text holds is a visible escape (\\x1b, \\u202e)."""
    report = hostile_report()
    shown = {"text": formats.render(report, "text"), "verbose": formats.render(report, "text", verbose=True),
             "quiet": formats.render(report, "text", quiet=True), "junit": formats.render(report, "junit"),
             "html": html_report.render(view.build(report)),
             **{fmt: "\n".join(strings(json.loads(formats.render(report, fmt))))
                for fmt in ("gradescope", "prairielearn")}}
    for fmt, text in shown.items():
        assert OBEYED.findall(text) == [], fmt
        if fmt != "quiet":  # quiet cuts the root cause at one 80-column line, before the student's words here
            assert "\\u202e" in text and "\\x1b" in text, fmt
    assert "\\u2066" in shown["verbose"] and "\\x9b" in shown["verbose"] and "\\u200f" in shown["verbose"]
    assert "\\u202e" in shown["prairielearn"].split("abc")[-1]  # the printed output too


def test_grade_summary_shows_a_names_control_characters(tmp_path):
    """The batch's summary.csv: a submission named with bidi controls and an escape sequence shows them escaped."""
    row = graded(f"bob{HOSTILE}", f"a{HOSTILE}.py:MyAttn", hostile_report(), {"format": "text"}, 0.0)
    write_summary([row["row"]], tmp_path / "summary.csv")
    text = (tmp_path / "summary.csv").read_text()
    assert OBEYED.findall(text.replace("\r\n", "\n")) == [] and "bob\\x1b[2J" in text and "\\u202e" in text
    assert OBEYED.findall(row["text"]) == []


# Markdown an exception message may hold, each piece a formatting Gradescope's "md" output would otherwise render
MARKDOWN_PIECES = ["**PASS** every check", "| check | result |\n|---|---|\n| causal-leakage | **PASS** |",
                   "_all_ *good* ~~bad~~", "`code` ``more``", "```\nfenced\n```", "# Score: 100/100",
                   "Score\n=====", "Score\n-----", "***", "1. first\n2) second", "- item\n+ item\n* item",
                   "> quoted", "[link](http://e.example/x)", "![img](http://e.example/x.png)", "<b>html</b>",
                   "<http://e.example>", "&#8238;&amp;", "\\*not\\* escaped", "    indented code", "\tcode too"]
MARKDOWN_TAGS = re.compile(r"<(?!/?p>)[a-z/][^>]*>")  # any element but a paragraph: strong, em, table, code, h1...


def rendered(markdown: str) -> str:
    """Gradescope's page, as near as a CommonMark renderer with GitHub's tables and strikethrough gets."""
    return MarkdownIt("commonmark").enable("table").enable("strikethrough").render(markdown)


def words(page: str) -> str:
    """What a reader sees of the HTML `page`: the text, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_a_students_markdown_shows_as_typed_on_gradescope():
    """An exception message full of Markdown (a bold PASS, a table, headings, lists, links, HTML, entities, code)
    renders on Gradescope as the words the student wrote, with no formatting: the failing test's output has no
    element but paragraphs, and its words hold every piece as typed."""
    message = "forward raised ValueError: " + "\n\n".join(MARKDOWN_PIECES)
    data = formats.gradescope(report_saying(message))
    test = next(t for t in data["tests"] if t["name"].startswith("output-shape"))
    assert test["output_format"] in ("md", "simple_format")
    page = rendered(test["output"])
    assert MARKDOWN_TAGS.findall(page) == [], page
    seen = words(page)
    for piece in MARKDOWN_PIECES:
        assert " ".join(piece.split()) in seen, (piece, seen)


def test_a_students_markdown_shows_as_typed_in_gradescopes_headline():
    """The results' summary quotes what the code raised in its verdict (a red team ended the grader's bold early and
    added its own code spans, emphasis and strikethrough there): it renders the bold of mha-check's own words only."""
    words = " ".join(p for p in MARKDOWN_PIECES if "\n" not in p)
    report = report_saying("forward raised ValueError: " + words)
    report.checks[[c.id for c in report.checks].index("output-shape")].details["raised"] = {
        "kind": "ValueError", "text": "** " + words + " **", "at": "attention.py:9"}
    page = rendered(formats.gradescope(report)["output"])
    assert "your code raised ValueError" in page
    assert set(MARKDOWN_TAGS.findall(page)) <= {"<strong>", "</strong>"}, page
    assert page.count("<strong>") == 1 + ("Root cause" in page), page


def test_a_fix_in_the_students_names_shows_as_typed_on_gradescope():
    """A failing check's fix is our words with code in backticks, in the student's names: "__init__" outside the code
    rendered as a bold "init" (a user's trial), and a name the student chose must not format the page either.  Only
    the code spans are elements; every word reads as typed."""
    fix = "At the top of __init__: `if n_embd % n_head: raise ValueError(\"`**x**`\")` (an _assert_ also works)"
    report = report_saying("built a module for d_out=8 with 3 heads instead of refusing it")
    report.checks[[c.id for c in report.checks].index("output-shape")].fix = fix
    test = next(t for t in formats.gradescope(report)["tests"] if t["name"].startswith("output-shape"))
    page = rendered(test["output"])
    assert set(MARKDOWN_TAGS.findall(page)) <= {"<code>", "</code>"}, page
    assert "At the top of __init__:" in words(page) and "(an _assert_ also works)" in words(page), page
    assert "**x**" in words(page), page  # a backtick of the student's ends a code span early: shown, not obeyed


OUTPUT_SHAPE_MUTANT = f"{ROOT / 'mutants' / 'mask_size_fixed.py'}:CausalMHA"  # output-shape fails; 9 checks need it
BUGGY = f"{ROOT / 'examples' / 'buggy_attention.py'}"  # split-view-order: view-order and three other checks fail


def rubric_file(tmp_path, text: str):
    path = tmp_path / "rubric.toml"
    path.write_text(text)
    return load_rubric(str(path), {c.id for c in all_checks()})


def visible_text(data: dict) -> str:
    """All a student sees of Gradescope's results before anything is published: the visible tests, and the summary
    and total when the results' own visibility is "visible"."""
    shown = [t["name"] + "\n" + t["output"] for t in data["tests"] if t["visibility"] == "visible"]
    if data.get("visibility", "visible") == "visible":
        shown += [data["output"], str(data["score"])]
    return "\n".join(shown)


def test_a_hidden_check_is_inferable_nowhere_on_gradescope(tmp_path):
    """The rubric hides output-shape and the layer gets it wrong: no visible test says what it needs (nine said
    "skipped: needs output-shape, which did not pass"), the verdict does not call a wrong layer "nothing it could check
    is wrong", and the results' own visibility (the total and the summary) waits for the grades to be published."""
    rubric = rubric_file(tmp_path, "[checks.output-shape]\nhidden = true\n")
    report = report_for(OUTPUT_SHAPE_MUTANT)
    assert report["output-shape"].status == "fail" and sum(c.status == "skip" for c in report.checks) >= 9
    data = formats.gradescope(report, rubric)
    hidden = [t for t in data["tests"] if t["visibility"] != "visible"]
    assert [t["name"].split()[0] for t in hidden] == ["output-shape"] and hidden[0]["status"] == "failed"
    visible = visible_text(data)
    assert "output-shape" not in visible  # (contiguity's own run saw the forward raise: its evidence, shown)
    skipped = [t for t in data["tests"] if t["visibility"] == "visible" and "skipped" in t["output"]]
    assert len(skipped) >= 9 and all("needs a check not shown yet" in t["output"] for t in skipped)
    assert "nothing it could check is wrong" not in data["output"] and data["output"].startswith("**FAIL")
    assert data["visibility"] == "after_published"  # the total would tell what output-shape earned
    assert data["score"] == sum(t["score"] for t in data["tests"])  # the grade itself is whole
    shown = view.build(report, hidden=rubric.hidden([c.id for c in report.checks]))
    assert "nothing it could check is wrong" not in shown.verdict and shown.verdict.startswith("FAIL")


def test_the_totals_visibility_is_a_rubric_option(tmp_path):
    """`score_visibility`: by default the total waits as long as the most hidden check (at most until publication);
    a rubric may set it (after_due_date, after_published, visible), and a wrong value is an error."""
    report = report_for(OUTPUT_SHAPE_MUTANT)
    assert formats.gradescope(report)["visibility"] == "visible"  # nothing hidden: the total is shown at once
    later = rubric_file(tmp_path, '[checks.view-order]\nvisibility = "after_due_date"\n')
    assert formats.gradescope(report, later)["visibility"] == "after_due_date"
    chosen = rubric_file(tmp_path, 'score_visibility = "after_published"\n')
    assert formats.gradescope(report, chosen)["visibility"] == "after_published"
    knowingly = rubric_file(tmp_path, 'score_visibility = "visible"\n[checks.output-shape]\nhidden = true\n')
    assert formats.gradescope(report, knowingly)["visibility"] == "visible"
    with pytest.raises(RubricError, match="score_visibility must be one of"):
        rubric_file(tmp_path, 'score_visibility = "soon"\n')


def test_hiding_a_check_keeps_the_root_cause_a_visible_check_supports(tmp_path):
    """view-order is hidden; the split mistake also makes the visible reference-match, causal-leakage and
    gradient-match fail: the root cause stays in the summary and in those tests, and view-order is named nowhere."""
    rubric = rubric_file(tmp_path, "score_visibility = \"visible\"\n[checks.view-order]\nhidden = true\n")
    report = report_for(BUGGY)
    assert report.diagnosis.mutant == "split-view-order" and "view-order" in report.diagnosis.follows
    data = formats.gradescope(report, rubric)
    assert "Root cause: **Heads split with view(B, H, n, dh)" in data["output"]
    supported = next(t for t in data["tests"] if t["name"].startswith("reference-match"))
    assert "This follows from the root cause" in supported["output"] and supported["visibility"] == "visible"
    assert "view-order" not in visible_text(data)


def test_a_trace_shows_control_and_bidi_characters_escaped():
    """`mha-check trace` prints the student's names, their forward's error and the notes: escaped as everywhere."""
    result = TraceResult(f"a{HOSTILE}.py:MyAttn", f"MyAttn({HOSTILE})", {"d": 4, "heads": 2, "n": 3, "batch": 1},
                         notes=[f"note {HOSTILE}"], error=f"forward raised ValueError: {HOSTILE}")
    shown = trace_text.render(result)
    assert OBEYED.findall(shown) == [] and "\\u202e" in shown and "\\x1b" in shown


def test_a_file_name_with_backticks_stays_one_code_span_in_the_summary():
    """The root cause's file:line (a student's file name) and fix are inline code on Gradescope whatever backticks
    they hold: the name renders whole, as typed, and nothing after it turns into code or formatting."""
    report = report_saying("forward raised ValueError: x")
    report.diagnosis = Diagnosis.from_dict({"mutant": "no-scale", "title": "the scores are not scaled",
                                            "evidence": "e", "symptom": "s",
                                            "fix": "raise: `if d % h: raise ValueError(...)`", "lesson": "l",
                                            "at": "a`b``**c**.py:3", "follows": ["output-shape"]})
    page = rendered(formats.gradescope(report)["output"])
    assert re.findall(r"<code>(.*?)</code>", page) == [html.escape("a`b``**c**.py:3", quote=False),
                                                        html.escape("raise: `if d % h: raise ValueError(...)`",
                                                                    quote=False)]
    assert "<strong>c</strong>" not in page


def test_a_name_with_blank_lines_stays_in_its_code_span_on_gradescope():
    """A fix quotes a name of the student's module in a code span (the name meant, a misspelt one's neighbour), and
    a module may be named with blank lines between Markdown: a blank line ended the span's paragraph, and red team 8's
    bold "Score: 19/19, every check passed" and its table rendered on Gradescope's page.  Each line break of a code
    span is shown as \\n: the failing test renders code and paragraphs only, the payload inside the code."""
    run = run_cli(f"{ROOT / 'tests' / 'hostile' / 'markdown_name.py'}:MyAttn", "--format", "gradescope")
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr[-3000:]
    test = next(t for t in json.loads(run.stdout)["tests"] if t["name"].startswith("output-shape"))
    page = rendered(test["output"])
    assert "Fix: Use " in page and "\\n\\n**Score: 19/19, every check passed**" in page, page
    assert set(MARKDOWN_TAGS.findall(page)) <= {"<code>", "</code>"}, page
    code = " ".join(re.findall(r"<code>(.*?)</code>", page, re.S))
    assert "**Score: 19/19, every check passed**" in html.unescape(code), page
