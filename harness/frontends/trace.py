"""`mha-check trace TARGET`: one forward pass of the lesson's worked example, step by step, in the lesson's words.

The child (`Worker.op_trace`) runs the student's forward once on an input of shape (2, 3, 8) (width d = 8, H = 2
heads of width dh = 4, n = 3 tokens, batch B = 2: the worked example of lesson LM3-T5) and records every torch
operation with the shapes of its tensors, its other arguments, where each input came from and the student's line.
This module, in the trusted process, names each operation by the lesson's steps (project, split, move heads forward,
scores, scale, mask, softmax, mix values, merge, output projection) from its name and shapes, and marks the step
where a known mistake shows:

- a view/reshape to (B, H, n, dh) straight from (B, n, d)                       [split-view-order]
- a merge view/reshape (B, H, n, dh) -> (B, n, d) without the transpose first   [merge-no-transpose]
- a softmax over an axis other than the last                                    [softmax-wrong-axis]
- scores scaled by anything other than 1/sqrt(dh) in total                      [no-scaling, scale-by-dh, ...]
- masked_fill with a small finite value such as -10 or -100                      [finite-fill]
- no mask at all, a mask whose result is thrown away, a mask after the softmax  [no-mask, zero-after-softmax]
- a mask that is not the strict upper triangle (hides the diagonal, inverted)    [mask-hides-diagonal, ...]

It ends with the lesson's arithmetic for the target: head width, parameter count by the formula and as counted in
the student's module, and the size of the score tensor.  `main(argv)` is the `mha-check trace` subcommand.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import asdict, dataclass, field

LESSON_STEPS = ("project", "split", "move heads forward", "scores", "scale", "mask", "softmax", "mix values",
                "merge", "output projection")
WORKED = {"d": 8, "heads": 2, "n": 3, "batch": 2, "context_length": 16}  # lesson LM3-T5, "A worked example"
FUSED_ATTENTION = ("scores", "scale", "mask", "softmax", "mix values")
SAFE_FILL = -1e4  # a finite fill at or below this underflows to an exact 0 after the softmax (float32 and float64)

VIEWS = {"view", "reshape", "unflatten", "flatten", "view_as", "reshape_as", "_unsafe_view"}
TRANSPOSES = {"transpose", "permute", "swapaxes", "swapdims", "movedim", "mT", "T", "transpose_", "t"}
MATMULS = {"matmul", "__matmul__", "__rmatmul__", "bmm", "mm", "einsum", "baddbmm", "addmm", "tensordot"}
SCALARS = {"div", "mul", "__truediv__", "__mul__", "__rmul__", "true_divide", "div_", "mul_", "__itruediv__",
           "__imul__", "multiply", "divide", "__div__"}
DIVIDES = {"div", "__truediv__", "true_divide", "div_", "__itruediv__", "divide", "__div__"}
SOFTMAXES = {"softmax", "log_softmax", "_softmax", "special_softmax"}
DROPOUTS = {"dropout", "dropout_", "alpha_dropout", "feature_alpha_dropout", "native_dropout"}
ADDS = {"add", "__add__", "__radd__", "add_", "__iadd__"}
PASS_THROUGH = {"contiguous", "clone", "to", "float", "double", "type", "type_as", "detach", "squeeze", "unsqueeze",
                "expand", "expand_as", "__getitem__", "bool", "data"}
SPLITS = {"split", "chunk", "unbind", "tensor_split"}
CATS = {"cat", "concat", "concatenate", "stack", "hstack"}
MASK_BUILDERS = {"triu", "tril", "ones", "ones_like", "zeros", "full", "arange", "logical_not", "__invert__", "eq",
                 "__eq__", "ne", "__ne__", "gt", "__gt__", "lt", "__lt__", "ge", "__ge__", "le", "__le__", "bool",
                 "__getitem__", "to", "triu_", "tril_", "masked_fill", "view", "reshape", "unsqueeze", "float"}
FUSED_MHA = {"multi_head_attention_forward", "_native_multi_head_attention"}


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
    mistake: dict | None = None  # {"id", "text"} when a known mistake shows at this step


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

    @property
    def ok(self) -> bool:
        return self.error is None and not self.mistakes

    def to_dict(self) -> dict:
        out = asdict(self)
        out["tool"], out["ok"] = "mha-check trace", self.ok
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)

    def to_text(self) -> str:
        c = self.config
        lines = [f"mha-check trace {self.target}"]
        if self.construction:
            lines.append(f"  built as {self.construction}")
        lines.append(f"  one forward pass of the lesson's worked example: d={c['d']}, H={c['heads']} heads of width "
                     f"dh={c['d'] // c['heads']}, n={c['n']} tokens, batch B={c['batch']}: x has shape "
                     f"({c['batch']}, {c['n']}, {c['d']})")
        lines.append("")
        if self.steps:
            w_label = max(len(s.label or "·") for s in self.steps)
            w_call = min(32, max(len(s.call) for s in self.steps))
            w_shape = min(44, max(len(s.shapes) for s in self.steps))
            w_sym = min(46, max(len(s.symbols) for s in self.steps))
            lines.append(f"  {'#':>3}  {'step':<{w_label}}  {'operation':<{w_call}}  {'shapes':<{w_shape}}  "
                         f"{'in the lesson':<{w_sym}}  your code")
            for s in self.steps:
                flag = "!!" if s.mistake else "  "
                lines.append(f"{flag}{s.index:>3}  {s.label or '·':<{w_label}}  {_cut(s.call, w_call):<{w_call}}  "
                             f"{_cut(s.shapes, w_shape):<{w_shape}}  {_cut(s.symbols, w_sym):<{w_sym}}  "
                             f"{s.at}  {s.code}".rstrip())
                if s.mistake:
                    lines.append(f"       ^ MISTAKE [{s.mistake['id']}]: {s.mistake['text']}")
            if self.truncated:
                lines.append("  ... (more operations not recorded)")
            lines.append("")
        if self.error:
            lines.append(f"ERROR: {self.error}")
            lines.append("")
        if self.steps:
            lines.append("lesson steps, in the order your forward takes them:")
            lines.append("  " + " -> ".join(self.lesson_order) if self.lesson_order else "  (none recognised)")
            if self.missing:
                lines.append(f"  not seen: {', '.join(self.missing)}")
            lines.append("  the lesson: " + " -> ".join(LESSON_STEPS))
            lines.append("")
        whole = [m for m in self.mistakes if m.get("step") is None]
        for m in whole:
            lines.append(f"MISTAKE [{m['id']}]: {m['text']}")
        if self.mistakes:
            where: dict[str, list] = {}
            for m in self.mistakes:
                where.setdefault(m["id"], []).append(m["step"])
            found = "; ".join(mid + (" (step " + ", ".join(str(s) for s in at if s is not None) + ")"
                                     if any(s is not None for s in at) else "") for mid, at in where.items())
            lines.append(f"known mistakes marked: {found}")
            lines.append("(run `mha-check TARGET` for the full checks)")
        elif not self.error:
            lines.append("no known mistake shows in this trace (run `mha-check TARGET` for the full checks)")
        for note in self.notes:
            lines.append(f"note: {note}")
        lines.append("")
        lines += _arithmetic_text(self.arithmetic)
        return "\n".join(lines)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


# -- arithmetic -------------------------------------------------------------------------------------------------------
def arithmetic(d: int, heads: int, n: int, batch: int = 1, qkv_bias: bool = False, counted: int | None = None,
               counted_note: str = "") -> dict:
    """The lesson's figures for width d (= d_in = d_out), `heads` heads, a batch of `batch` sequences of n tokens."""
    from reference.arithmetic import param_count_formula, score_entries

    formula = param_count_formula(d, d, qkv_bias)
    entries = score_entries(heads, n, batch)
    return {"d": d, "heads": heads, "head_width": d // heads if heads else None, "divisible": d % heads == 0,
            "qkv_bias": qkv_bias, "param_formula": formula, "param_counted": counted, "counted_note": counted_note,
            "batch": batch, "n": n, "score_shape": [batch, heads, n, n], "score_entries": entries,
            "score_bytes_float32": 4 * entries}


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


