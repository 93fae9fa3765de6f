"""The report as HTML for a notebook: the same order as the text report (the verdict; the root cause with the
failing checks it explains, one line each; then the other checks by section, in tables)."""
from __future__ import annotations

import html

from harness.render.view import CheckLine, ReportView
from harness.wire.status import Status

STATUS_COLOURS = {Status.PASS: "#1a7f37", Status.FAIL: "#cf222e", Status.CANNOT_TELL: "#bc4c00", Status.SKIP: "#6e7781"}


def _row(line: CheckLine) -> str:
    e = html.escape
    cell = [e(line.text)]
    if line.status == Status.FAIL:
        for name, value in (("smallest failing configuration", line.config), ("observed", line.observed),
                            ("where", line.where), ("fix", line.fix)):
            if value:
                cell.append(f"<br><small>{name}: <code>{e(value)}</code></small>")
    elif line.status == Status.CANNOT_TELL and line.help:
        cell.append(f"<br><small>what would help: {e(line.help)}</small>")
    colour = STATUS_COLOURS[Status.SKIP] if line.not_applicable else STATUS_COLOURS.get(line.status, "#000")  # N/A:
    # nothing was judged, shown apart from the verified passes
    return (f'<tr><td style="text-align:left"><code>{e(line.id)}</code></td>'
            f'<td style="text-align:left"><b style="color:{colour}">{e(line.label)}</b></td>'
            f'<td style="text-align:left">{"".join(cell)}</td></tr>')


def render(view: ReportView, notes: list[str] = ()) -> str:
    e = html.escape
    colour = STATUS_COLOURS[Status.PASS if view.passed else Status.FAIL]
    out = [f'<div class="mha-check-report"><p><b>mha-check</b> <code>{e(view.target)}</code>: '
           f'<b style="color:{colour}">{e(view.verdict)}</b></p>']
    r = view.root
    if r:
        def rows(r):
            return [("where", f"<code>{e(r.at)}</code>" if r.at else ""),
                    ("you wrote", f"<code>{e(r.code)}</code>" if r.code else ""),
                    ("fix", f"<code>{e(r.fix)}</code>" if r.fix_is_code else e(r.fix)),
                    ("what happens", e(r.symptom)), ("how we know", e(r.evidence))]
        second = (f"</p><p><b>And a second mistake:</b> {e(r.also.title)}<br>"
                  + "<br>".join(f"{name}: {value}" for name, value in rows(r.also)
                                if value and not (name == "how we know" and r.also.evidence == r.evidence))
                  ) if r.also else ""  # the evidence the two share is said once
        follows = "".join(f'<li><b style="color:{STATUS_COLOURS[Status.FAIL]}">{e(ln.label)}</b> '
                          f"<code>{e(ln.id)}</code>: {e(ln.text)}</li>" for ln in view.follows)
        out.append(f"<p><b>Root cause:</b> {e(r.title)}<br>"
                   + "<br>".join(f"{name}: {value}" for name, value in rows(r) if value) + second
                   + (f"</p><p>{'They make' if r.also else 'It makes'} {len(view.follows)} "
                      f"check{'s' if len(view.follows) != 1 else ''} fail:</p>"
                      f"<ul>{follows}</ul><p>" if view.follows else "<br>")
                   + "<small>" + "; ".join(f"<code>{e(c)}</code>: {e(what)}" for c, what in r.commands)
                   + "</small></p>")
    elif view.unmatched:
        out.append(f"<p>{e(view.unmatched)}</p>")
    for title, lines in view.sections:
        out.append(f"<p><b>{e(title)}</b></p><table><thead><tr><th style=\"text-align:left\">check</th>"
                   "<th style=\"text-align:left\">status</th><th style=\"text-align:left\">finding</th></tr>"
                   "</thead><tbody>" + "".join(_row(ln) for ln in lines) + "</tbody></table>")
    for note in [view.summary, view.mapping, *view.notes, view.isolation, *notes]:
        if note:
            out.append(f"<p><small>{e(note)}</small></p>")
    out.append("</div>")
    return "\n".join(out)
