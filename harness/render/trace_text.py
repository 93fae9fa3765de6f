"""`mha-check trace` as text: the steps table, the mistakes marked, the lesson's arithmetic.

Two layouts.  The default fits 100 columns, to be read on a projector: the student's line is a row of its own
above the operations it runs, and the shapes are written in the lesson's letters (B, n, H, dh, d; the header
says what they are in this run), in numbers only where a shape is not one of the lesson's.  `wide` is the table
of one row per operation with the numbers, the letters and the student's line side by side (about 260 columns).
"""
from __future__ import annotations

import re

from harness.engine.trace.result import TraceResult
from harness.engine.trace.vocabulary import LESSON_STEPS
from harness.render.text import WIDTH, wrap, wrap_preformatted
from harness.render.view import clean


ORDER_NOTE = ("(another order, or a step not seen, is no mistake by itself: scaling q or k before their product, "
              "or heads kept on weights of their own, compute the same; a mistake is a marked step)")  # a student's
# trial worried over three correct layers whose order differed from the lesson's, with nothing said of it


def render(result: TraceResult, wide: bool = False) -> str:
    c = result.config
    again = f"{result.target}{result.options}"  # the target with the trace's --arg/--map: a command that works
    lines = [f"mha-check trace {result.target}"]
    if result.construction:
        lines += _wrap(f"built as {result.construction}", "    ", "  ", wide)
    kv = f" sharing KV={c['kv_heads']} key/value heads" if c.get("kv_heads") else ""  # a grouped-query layer
    example = ("the lesson's worked example made grouped, its heads wider (so that no two scales coincide)" if kv
               else "the lesson's worked example")
    lines += _wrap(f"one forward pass of {example}: d={c['d']}, H={c['heads']} heads of width "
                   f"dh={c['d'] // c['heads']}{kv}, n={c['n']} tokens, batch B={c['batch']}: x has shape "
                   f"({c['batch']}, {c['n']}, {c['d']})", "    ", "  ", wide)
    lines.append("")
    if result.steps:
        lines += _wide_table(result) if wide else _narrow_table(result)
        if result.truncated:
            lines.append("  ... (more operations not recorded)")
        lines.append("")
    if result.error:
        lines += _wrap(f"ERROR: {result.error}", "  ", "", wide)
        lines.append("")
    if result.steps:
        lines.append("lesson steps, in the order your forward takes them:")
        lines += _wrap(" -> ".join(result.lesson_order) if result.lesson_order else "(none recognised)", "    ",
                       "  ", wide)
        if result.missing:
            lines += _wrap(f"not seen: {', '.join(result.missing)}", "    ", "  ", wide)
        lines += _wrap("the lesson: " + " -> ".join(LESSON_STEPS), "    ", "  ", wide)
        if result.missing or [s for s in LESSON_STEPS if s in result.lesson_order] != result.lesson_order:
            lines += _wrap(ORDER_NOTE, "    ", "  ", wide)
        lines.append("")
    for m in (m for m in result.mistakes if m.get("step") is None):
        place = f" (at {m['at']}: {m['code']})" if m.get("at") else ""  # where the missing step belongs
        lines += _wrap(f"MISTAKE [{m.get('mutant') or m['id']}]: {m['text']}{place}", "  ", "", wide)
    if result.mistakes:
        where: dict[str, list] = {}
        for m in result.mistakes:
            made = f", the line to change: {m['at']}" if m.get("at") else ""  # a mask made wrongly elsewhere
            where.setdefault(m.get("mutant") or m["id"], []).append((m["step"], made))
        found = "; ".join(mid + (" (step " + ", ".join(str(s) + made for s, made in at if s is not None) + ")"
                                 if any(s is not None for s, _ in at) else
                                 " (" + made.removeprefix(", ") + ")" if any(made for _, made in at) else "")
                          for mid, at in where.items())
        lines += _wrap(f"known mistakes marked: {found}", "  ", "", wide)
        explain = [m.get("mutant") or m["id"] for m in result.mistakes]  # a mark with no catalogued mistake of
        # this form (wrong-scale: a factor no mutant has) is explained by its own id: `explain` knows every mark
        lines += _wrap(f"(run `mha-check {again}` for the full checks; `mha-check explain {explain[0]}` for "
                       "the story of the mistake)", "  ", "", wide)
    elif not result.error and not result.steps:  # nothing recorded is no evidence that nothing is wrong (a
        # student's trial: a factory returning torch.jit.script(layer), whose leak the checks find)
        lines += _wrap("no operation of your forward could be recorded (TorchScript code such as "
                       "torch.jit.script's, or an extension's, runs where mha-check's recorder cannot see it), so "
                       f"this trace cannot show a mistake: run `mha-check {again}` for the full checks, or "
                       "trace the layer unscripted", "  ", "", wide)
    elif not result.error:
        lines += _wrap(f"no known mistake shows in this trace (run `mha-check {again}` for the full "
                       "checks)", "  ", "", wide)
    for note in result.notes:
        lines += _wrap(f"note: {note}", "  ", "", wide)
    lines.append("")
    lines += _arithmetic_text(result.arithmetic, wide)
    return clean("\n".join(lines))  # the student's names, lines and messages: escapes shown, never obeyed