# -- naming the steps -------------------------------------------------------------------------------------------------
def _patterns(B: int, n: int, d: int, H: int, dh: int, L: int) -> list[tuple[str, tuple]]:
    return [("B, n, d", (B, n, d)), ("B, n, H, dh", (B, n, H, dh)), ("B, H, n, dh", (B, H, n, dh)),
            ("B, H, dh, n", (B, H, dh, n)), ("B, H, n, n", (B, H, n, n)), ("B, n, 3d", (B, n, 3 * d)),
            ("B, n, 3, H, dh", (B, n, 3, H, dh)), ("3, B, H, n, dh", (3, B, H, n, dh)),
            ("B·H, n, dh", (B * H, n, dh)), ("B·H, dh, n", (B * H, dh, n)), ("B·H, n, n", (B * H, n, n)),
            ("B, n, dh", (B, n, dh)), ("B, dh, n", (B, dh, n)), ("B, n, n", (B, n, n)), ("n, n", (n, n)),
            ("L, L", (L, L)), ("1, 1, n, n", (1, 1, n, n)), ("1, 1, L, L", (1, 1, L, L)), ("d, d", (d, d)),
            ("3d, d", (3 * d, d)), ("d", (d,)), ("3d", (3 * d,)), ("n", (n,)), ("", ())]


