"""The class view built from hand-made summaries (no grading): counts, the score distribution, pass rates, the
ranking of mistakes, the links, and every student-controlled string shown, never obeyed."""
import csv
import html.parser
import io
from pathlib import Path
from urllib.parse import unquote

import pytest

from checks import all_checks
from harness.frontends import batch_files, class_view, exercises
from harness.render import class_report

CHECKS = [c.id for c in all_checks()]
NAMES = ("ada", "bob", "cyd", "dee", "eve", "fay", "gus")


def row(name: str, diagnosis: str = "", failing: tuple = (), undecided: tuple = (), score: float = 17.0,
        process: str = "", review: bool | None = None) -> dict:
    """A summary row as harness.frontends.grader.graded makes it."""
    statuses = {c: "fail" if c in failing else "cannot_tell" if c in undecided else "pass" for c in CHECKS}
    counts = {s: sum(v == s for v in statuses.values()) for s in ("pass", "fail", "cannot_tell", "skip")}
    return {"submission": name, "target": "attention.py:MHA", "passed": not failing and not undecided,
            "needs_review": bool(undecided or process) if review is None else review, "score": score,
            "max_score": 17.0, **counts, "diagnosis": diagnosis, "process": process, "isolation": "full",
            "seconds": 1.5, **statuses, "other_attempts": "", "not_graded": ""}


def klass() -> list[dict]:
    """Seven students and one file that got no row: two mistakes (three students and two), one failure no mistake
    explains, one undecided (a time limit), two who pass."""
    return [row("ada"), row("bob", "split-view-order", ("reference-match", "gradient-match"), score=15),
            row("cyd", "split-view-order", ("reference-match",), score=16),
            row("dee", "scale-by-dh", ("reference-match",), score=8.5),
            row("eve", "split-view-order", ("reference-match",), score=0),
            row("fay", "", ("causal-leakage",), score=16.9),
            row("gus", "", (), ("reference-match",), score=16, process="timeout"), row("hal", "scale-by-dh",
                                                                                        ("reference-match",), score=12),
            {"submission": "ivy.zip", "target": "", "passed": "", "needs_review": True,
             "not_graded": "not a .py or .ipynb file"},
            {"submission": "README.txt", "target": "", "passed": "", "needs_review": False,
             "not_graded": "not a submission"}]


def view_of(rows, links=None, **kw) -> class_report.ClassView:
    from mutants import catalogue
    return class_report.build(rows, [(c.id, c.claim) for c in all_checks()], catalogue(), links or {}, **kw)


def test_counts_distribution_and_pass_rates():
    view = view_of(klass())
    assert view.graded == 8 and [s.name for s in view.not_graded] == ["README.txt", "ivy.zip"]
    assert view.verdicts == {"pass": 1, "fail": 6, "cannot_tell": 1, "not_graded": 1}  # README.txt is no student's
    # bins of 10 %: eve 0 %; dee 50 %; hal 70.6 %; bob 88 %; cyd, gus 94 % and fay 99.4 %; ada 100 % alone
    assert view.histogram == [1, 0, 0, 0, 0, 1, 0, 1, 1, 3, 1]
    assert sum(view.histogram) == view.graded
    rates = {r.id: r.counts for r in view.checks}
    assert [r.id for r in view.checks] == CHECKS  # every check, in the report's order
    assert rates["reference-match"] == {"pass": 2, "fail": 5, "cannot_tell": 1, "skip": 0, "not_applicable": 0}
    assert rates["causal-leakage"] == {"pass": 7, "fail": 1, "cannot_tell": 0, "skip": 0, "not_applicable": 0}
    assert [s.name for s in view.review] == ["gus", "ivy.zip"]
    gus = view.review[0]
    assert gus.why == "cannot tell: reference-match; the run: timeout" and gus.verdict == "cannot_tell"
    assert view.review[1].why == "not a .py or .ipynb file"
    assert [s.name for s in view.unnamed] == ["fay"]


def test_a_check_that_did_not_apply_is_counted_apart_from_the_passes():
    """A class where nobody's layer has a KV cache: kv-cache did not apply to anyone, not "8/8 pass"."""
    rows = [{**r, "not_applicable_checks": "kv-cache"} if "not_graded" not in r or not r["not_graded"] else r
            for r in klass()]
    rows[0]["not_applicable_checks"] = "kv-cache view-order"  # ada's single-head layer
    view = view_of(rows)
    rates = {r.id: r.counts for r in view.checks}
    assert rates["kv-cache"] == {"pass": 0, "fail": 0, "cannot_tell": 0, "skip": 0, "not_applicable": 8}
    assert rates["view-order"] == {"pass": 7, "fail": 0, "cannot_tell": 0, "skip": 0, "not_applicable": 1}
    page = class_report.page(view)
    assert "kv-cache: N/A 8 of 8" in page and "N/A for all 8" in page and "0/8 pass" not in page  # not 0 %
    assert "7/7 pass (100%), 1 N/A" in page  # view-order: the rate of those it applied to; ada's did not
    rows[1]["kv-cache"] = "fail"  # a cell that is not a pass is its status, whatever the list says
    assert {r.id: r.counts for r in view_of(rows).checks}["kv-cache"]["fail"] == 1


