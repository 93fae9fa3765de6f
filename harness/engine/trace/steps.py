"""The steps of a recorded forward as the student reads them: each operation as a short call, its shapes in numbers
and in the lesson's letters, its name among the lesson's steps, the student's line, and its mark if it has one."""
from __future__ import annotations

import re
from dataclasses import dataclass

from harness.engine.trace.naming import Namer
from harness.engine.trace.vocabulary import FUSED_ATTENTION, LESSON_STEPS, is_weight


@dataclass
class Step:
    index: int
    op: str
    call: str  # the operation with its arguments, e.g. "view(2, 3, 2, 4)"
    label: str  # one of LESSON_STEPS, "dropout", "attention (fused)", or "" (not one of the lesson's steps)
    inputs: list  # shapes of the tensor inputs
    output: list | None  # shape of the output (None: no single tensor)
    shapes: str  # the data's shapes, e.g. "(2, 3, 8) -> (2, 3, 2, 4)" (weights left out)
    symbols: str  # the same in the lesson's letters, e.g. "(B, n, d) -> (B, n, H, dh)" ("" when not recognised)
    at: str  # student file:line
    code: str  # that line
    mistake: dict | None = None  # {"id": detector, "text"} when a known mistake shows at this step
    also: tuple[str, ...] = ()  # the lesson's steps this operation takes besides its label's (baddbmm's scale, mask)
    statement: str = ""  # "attn.py:28-30" where `code` is a statement written over several lines, else ""


def build(namer: Namer, ops: list[dict], marks: dict[int, dict]) -> list[Step]:
    """One Step per recorded operation, named (`namer` has run) and marked (`marks`: operation index -> mark)."""
    labels = namer.labels
    steps = []
    for op in ops:
        ins = [t["shape"] for t in op["in"]]
        out = op.get("out", {}).get("shape") if op.get("out") else None
        data = [t for t in op["in"] if not is_weight(t)][:2] or op["in"][:1]
        outs = [op["out"]] if op.get("out") else op.get("outs", [])
        shapes = (", ".join(shape_text(t["shape"]) for t in data) + " -> "
                  + (", ".join(shape_text(t["shape"]) for t in outs[:3]) or "-"))
        known = [namer.sym(t) for t in data + outs[:1]]
        symbols = ""
        if all(k is not None for k in known) and any(known):
            symbols = ", ".join(f"({k})" for k in known[:-1]) + f" -> ({known[-1]})" if outs else ""
        steps.append(Step(op["i"] + 1, op["op"], call_text(op), labels[op["i"]], ins, out, shapes.strip(),
                          symbols.strip(), op.get("at", "?"), op.get("code", ""), marks.get(op["i"]),
                          namer.also.get(op["i"], ()), op.get("statement", "")))
    return steps


def lesson_order(steps: list[Step]) -> list[str]:
    """The lesson's steps in the order the forward takes them (a fused attention takes five at once).  Masking is
    the mask applied to the scores, so a mask made or cut to size before there are scores is not counted where the
    scores are recognised: a student's trial read "mask -> project -> ... -> softmax" for a layer that masks after
    the softmax, the first "mask" being the mask mha-check made to call it (a buffer sliced at the top of forward,
    or a mask expanded for baddbmm, read the same)."""
    scored = any(s.label == "scores" or "scores" in s.also or s.label in ("attention (fused)",
                                                                         "attention (nn.MultiheadAttention)")
                 for s in steps)
    order: list[str] = []
    for s in steps:
        if s.at == "mha-check" or (s.label == "mask" and scored and "scores" not in order):
            continue
        names = FUSED_ATTENTION if s.label == "attention (fused)" else (
            LESSON_STEPS if s.label == "attention (nn.MultiheadAttention)" else (s.label, *s.also))
        for name in names:
            if name in LESSON_STEPS and name not in order:
                order.append(name)
    return order


def shape_text(shape) -> str:
    return "(" + ", ".join(str(v) for v in shape) + ("," if len(shape) == 1 else "") + ")"


_SLICE = re.compile(r"slice\((-?\w+), (-?\w+), (-?\w+)\)")


def _slices(text: str) -> str:
    def one(m):
        a, b, c = (("" if v == "None" else v) for v in m.groups())
        return f"{a}:{b}" + (f":{c}" if c else "")

    return _SLICE.sub(one, text)


def call_text(op: dict) -> str:
    """The operation as a short call: data tensors left out (the shapes column has them), weights by name."""
    ins = op["in"]

    def show(text: str) -> str:
        for k, t in enumerate(ins):
            token = f"<T{k}>"
            if token in text:
                if t.get("name"):
                    label = t["name"]
                elif not t["shape"]:
                    label = str(t.get("value", "tensor"))
                else:
                    label = "(" + ", ".join(str(v) for v in t["shape"]) + ")"
                text = text.replace(token, label)
        return text

    name, args = op["op"], list(op["args"])
    if name == "__getitem__" and len(args) == 2:
        index = _slices(args[1])
        index = index[1:-1] if index.startswith("(") and index.endswith(")") else index
        return f"{show(args[0])}[{index.rstrip(',')}]"
    if name == "linear":
        return f"linear({', '.join(show(a) for a in args[1:] if a != 'None')})"
    if args and args[0] == "<T0>" and not is_weight(ins[0]):
        args = args[1:]  # the tensor the method is called on

    def data_tensor(a: str) -> bool:  # shown in the shapes column instead (a mask argument stays)
        if not re.fullmatch(r"<T\d+>", a) or name in ("masked_fill", "masked_fill_", "where"):
            return False
        t = ins[int(a[2:-1])]
        return not is_weight(t) and bool(t["shape"])

    shown = [show(_slices(a)) for a in args if not data_tensor(a)]
    shown += [f"{k}={show(v)}" for k, v in op["kwargs"].items() if v not in ("False", "None")
              and not k.startswith("_")]  # torch's own plumbing (F.softmax's _stacklevel), not the student's
    return f"{name}({', '.join(s for s in shown if s != 'None')})"