SCORES_LIKE = {"B, H, n, n", "B·H, n, n", "B, n, n"}
MASK_LIKE = {"n, n", "L, L", "1, 1, n, n", "1, 1, L, L"}


def _number(text) -> float | None:
    if text is None:
        return None
    try:
        return float(str(text))
    except ValueError:
        return None


class _Namer:
    def __init__(self, ops: list[dict], cfg: dict):
        self.ops = ops
        d, H, n, B, L = cfg["d"], cfg["heads"], cfg["n"], cfg["batch"], cfg["context_length"]
        self.dh = d // H
        self.d = d
        self.pats = {shape: name for name, shape in reversed(_patterns(B, n, d, H, self.dh, L))}
        self.labels: list[str] = []
        self.mistakes: dict[int, dict] = {}
        self.scale_factors: list[tuple[int, float]] = []
        self.mask_ops: list[int] = []  # operations that apply a mask to the scores
        self.fused: list[int] = []

    def sym(self, info: dict | None) -> str | None:
        return None if info is None else self.pats.get(tuple(info["shape"]))

    def ancestors(self, index: int) -> set[int]:
        seen, todo = set(), [index]
        while todo:
            i = todo.pop()
            for t in self.ops[i]["in"]:
                src = t.get("src")
                if src is not None and src not in seen:
                    seen.add(src)
                    todo.append(src)
        return seen

    def label_of(self, info: dict) -> str:
        src = info.get("src")
        return self.labels[src] if src is not None and src < len(self.labels) else ""

    def derives_from(self, info: dict, labels) -> bool:
        src = info.get("src")
        if src is None:
            return False
        return any(self.labels[a] in labels for a in self.ancestors(src) | {src} if a < len(self.labels))

    def run(self) -> list[str]:
        for op in self.ops:
            self.labels.append(self.name(op))
        return self.labels

    def name(self, op: dict) -> str:  # noqa: C901 - one rule per shape transition, in the lesson's order
        name, ins, out = op["op"], op["in"], op.get("out")
        si = [self.sym(t) for t in ins]
        so = self.sym(out)
        data = ins[0] if ins else None
        params = [t for t in ins if t.get("name") and t["name"] != "x"]
        i = op["i"]
        if name == "scaled_dot_product_attention":
            self.fused.append(i)
            return "attention (fused)"
        if name in FUSED_MHA:
            self.fused.append(i)
            return "attention (nn.MultiheadAttention)"
        # projections: a weight parameter meets the data
        if (name == "linear" or (name in MATMULS and any(len(p["shape"]) == 2 for p in params))) and data:
            source = next((t for t in ins if not (t.get("name") and t["name"] != "x")), data)
            if self.derives_from(source, ("mix values", "attention (fused)", "merge")):
                return "output projection"
            return "project"
        if name in SOFTMAXES:
            return "softmax"
        if name in DROPOUTS:
            return self.label_of(data) if data and self.label_of(data) == "dropout" else "dropout"
        if name in ("masked_fill", "masked_fill_") and data and self.sym(data) not in MASK_LIKE:
            self.mask_ops.append(i)
            return "mask"
        if name == "__setitem__" and data and (self.sym(data) in SCORES_LIKE or self.derives_from(data, ("scores",))):
            self.mask_ops.append(i)
            return "mask"
        if name == "where" and len(ins) >= 2 and any(self.sym(t) in SCORES_LIKE for t in ins[1:]):
            self.mask_ops.append(i)
            return "mask"
        if name in ADDS and len(ins) >= 2 and any(t.get("neginf") for t in ins) and \
                any(self.sym(t) in SCORES_LIKE for t in ins):
            self.mask_ops.append(i)
            return "mask"
        if name in MATMULS and len(ins) >= 2:
            if any(self.sym(t) in SCORES_LIKE or self.derives_from(t, ("softmax",)) for t in ins[:2]) and \
                    so not in SCORES_LIKE:
                return "mix values"
            if so in SCORES_LIKE:
                return "scores"
        if name in SCALARS and data is not None:
            factor = self._scalar_factor(op)
            if factor is not None and not self.derives_from(data, ("softmax",)) and \
                    self.derives_from(data, ("project",)):
                self.scale_factors.append((i, factor))
                return "scale"
        if name in VIEWS and data is not None:
            a, b = si[0], so
            if a == "B, n, d" and b == "B, n, H, dh":
                return "split"
            if a == "B, n, d" and b == "B, H, n, dh":
                self.mistakes[i] = {"id": "split-view-order", "text": (
                    "view/reshape to (B, H, n, dh) straight from (B, n, d): the heads' 'positions' are cut across "
                    "several tokens, mixing tokens and features; split with view(B, n, H, dh) and then "
                    "transpose(1, 2)")}
                return "split"
            if a == "B, n, 3d" and b == "B, n, 3, H, dh":
                return "split"
            if a == "B, n, H, dh" and b == "B, n, d":
                return "merge"
            if a == "B, H, n, dh" and b == "B, n, d":
                self.mistakes[i] = {"id": "merge-no-transpose", "text": (
                    "the heads are merged with view/reshape (B, H, n, dh) -> (B, n, d) without transpose(1, 2) "
                    "first: each output row mixes several positions of one head; use "
                    "transpose(1, 2).contiguous().view(B, n, d)")}
                return "merge"
            if a == "B, H, n, dh" and b == "B·H, n, dh":
                return "move heads forward"
            if a == "B·H, n, dh" and b == "B, H, n, dh":
                return "merge"
        if name in TRANSPOSES and data is not None:
            a, b = si[0], so
            if (a, b) in (("B, n, H, dh", "B, H, n, dh"), ("B, n, 3, H, dh", "3, B, H, n, dh")):
                return "move heads forward"
            if (a, b) in (("B, H, n, dh", "B, H, dh, n"), ("B·H, n, dh", "B·H, dh, n"), ("B, n, dh", "B, dh, n")):
                return "scores"
            if (a, b) == ("B, H, n, dh", "B, n, H, dh"):
                return "merge"
        if name in SPLITS and data is not None:
            a = si[0]
            if a == "B, n, 3d":
                return "project"
            if a == "3, B, H, n, dh":
                return "move heads forward"
            if a == "B, n, 3, H, dh":
                return "split"
        if name == "__getitem__" and data is not None:
            a = si[0]
            if a == "B, n, d" and so == "B, n, dh":
                return "split"
            if a == "3, B, H, n, dh" and so == "B, H, n, dh":
                return "move heads forward"
            if a == "B, n, 3d" and so == "B, n, d":
                return "project"
        if name in CATS and so == "B, n, d" and ins and all(self.derives_from(t, ("mix values",)) for t in ins):
            return "merge"
        # building or slicing the mask: everything in and out is (n, n) / (L, L) shaped
        if name in MASK_BUILDERS and (so in MASK_LIKE or so == "n") and all(s in MASK_LIKE or s in ("n", "")
                                                                               for s in si):
            return "mask"
        if name in MASK_BUILDERS and so in MASK_LIKE and not ins:
            return "mask"
        if op.get("raised") and data is not None and self.label_of(data) in LESSON_STEPS:
            return self.label_of(data)  # it raised, so no output shape: named after what it worked on
        if (name in PASS_THROUGH or name in VIEWS or name in ADDS) and data is not None and so is not None and \
                self.label_of(data) in LESSON_STEPS:
            if name in ADDS and not any(t.get("name") for t in ins[1:]) and len(ins) > 1:
                return ""
            return self.label_of(data)
        return ""

    def _scalar_factor(self, op: dict) -> float | None:
        """The number a tensor is multiplied by (or 1/the divisor), when the other operand is a plain number or a
        one-element tensor."""
        args, ins = op["args"], op["in"]
        value = None
        if len(ins) == 1 and len(args) >= 2 and args[0] == "<T0>":
            value = _number(args[1])
        elif len(ins) == 1 and "other" in op["kwargs"]:
            value = _number(op["kwargs"]["other"])
        elif len(ins) == 2 and ins[1].get("value") is not None and len(ins[0]["shape"]) > 0:
            value = _number(ins[1]["value"])
        if value is None or value == 0 or not math.isfinite(value):
            return None
        return 1.0 / value if op["op"] in DIVIDES else value


