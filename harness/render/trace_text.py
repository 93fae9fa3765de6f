"""`mha-check trace` as text: the steps table, the mistakes marked, the lesson's arithmetic."""
from __future__ import annotations

from harness.engine.trace import LESSON_STEPS, TraceResult


def render(result: TraceResult) -> str:
    c = result.config
    lines = [f"mha-check trace {result.target}"]
    if result.construction:
        lines.append(f"  built as {result.construction}")
    lines.append(f"  one forward pass of the lesson's worked example: d={c['d']}, H={c['heads']} heads of width "
                 f"dh={c['d'] // c['heads']}, n={c['n']} tokens, batch B={c['batch']}: x has shape "
                 f"({c['batch']}, {c['n']}, {c['d']})")
    lines.append("")
    if result.steps:
        w_label = max(len(s.label or "·") for s in result.steps)
        w_call = min(32, max(len(s.call) for s in result.steps))
        w_shape = min(44, max(len(s.shapes) for s in result.steps))
        w_sym = min(46, max(len(s.symbols) for s in result.steps))
        lines.append(f"  {'#':>3}  {'step':<{w_label}}  {'operation':<{w_call}}  {'shapes':<{w_shape}}  "
                     f"{'in the lesson':<{w_sym}}  your code")
        for s in result.steps:
            flag = "!!" if s.mistake else "  "
            lines.append(f"{flag}{s.index:>3}  {s.label or '·':<{w_label}}  {_cut(s.call, w_call):<{w_call}}  "
                         f"{_cut(s.shapes, w_shape):<{w_shape}}  {_cut(s.symbols, w_sym):<{w_sym}}  "
                         f"{s.at}  {s.code}".rstrip())
            if s.mistake:
                lines.append(f"       ^ MISTAKE [{s.mistake.get('mutant') or s.mistake['id']}]: {s.mistake['text']}")
        if result.truncated:
            lines.append("  ... (more operations not recorded)")
        lines.append("")
    if result.error:
        lines.append(f"ERROR: {result.error}")
        lines.append("")
    if result.steps:
        lines.append("lesson steps, in the order your forward takes them:")
        lines.append("  " + " -> ".join(result.lesson_order) if result.lesson_order else "  (none recognised)")
        if result.missing:
            lines.append(f"  not seen: {', '.join(result.missing)}")
        lines.append("  the lesson: " + " -> ".join(LESSON_STEPS))
        lines.append("")
    whole = [m for m in result.mistakes if m.get("step") is None]
    for m in whole:
        lines.append(f"MISTAKE [{m.get('mutant') or m['id']}]: {m['text']}")
    if result.mistakes:
        where: dict[str, list] = {}
        for m in result.mistakes:
            where.setdefault(m.get("mutant") or m["id"], []).append(m["step"])
        found = "; ".join(mid + (" (step " + ", ".join(str(s) for s in at if s is not None) + ")"
                                 if any(s is not None for s in at) else "") for mid, at in where.items())
        lines.append(f"known mistakes marked: {found}")
        lines.append("(run `mha-check TARGET` for the full checks)")
    elif not result.error:
        lines.append("no known mistake shows in this trace (run `mha-check TARGET` for the full checks)")
    for note in result.notes:
        lines.append(f"note: {note}")
    lines.append("")
    lines += _arithmetic_text(result.arithmetic)
    return "\n".join(lines)




def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"



def _arithmetic_text(a: dict) -> list[str]:
    if not a:
        return []
    d, H = a["d"], a["heads"]
    bias = " with Q/K/V biases" if a["qkv_bias"] else ", no Q/K/V biases"
    out = [f"arithmetic for d={d}, H={H}{bias}:"]
    if a["divisible"]:
        out.append(f"  head width          dh = d / H = {d} / {H} = {a['head_width']}")
    else:
        out.append(f"  head width          d / H = {d} / {H} is not a whole number: choose H dividing d")
    extra = f" + 3·{d}" if a["qkv_bias"] else ""
    out.append(f"  parameters          3·d_in·d_out + d_out² + d_out{' + 3·d_out' if a['qkv_bias'] else ''} = "
               f"3·{d}·{d} + {d}² + {d}{extra} = {a['param_formula']:,} (no H in it)")
    counted = a.get("param_counted")
    if counted is not None:
        verdict = "matches the formula" if counted == a["param_formula"] else (
            f"differs from the formula by {counted - a['param_formula']:+,}")
        out.append(f"  in your module      {counted:,} parameters when built with d={d}, H={H}: {verdict}")
    if a.get("counted_note"):
        out.append(f"                      ({a['counted_note']})")
    B, n, e = a["batch"], a["n"], a["score_entries"]
    mb = a["score_bytes_float32"] / 1e6
    out.append(f"  score tensor        (B, H, n, n) = ({B}, {H}, {n:,}, {n:,}): {B}·{H}·{n:,}² = {e:,} entries, "
               f"{a['score_bytes_float32']:,} bytes in float32 ({mb:,.1f} MB) per layer")
    return out