def test_mistakes_are_ranked_by_how_many_students_made_each_and_ties_share_a_rank():
    rows = klass() + [row("jon", "batch-seq-swap", ("batch-independence",))]
    view = view_of(rows)
    assert [(m.rank, m.id, m.count) for m in view.mistakes] == [(1, "split-view-order", 3), (2, "scale-by-dh", 2)] \
        + [(3, "batch-seq-swap", 1)]
    rows += [row("kim", "batch-seq-swap", ("batch-independence",))]
    assert [(m.rank, m.id) for m in view_of(rows).mistakes] == [(1, "split-view-order"), (2, "batch-seq-swap"),
                                                                 (2, "scale-by-dh")]  # a tie: by id, one rank
    top = view.mistakes[0]
    assert [s.name for s in top.students] == ["bob", "cyd", "eve"]
    assert top.topic == "splitting into heads" and "view(B, n, H, d_h)" in top.lesson and top.title.startswith("Heads")


def test_rows_read_back_from_the_summary_csv_give_the_same_view():
    """--only keeps the other students' rows as read from summary.csv: strings, not booleans and numbers."""
    typed = view_of(klass())
    rows = list(csv.DictReader(io.StringIO(batch_files.summary_text(klass()))))
    assert {r["passed"] for r in rows} == {"True", "False", ""}
    read = view_of(rows)
    assert (read.verdicts, read.histogram, [(m.id, m.count) for m in read.mistakes]) == \
        (typed.verdicts, typed.histogram, [(m.id, m.count) for m in typed.mistakes])
    assert [(r.id, r.counts) for r in read.checks] == [(r.id, r.counts) for r in typed.checks]


def test_columns_that_hold_only_statuses_are_shown_as_checks_too():
    """An instructor's own tests, as columns of the summary beside mha-check's checks."""
    rows = [dict(row("ada"), **{"test_my_shapes": "pass"}), dict(row("bob"), **{"test_my_shapes": "fail"})]
    view = view_of(rows)
    assert view.checks[-1].id == "test_my_shapes" and view.checks[-1].counts["fail"] == 1
    assert "other_attempts" not in [r.id for r in view.checks]


class Parsed(html.parser.HTMLParser):
    def __init__(self, text: str):
        super().__init__()
        self.tags, self.hrefs, self.attrs, self.text = [], [], [], []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [name for name, _ in attrs]
        self.hrefs += [value for name, value in attrs if name == "href"]

    def handle_data(self, data):
        self.text.append(data)


HOSTILE = ["<script>alert(1)</script>", "x\" onmouseover=\"alert(1)", "<img src=x onerror=alert(1)>",
           "evil\u202egnp.exe", "bell\x07\x1b[31mred", "lone\udc80surrogate", "a#b?c=d%20 e", "javascript:alert(1)",
           "=cmd|' /C calc'!A0"]


def test_every_student_controlled_string_is_shown_and_never_obeyed(tmp_path):
    rows = [row(name, "split-view-order" if i % 2 else "", ("reference-match",) if i % 2 else (),
                process="" if i % 2 else "crash <b>here</b>", review=not i % 2) for i, name in enumerate(HOSTILE)]
    for r in rows:
        r["target"] = "<i>attention.py</i>:\u202eMHA"
    links = {r["submission"]: f"{r['submission']}.json" for r in rows}
    page = class_report.page(view_of(rows, links))
    page.encode("utf-8")  # no lone surrogate left: the page can be written
    parsed = Parsed(page)
    assert set(parsed.tags) <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "div", "b",
                                "table", "thead", "tbody", "tr", "th", "td", "a", "code", "details", "summary",
                                "span", "i", "svg", "rect", "text", "line", "br"}, parsed.tags
    assert "script" not in parsed.tags and "img" not in parsed.tags
    assert not [a for a in parsed.attrs if a.startswith("on")]  # no handler made of a name
    for bad in ("\u202e", "\x07", "\x1b", "<script>", "<img", "<b>here"):
        assert bad not in page
    shown = "".join(parsed.text)
    for name in ("<script>alert(1)</script>", "x\" onmouseover=\"alert(1)", "evil\\u202egnp.exe",
                 "bell\\x07\\x1b[31mred", "lone\\udc80surrogate", "crash <b>here</b>", "<i>attention.py</i>"):
        assert name in shown  # the text itself, as a person reads it
    for href in parsed.hrefs:  # relative, with no scheme, query or fragment: a name cannot make it leave the folder
        assert href.startswith("./") and ":" not in href and "#" not in href and "?" not in href, href
    assert {unquote(h[2:], errors="surrogateescape") for h in parsed.hrefs} == {f"{n}.json" for n in HOSTILE}


def test_the_page_needs_no_network_and_no_script():
    page = class_report.page(view_of(klass()))
    assert "default-src 'none'" in page and "<script" not in page
    assert "http://" not in page and "https://" not in page and " src=" not in page and "url(" not in page
    assert page.count("<svg") >= 4