_SLICE = re.compile(r"slice\((-?\w+), (-?\w+), (-?\w+)\)")


def _slices(text: str) -> str:
    def one(m):
        a, b, c = (("" if v == "None" else v) for v in m.groups())
        return f"{a}:{b}" + (f":{c}" if c else "")

    return _SLICE.sub(one, text)


def _is_weight(t: dict) -> bool:
    return bool(t.get("name")) and t["name"] != "x"


def _call_text(op: dict) -> str:
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
    if args and args[0] == "<T0>" and not _is_weight(ins[0]):
        args = args[1:]  # the tensor the method is called on

    def data_tensor(a: str) -> bool:  # shown in the shapes column instead (a mask argument stays)
        if not re.fullmatch(r"<T\d+>", a) or name in ("masked_fill", "masked_fill_", "where"):
            return False
        t = ins[int(a[2:-1])]
        return not _is_weight(t) and bool(t["shape"])

    shown = [show(_slices(a)) for a in args if not data_tensor(a)]
    shown += [f"{k}={show(v)}" for k, v in op["kwargs"].items() if v not in ("False", "None")]
    return f"{name}({', '.join(s for s in shown if s != 'None')})"


# -- mistakes found by looking at the whole forward -----------------------------------------------------------------
def _mask_pattern(namer: _Namer, op: dict) -> list | None:
    """Which score positions (n, n) this mask operation hides (True = hidden), when it can be read."""
    import numpy as np

    n = WORKED["n"]

    def last2(pattern):
        a = np.asarray(pattern, dtype=bool)
        while a.ndim > 2:
            a = a[0]
        return a if a.shape == (n, n) else None

    name, ins = op["op"], op["in"]
    if name in ("masked_fill", "masked_fill_", "__setitem__") and len(ins) >= 2 and "pattern" in ins[1]:
        return last2(ins[1]["pattern"])
    if name == "where" and ins and "pattern" in ins[0]:
        cond = last2(ins[0]["pattern"])
        if cond is None:
            return None
        scores_first = len(ins) >= 2 and op["args"][1:2] == ["<T1>"] and (
            namer.sym(ins[1]) in SCORES_LIKE or namer.derives_from(ins[1], ("scores",)))
        return ~cond if scores_first else cond
    if name in ADDS:
        for t in ins:
            if t.get("neginf") and "pattern" in t and namer.sym(t) not in SCORES_LIKE:
                return last2(t["pattern"])
    return None


