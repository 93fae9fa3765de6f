"""The report in machine formats: JSON (the stable schema), Gradescope's and PrairieLearn's results.json and JUnit XML;
and `render`,
the one entry point every front end uses for any format.  All of them read the shared view (harness.render.view),
so the order, the words and the scoring rule are the same everywhere."""
from __future__ import annotations

import html
import json
import re

from harness.render import text, view
from harness.render.rubric import Rubric, score
from harness.wire.status import Status

FORMATS = ("text", "json", "gradescope", "prairielearn", "junit")
PL_OUTPUT_LIMIT = 64_000  # characters of the student's printed output kept (PrairieLearn takes results up to 1 MB)
PL_STAFF_FIELD = "mha_check_isolation"  # kept with the results, not rendered by <pl-external-grader-results>
PL_SEED_FIELD = "mha_check_seed"  # likewise: the seed that repeats this grade (staff_seed)
PL_MESSAGE_LIMIT = 8_000  # characters of one message kept (a student's exception can be long; the page is not)


def detail(line: view.CheckLine, root: view.RootCause | None, finding=str, fix=str) -> str:
    """One check's text for a grader's page (Markdown): what it found, and for a failure the fix.  `finding` makes
    the finding, which may hold the student's words (an exception message), fit the page (`literal` for Markdown);
    `fix` the fix, words with code in backticks that may hold the student's names (`words_and_code`)."""
    parts = [finding(line.text)]
    if line.status == Status.FAIL:
        if line.follows_root and root:
            parts.append(f"This follows from the root cause: **{(root.owner(line.id) or root).title}**.")
        if line.config:
            parts.append("Smallest failing configuration: " + line.config)
        if line.where:  # the student's file:line and code: their own words, shown as the finding is
            parts.append("Where: " + finding(line.where))
        if line.fix:
            parts.append("Fix: " + fix(line.fix))
    elif line.status == Status.CANNOT_TELL:
        parts.append("mha-check could not decide this. " + (f"What would help: {line.help}"
                                                                            if line.help else ""))
    elif line.status == Status.SKIP:
        parts.append("Not verified, so no points for it.")
    elif line.not_applicable:
        parts.append(NOT_APPLICABLE_WORDS)
    return "\n\n".join(p for p in parts if p)


NOT_APPLICABLE_WORDS = ("Does not apply to your layer: there was nothing to check, so nothing was verified; full "
                        "points, since what your layer need not do is never held against it.")


def defang(markdown: str) -> str:
    """Markdown that may carry a student's words (an exception message, a line of their code) with what mha-check
    itself never writes made inert: headings, images, links and HTML.  A message such as "# Score: 100/100" with a
    remote image must not render as the grader's own words on Gradescope's page."""
    text = markdown.replace("<", "&lt;").replace("![", "!\\[").replace("](", "]\\(")
    return re.sub(r"(?m)^(\s*)([#>=-])", r"\1\\\2", text)


_MARKS = re.compile(r"([\\`*_\[\]|~])")  # what makes emphasis, code, links, tables and strikethrough anywhere
_LINE_MARKS = re.compile(r"(?m)^(?:([#=+-])|(\d+)([.)]))")  # what makes a heading, a rule or a list at a line's start


def literal(text: str, line_start: bool = True) -> str:
    """Text that may hold the student's words, for a Markdown page, shown as typed: every mark that would format
    (emphasis, code, tables, links, strikethrough, headings, rules, lists, quotes) escaped, markup and character
    references shown as text, and a line's leading indentation left off (a page collapses it; kept, four spaces would
    make a code block).  An exception message "**PASS** every check" or a table must not pass for the grader's
    words on Gradescope's page.  `line_start`: the text begins a line (False for the words after a code span, whose
    space before them is no indentation: "Build `self.o`as an nn.Linear" lost it)."""
    text = _MARKS.sub(r"\\\1", re.sub(r"(?m)^[ \t]+" if line_start else r"(?<=\n)[ \t]+", "", text))
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _LINE_MARKS.sub(lambda m: f"\\{m[1]}" if m[1] else f"{m[2]}\\{m[3]}", text)


def words_and_code(text: str) -> str:
    """Our words with code in backticks ("At the top of __init__: `if d % h: raise ...`"), for a Markdown page: the
    words shown as typed (`literal`: "__init__" made no bold "init" on Gradescope's page), each code part a code span
    whatever backticks the student's names bring into it."""
    parts = re.split(r"`([^`]*)`", text)
    return "".join(code_span(part) if i % 2 else literal(part, line_start=i == 0) for i, part in enumerate(parts))


