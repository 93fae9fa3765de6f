"""The record of one traced forward (`TraceResult`: its steps, the lesson's order, the marked mistakes, notes) and
the lesson's arithmetic for a target's widths.  Data: the renderers and the diagnosis read it."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from harness.engine.trace.steps import Step
from reference.arithmetic import param_count_formula, score_entries


@dataclass
class TraceResult:
    target: str
    construction: str
    config: dict
    steps: list[Step] = field(default_factory=list)
    lesson_order: list[str] = field(default_factory=list)  # lesson steps in the order the forward takes them
    missing: list[str] = field(default_factory=list)
    mistakes: list[dict] = field(default_factory=list)  # {"id", "text", "step"} (step None: the forward as a whole)
    notes: list[str] = field(default_factory=list)
    error: str | None = None  # the target could not be loaded/built, or its forward raised
    output_shape: list | None = None
    truncated: bool = False
    arithmetic: dict = field(default_factory=dict)
    call: str = ""  # how forward was called, in words (the proven way, or the first tried where none was proven)
    call_ways: int = 1  # how many ways of calling forward the child offered (x alone, or with a mask of some kind)
    options: str = ""  # the trace's --arg and --map, typed again (harness.engine.options.command_words): the
    # commands it prints (`mha-check FILE:Class` for the full checks) need them as much as it did

    @property
    def ok(self) -> bool:
        return self.error is None and not self.mistakes

    def where(self, mark: dict) -> tuple[str | None, str | None]:
        """(file:line, code) of a marked mistake: the line to change, which is the marked step's own, except for a
        mask made wrongly elsewhere (in __init__, say), whose mark says where (`at`, `code`); (None, None) for a mark
        on the forward as a whole.  The report's line is read here too, so that trace and report never disagree."""
        if mark.get("at"):
            return mark["at"], mark.get("code", "")
        step = next((s for s in self.steps if s.index == mark.get("step")), None)
        return (step.at, step.code) if step else (None, None)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["tool"], out["ok"] = "mha-check trace", self.ok
        if not self.options:
            del out["options"]  # (in JSON only when there are some)
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)


def arithmetic(d: int, heads: int, n: int, batch: int = 1, qkv_bias: bool = False, counted: int | None = None,
               counted_note: str = "", out_proj: bool = True, counted_biases: int | None = None) -> dict:
    """The lesson's figures for width d (= d_in = d_out), `heads` heads, a batch of `batch` sequences of n tokens.
    `out_proj=False`: the single-head form (harness.wire.form), whose count has no d² + d of an output projection.
    `counted_biases`: the size of the built module's bias vectors, where it was built (None: not known)."""
    formula = param_count_formula(d, d, qkv_bias) - (0 if out_proj else d * d + d)
    entries = score_entries(heads, n, batch)
    return {"d": d, "heads": heads, "head_width": d // heads if heads else None, "divisible": d % heads == 0,
            "qkv_bias": qkv_bias, "param_formula": formula, "param_counted": counted, "counted_note": counted_note,
            "batch": batch, "n": n, "score_shape": [batch, heads, n, n], "score_entries": entries,
            "score_bytes_float32": 4 * entries, **({} if out_proj else {"out_proj": False}),
            **({} if counted_biases is None else {"counted_biases": counted_biases})}