def _fill_value(op: dict) -> float | None:
    name, args, ins = op["op"], op["args"], op["in"]
    if name in ("masked_fill", "masked_fill_", "__setitem__"):
        raw = args[2] if len(args) >= 3 else op["kwargs"].get("value")
        if raw is not None and raw.startswith("<T"):
            k = int(raw[2:-1])
            return _number(ins[k].get("value")) if k < len(ins) else None
        return _number(raw)
    if name == "where":
        for k, raw in enumerate(args[1:3], start=1):
            if raw.startswith("<T"):
                t = ins[int(raw[2:-1])]
                if len(t["shape"]) == 0 and t.get("value") is not None:
                    return _number(t["value"])
            else:
                return _number(raw)
    return None


def _check_whole(namer: _Namer, ops: list[dict], cfg: dict, mistakes: dict[int, dict], notes: list[str],
                 complete: bool = True) -> list:
    import numpy as np

    whole: list[dict] = []
    # the operation that raised, and the input changed in place
    for op in ops:
        if op.get("raised"):
            mistakes[op["i"]] = _raised(namer, op)
        elif op.get("inplace") and op["in"] and op["in"][0].get("name") == "x":
            mistakes.setdefault(op["i"], {"id": "input-modified-in-place", "text": (
                f"{op['op']} changes the caller's input tensor x in place; compute a new tensor instead "
                "(x = x / c, not x /= c)")})
    labels = namer.labels
    softmaxes = [op["i"] for op in ops if labels[op["i"]] == "softmax"]
    before_softmax: set[int] = set()
    for s in softmaxes:
        before_softmax |= namer.ancestors(s)
    dh = cfg["d"] // cfg["heads"]
    n = cfg["n"]

    # softmax over the last axis
    for s in softmaxes:
        op = ops[s]
        raw = op["kwargs"].get("dim", op["args"][1] if len(op["args"]) >= 2 else None)
        dim, ndim = _number(raw), len(op["in"][0]["shape"]) if op["in"] else 0
        if dim is not None and ndim and int(dim) % ndim != ndim - 1:
            mistakes[s] = {"id": "softmax-wrong-axis", "text": (
                f"softmax over dim={int(dim)} of a {ndim}-d score tensor: it normalises over the queries, not over "
                f"the keys; use dim=-1 (the last axis)")}

    # fused attention: its own scaling and masking
    fused_scale = 1.0
    for f in namer.fused:
        op = ops[f]
        causal = op["kwargs"].get("is_causal") == "True"
        mask_arg = op["kwargs"].get("attn_mask", op["args"][3] if len(op["args"]) > 3 and op["op"] ==
                                    "scaled_dot_product_attention" else None)
        if op["op"] in FUSED_MHA:
            mask_arg = op["kwargs"].get("attn_mask")
        if not causal and (mask_arg is None or mask_arg == "None"):
            mistakes[f] = {"id": "no-mask", "text": (
                "the fused attention is called without is_causal=True or an attn_mask: every token sees the "
                "future")}
        if op["op"] == "scaled_dot_product_attention":
            given = _number(op["kwargs"].get("scale"))
            q_width = op["in"][0]["shape"][-1] if op["in"] else dh
            fused_scale *= given if given is not None else 1 / math.sqrt(q_width)
    fused_sdpa = any(ops[f]["op"] == "scaled_dot_product_attention" for f in namer.fused)
    fused_mha = any(ops[f]["op"] in FUSED_MHA for f in namer.fused)

    # scaling: the product of the scalar factors on the way to each softmax (q and k may be scaled separately)
    for target in (softmaxes or ([namer.fused[0]] if fused_sdpa else [])):
        ancestors = namer.ancestors(target)
        factors = [(i, f) for i, f in namer.scale_factors if i in ancestors]
        total = math.prod(f for _, f in factors) * (fused_scale if target in namer.fused else 1.0)
        want = 1 / math.sqrt(dh)
        if not math.isclose(total, want, rel_tol=1e-6):
            divisor = 1 / total if total else float("inf")
            if math.isclose(total, 1.0):
                mid, text = "no-scaling", "the scores are never scaled"
            elif math.isclose(divisor, dh):
                mid, text = "scale-by-dh", f"the scores are divided by dh = {dh}, not by sqrt(dh)"
            elif math.isclose(divisor, math.sqrt(cfg["d"])):
                mid, text = "scale-by-sqrt-d", (f"the scores are divided by sqrt(d) = {divisor:.4g} (the full "
                                                "width), not by sqrt(dh) (the head width)")
            else:
                mid, text = "wrong-scale", f"the scores are multiplied by {total:.4g} in all (divided by {divisor:.4g})"
            text += f"; the lesson divides by sqrt(dh) = sqrt({dh}) = {math.sqrt(dh):.4g}"
            mistakes.setdefault(factors[-1][0] if factors else target, {"id": mid, "text": text})

    # the mask: present, used, before the softmax, hiding exactly the future, with -inf
    if softmaxes and not fused_mha:
        applied = [m for m in namer.mask_ops if m in before_softmax]
        after = [m for m in namer.mask_ops if namer.derives_from(ops[m]["in"][0], ("softmax",))]
        unused = [m for m in namer.mask_ops if m not in applied and m not in after]
        for m in after:
            mistakes[m] = {"id": "zero-after-softmax", "text": (
                "the mask is applied after the softmax: the weights of a row no longer sum to 1 (and a finite fill "
                "lets the future through); mask the scores with -inf before the softmax")}
        for m in unused:
            mistakes[m] = {"id": "no-mask", "text": (
                f"the result of {ops[m]['op']} is never used: masked_fill is not in place; write "
                "scores = scores.masked_fill(...) (or use masked_fill_)")}
        if complete and not applied and not after and not unused:
            whole.append({"id": "no-mask", "step": None, "text": (
                "no operation masks the scores before the softmax: every token sees the future; add "
                "scores = scores.masked_fill(mask[:n, :n], float('-inf')) before the softmax")})
        hidden = None
        for m in applied:
            fill = _fill_value(ops[m])
            if fill is not None and math.isfinite(fill) and ops[m]["op"] != "__add__":
                if fill > SAFE_FILL:
                    mistakes.setdefault(m, {"id": "finite-fill", "text": (
                        f"the masked scores are filled with {fill:g}, a finite value: after the softmax the future "
                        "keeps a small weight (exp of it is not 0); fill with float('-inf')")})
                else:
                    notes.append(f"step {m + 1}: the mask fills with {fill:g}; that underflows to an exact 0 after the "
                                 "softmax, but float('-inf') says what is meant")
            pattern = _mask_pattern(namer, ops[m])
            if pattern is not None:
                hidden = pattern if hidden is None else (hidden | pattern)
        if hidden is not None and applied:
            future = np.triu(np.ones((n, n), bool), 1)
            if not np.array_equal(hidden, future):
                if np.array_equal(hidden, np.triu(np.ones((n, n), bool), 0)):
                    mid, text = "mask-hides-diagonal", ("the mask also hides the diagonal: a token must see itself "
                                                       "(use torch.triu(..., diagonal=1))")
                elif np.array_equal(hidden, ~future) or np.array_equal(hidden, np.tril(np.ones((n, n), bool), -1)):
                    mid, text = "mask-inverted", "the mask is inverted: it hides the past and shows the future"
                elif np.array_equal(hidden, np.triu(np.ones((n, n), bool), 2)):
                    mid, text = "mask-lets-one-future", ("the mask lets the next token through: use "
                                                         "torch.triu(..., diagonal=1)")
                elif not hidden.any():
                    mid, text = "no-mask", "the mask hides nothing"
                else:
                    mid, text = "mask-wrong", "the mask does not hide exactly the future positions (s > t)"
                rows = "; ".join("".join("x" if v else "." for v in row) for row in hidden)
                mistakes.setdefault(applied[-1], {"id": mid, "text": f"{text} (hidden, row by row: {rows}; "
                                                                   "expected .xx; ..x; ...)"})
    if complete and (softmaxes or fused_sdpa) and not fused_mha and \
            not any(labels[i] == "output projection" for i in range(len(ops))):
        whole.append({"id": "no-output-projection", "step": None, "text": (
            "no output projection after the heads are merged: the heads cannot exchange information; add "
            "self.out_proj = nn.Linear(d_out, d_out) and apply it last")})
    return whole