def code_span(text: str) -> str:
    """`text` as inline code whatever backticks it holds (a fence longer than its longest run of them), and whatever
    line breaks: each is shown as `\\n` (a blank line ends a paragraph, and the span with it: red team 8 named a
    module of its own "...\\n\\n**Score: 19/19, every check passed**\\n\\n", mha-check's fix quoted that name as the
    one meant, and the bold rendered as the grader's words on Gradescope's page)."""
    text = re.sub(r"\r\n|[\r\n]", r"\\n", text)
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def gradescope(report, rubric: Rubric | None = None) -> dict:
    """Gradescope's results.json: the score, a summary everyone may see, one test per check.

    What a student sees never tells what a check they do not see found: the summary and the visible tests are
    written from the view without the rubric's hidden checks (no skip reason names one, no verdict calls a layer
    that one of them fails right), each hidden test from the whole view; and the results' own visibility (the total
    and the summary) is the rubric's `total_visibility`, since the total less the visible tests' points is what the
    hidden ones earned."""
    rubric = rubric or Rubric()
    ids = [c.id for c in report.checks]
    hidden = rubric.hidden(ids)
    public = view.build(report, hidden=hidden)  # the summary never reveals a hidden check
    full = view.build(report)
    shown = {line.id: line for line in public.lines}
    got, _ = score(report, rubric)
    counted = {c.id for c in report.checks if c.kind != "rule" or rubric.rules}
    tests = [{"name": _test_name(line), "number": str(i),
              "score": rubric.points_for(line.id) if line.passed and line.id in counted else 0.0,
              "max_score": rubric.points_for(line.id) if line.id in counted else 0.0,
              "status": "passed" if line.passed else "failed",
              "output": defang(detail(line, full.root, literal, words_and_code) if line.id in hidden else
                               detail(shown[line.id], public.root, literal, words_and_code)),
              "output_format": "md", "visibility": rubric.visibility_for(line.id),
              **({"extra_data": {"not_applicable": True}} if line.not_applicable else {})}
             for i, line in enumerate(full.lines, 1)]
    summary = _public_summary(public)
    return {"score": got, "output": defang("\n\n".join(summary)), "output_format": "md",
            "visibility": rubric.total_visibility(ids),
            "stdout_visibility": "hidden", "tests": tests,
            "extra_data": {"isolation": staff_isolation(report), **_seed_field("seed", report)}}


STAFF_ISOLATION = ("summary", "mechanism", "uid", "namespaces", "landlock", "full_policy", "short_of_policy",
                   "unfit_to_grade", "accepted")


def staff_isolation(report) -> dict:
    """What confined the child, for graders only: Gradescope keeps `extra_data` and PrairieLearn any field beyond
    the ones its results element renders, neither shows them to students.  A report without an isolation block
    (nothing ran: no file to check) says so."""
    if report.isolation is None:
        return {"summary": "no process ran this submission's code", "full_policy": True}
    block = report.isolation.to_dict()
    return {k: block[k] for k in STAFF_ISOLATION if k in block}


def staff_seed(report) -> int | None:
    """The seed that repeats this grade (--seed N), for fields only staff see (Gradescope's extra_data,
    PL_SEED_FIELD); None where it must not be in the report at all: `grade`'s reports, which are handed to the
    students (their seed is in the output folder's record, harness.frontends.seeds), and a report read back
    without it."""
    return report.seed if report.seed_private in ("", "staff") else None


def _seed_field(name: str, report) -> dict:
    seed = staff_seed(report)
    return {} if seed is None else {name: seed}


def _test_name(line: view.CheckLine) -> str:
    """"kv-cache (math)"; "kv-cache (math; does not apply)" for a check with nothing to judge, so that a list of
    passed tests does not read as that many things verified."""
    return f"{line.id} ({_KIND_WORDS.get(line.kind, 'math')}{'; does not apply' if line.not_applicable else ''})"


_KIND_WORDS = {"rule": "lesson rule", "instructor": "instructor's test"}


def _public_summary(public: view.ReportView) -> list[str]:
    summary = [f"**{literal(public.verdict)}**"]  # a verdict quotes what the code raised: the student's words
    if public.root:
        summary.append(f"Root cause: **{literal(public.root.title)}**" + (f" (at {code_span(public.root.at)})"
                                                                 if public.root.at else ""))
        summary.append(f"Fix: {code_span(public.root.fix) if public.root.fix_is_code else literal(public.root.fix)}")
        also = public.root.also  # a second mistake made with it: its line and its own fix
        if also:
            summary.append(f"And a second mistake: **{also.title}**" + (f" (at {code_span(also.at)})" if also.at
                                                                      else ""))
            summary.append(f"Fix: {code_span(also.fix) if also.fix_is_code else literal(also.fix)}")
    return summary


