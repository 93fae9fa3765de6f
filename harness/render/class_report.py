"""The class view of a graded batch: one self-contained HTML page (`class-report.html`) for the instructor.

It answers what a teacher of a large course asks after `mha-check grade`: how many passed, how the scores spread,
which checks the class fails, which mistakes the class made and how many students made each (with the lesson's
section to revisit and an exercise to hand out), who needs a person to look, and where each student's report is.

Built from the summary's rows only (plain data: the rows `grade` writes to summary.csv, or reads back from it for
--only), in the trusted process, with no torch and nothing of the student's run: the page is text.  Everything the
student controls (names, targets, reasons that quote file names) is shown through `view.clean` (control, bidi and
surrogate characters as visible escapes) and then HTML-escaped; links are percent-encoded relative paths given by
the caller, which checked that they exist.  The page opens without a network and without JavaScript: inline CSS,
charts as inline SVG, and a Content-Security-Policy that forbids every fetch and every script.

The catalogue, the exercise files and the writing are the caller's (harness.frontends.class_view): this layer may
not read the mutants.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from urllib.parse import quote

from harness.engine.report import STATUSES as STATUS_VALUES
from harness.wire.status import Status
from harness.render.html import STATUS_COLOURS
from harness.render.view import LABELS, NOT_APPLICABLE_LABEL, clean

VERDICTS = ("pass", "fail", "cannot_tell", "not_graded")
VERDICT_LABELS = {**LABELS, "not_graded": "NOT GRADED"}
VERDICT_WORDS = {"pass": "pass every check", "fail": "a bug found (a check fails)",
                 "cannot_tell": "cannot tell (nothing failed, something could not be decided)",
                 "not_graded": "not graded: a student's file or folder with no row of its own (the reason below)"}
NOT_APPLICABLE = "not_applicable"  # a check's pass with nothing to judge (the row's not_applicable_checks)
RATE_VALUES = (*STATUS_VALUES, NOT_APPLICABLE)  # a check's pass rate: the statuses, and N/A apart from the passes
RATE_LABELS = {**LABELS, NOT_APPLICABLE: NOT_APPLICABLE_LABEL}
COLOURS = {**STATUS_COLOURS, "not_graded": "#57606a", NOT_APPLICABLE: "#afb8c1"}
ROW_KEYS = ("submission", "target", "passed", "needs_review", "score", "max_score", "pass", "fail", "cannot_tell",
            "skip", "not_applicable", "not_applicable_checks", "diagnosis", "second_mistake", "rule_mistakes",
            "process", "isolation", "seconds", "student_id", "other_attempts", "not_graded", "review_reason")
RUN_WORDS = {  # harness.wire.errors.ChildEnd's codes, as the summary's `process` writes them, said for a person
    "time": "its code ran past the time limit: an endless loop, a sleep, or far too much work",
    "cpu": "its code used up its CPU time", "memory": "its code ran out of memory",
    "output": "its code printed more than the output limit", "disk": "its code filled its disk budget",
    "startup": "mha-check's process did not start, before any of the student's code ran: not the code's doing",
    "channel": "its code corrupted the channel to mha-check", "crash": "its code crashed (a signal such as SIGSEGV)",
    "killed": "its process was killed by a signal, twice", "killed-outside": "its process was killed from outside "
    "once, then answered: not the code's doing", "exit": "its code ended the process without answering",
    "interrupted": "mha-check was stopped while it ran", "grader error": "mha-check's grading process broke: not the "
    "code's doing"}
SCORE_BINS = 11  # 0-9 %, 10-19 %, ..., 90-99 %, and 100 % alone: full marks are a bar of their own


@dataclass
class Student:
    """One row of the summary as the page shows it."""
    name: str  # as written in the summary (the report's file name): shown only through `_e`
    verdict: str  # one of VERDICTS
    needs_review: bool
    score: float | None
    max_score: float | None
    mistake: str  # the diagnosed mistake's id, or ""
    why: str  # why a person should look, or why it was not graded ("" otherwise)
    target: str
    link: str | None  # relative path of the student's report, as given (quoted when drawn)
    statuses: dict[str, str] = field(default_factory=dict)  # check id -> status
    second: str = ""  # a second mistake named with the first (two at once), or ""
    rules: tuple[str, ...] = ()  # the lesson's rules broken beside them, as their catalogued mistakes

    @property
    def mistakes(self) -> list[str]:
        """Every mistake named in the student's report: the root cause, a second one made with it, and a lesson's
        rule broken beside them."""
        return list(dict.fromkeys(m for m in (self.mistake, self.second, *self.rules) if m))

    @property
    def named(self) -> str:
        """The mistakes as the page writes them: "a + b" for two made together."""
        return " + ".join(self.mistakes)

    @property
    def fraction(self) -> float | None:
        if self.score is None or not self.max_score:
            return None
        return max(0.0, min(1.0, self.score / self.max_score))


@dataclass
class Mistake:
    """One mistake the class made, with what the catalogue says about it."""
    id: str
    students: list[Student]
    rank: int = 0
    title: str = ""
    topic: str = ""  # the part of the layer (the lesson's order of topics)
    lesson: str = ""  # the lesson's passage to revisit
    fix: str = ""
    exercise: str | None = None  # relative paths of the exported exercise and its solution
    solution: str | None = None

    @property
    def count(self) -> int:
        return len(self.students)


@dataclass
class CheckRate:
    id: str
    claim: str
    counts: dict[str, int]  # status -> students

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass
class ClassView:
    students: list[Student]  # every row with a submission graded, by name
    not_graded: list[Student]  # files and folders of the export that got no grade, with the reason
    verdicts: dict[str, int]
    histogram: list[int]  # SCORE_BINS counts of score / max_score
    checks: list[CheckRate]
    mistakes: list[Mistake]  # most students first
    unnamed: list[Student]  # a check fails but no known mistake was named
    review: list[Student]  # a person should look
    notes: list[str]  # lines under the title (the caller's: batch, version, seed, an interruption)

    @property
    def graded(self) -> int:
        return len(self.students)


def _truth(value) -> bool:
    """A summary cell as a boolean: True, or "True" as read back from the CSV."""
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def _number(value) -> float | None:
    if isinstance(value, bool) or value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _count(value) -> int:
    number = _number(value)
    return int(number) if number is not None else 0


def _verdict(row: dict) -> str:
    if row.get("not_graded"):
        return "not_graded"
    if _truth(row.get("passed")):
        return "pass"
    if _count(row.get("fail")) > 0:
        return "fail"
    return "cannot_tell"


def _why(row: dict, statuses: dict[str, str]) -> str:
    """Why a person should look, in the summary's own words."""
    if row.get("not_graded"):
        return str(row["not_graded"])
    parts = []
    undecided = [c for c, s in statuses.items() if s == Status.CANNOT_TELL]
    if undecided:
        parts.append("cannot tell: " + ", ".join(undecided))
    if row.get("process"):  # its words, not only ChildEnd's code: "the run: time" was read as a time (trial 10)
        parts.append("the run: " + "; ".join(f"{k} ({RUN_WORDS[k]})" if k in RUN_WORDS else k
                                             for k in str(row["process"]).split("; ")))
    if row.get("review_reason"):  # instructor trial 9: "its notes say why" for a class named otherwise, no note said
        parts.append(str(row["review_reason"]))
    if not parts and _truth(row.get("needs_review")):
        parts.append("marked for review in its report: its notes say why (which file or class was checked, files "
                     "left out such as compiled code)")  # a student trial: a .pyc left out read as a choice of file
    return "; ".join(parts)