def _raised(namer: _Namer, op: dict) -> dict:
    message = op["raised"]
    if op["op"] in VIEWS and "view size is not compatible" in message:
        return {"id": "view-without-contiguous", "text": (
            f"view() on a tensor that is not contiguous (after a transpose) raised {message.split(':')[0]}: call "
            ".contiguous() before .view(), or use .reshape()")}
    if any(namer.sym(t) in ("L, L", "1, 1, L, L") for t in op["in"]) and any(
            namer.sym(t) in SCORES_LIKE for t in op["in"]):
        return {"id": "mask-not-sliced", "text": (
            "the (context_length, context_length) mask meets the (n, n) scores without being cut to the sequence: "
            f"use mask[:n, :n] ({message})")}
    return {"id": "raised", "text": f"this operation raised {message}"}


def analyse(ops: list[dict], cfg: dict, complete: bool = True) -> tuple[list[Step], list[dict], list[str]]:
    """Name the recorded operations and find the known mistakes: (steps, mistakes, notes).  `complete`: the
    forward ran to the end (otherwise what is missing after the failing step is not a finding)."""
    namer = _Namer(ops, cfg)
    labels = namer.run()
    mistakes = dict(namer.mistakes)
    notes: list[str] = []
    whole = _check_whole(namer, ops, cfg, mistakes, notes, complete)
    steps = []
    for op in ops:
        ins = [t["shape"] for t in op["in"]]
        out = op.get("out", {}).get("shape") if op.get("out") else None
        data = [t for t in op["in"] if not _is_weight(t)][:2] or op["in"][:1]
        outs = [op["out"]] if op.get("out") else op.get("outs", [])
        shapes = (", ".join(_shape_text(t["shape"]) for t in data) + " -> "
                  + (", ".join(_shape_text(t["shape"]) for t in outs[:3]) or "-"))
        known = [namer.sym(t) for t in data + outs[:1]]
        symbols = ""
        if all(k is not None for k in known) and any(known):
            symbols = ", ".join(f"({k})" for k in known[:-1]) + f" -> ({known[-1]})" if outs else ""
        steps.append(Step(op["i"] + 1, op["op"], _call_text(op), labels[op["i"]], ins, out, shapes.strip(),
                          symbols.strip(), op.get("at", "?"), op.get("code", ""), mistakes.get(op["i"])))
    listed = [{"id": m["id"], "text": m["text"], "step": i + 1} for i, m in sorted(mistakes.items())]
    return steps, listed + whole, notes