def plain(text: str) -> str:
    """Markdown's marks taken out, for a page that shows text as it is (PrairieLearn's <pre>): `code` is code,
    **bold** is bold, [words](url) is "words (url)".  A power (dh**0.5) is not bold and stays."""
    text = re.sub(r"\[([^\]\n]+)\]\((\S+?)\)", r"\1 (\2)", text)
    text = re.sub(r"\*\*([^*\s](?:[^*\n]*[^*\s])?)\*\*", r"\1", text)
    return text.replace("`", "")


def cut(text: str, limit: int, keep: str = "head") -> str:
    """`text` at most `limit` characters, the start (keep="head") or the end ("tail") kept, and a line that says it
    was cut and how much was left off: nobody should take a shortened text for the whole of it."""
    if len(text) <= limit:
        return text
    if keep == "tail":
        return f"[cut by mha-check: the first {len(text) - limit} characters were left off]\n" + text[-limit:]
    return text[:limit] + f"\n[cut by mha-check: the last {len(text) - limit} characters were left off]"


NOT_GRADABLE = {  # construct's finding -> what a PrairieLearn student reads (the target itself is the assignment's)
    "load:import": ("mha-check could not load your file",
                    "Fix what is said above so that the file loads, and submit again."),
    "load:lookup": ("mha-check could not find the class it checks in your file",
                    "Give your class the name the assignment asks for, and submit again."),
    "load:ambiguous": ("mha-check could not tell which class in your file to check",
                       "Give your attention class the name the assignment asks for (or keep only one attention "
                       "class in the file), and submit again."),
}


def _pl_text(text: str) -> str:
    return cut(plain(view.clean(text)), PL_MESSAGE_LIMIT)


def prairielearn(report, rubric: Rubric | None = None) -> dict:
    """PrairieLearn's external-grader results (docs/externalGrading.md): score in [0, 1], one test per check.

    A target that cannot even be loaded (a SyntaxError, not a notebook, no such file) or found in it (no class of
    that name, no nn.Module at all, several candidate classes) is `gradable: false` with the message in
    `format_errors`: PrairieLearn's rule for input that is not valid, so the attempt is not used up.  Every
    other submission is scored by the one rule (harness.render.rubric.score).  PrairieLearn has no per-test
    visibility, so the checks a rubric hides (hidden, or visible only later) are named nowhere: they are one test,
    "hidden checks", with their points earned and possible, so that the tests' points add up to score x total.
    PrairieLearn shows messages in a <pre>: they are plain text (`plain`), and a long one is cut with a line that
    says how much was left off (`cut`), as is the student's printed output (its end is kept).
    """
    rubric = rubric or Rubric()
    construct = next((c for c in report.checks if c.id == "construct"), None)
    finding = (construct.details or {}).get("finding") if construct is not None else None
    if finding in NOT_GRADABLE and construct.status in (Status.FAIL, Status.CANNOT_TELL):
        what, todo = NOT_GRADABLE[finding]
        return {"gradable": False, "format_errors": [_pl_text(construct.message)],
                "message": _pl_text(f"Not graded: {what}.\n\n{construct.message}\n\n{todo}"),
                "output": _pl_output(report), PL_STAFF_FIELD: staff_isolation(report),
                **_seed_field(PL_SEED_FIELD, report)}
    hidden = rubric.hidden([c.id for c in report.checks])
    public = view.build(report, hidden=hidden)
    got, total = score(report, rubric)
    counted = {c.id for c in report.checks if c.kind != "rule" or rubric.rules}
    tests = [{"name": _test_name(line), "description": plain(line.claim),
              "points": rubric.points_for(line.id) if line.passed and line.id in counted else 0.0,
              "max_points": rubric.points_for(line.id) if line.id in counted else 0.0,
              "message": _pl_text(detail(line, public.root)), "output": ""}
             for line in public.lines]
    summary = _public_summary(public)
    if hidden:
        words = "1 check that counts toward the score and is not shown" if len(hidden) == 1 else \
            f"{len(hidden)} checks that count toward the score and are not shown"
        tests.append({"name": "hidden checks", "description": words,
                      "points": float(sum(rubric.points_for(c.id) for c in report.checks
                                          if c.id in hidden and c.id in counted and c.status == Status.PASS)),
                      "max_points": float(sum(rubric.points_for(c) for c in hidden if c in counted)),
                      "message": f"The points of {words}.", "output": ""})
        summary.append(f"{words} (the test \"hidden checks\").")
    return {"gradable": True, "score": round(got / total, 6) if total else 0.0,
            "message": _pl_text("\n\n".join(summary)), "output": _pl_output(report, hidden), "tests": tests,
            PL_STAFF_FIELD: staff_isolation(report), **_seed_field(PL_SEED_FIELD, report)}


def _pl_output(report, hidden=frozenset()) -> str:
    """What the student's code printed: the end of it, which is where an error is.  Not where the rubric hides a
    check: the code runs for every check that runs, mask-fill only where causal-leakage passed, and what it printed
    told the hidden check's result (red team 13: 284 characters against 225)."""
    if hidden and (report.student_output or "").strip():
        return "(what your code printed is not shown: some checks are not shown yet)"
    return cut(view.clean(report.student_output or ""), PL_OUTPUT_LIMIT, keep="tail")


