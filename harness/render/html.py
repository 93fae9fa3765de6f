"""The report as HTML for a notebook: the same order as the text report (verdict, root cause, checks by section)."""
from __future__ import annotations

import html

from harness.render.view import CheckLine, ReportView

STATUS_COLOURS = {"pass": "#1a7f37", "fail": "#cf222e", "cannot_tell": "#bc4c00", "skip": "#6e7781"}


def _row(line: CheckLine) -> str:
    e = html.escape
    cell = [e(line.text)]
    if line.status == "fail" and not line.follows_root:
        for name, value in (("smallest failing configuration", line.config), ("observed", line.observed),
                            ("fix", line.fix)):
            if value:
                cell.append(f"<br><small>{name}: <code>{e(value)}</code></small>")
    elif line.follows_root:
        cell.append("<br><small>fails because of the root cause above</small>")
    elif line.status == "cannot_tell" and line.help:
        cell.append(f"<br><small>what would help: {e(line.help)}</small>")
    colour = STATUS_COLOURS.get(line.status, "#000")
    return (f'<tr><td style="text-align:left"><code>{e(line.id)}</code></td>'
            f'<td style="text-align:left"><b style="color:{colour}">{e(line.label)}</b></td>'
            f'<td style="text-align:left">{"".join(cell)}</td></tr>')


def render(view: ReportView, notes: list[str] = ()) -> str:
    e = html.escape
    colour = STATUS_COLOURS["pass" if view.passed else "fail"]
    out = [f'<div class="mha-check-report"><p><b>mha-check</b> <code>{e(view.target)}</code>: '
           f'<b style="color:{colour}">{e(view.verdict)}</b></p>']
    r = view.root
    if r:
        where = f" at <code>{e(r.at)}</code>" if r.at else ""
        wrote = f"<br>you wrote: <code>{e(r.code)}</code>" if r.code else ""
        out.append(f"<p><b>Root cause:</b> {e(r.title)}{where}{wrote}<br>write: <code>{e(r.fix)}</code><br>"
                   f"<small>{e(r.symptom)}<br>evidence: {e(r.evidence)}<br><code>mha-check explain {e(r.mutant)}"
                   "</code> shows a worked example</small></p>")
    elif view.unmatched:
        out.append(f"<p>{e(view.unmatched)}</p>")
    for title, lines in (("The math", view.correctness), ("The lesson's rules", view.rules)):
        if lines:
            out.append(f"<p><b>{e(title)}</b></p><table><thead><tr><th style=\"text-align:left\">check</th>"
                       "<th style=\"text-align:left\">status</th><th style=\"text-align:left\">finding</th></tr>"
                       "</thead><tbody>" + "".join(_row(ln) for ln in lines) + "</tbody></table>")
    for note in [view.summary, view.mapping, *view.notes, *notes]:
        if note:
            out.append(f"<p><small>{e(note)}</small></p>")
    out.append("</div>")
    return "\n".join(out)