def _shape_text(shape) -> str:
    return "(" + ", ".join(str(v) for v in shape) + ("," if len(shape) == 1 else "") + ")"


def lesson_order(steps: list[Step]) -> list[str]:
    order: list[str] = []
    for s in steps:
        names = FUSED_ATTENTION if s.label == "attention (fused)" else (
            LESSON_STEPS if s.label == "attention (nn.MultiheadAttention)" else (s.label,))
        for name in names:
            if name in LESSON_STEPS and name not in order:
                order.append(name)
    return order


# -- running it -------------------------------------------------------------------------------------------------------
def trace(target, *, n: int = 1024, batch: int = 1, heads: int | None = None, d: int | None = None,
          qkv_bias: bool = False, seed: int = 0, args: dict | None = None, weight_map: dict | None = None,
          source: bool | None = None) -> TraceResult:
    """Trace one forward pass of the lesson's worked example through `target` (any form `harness.api.check`
    takes); the arithmetic is for width `d` (default 8), `heads` heads (default 2), Q/K/V biases or not, and a
    score tensor of `batch` sequences of `n` tokens."""
    import numpy as np

    from harness.frontends.api import resolved_target
    from harness.wire.config import Config
    from harness.sandbox.subject import Subject, TargetFailure, WorkerDied

    w = WORKED
    cfg = Config(d_in=w["d"], d_out=w["d"], heads=w["heads"], context_length=w["context_length"],
                 batch=w["batch"], n=w["n"])
    a_d, a_heads = d or w["d"], heads or w["heads"]
    with resolved_target(target, source) as resolved:
        result = TraceResult(resolved.display, "", dict(w), notes=list(resolved.notes))
        subject = Subject(resolved.spec, dict(args or {}), seed, weight_map=dict(weight_map or {}))
        counted, counted_note = None, ""
        try:
            loaded = subject.load()
            result.construction = _construction(loaded, cfg)
            inst = subject.build(cfg)
            x = np.random.default_rng([seed, 31337]).standard_normal((cfg.batch, cfg.n, cfg.d_in))
            reply = inst.trace(x)
            ops = reply["ops"]
            result.truncated = bool(reply.get("truncated"))
            if reply.get("raised"):
                result.error = f"your forward raised {reply['raised']}"
            if reply.get("output"):
                result.output_shape = reply["output"]["shape"]
            steps, mistakes, notes = analyse(ops, w, complete=not reply.get("raised") and not result.truncated)
            result.steps, result.mistakes = steps, mistakes
            result.notes += notes
            result.lesson_order = lesson_order(steps)
            result.missing = [s for s in LESSON_STEPS if s not in result.lesson_order]
            if result.output_shape is not None and result.output_shape != [cfg.batch, cfg.n, cfg.d_out]:
                result.notes.append(f"the output has shape {tuple(result.output_shape)}, expected "
                                    f"({cfg.batch}, {cfg.n}, {cfg.d_out})")
            if a_d % a_heads == 0:
                sig = loaded["signature"]
                if qkv_bias and "qkv_bias" not in sig["accepts"] and not sig["config_param"]:
                    counted_note = "your constructor has no Q/K/V bias parameter: counted as it builds"
                try:
                    built = subject.build(Config(d_in=a_d, d_out=a_d, heads=a_heads, qkv_bias=qkv_bias,
                                                 context_length=max(1, min(n, 2048)), batch=1, n=1))
                    counted = int(built.info["param_count"])
                except TargetFailure as e:
                    counted_note = f"building it with d={a_d}, H={a_heads} raised {e.message}"
        except (TargetFailure, WorkerDied) as e:
            result.error = f"{getattr(e, 'stage', '?')}: {e.message}"
        finally:
            subject.close()
    result.arithmetic = arithmetic(a_d, a_heads, n, batch, qkv_bias, counted, counted_note)
    return result


