"""The report as text for a person at a terminal: the verdict and the root cause first, everything within 100
columns (wrapped, never cut), colour only when asked for.  `verbose` keeps every detail; `quiet` is one line a
check."""
from __future__ import annotations

import textwrap

from harness.render.view import CheckLine, ReportView

WIDTH = 100
COLOURS = {"pass": "32", "fail": "31", "cannot_tell": "33", "skip": "90"}


def _paint(text: str, status: str, colour: bool) -> str:
    return f"\033[{COLOURS[status]}m{text}\033[0m" if colour and status in COLOURS else text


def wrap(text: str, indent: str = "", first: str | None = None, width: int = WIDTH) -> list[str]:
    """`text` in lines of at most `width` columns: `first` starts the first line, `indent` the others."""
    first = indent if first is None else first
    return textwrap.wrap(" ".join(str(text).split()), width, initial_indent=first, subsequent_indent=indent,
                         break_long_words=True, break_on_hyphens=False) or [first.rstrip()]


def _field(name: str, value: str, pad: int = 14) -> list[str]:
    return wrap(value, " " * (2 + pad), f"  {name + ':':<{pad}}")


def _root(view: ReportView) -> list[str]:
    r = view.root
    out = wrap(r.title, "  ", "Root cause: ")
    if r.at:
        out += _field("where", r.at)
    if r.code:
        out += _field("you wrote", r.code)
    out += _field("write" if r.code else "fix", r.fix)
    out += _field("what happens", r.symptom)
    out += _field("evidence", r.evidence)
    if r.follows:
        out += _field("explains", "the failing checks " + ", ".join(r.follows))
    out += wrap(f"(mha-check explain {r.mutant} shows a worked example; mha-check trace shows every step of your "
                "forward)", "  ", "  ")
    return out


def check_lines(line: CheckLine, width: int, verbose: bool, colour: bool) -> list[str]:
    """One check's lines: its label and id, the finding and, for a failure, where, what and the fix."""
    lead = f"  {line.label:<10} {line.id:<{width}}  "
    indent = " " * len(lead)
    if line.passed and not verbose:
        out = wrap(line.claim, indent, lead)
    elif line.follows_root and not verbose:
        out = wrap("fails because of the root cause above: " + line.text, indent, lead)[:2]
    else:
        out = wrap(line.text, indent, lead)
        if line.status == "fail":
            for name, value in (("smallest failing configuration", line.config), ("observed", line.observed),
                                ("why it matters", line.why if verbose else ""), ("fix", line.fix)):
                if value:
                    out += wrap(f"{name}: {value}", indent + "  ", indent)
        elif line.status == "cannot_tell" and line.help:
            out += wrap(f"what would help: {line.help}", indent + "  ", indent)
    out[0] = out[0].replace(line.label, _paint(line.label, line.status, colour), 1)
    return out


def render(view: ReportView, verbose: bool = False, quiet: bool = False, colour: bool = False) -> str:
    width = max((len(c.id) for c in view.lines), default=10)
    if quiet:
        rows = []
        for c in view.lines:
            row = f"{c.label:<10} {c.id:<{width}}  {' '.join((c.claim if c.passed else c.text).split())}"
            row = row if len(row) <= WIDTH else row[: WIDTH - 1] + "…"
            rows.append(row.replace(c.label, _paint(c.label, c.status, colour), 1))
        return "\n".join(wrap(view.verdict) + rows)
    out = wrap(view.target, "  ", "mha-check ")
    out += wrap(view.verdict, "  ", "")
    if view.root:
        out += [""] + _root(view)
    elif view.unmatched:
        out += [""] + wrap(view.unmatched, "  ", "")
    for title, lines in (("The math", view.correctness), ("The lesson's rules", view.rules)):
        if lines:
            out += ["", title]
            for line in lines:
                out += check_lines(line, width, verbose, colour)
    out += [""] + wrap(view.summary, "  ", "")
    if view.construction:
        out += wrap(f"built as {view.construction}", "  ", "")
    if view.mapping:
        out += wrap(view.mapping, "  ", "")
    for note in view.notes:
        out += wrap(note, "  ", "")
    if view.needs_review:
        out += wrap("some claims could not be decided: a person should look at this report", "  ", "")
    return "\n".join(out)
