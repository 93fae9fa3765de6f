"""The report as text for a person at a terminal, wrapped to it (never cut off at the edge): 80 columns, the width
of the smallest usual terminal, or the terminal's own width when stdout is a wider terminal (up to 120, past which
lines are too long to read).

Order: the verdict; the root cause when a mistake is identified (the mistake, the file and line, the line as written,
the fix, what happens, how mha-check knows, the failing checks it explains in one line each, where to look next);
then the other checks by section.  A student reads the one thing to change first, in one screen.

Three densities: the default (failing checks in full, the undecided ones grouped by reason, the passing ones in one
list when something failed, each with its claim when all passed); `verbose` (every check with every detail, as
before the root cause was listed first); `quiet` (the verdict, the root cause in one line, one line per check).
The line on what confined the code only when it was less than the full policy (the JSON has it always).
Colour only when asked for (the CLI asks when stdout is a terminal and NO_COLOR is not set).
"""
from __future__ import annotations

import re
import shutil
import sys
import textwrap

from harness.render.view import NOT_APPLICABLE_LABEL, CheckLine, ReportView
from harness.wire.status import Status

WIDTH = 100  # the teaching pages (explain, trace), projected in a class
REPORT_WIDTH = 80  # a report's width when its reader's terminal is not known: an 80x30 terminal shows it whole
MAX_WIDTH = 120
NOT_APPLICABLE = "not_applicable"  # the colour of a check that did not apply


def terminal_width(stream=None) -> int:
    """The columns a report is wrapped to: the terminal's when `stream` (stdout) is a terminal wider than
    REPORT_WIDTH, at most MAX_WIDTH; REPORT_WIDTH otherwise (a file, a pipe, a test), so a saved report does not
    depend on the window it was made in."""
    stream = sys.stdout if stream is None else stream
    try:
        if not stream.isatty():
            return REPORT_WIDTH
    except (AttributeError, ValueError):  # closed or replaced by something that is not a file
        return REPORT_WIDTH
    columns = shutil.get_terminal_size((REPORT_WIDTH, 30)).columns
    return max(REPORT_WIDTH, min(MAX_WIDTH, columns))
COLOURS = {Status.PASS: "32", Status.FAIL: "31", Status.CANNOT_TELL: "33", Status.SKIP: "90", NOT_APPLICABLE: "90"}


def _mark(line: CheckLine) -> str:
    """The colour's key of a line's label: its status, or NOT_APPLICABLE for a pass with nothing to judge."""
    return NOT_APPLICABLE if line.not_applicable else line.status


def _paint(text: str, status: str, colour: bool) -> str:
    return f"\033[{COLOURS[status]}m{text}\033[0m" if colour and status in COLOURS else text


GLUE = "\ue000"  # stands for a space that must not become a line break while wrapping (not whitespace)
SHORT_GROUP = 30  # a bracketed group up to this long, like "(B, n, H, dh)", stays on one line


def _depths(text: str) -> list[int]:
    """The bracket depth at each character (never below 0)."""
    depth, out = 0, []
    for ch in text:
        depth = max(0, depth - (ch in ")]"))
        out.append(depth)
        depth += ch in "(["
    return out


def _glued(text: str) -> str:
    """`text` with the spaces inside short bracketed groups and short `quoted commands` glued, so that
    `view(B, n, H, dh)` or `mha-check explain no-mask` is never split."""
    text = re.sub(r"`[^`]*`", lambda m: m.group().replace(" ", GLUE) if len(m.group()) <= 42 else m.group(), text)
    chars, opened = list(text), []
    for i, ch in enumerate(text):
        if ch in "([":
            opened.append(i)
        elif ch in ")]" and opened:
            start = opened.pop()
            if i - start <= SHORT_GROUP:
                for k in range(start, i):
                    if chars[k] == " ":
                        chars[k] = GLUE
    return "".join(chars)


def wrap(text: str, indent: str = "", first: str | None = None, width: int = WIDTH,
         break_long: bool = False) -> list[str]:
    """`text` in lines of at most `width` columns: `first` starts the first line, `indent` the others; short
    bracketed groups are not split.  A word longer than the line (a path) stays whole unless `break_long`: cut, it
    could no longer be copied, and joined again it would hold a space."""
    first = indent if first is None else first
    lines = textwrap.wrap(_glued(" ".join(str(text).split())), width, initial_indent=first,
                          subsequent_indent=indent, break_long_words=break_long, break_on_hyphens=False)
    return [ln.replace(GLUE, " ") for ln in lines] or [first.rstrip()]