def test_written_into_the_output_folder_with_links_that_resolve_and_a_gradebook_csv(tmp_path):
    rows = klass()
    for r in rows:
        if not r["not_graded"]:
            (tmp_path / f"{r['submission']}.json").write_text("{}")
    (tmp_path / "ada.json").unlink()
    (tmp_path / "ada.txt").write_text("a row kept by --only, its report in another format")
    page, table = class_view.write(tmp_path, rows, "json")
    assert page == tmp_path / "class-report.html" and table == tmp_path / "class-mistakes.csv"
    hrefs = Parsed(page.read_text()).hrefs
    targets = [tmp_path / unquote(h[2:]) for h in hrefs]
    assert all(t.is_file() for t in targets), [h for h, t in zip(hrefs, targets) if not t.is_file()]
    numbered = f"exercise-{exercises.ordered().index('split-view-order') + 1:02d}.py"  # (numbered as the exercise
    # set is: a mutant added before it moves it)
    assert {t.name for t in targets} >= {"ada.txt", "bob.json", "gus.json", numbered}
    assert not any(t.name.startswith(("ivy.zip", "README")) for t in targets)  # nothing graded: nothing to link
    solutions = {t for t in targets if t.parent.name == "solutions"}
    assert len(solutions) == 2 and all((tmp_path / "class-exercises" / t.name).is_file() for t in solutions)
    mistakes = list(csv.DictReader(open(table, newline="")))
    assert [(m["rank"], m["mistake"], m["students"], m["share"]) for m in mistakes] == [
        ("1", "split-view-order", "3", "37.5%"), ("2", "scale-by-dh", "2", "25.0%")]
    assert mistakes[0]["who"] == "bob; cyd; eve" and mistakes[1]["explain"] == "mha-check explain scale-by-dh"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no partial file left


def test_a_gradebook_cell_is_never_a_formula(tmp_path):
    rows = [row("=HYPERLINK(\"x\")", "scale-by-dh", ("reference-match",))]
    _, table = class_view.write(tmp_path, rows, "json")
    who = list(csv.DictReader(open(table, newline="")))[0]["who"]
    assert who.startswith("'=")


@pytest.mark.parametrize("name", ["=HYPERLINK(\"x\")", "+1", "-1", "@SUM(A1)", "\t=HYPERLINK(\"x\")",
                                  "\r=HYPERLINK(\"x\")"])
def test_no_cell_of_the_summary_starts_as_a_formula(name):
    cell = batch_files.csv_cell(name)
    assert cell.startswith("'") or cell.startswith("\\x0d"), cell  # a carriage return is shown as an escape


def test_a_shard_writes_its_own_class_view(tmp_path):
    page, table = class_view.write(tmp_path, klass(), "json", shard=(2, 3))
    assert (page.name, table.name) == ("class-report-2-of-3.html", "class-mistakes-2-of-3.csv")


@pytest.mark.parametrize("stop", [OSError(28, "No space left on device"), KeyboardInterrupt()], ids=repr)
def test_a_write_that_fails_leaves_nothing_half_made(tmp_path, monkeypatch, stop):
    real = class_view.write_atomic

    def failing(path, text, **kw):
        if Path(path).name == "class-report.html":
            raise stop
        real(path, text, **kw)

    monkeypatch.setattr(class_view, "write_atomic", failing)
    with pytest.raises(type(stop)):
        class_view.write(tmp_path, klass(), "json")
    assert not (tmp_path / "class-exercises").exists() and not (tmp_path / "class-report.html").exists()


def test_why_a_person_should_look_says_what_the_run_did_in_words():
    """Instructor trial 10: a student whose forward never ended was "cannot tell: contiguity; the run: time" in the
    class view, ChildEnd's code alone.  Each code the summary's `process` can hold is said in words there."""
    from harness.wire.errors import ChildEnd
    assert set(class_report.RUN_WORDS) == {k.value for k in ChildEnd}
    rows = [row("oscar", "", (), ("contiguity",), score=1, process="time"),
            row("pia", "", (), ("contiguity",), score=1, process="killed-outside; time")]
    why = {s.name: s.why for s in view_of(rows).students}
    assert why["oscar"] == ("cannot tell: contiguity; the run: time (its code ran past the time limit: an endless "
                            "loop, a sleep, or far too much work)"), why
    assert why["pia"].startswith("cannot tell: contiguity; the run: killed-outside (its process was killed from "
                                 "outside once"), why


@pytest.mark.parametrize("name", ["'=x", "=x", "'x", "''=x", "'", "x"])
def test_every_name_reads_back_from_its_summary_cell_as_itself(name):
    """Red team 18: a student named '=x (a typed Moodle or Gradescope name) was written '=x, the cell of a student
    named =x, and read back (--only, --merge) as =x: `grade --only =x` took both rows for the one graded again, the
    other student's row lost from the summary, and the merged class view linked '=x to =x's report."""
    assert batch_files.csv_uncell(batch_files.csv_cell(name)) == name
    assert batch_files.csv_cell("'=x") != batch_files.csv_cell("=x")