def _construction(loaded: dict, cfg) -> str:
    sig = loaded["signature"]
    values = {"width": cfg.d_out, "d_in": cfg.d_in, "d_out": cfg.d_out, "heads": cfg.heads,
              "context_length": cfg.context_length, "dropout": cfg.dropout, "qkv_bias": cfg.qkv_bias}
    args = [f"{p}={values[k]}" for k, p in sig["accepts"].items() if k in values]
    if sig.get("config_param"):
        args.append(f"{sig['config_param']}=<config object>")
    return f"{loaded['name']}({', '.join(args)})"


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        print(f"mha-check trace: error: {message}", file=sys.stderr)
        sys.exit(2)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="mha-check trace", description=(
        "Run one forward pass of the lesson's worked example (d=8, 2 heads, 3 tokens, batch 2) through TARGET and "
        "show every tensor operation named by the lesson's steps, marking known mistakes; then the lesson's "
        "arithmetic for the target."), epilog="Exit status: 0 no known mistake shows; 1 a mistake is marked or the "
                                              "target could not be traced; 2 the command line is wrong.")
    p.add_argument("target", help="what to trace, e.g. attn.py:MyAttn (the same forms as mha-check TARGET)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--n", type=int, default=1024, help="tokens per sequence for the score-memory figures "
                                                       "(default 1024)")
    p.add_argument("--batch", type=int, default=1, help="sequences for the score-memory figures (default 1)")
    p.add_argument("--heads", type=int, default=None, help="heads for the arithmetic (default 2, as traced)")
    p.add_argument("--d", type=int, default=None, help="width for the arithmetic (default 8, as traced)")
    p.add_argument("--qkv-bias", action="store_true", help="count Q/K/V biases in the arithmetic (GPT-2 has them)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE",
                   help="constructor argument, as for mha-check TARGET")
    return p


def main(argv=None) -> int:
    """`mha-check trace TARGET [--format json] [--n N] [--batch B] [--heads H] [--d D] [--qkv-bias]`.

    `argv` may start with the word "trace" (harness.frontends.cli's SUBCOMMANDS hands over the whole command line)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["trace"]:
        argv = argv[1:]
    parser = _parser()
    args = parser.parse_args(argv)
    for name in ("n", "batch", "heads", "d"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name} must be at least 1")
    from harness.frontends.cli import _overrides

    result = trace(args.target, n=args.n, batch=args.batch, heads=args.heads, d=args.d, qkv_bias=args.qkv_bias,
                   seed=args.seed, args=_overrides(args.arg, parser))
    if args.format == "json":
        sys.stdout.write(result.to_json() + "\n")
    else:
        print(result.to_text())
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