KEPT_ROOM = 24  # columns of text a continuation line keeps at least, however deep its indent


def wrap_preformatted(line: str, width: int = WIDTH, more: int = 4) -> list[str]:
    """A line whose spacing means something (code, a worked example, a diff line) in lines of at most `width`:
    broken at the last clause (": ", "; ") or else the last ", " outside brackets that keeps at least 40% of the
    line, or else at the last space outside them, before the last method call's dot, or at the last space; only a
    line with none of those is cut inside a word; each continuation is indented `more` columns past the line's own
    indent (and keeps a diff marker), so it never reads as a line of its own; a comment's continuation starts with
    "# "."""
    out = []
    marker = line[:1] if line[:1] in "+-" else ""
    lead = marker + " " * (len(line[len(marker):]) - len(line[len(marker):].lstrip(" ")))
    indent = len(lead)  # where this line's text starts: a break inside the indent would never shorten it
    cont = (lead + " " * more)[:max(len(marker), width - KEPT_ROOM)]  # a continuation's indent leaves room for text
    # (trace's `FILE:LINES` heading of a long file name asked for more than the width: no cut shortened the line)
    while len(line) > width:
        depth = _depths(line)
        cut = None
        if line.startswith("# ", indent):  # a comment's continuation: a cut right after its "# " would only put the
            indent += 2  # "# " back in front of the same text, for good
        for seps in ((": ", "; "), (", ",), (" ",)):
            found = [i for i in range(indent + 1, width) if depth[i] == 0 and
                     any(line.startswith(sep, i) for sep in seps) and (i >= width * 2 // 5 or seps == (" ",))]
            if found:
                cut = max(found)
                break
        if cut is None:  # no break outside brackets: before a method's dot (`...head_dim)` / `.transpose(1, 2)`),
            # else at a space inside them, never inside a name (a student's trial read `.tra` / `nspose(1, 2)`)
            dots = [i - 1 for i in range(indent + 2, width) if line[i] == "." and line[i - 1] in ")]"]
            spaces = [i for i in range(indent + 1, width) if line[i] == " "]
            cut = max(dots) if dots else max(spaces) if spaces else width - 1
        head, tail = line[:cut + 1].rstrip(), line[cut + 1:].lstrip(" ")
        comment = line.find(" # ")
        if 0 <= comment < cut and not tail.startswith("#"):  # a comment broken across lines stays a comment (a
            tail = "# " + tail  # student's trial read a bug comment's second half as a line of code)
        if len(tail) >= len(line) - indent:  # no cut shortens its text (a first line indented past the width): as
            break  # it is (measured on the text, not the line: a deeper continuation indent is no lack of progress)
        out.append(head)
        line, indent = cont + tail, len(cont)
    return out + [line]


_POINTER_PARTS = (", code cell ", ", line ")  # "lab.ipynb, code cell 2, line 16" is one pointer, never cut


_NEEDS_OBJECT = {"from", "to", "with", "of", "as", "by", "into", "than", "at", "in", "on", "for", "is", "are",
                 "has", "have", "expected", "got"}  # a clause that ends in one of these is cut mid-sentence


def one_line(text: str, room: int) -> str:
    """`text` in at most `room` columns: whole when it fits, else up to the last clause that fits (at ": " or "; "
    outside brackets), else up to the last part that fits (" (" or ", ": a list cut short, so with "…", as a
    student read "W_q, W_k, W_v, W_o, b_q" as every wrong gradient where b_k and b_v followed), else cut at a word
    with "…".  The full text is in --verbose."""
    text = " ".join(str(text).split())
    if len(text) <= room:
        return text
    depth = _depths(text)
    tiers = (((": ", "; "), room * 3 // 5, ""), ((": ", "; ", " (", ", "), min(12, room // 3), "…"))
    for seps, shortest, more in tiers:
        cuts = [i for i in range(shortest, min(room - len(more), len(text)) + 1)
                if depth[i] == 0 and any(text.startswith(sep, i) for sep in seps) and not
                text.startswith(_POINTER_PARTS, i) and text[:i].rsplit(" ", 1)[-1] not in _NEEDS_OBJECT]
        if cuts:
            return text[:max(cuts)].rstrip(" ,;:") + more
    return text[:room - 1].rsplit(" ", 1)[0] + "…"


def _field(name: str, value: str, cols: int, pad: int = 14) -> list[str]:
    return wrap(value, " " * (2 + pad), f"  {name + ':':<{pad}}", cols)


def _mistake(r, head: str, cols: int, said: str = "") -> list[str]:
    """One named mistake's lines; `said`: the evidence already given (two mistakes share theirs)."""
    out = wrap(r.title, "  ", head, cols)
    if r.at:
        out += _field("where", r.at, cols)
    if r.code:
        out += _field("you wrote", r.code, cols)
    out += _field("fix", r.fix, cols)
    out += _field("what happens", r.symptom, cols)
    if r.evidence != said:
        out += _field("how we know", r.evidence, cols)
    return out


def _root(view: ReportView, colour: bool, cols: int) -> list[str]:
    r = view.root
    out = _mistake(r, "Root cause: ", cols)
    if r.also:  # two mistakes at once: each with its line and fix, the failing checks after both
        out += _mistake(r.also, "and a second mistake: ", cols, said=r.evidence)
    if view.follows:
        out.append(f"  {'they make' if r.also else 'it makes'} {len(view.follows)} "
                   f"check{'s' if len(view.follows) != 1 else ''} fail:")
        width = max(len(ln.id) for ln in view.follows)
        cut = False
        for ln in view.follows:
            lead = f"    FAIL {ln.id:<{width}}  "
            shown = one_line(ln.text, cols - len(lead))
            cut = cut or shown != ln.text
            out.append(lead.replace("FAIL", _paint("FAIL", "fail", colour), 1) + shown)
        if cut:  # a student's trial found the evidence cut short with no word of where the rest is
            out.append("    (each check's whole finding: run again with -v)")
    commands = r.commands + (r.also.commands[:1] if r.also else [])  # the second's worked example too
    for i, (command, what) in enumerate(commands):
        out += wrap(f"{command.replace(' ', GLUE)}: {what}", " " * 16, f"  {'see also:' if i == 0 else '':<14}",
                    cols)  # a command is never split: it is copied as a whole
    return out


def check_lines(line: CheckLine, width: int, verbose: bool, colour: bool, cols: int = REPORT_WIDTH) -> list[str]:
    """One check's lines: its label and id, the finding and, for a failure, where, what and the fix."""
    lead = f"  {line.label:<10} {line.id:<{width}}  "
    head = []
    if line.kind == "instructor" and len(lead) > cols // 2:  # "file.py::test_name": on a line of its own
        head, lead = [lead.rstrip()], " " * 13
    indent = " " * len(lead)
    if line.passed and not verbose:
        out = wrap(line.claim, indent, lead, cols)
    else:
        out = wrap(line.text, indent, lead, cols)
        if line.status == Status.FAIL:
            for name, value in (("smallest failing configuration", line.config), ("observed", line.observed),
                                ("why it matters", line.why if verbose else ""), ("where", line.where),
                                ("fix", line.fix)):
                if value:
                    out += wrap(f"{name}: {value}", indent + "  ", indent, cols)
        elif line.status == Status.CANNOT_TELL and line.help:
            out += wrap(f"what would help: {line.help}", indent + "  ", indent, cols)
    out = head + out
    out[0] = out[0].replace(line.label, _paint(line.label, _mark(line), colour), 1)
    return out


def _grouped(lines: list[CheckLine], colour: bool, cols: int) -> list[str]:
    """Checks with the same status and the same words, said once: "CAN'T TELL a, b, c" and the reason."""
    groups: dict[tuple, list[CheckLine]] = {}
    for ln in lines:
        groups.setdefault((ln.status, ln.text, ln.help), []).append(ln)
    out = []
    for (status, text, help_), members in groups.items():
        label = members[0].label
        lead = f"  {label:<10} "
        indent = " " * len(lead)
        ids = ", ".join(m.id for m in members)
        if status == Status.SKIP and not help_ and len(f"{lead}{ids} ({text})") <= cols:  # a short skip: one line
            out.append(f"{lead}{ids} ({text})".replace(label, _paint(label, status, colour), 1))
            continue
        head = wrap(ids, indent, lead, cols)
        head[0] = head[0].replace(label, _paint(label, status, colour), 1)
        out += head + wrap(text, indent, width=cols)
        if help_:
            out += wrap(f"what would help: {help_}", indent + "  ", indent, cols)
    return out


def _section(lines: list[CheckLine], width: int, all_passed: bool, colour: bool, cols: int) -> list[str]:
    out = []
    for ln in lines:
        if ln.status == Status.FAIL or (ln.passed and all_passed):
            out += check_lines(ln, width, False, colour, cols)
    out += _grouped([ln for ln in lines if ln.status in (Status.CANNOT_TELL, Status.SKIP)], colour, cols)
    for label, key, ids in (("PASS", "pass", [ln.id for ln in lines if ln.verified]),
                             (NOT_APPLICABLE_LABEL, NOT_APPLICABLE, [ln.id for ln in lines if ln.not_applicable])):
        if ids and not all_passed:  # the passes in one line, and apart from them those with nothing to judge
            lead = f"  {label:<10} "
            out += [ln.replace(label, _paint(label, key, colour), 1) if i == 0 else ln
                    for i, ln in enumerate(wrap(", ".join(ids), " " * len(lead), lead, cols))]
    return out


def _quiet(view: ReportView, width: int, colour: bool, cols: int) -> str:
    out = wrap(view.verdict, "  ", "", cols)
    if view.root:
        for head, r in (("root cause", view.root), ("second mistake", view.root.also)):
            if r:
                out.append("  " + one_line(f"{head}: {r.title}" + (f" (at {r.at})" if r.at else ""), cols - 2))
    for c in view.lines:
        row = f"{c.label:<10} {c.id:<{width}}  "
        row += one_line(c.text, cols - len(row))
        out.append(row.replace(c.label, _paint(c.label, _mark(c), colour), 1))
    return "\n".join(out)


def render(view: ReportView, verbose: bool = False, quiet: bool = False, colour: bool = False,
           cols: int | None = None) -> str:
    """The report in lines of at most `cols` columns (None: `terminal_width()`)."""
    cols = terminal_width() if cols is None else cols
    width = max((len(c.id) for c in view.lines if c.kind != "instructor"), default=10)  # a test's id: its own
    if quiet:
        return _quiet(view, width, colour, cols)
    out = wrap(view.target, "  ", "mha-check ", cols)
    out += wrap(view.verdict, "  ", "", cols)
    if view.root:
        out += [""] + _root(view, colour, cols)
    elif view.unmatched:
        out += [""] + wrap(view.unmatched, "  ", "", cols)
    sections = ([(t, ls) for t, ls in (("The math", view.correctness), ("The lesson's rules", view.rules),
                                             ("Your instructor's tests", view.instructor)) if ls]
                if verbose else view.sections)
    for title, lines in sections:
        out += ["", title]
        if verbose:
            for line in lines:
                out += check_lines(line, width, True, colour, cols)
        else:
            out += _section(lines, width, view.passed, colour, cols)
    out += [""] + wrap(view.summary, "  ", "", cols)
    if view.construction:
        out += wrap(f"built as {view.construction}", "  ", "", cols)
    if view.mapping:
        out += wrap(view.mapping, "  ", "", cols)
    for note in view.notes + ([view.isolation] if view.isolation and view.isolation_weak else []):
        out += wrap(note, "  ", "", cols)  # full isolation is the normal case: said in JSON, not on a student's screen
    if view.needs_review:
        lines = view.follows + view.correctness + view.rules + view.instructor
        undecided = any(line.status == Status.CANNOT_TELL for line in lines)
        if undecided:
            out += wrap("some claims could not be decided (never counted against you): each says what would help; "
                        "try that, and if nothing helps, show this report to your instructor", "  ", "", cols)
            # (a student alone read "a person should look at this report" and had no one to ask what to do)
        elif not view.review:
            out += wrap("marked for review: a person should look at this report (the notes above say why)", "  ", "",
                        cols)
        for reason in view.review:  # a reason no note above says (instructor trial 9: a class named otherwise got
            # "the notes above say why" with no note above)
            out += wrap(f"marked for review, a person should look at this report: {reason}", "  ", "", cols)
    return "\n".join(out)