def _wrap(text: str, indent: str, first: str, wide: bool) -> list[str]:
    return [first + text] if wide else wrap(text, indent, first)


def _narrow_table(result: TraceResult) -> list[str]:
    """One row per operation: #, step, operation, shapes (in the lesson's letters where they are the lesson's);
    above each run of operations, the student's line they come from; under a marked step, the mistake."""
    steps = result.steps
    w_label = max(len(s.label or "·") for s in steps)
    calls = [_short_call(s.call) for s in steps]
    w_call = min(26, max(map(len, calls)))
    lead = 2 + 3 + 2 + w_label + 2
    out = [f"  {'#':>3}  {'step':<{w_label}}  {'operation':<{w_call}}  shapes, in the lesson's letters"]
    said: dict[str, int] = {}  # mistake text -> the step that said it first
    last_at = None
    for s, call in zip(steps, calls):
        at = s.statement or s.at  # the operations of one statement over several lines under one heading
        if at != last_at:
            out += wrap_preformatted(f"  {at}  {s.code}".rstrip(), WIDTH, more=len(at) + 2)
            last_at = at
        flag = "!!" if s.mistake else "  "
        call = _cut(call, w_call)
        shapes = s.symbols or s.shapes
        row = wrap(shapes, " " * (lead + w_call + 2 + 4), f"{flag}{s.index:>3}  {s.label or '·':<{w_label}}  "
                                                          f"{call:<{w_call}}  ")
        out += row
        if s.mistake:
            name = s.mistake.get("mutant") or s.mistake["id"]
            text = s.mistake["text"]
            if text in said:
                out.append(f"       ^ the same mistake as step {said[text]}")
            else:
                said[text] = s.index
                out += wrap(f"^ MISTAKE [{name}]: {text}", " " * 9, " " * 7)
            for other in _beside(result, s):
                out += wrap(f"^ and MISTAKE [{other.get('mutant') or other['id']}]: {other['text']}", " " * 9,
                            " " * 7)
    return out


def _beside(result: TraceResult, step) -> list[dict]:
    """The marks of a second mistake at a marked step (registry.Findings.beside): shown under it too."""
    return [m for m in result.mistakes if m.get("step") == step.index and m["id"] != step.mistake["id"]]


def _wide_table(result: TraceResult) -> list[str]:
    steps = result.steps
    w_label = max(len(s.label or "·") for s in steps)
    w_call = min(32, max(len(s.call) for s in steps))
    w_shape = min(44, max(len(s.shapes) for s in steps))
    w_sym = min(46, max(len(s.symbols) for s in steps))
    out = [f"  {'#':>3}  {'step':<{w_label}}  {'operation':<{w_call}}  {'shapes':<{w_shape}}  "
           f"{'in the lesson':<{w_sym}}  your code"]
    for s in steps:
        flag = "!!" if s.mistake else "  "
        out.append(f"{flag}{s.index:>3}  {s.label or '·':<{w_label}}  {_cut(s.call, w_call):<{w_call}}  "
                   f"{_cut(s.shapes, w_shape):<{w_shape}}  {_cut(s.symbols, w_sym):<{w_sym}}  "
                   f"{s.at}  {s.code}".rstrip())
        if s.mistake:
            out.append(f"       ^ MISTAKE [{s.mistake.get('mutant') or s.mistake['id']}]: {s.mistake['text']}")
            out += [f"       ^ and MISTAKE [{m.get('mutant') or m['id']}]: {m['text']}" for m in _beside(result, s)]
    return out