def _status_columns(rows: list[dict], checks: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The checks in the summary: the known ones in their order, then any other column that holds only statuses
    (an instructor's own tests, for instance), in the order the rows first name them."""
    known = [(cid, claim) for cid, claim in checks if any(cid in r for r in rows)]
    seen = {cid for cid, _ in checks} | set(ROW_KEYS)
    extra: list[str] = []
    for row in rows:
        extra += [k for k in row if k not in seen and k not in extra]
    values = {k: {row[k] for row in rows if row.get(k) not in (None, "")} for k in extra}
    return known + [(k, "") for k in extra if values[k] and values[k] <= set(STATUS_VALUES)]


def build(rows: list[dict], checks: list[tuple[str, str]], catalogue: dict[str, dict],
          links: dict[str, str], exercises: dict[str, tuple[str, str]] | None = None,
          notes: list[str] | None = None) -> ClassView:
    """The class view of the summary's `rows`.  `checks`: (id, claim) in the report's order; `catalogue`: the
    mutants' catalogue entries (title, topic, lesson, fix) by id; `links`: submission -> relative path of its
    report, for those that exist; `exercises`: mistake id -> (exercise, solution) relative paths."""
    exercises = exercises or {}
    columns = _status_columns(rows, checks)
    students, not_graded = [], []
    for row in rows:
        name = str(row.get("submission", ""))
        statuses = {cid: str(row[cid]) for cid, _ in columns if row.get(cid) in STATUS_VALUES}
        for cid in str(row.get("not_applicable_checks") or "").split():  # passed with nothing to judge: apart
            if statuses.get(cid) == Status.PASS:
                statuses[cid] = NOT_APPLICABLE
        student = Student(name=name, verdict=_verdict(row), needs_review=_truth(row.get("needs_review")),
                          score=_number(row.get("score")), max_score=_number(row.get("max_score")),
                          mistake=str(row.get("diagnosis") or ""), why="", target=str(row.get("target") or ""),
                          link=links.get(name), statuses=statuses,
                          second=str(row.get("second_mistake") or "") if row.get("diagnosis") else "",
                          rules=tuple(str(row.get("rule_mistakes") or "").split()))
        student.why = _why(row, statuses) if student.needs_review or student.verdict == "not_graded" else ""
        (not_graded if student.verdict == "not_graded" else students).append(student)
    students.sort(key=lambda s: s.name)
    not_graded.sort(key=lambda s: s.name)
    missing = [s for s in not_graded if s.needs_review]  # a student's file or folder that got no grade (the others
    # are what the export holds beside the submissions: listed, not counted)
    verdicts = {v: sum(s.verdict == v for s in students + missing) for v in VERDICTS}
    histogram = [0] * SCORE_BINS
    for s in students:
        if s.fraction is not None:
            histogram[SCORE_BINS - 1 if s.fraction >= 1 else int(s.fraction * (SCORE_BINS - 1))] += 1
    rates = [CheckRate(cid, claim, {st: sum(s.statuses.get(cid) == st for s in students) for st in RATE_VALUES})
             for cid, claim in columns]
    made: dict[str, list[Student]] = {}
    for s in students:
        for mid in s.mistakes:  # a student with two mistakes made together counts under each
            made.setdefault(mid, []).append(s)
    mistakes = [Mistake(mid, who, **_described(catalogue.get(mid)), exercise=exercises.get(mid, (None, None))[0],
                        solution=exercises.get(mid, (None, None))[1])
                for mid, who in sorted(made.items(), key=lambda item: (-len(item[1]), item[0]))]
    for i, m in enumerate(mistakes):  # ties share a rank: 1, 2, 2, 4
        m.rank = mistakes[i - 1].rank if i and mistakes[i - 1].count == m.count else i + 1
    unnamed = [s for s in students if s.verdict == "fail" and not s.mistake]
    review = [s for s in students + not_graded if s.needs_review]
    return ClassView(students, not_graded, verdicts, histogram, rates, mistakes, unnamed, review, list(notes or ()))


def _described(entry: dict | None) -> dict:
    entry = entry or {}
    return {k: str(entry.get(k) or "") for k in ("title", "topic", "lesson", "fix")}


# --- drawing -----------------------------------------------------------------------------------------------------

def _e(text) -> str:
    """Any text on the page: shown, never obeyed (view.clean, then HTML-escaped, quotes included)."""
    return html.escape(clean(text), quote=True)


def _href(path: str) -> str:
    """A relative link to a file inside the output folder: each part percent-encoded (a name may hold ':', '#', '?',
    spaces or any character), so that it never reads as a scheme, a fragment or a query, and starts with ./"""
    parts = []
    for part in path.split("/"):
        try:
            parts.append(quote(part, safe="", errors="surrogateescape"))  # a file name's undecodable bytes
        except UnicodeEncodeError:
            parts.append(quote(part.encode("utf-8", "replace"), safe=""))
    return html.escape("./" + "/".join(parts), quote=True)


def _link(text_html: str, path: str | None) -> str:
    return f'<a href="{_href(path)}">{text_html}</a>' if path else text_html


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def _verdict_bar(view: ClassView) -> str:
    """The verdicts as one stacked bar, each part labelled with its count."""
    total = sum(view.verdicts.values())
    width, x, parts = 720, 0.0, []
    for v in VERDICTS:
        n = view.verdicts[v]
        if not n:
            continue
        w = width * n / total
        parts.append(f'<rect x="{x:.1f}" y="0" width="{w:.1f}" height="34" fill="{COLOURS[v]}">'
                     f'<title>{_e(VERDICT_LABELS[v])}: {n}</title></rect>')
        if w >= 28:
            parts.append(f'<text x="{x + w / 2:.1f}" y="22" class="on-bar">{n}</text>')
        x += w
    return (f'<svg class="chart" role="img" aria-label="verdicts" width="{width}" height="34" '
            f'viewBox="0 0 {width} 34">{"".join(parts)}</svg>')


def _histogram(view: ClassView) -> str:
    bar, gap, height, top, bottom = 52, 10, 160, 22, 40
    peak = max(view.histogram) or 1
    width = SCORE_BINS * (bar + gap) + gap
    labels = [f"{10 * i}-{10 * i + 9}" for i in range(SCORE_BINS - 1)] + ["100"]
    out = [f'<line x1="0" y1="{top + height}" x2="{width}" y2="{top + height}" class="axis"/>']
    for i, n in enumerate(view.histogram):
        h = height * n / peak
        x = gap + i * (bar + gap)
        colour = COLOURS["pass"] if i == SCORE_BINS - 1 else "#0969da"
        out.append(f'<rect x="{x}" y="{top + height - h:.1f}" width="{bar}" height="{h:.1f}" fill="{colour}">'
                   f'<title>{labels[i]}%: {n} student{"s" * (n != 1)}</title></rect>')
        out.append(f'<text x="{x + bar / 2}" y="{top + height - h - 5:.1f}" class="count">{n}</text>')
        out.append(f'<text x="{x + bar / 2}" y="{top + height + 16}" class="tick">{labels[i]}</text>')
    out.append(f'<text x="{width / 2}" y="{top + height + 34}" class="tick">score, % of the points</text>')
    total = top + height + bottom
    return (f'<svg class="chart" role="img" aria-label="score distribution" width="{width}" height="{total}" '
            f'viewBox="0 0 {width} {total}">{"".join(out)}</svg>')


def _check_bars(view: ClassView) -> str:
    label, bar, row = 230, 360, 24
    width, height = label + bar + 150, row * len(view.checks) + 4
    out = []
    for i, rate in enumerate(view.checks):
        y, x = i * row + 4, float(label)
        out.append(f'<text x="{label - 8}" y="{y + 13}" class="label">{_e(rate.id)}'
                   f'<title>{_e(rate.claim or rate.id)}</title></text>')
        for status in RATE_VALUES:
            n = rate.counts.get(status, 0)
            if n and rate.total:
                w = bar * n / rate.total
                out.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="16" fill="{COLOURS[status]}">'
                           f'<title>{_e(rate.id)}: {RATE_LABELS[status]} {n} of {rate.total}</title></rect>')
                x += w
        na = rate.counts.get(NOT_APPLICABLE, 0)
        judged = rate.total - na  # the rate is of the students it applied to (a student's trial read kv-cache's
        # "0/10 pass (0%), 10 N/A" as ten failures)
        said = (f"{NOT_APPLICABLE_LABEL} for all {rate.total}" if rate.total and not judged else
                f'{rate.counts["pass"]}/{judged} pass ({_percent(rate.counts["pass"], judged)})'
                + (f', {na} {NOT_APPLICABLE_LABEL}' if na else ''))
        out.append(f'<text x="{label + bar + 8}" y="{y + 13}" class="rate">{said}</text>')
    return (f'<svg class="chart" role="img" aria-label="pass rate per check" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">{"".join(out)}</svg>')


def _small_bar(part: int, whole: int) -> str:
    w = 120 * part / whole if whole else 0
    return (f'<svg class="mini" width="122" height="12" viewBox="0 0 122 12" aria-hidden="true">'
            f'<rect x="0" y="1" width="122" height="10" fill="#eaeef2"/>'
            f'<rect x="0" y="1" width="{w:.1f}" height="10" fill="{COLOURS["fail"]}"/></svg>')


def _legend(statuses=STATUS_VALUES, labels=LABELS) -> str:
    return "".join(f'<span class="key"><i style="background:{COLOURS[s]}"></i>{_e(labels[s])}</span>'
                   for s in statuses)


def _name(s: Student) -> str:
    return _link(_e(s.name), s.link)


def _names(students: list[Student]) -> str:
    return ", ".join(_name(s) for s in students)


def _badge(verdict: str) -> str:
    return f'<b style="color:{COLOURS[verdict]}">{_e(VERDICT_LABELS[verdict])}</b>'


def _score(s: Student) -> str:
    if s.score is None:
        return ""
    return f"{s.score:g}" + (f" / {s.max_score:g}" if s.max_score else "")


def _mistakes(view: ClassView) -> str:
    if not view.mistakes:
        none = "No known mistake was named in this class."
        return f"<p>{none}</p>" + _unnamed(view)
    rows = []
    for m in view.mistakes:
        what = f"<b>{_e(m.title or m.id)}</b><br><code>mha-check explain {_e(m.id)}</code>"
        lesson = (f"<b>{_e(m.topic)}</b><br>" if m.topic else "") + _e(m.lesson)
        files = (_link("exercise", m.exercise) + (" · " + _link("solution", m.solution) if m.solution else "")
                 if m.exercise else "")
        who = (f"<details><summary>who: {m.count} student{'s' * (m.count != 1)}</summary>{_names(m.students)}"
               "</details>")
        rows.append(f'<tr class="mistake"><td class=num>{m.rank}</td><td>{what}</td><td class=num>{m.count}<br>'
                    f"{_small_bar(m.count, view.graded)} {_percent(m.count, view.graded)}</td><td>{lesson}</td>"
                    f'<td>{files}</td></tr><tr class="who"><td></td><td colspan=4>{who}</td></tr>')
    return ("<table><thead><tr><th>#</th><th>mistake</th><th>students</th><th>the lesson's section to revisit</th>"
            "<th>exercise</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
            + _unnamed(view))


def _unnamed(view: ClassView) -> str:
    if not view.unnamed:
        return ""
    n = len(view.unnamed)
    return (f"<p>{n} student{'s' * (n != 1)} fail{'s' * (n == 1)} a check with no known mistake named (their "
            f"reports show what fails): {_names(view.unnamed)}</p>")


def _review(view: ClassView) -> str:
    if not view.review:
        return "<p>Nobody: every submission got a verdict mha-check could decide.</p>"
    rows = "".join(f"<tr><td>{_name(s)}</td><td>{_badge(s.verdict)}</td><td>{_e(s.why)}</td>"
                   f"<td class=num>{_score(s)}</td></tr>" for s in view.review)
    return ("<table><thead><tr><th>student</th><th>verdict</th><th>why a person should look</th><th>score</th>"
            "</tr></thead><tbody>" + rows + "</tbody></table>")


def _everyone(view: ClassView) -> str:
    rows = "".join(f"<tr><td>{_name(s)}</td><td>{_badge(s.verdict)}{' · review' if s.needs_review else ''}</td>"
                   f"<td class=num>{_score(s)}</td><td>{_e(s.named)}</td><td><code>{_e(s.target)}</code></td></tr>"
                   for s in view.students)
    table = ('<table class="fixed"><thead><tr><th style="width:30%">student (report)</th><th style="width:14%">'
             'verdict</th><th style="width:10%">score</th><th style="width:18%">mistake</th><th>file checked</th>'
             "</tr></thead><tbody>" + rows + "</tbody></table>")
    if view.not_graded:
        table += ("<h3>Not graded</h3><table><thead><tr><th>file or folder</th><th>reason</th></tr></thead><tbody>"
                  + "".join(f"<tr><td>{_e(s.name)}</td><td>{_e(s.why)}</td></tr>" for s in view.not_graded)
                  + "</tbody></table>")
    return table


STYLE = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#1f2328;margin:24px auto;
max-width:1100px;padding:0 16px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
h3{font-size:16px}.notes{color:#57606a;margin:0}.big{display:flex;gap:12px;flex-wrap:wrap;margin:14px 0}
.big div{border:1px solid #d0d7de;border-radius:6px;padding:8px 14px;min-width:120px}
.big b{display:block;font-size:24px}table{border-collapse:collapse;width:100%;margin:8px 0}
th,td{border-bottom:1px solid #d0d7de;padding:6px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}tr.mistake td{border-bottom:none}tr.who td{padding-top:0}
td.num{text-align:right;white-space:nowrap}code{font-size:13px;overflow-wrap:anywhere}
td{overflow-wrap:anywhere}table.fixed{table-layout:fixed}.key{margin-right:14px;white-space:nowrap}
.key i{display:inline-block;width:12px;height:12px;margin-right:5px;vertical-align:-1px}
svg.chart{display:block;max-width:100%;height:auto;margin:8px 0}
svg text{font:12px system-ui,"DejaVu Sans",sans-serif;fill:#1f2328}svg text.on-bar{fill:#fff;font-weight:bold;
text-anchor:middle}svg text.count,svg text.tick{text-anchor:middle}svg text.label{text-anchor:end}
svg .axis{stroke:#8c959f}details summary{cursor:pointer}.banner{background:#fff8c5;border:1px solid #d4a72c;
padding:8px 12px;border-radius:6px}
"""


def page(view: ClassView, title: str = "mha-check: class report", banner: str = "") -> str:
    """The whole page, self-contained."""
    graded, v = view.graded, view.verdicts
    big = "".join(f"<div><b>{n}</b>{_e(label)}</div>" for n, label in (
        (graded, "submissions graded"), (v["pass"], "pass every check"), (v["fail"], "a bug found"),
        (v["cannot_tell"], "cannot tell"), (len(view.review), "need a person to look")))
    scored = [s.fraction for s in view.students if s.fraction is not None]
    mean = f"mean {100 * sum(scored) / len(scored):.0f}% of the points over {len(scored)} scored" if scored else \
        "no scores"
    verdict_rows = "".join(f"<tr><td>{_badge(k)}</td><td>{_e(VERDICT_WORDS[k])}</td><td class=num>{v[k]}</td>"
                           f"<td class=num>{_percent(v[k], sum(v.values()))}</td></tr>" for k in VERDICTS)
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        # no fetch, no script, no frame: the page is what it holds (links still open the reports beside it)
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "img-src data:\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{_e(title)}</h1>", *(f'<p class="notes">{_e(n)}</p>' for n in view.notes),
        f'<p class="banner">{_e(banner)}</p>' if banner else "",
        f'<div class="big">{big}</div>',
        "<h2>Verdicts</h2>", _verdict_bar(view), f"<p>{_legend(VERDICTS, VERDICT_LABELS)}</p>",
        f"<table><tbody>{verdict_rows}</tbody></table>",
        "<h2>The mistakes, by how many students made each</h2>",
        "<p>A mistake is named only on evidence (its signature in the checks' results); each links to the lesson's "
        "passage, to an exercise with that mistake alone to hand out, and to its solution.</p>", _mistakes(view),
        "<h2>Who needs a person to look</h2>", _review(view),
        "<h2>Scores</h2>", _histogram(view), f"<p>{_e(mean)}.</p>",
        "<h2>Pass rate per check</h2>", f"<p>{_legend(RATE_VALUES, RATE_LABELS)}</p>", _check_bars(view),
        "<h2>Every student</h2>", _everyone(view),
        "</body></html>"]
    return "\n".join(p for p in parts if p) + "\n"


def mistakes_table(view: ClassView) -> list[dict]:
    """The mistakes table as rows for a CSV (the gradebook): one per mistake, most students first."""
    return [{"rank": m.rank, "mistake": m.id, "title": m.title, "students": m.count,
             "share": f"{100 * m.count / view.graded:.1f}%" if view.graded else "", "topic": m.topic,
             "lesson": m.lesson, "exercise": m.exercise or "", "solution": m.solution or "",
             "explain": f"mha-check explain {m.id}", "who": "; ".join(s.name for s in m.students)}
            for m in view.mistakes]