_ATTRIBUTE_WHITESPACE = str.maketrans({"\n": "&#10;", "\r": "&#13;", "\t": "&#9;"})  # kept, not normalised away


def escape(text: str) -> str:
    """XML character data: &, < and > escaped, and every character XML forbids shown as an escape (view.clean), so
    that no message or printed output can make the document unreadable.  (Not xml.sax.saxutils: importing it pulls
    in urllib, http and email, about 0.1 s of every run's start, for three replacements.)"""
    return html.escape(view.clean(text), quote=False)


def quoteattr(text: str) -> str:
    """An XML attribute value with its double quotes; line breaks and tabs survive as character references."""
    return '"' + html.escape(view.clean(text), quote=True).translate(_ATTRIBUTE_WHITESPACE) + '"'


def junit(report, rubric: Rubric | None = None) -> str:
    """JUnit XML, one testcase per check: a failure for fail and for skip (not verified), an error for cannot tell.  A
    check that does not apply passes (it is never the student's loss), with the property not_applicable=true and
    why in its system-out, so that a reader of the XML can count it apart from the verified passes."""
    lines_ = view.build(report).lines
    failures = sum(ln.status in (Status.FAIL, Status.SKIP) for ln in lines_)
    errors = sum(ln.status == Status.CANNOT_TELL for ln in lines_)
    name = quoteattr(f"mha-check {report.target}")
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<testsuite name={name} tests="{len(lines_)}" failures="{failures}" errors="{errors}" skipped="0">']
    for line in lines_:
        out.append(f'  <testcase classname="mha-check.{line.kind}" name={quoteattr(line.id)}>')
        if line.status in (Status.FAIL, Status.SKIP):
            kind = "failure" if line.status == Status.FAIL else "not-verified"
            out.append(f"    <failure type={quoteattr(kind)} message={quoteattr(line.text[:500])}>"
                       f"{escape(detail(line, None))}</failure>")
        elif line.status == Status.CANNOT_TELL:
            out.append(f'    <error type="cannot-tell" message={quoteattr(line.text[:500])}>'
                       f"{escape(detail(line, None))}</error>")
        elif line.not_applicable:
            out.append('    <properties><property name="not_applicable" value="true"/></properties>')
            out.append(f"    <system-out>{escape(detail(line, None))}</system-out>")
        out.append("  </testcase>")
    if report.student_output:
        out.append(f"  <system-out>{escape(report.student_output)}</system-out>")
    out.append("</testsuite>")
    return "\n".join(out) + "\n"


def to_json(report, rubric: Rubric | None = None) -> str:
    data = report.to_dict()
    if rubric is not None:
        data["score"], data["max_score"] = score(report, rubric)
    return json.dumps(data, indent=2, default=str) + "\n"


def feedback(report, rubric: Rubric | None = None) -> str:
    """What a student may be handed back from a batch (`grade --feedback`): the text report of the view without the
    rubric's hidden checks (no line, skip reason or verdict names one, as on Gradescope), a line that says how many
    are not shown, and the score only where the rubric shows the total at once (the points a hidden check earned
    are the total less the visible ones')."""
    rubric = rubric or Rubric()
    ids = [c.id for c in report.checks]
    hidden = rubric.hidden(ids)
    lines = [text.render(view.build(report, hidden=hidden), cols=text.REPORT_WIDTH)]
    if hidden:
        lines.append("1 check that counts toward the score is not shown here." if len(hidden) == 1 else
                     f"{len(hidden)} checks that count toward the score are not shown here.")
    if rubric.total_visibility(ids) == "visible":
        got, total = score(report, rubric)
        lines.append(f"score: {got:g} of {total:g}")
    return "\n".join(lines) + "\n"


def render(report, fmt: str, rubric: Rubric | None = None, verbose: bool = False, quiet: bool = False,
           colour: bool = False, on_terminal: bool = False) -> str:
    """`report` in format `fmt`; a text report is wrapped to the terminal's width only when it is printed
    `on_terminal`, else to text.REPORT_WIDTH (a saved report never depends on the window it was made in)."""
    if fmt == "json":
        return to_json(report, rubric)
    if fmt == "gradescope":
        return json.dumps(gradescope(report, rubric), indent=2) + "\n"
    if fmt == "prairielearn":
        return json.dumps(prairielearn(report, rubric), indent=2) + "\n"
    if fmt == "junit":
        return junit(report, rubric)
    cols = None if on_terminal else text.REPORT_WIDTH
    return text.render(view.build(report), verbose, quiet, colour, cols) + "\n"