# A module's weight and then its bias: the name starts where a name starts (the look-behind), so the regex tries
# one start per name, not every position of it.  Without it the backtracking was quadratic in a name (the student's):
# a ParameterDict key of 40,000 characters took 6.4 s of the parent's CPU per step (red team 15, fixed by red team
# 16), and `c_attn.weight, attn.bias` was read as c_attn's own weight and bias.
_WEIGHT_AND_BIAS = re.compile(r"(?<![\w.\[\]])([\w.\[\]]+)\.weight, \1\.bias")


def _short_call(call: str) -> str:
    """An operation with the student's weights by their module's name: `linear(out_proj.weight, out_proj.bias)`
    is `linear(out_proj + bias)`.  In time linear in the call."""
    call = _WEIGHT_AND_BIAS.sub(r"\1 + bias", call)
    return re.sub(r"\.weight\b", "", call)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _arithmetic_text(a: dict, wide: bool = False) -> list[str]:
    if not a:
        return []
    d, H = a["d"], a["heads"]
    bias = " with Q/K/V biases" if a["qkv_bias"] else ", no Q/K/V biases (--qkv-bias counts them)"
    out = _wrap(f"the lesson's arithmetic for d={d}, H={H}{bias}, and for the memory B={a['batch']} sequence"
                f"{'s' if a['batch'] != 1 else ''} of n={a['n']:,} tokens (--d, --heads, --batch, --n change them):",
                "  ", "", wide)

    def row(name: str, text: str) -> None:
        out.extend(_wrap(text, " " * 22, f"  {name:<20}", wide))

    if a["divisible"]:
        row("head width", f"dh = d / H = {d} / {H} = {a['head_width']}")
    else:
        row("head width", f"d / H = {d} / {H} is not a whole number: choose H dividing d")
    extra = f" + 3·{d}" if a["qkv_bias"] else ""
    if a.get("out_proj", True):
        row("parameters", f"3·d_in·d_out + d_out² + d_out{' + 3·d_out' if a['qkv_bias'] else ''} = "
                          f"3·{d}·{d} + {d}² + {d}{extra} = {a['param_formula']:,} (no H in it)")
    else:  # the single-head form: W_q, W_k, W_v and nothing else
        row("parameters", f"3·d_in·d_out{' + 3·d_out' if a['qkv_bias'] else ''} = 3·{d}·{d}{extra} = "
                          f"{a['param_formula']:,} (one head, no output projection)")
    counted = a.get("param_counted")
    if counted is not None:
        difference = counted - a["param_formula"]
        verdict = "matches the formula" if not difference else f"differs from the formula by {difference:+,}"
        biases = a.get("counted_biases")  # where known, the story is told only of a module that has the biases
        # (rela's ReLA: +24 = its two gated norms, and it has no Q/K/V bias at all)
        if difference == 3 * d and not a["qkv_bias"] and (biases is None or biases >= 3 * d):  # a student's trial
            # read "+24" as a bug of their GPT-2 layer
            verdict += f" = 3·{d}, what Q/K/V biases add (--qkv-bias counts them)"
        elif difference == -3 * d and a["qkv_bias"] and (biases is None or biases < 3 * d):
            verdict += f" = -3·{d}, what Q/K/V biases add, counted here (a layer without them: drop --qkv-bias)"
        row("in your module", f"{counted:,} parameters when built with d={d}, H={H}: {verdict}")
    if a.get("counted_note"):
        row("", f"({a['counted_note']})")
    B, n, e = a["batch"], a["n"], a["score_entries"]
    mb = a["score_bytes_float32"] / 1e6
    row("score tensor", f"(B, H, n, n) = ({B}, {H}, {n:,}, {n:,}): {B}·{H}·{n:,}² = {e:,} entries, "
                        f"{a['score_bytes_float32']:,} bytes in float32 ({mb:,.1f} MB) per layer")
    return out
