"""What one recorded forward pass shows, in the lesson's words: the trace analysis (no torch, no process control).

The child (`harness.child.recorders.TraceRecorder`) runs the student's forward once on an input of the lesson's
worked example (width d = 8, H = 2 heads of width dh = 4, n = 3 tokens, batch B = 2) and records every torch
operation with the shapes of its tensors, its other arguments, where each input came from and the student's line.
This module names each operation by the lesson's steps (project, split, move heads forward, scores, scale, mask,
softmax, mix values, merge, output projection) from its name and shapes, and marks the steps where a known
mistake shows, by *detector*:

- split-without-transpose: a view/reshape to (B, H, n, dh) straight from (B, n, d), on every projection
- queries-split-without-transpose, keys-split-without-transpose, values-split-without-transpose: the same on that
  projection alone (read from the data flow into the scores q @ kᵀ and the mixing weights @ v), the others split
  right; keys-and-values-split-without-transpose (and the other pairs): on two projections, the third split right
- merge-without-transpose: a merge view/reshape (B, H, n, dh) -> (B, n, d) without the transpose first
- softmax-not-last-axis: a softmax over an axis other than the last
- scores-not-scaled, scaled-by-dh, scaled-by-sqrt-d, wrong-scale: the scores' total scale is not 1/sqrt(dh)
- fill-leaks-visibly, fill-leaks-invisibly: masked_fill with a finite value (-10; -100), not -inf
- no-mask-applied, mask-result-unused, mask-after-softmax, sdpa-without-causal: the mask is missing or misplaced
- mask-hides-diagonal, mask-inverted, mask-lets-one-future, mask-wrong: the mask is not the strict upper triangle
- no-output-projection, input-modified-in-place, view-without-contiguous, mask-not-sliced, raised
- split-order-on-slice, view-on-slice: a view of a slice (a fused projection's part) raised: its sizes are in the
  wrong order, and .contiguous() would hide that, not fix it

Which known mistake (mutant) a detector stands for is declared by the mutants themselves (`MutantInfo.trace`) and
read from the catalogue: nothing here names a mutant.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field

import numpy as np

import mutants
from harness.wire.config import Config
from harness.wire.errors import CannotDrive, HarnessFailure, TargetFailure, WorkerDied
from reference.arithmetic import param_count_formula, score_entries

LESSON_STEPS = ("project", "split", "move heads forward", "scores", "scale", "mask", "softmax", "mix values",
                "merge", "output projection")
WORKED = {"d": 8, "heads": 2, "n": 3, "batch": 2, "context_length": 16}  # lesson LM3-T5, "A worked example"
FUSED_ATTENTION = ("scores", "scale", "mask", "softmax", "mix values")
SAFE_FILL = -1e4  # a finite fill at or below this underflows to an exact 0 after the softmax (float32 and float64)
VISIBLE_FILL = -50.0  # above this, the future's weight (exp(fill)) shows in ordinary forward values

VIEWS = {"view", "reshape", "unflatten", "flatten", "view_as", "reshape_as", "_unsafe_view"}
TRANSPOSES = {"transpose", "permute", "swapaxes", "swapdims", "movedim", "mT", "T", "transpose_", "t"}
MATMULS = {"matmul", "__matmul__", "__rmatmul__", "bmm", "mm", "einsum", "baddbmm", "addmm", "tensordot"}
SCALARS = {"div", "mul", "__truediv__", "__mul__", "__rmul__", "true_divide", "div_", "mul_", "__itruediv__",
           "__imul__", "multiply", "divide", "__div__"}
DIVIDES = {"div", "__truediv__", "true_divide", "div_", "__itruediv__", "divide", "__div__"}
REINDEX = {"__getitem__", "split", "chunk", "narrow", "unbind", "tensor_split", "split_with_sizes", "select",
           "squeeze", "unsqueeze", "expand", "contiguous"} | VIEWS  # re-index memory, compute nothing
SLICE_DETECTORS = ("split-order-on-slice", "view-on-slice")  # a view of a slice raised: not a missing contiguous()
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
    mistake: dict | None = None  # {"id": detector, "text"} when a known mistake shows at this step



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


# -- arithmetic -------------------------------------------------------------------------------------------------------
def arithmetic(d: int, heads: int, n: int, batch: int = 1, qkv_bias: bool = False, counted: int | None = None,
               counted_note: str = "") -> dict:
    """The lesson's figures for width d (= d_in = d_out), `heads` heads, a batch of `batch` sequences of n tokens."""
    formula = param_count_formula(d, d, qkv_bias)
    entries = score_entries(heads, n, batch)
    return {"d": d, "heads": heads, "head_width": d // heads if heads else None, "divisible": d % heads == 0,
            "qkv_bias": qkv_bias, "param_formula": formula, "param_counted": counted, "counted_note": counted_note,
            "batch": batch, "n": n, "score_shape": [batch, heads, n, n], "score_entries": entries,
            "score_bytes_float32": 4 * entries}



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
                self.mistakes[i] = {"id": "split-without-transpose", "text": (
                    "view/reshape to (B, H, n, dh) straight from (B, n, d): the heads' 'positions' are cut across "
                    "several tokens, mixing tokens and features; split with view(B, n, H, dh) and then "
                    "transpose(1, 2)")}
                return "split"
            if a == "B, n, 3d" and b == "B, n, 3, H, dh":
                return "split"
            if a == "B, n, H, dh" and b == "B, n, d":
                return "merge"
            if a == "B, H, n, dh" and b == "B, n, d":
                self.mistakes[i] = {"id": "merge-without-transpose", "text": (
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
    shown += [f"{k}={show(v)}" for k, v in op["kwargs"].items() if v not in ("False", "None")
              and not k.startswith("_")]  # torch's own plumbing (F.softmax's _stacklevel), not the student's
    return f"{name}({', '.join(s for s in shown if s != 'None')})"


# -- mistakes found by looking at the whole forward -----------------------------------------------------------------
def _last2(pattern, n: int):
    """An (n, n) boolean array from a recorded pattern (leading axes of size 1 dropped), or None."""
    if pattern is None:
        return None
    a = np.asarray(pattern, dtype=bool)
    while a.ndim > 2:
        a = a[0]
    return a if a.shape == (n, n) else None


def _mask_pattern(namer: _Namer, op: dict) -> list | None:
    """Which score positions (n, n) this mask operation hides (True = hidden), when it can be read."""
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
        for raw in args[1:3]:
            if raw.startswith("<T"):
                t = ins[int(raw[2:-1])]
                if len(t["shape"]) == 0 and t.get("value") is not None:
                    return _number(t["value"])
            else:
                return _number(raw)
    return None


def _check_whole(namer: _Namer,  # noqa: C901 - to be split with trace.py by job (issue 30)
                 ops: list[dict], cfg: dict, mistakes: dict[int, dict], notes: list[str],
                 complete: bool = True) -> list:
    whole: list[dict] = []
    # the operation that raised, and the input changed in place
    for op in ops:
        if op.get("raised"):
            mistakes[op["i"]] = _raised(namer, op)
        elif op.get("inplace") and op["in"] and op["in"][0].get("name") == "x":
            mistakes.setdefault(op["i"], {"id": "input-changed-in-place", "text": (
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
            mistakes[s] = _softmax_axis(int(dim), ndim)

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
            mistakes[f] = {"id": "sdpa-without-causal", "text": (
                "the fused attention is called without is_causal=True or an attn_mask: every token sees the "
                "future")}
        elif not causal and isinstance(mask_arg, str) and mask_arg.startswith("<T"):
            given = op["in"][int(mask_arg[2:-1])]
            keep = _last2(given.get("pattern"), n) if given.get("dtype") == "bool" else None
            if keep is not None and np.array_equal(keep, np.triu(np.ones((n, n), bool), 1)):
                mistakes[f] = {"id": "sdpa-mask-keeps-future", "text": (
                    "a boolean attn_mask of scaled_dot_product_attention says which positions to KEEP; this one is "
                    "True above the diagonal, so every token attends to the future only; pass is_causal=True or "
                    "attn_mask=~mask")}
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
                mid, text = "scores-not-scaled", "the scores are never scaled"
            elif math.isclose(divisor, dh):
                mid, text = "scaled-by-dh", f"the scores are divided by dh = {dh}, not by sqrt(dh)"
            elif math.isclose(divisor, math.sqrt(cfg["d"])):
                mid, text = "scaled-by-sqrt-d", (f"the scores are divided by sqrt(d) = {divisor:.4g} (the full "
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
            mistakes[m] = {"id": "mask-after-softmax", "text": (
                "the mask is applied after the softmax: the weights of a row no longer sum to 1 (and a finite fill "
                "lets the future through); mask the scores with -inf before the softmax")}
        for m in unused:
            mistakes[m] = {"id": "mask-result-unused", "text": (
                f"the result of {ops[m]['op']} is never used: masked_fill is not in place; write "
                "scores = scores.masked_fill(...) (or use masked_fill_)")}
        if complete and not applied and not after and not unused:
            whole.append({"id": "no-mask-applied", "step": None, "text": (
                "no operation masks the scores before the softmax: every token sees the future; add "
                "scores = scores.masked_fill(mask[:n, :n], float('-inf')) before the softmax")})
        hidden = None
        for m in applied:
            fill = _fill_value(ops[m])
            if fill is not None and math.isfinite(fill) and ops[m]["op"] != "__add__":
                if fill > SAFE_FILL:
                    mistakes.setdefault(m, _finite_fill(fill))
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
                    mid, text = "mask-includes-diagonal", ("the mask also hides the diagonal: a token must see itself "
                                                       "(use torch.triu(..., diagonal=1))")
                elif np.array_equal(hidden, ~future) or np.array_equal(hidden, np.tril(np.ones((n, n), bool), -1)):
                    mid, text = "mask-keeps-future", "the mask is inverted: it hides the past and shows the future"
                elif np.array_equal(hidden, np.triu(np.ones((n, n), bool), 2)):
                    mid, text = "mask-one-token-late", ("the mask lets the next token through: use "
                                                         "torch.triu(..., diagonal=1)")
                elif not hidden.any():
                    mid, text = "mask-hides-nothing", "the mask hides nothing"
                else:
                    mid, text = "mask-wrong", "the mask does not hide exactly the future positions (s > t)"
                rows = "; ".join("".join("x" if v else "." for v in row) for row in hidden)
                mistakes.setdefault(applied[-1], {"id": mid, "text": f"{text} (hidden, row by row: {rows}; "
                                                                   "expected .xx; ..x; ...)"})
    if complete and (softmaxes or fused_sdpa) and not fused_mha and \
            not any(labels[i] == "output projection" for i in range(len(ops))):
        whole.append({"id": "heads-not-projected", "step": None, "text": (
            "no output projection after the heads are merged: the heads cannot exchange information; add "
            "self.out_proj = nn.Linear(d_out, d_out) and apply it last")})
    return whole


def _made_by_transpose(namer: _Namer, info: dict) -> bool:
    """Whether a tensor's memory order was changed by a transpose: walking back through the operations that only
    re-index memory (slices, splits, views), a transpose or permute is met before any operation that computes."""
    src = info.get("src")
    while src is not None and src < len(namer.ops):
        op = namer.ops[src]
        if op["op"] in TRANSPOSES:
            return True
        if op["op"] not in REINDEX or not op["in"]:
            return False
        src = op["in"][0].get("src")
    return False


CATALOGUED_FILLS = (-10.0, -100.0)  # the fills the finite-fill mutants are told with


def _finite_fill(fill: float) -> dict:
    """A finite fill value.  The catalogued mistakes are told with -10 and -100; another value says itself how
    large its leak is (`title`, `symptom`), so that a fill of 0 is never called "-10.0" or "small"."""
    detector = "fill-leaks-visibly" if fill > VISIBLE_FILL else "fill-leaks-invisibly"
    weight = math.exp(fill)
    size = ("about as much as a past token's: the future is barely hidden" if fill >= -1 else
            "a clearly visible leak" if fill >= -7 else "small, but the outputs differ from the reference"
            if fill > VISIBLE_FILL else "invisible in ordinary outputs, but the gradient shows it")
    mark = {"id": detector, "text": (
        f"the masked scores are filled with {fill:g}, a finite value: after the softmax the future keeps a weight "
        f"of about e^{fill:g} = {weight:.2g} against a score of 0 ({size}); fill with float('-inf')")}
    if fill not in CATALOGUED_FILLS:
        mark["title"] = f"Masked scores filled with {fill:g} instead of -inf"
        mark["symptom"] = (f"Future tokens keep a weight of about e^{fill:g} = {weight:.2g} relative to a score of 0: "
                           f"{size}; the future influences the past.")
    return mark


def _softmax_axis(dim: int, ndim: int) -> dict:
    """A softmax over another axis than the keys'.  Over the queries' axis it is the catalogued mistake as told; over
    another axis (the heads, the batch) the same mistake has other effects, so the mark says them itself (`title`,
    `symptom`), and the diagnosis shows those instead of the catalogue's queries-axis story."""
    axis = dim % ndim
    names = {ndim - 2: "the queries", **({0: "the batch", 1: "the heads"} if ndim == 4 else {0: "the batch and "
                                                                                               "the heads"})}
    over = names.get(axis, f"axis {axis}")
    mark = {"id": "softmax-not-last-axis", "text": (
        f"softmax over dim={dim} of a {ndim}-d score tensor: it normalises over {over}, not over the keys; use "
        "dim=-1 (the last axis)")}
    if axis != ndim - 2:
        mark["title"] = f"softmax over dim={dim} ({over.removeprefix('the ')}) instead of dim=-1 (keys)"
        mark["symptom"] = (f"Each weight is normalised across {over}, not across the keys, so a token's weights no "
                           "longer sum to 1; a future score is -inf there too, so its softmax is 0/0 = NaN, which "
                           "spreads to the outputs.")
    return mark


def _raised(namer: _Namer, op: dict) -> dict:
    message = op["raised"]
    if op["op"] in VIEWS and "view size is not compatible" in message:
        data = op["in"][0] if op["in"] else {}
        if not data or _made_by_transpose(namer, data):
            return {"id": "view-on-transposed", "text": (
                f"view() on a tensor that is not contiguous (after a transpose) raised {message.split(':')[0]}: "
                "call .contiguous() before .view(), or use .reshape()")}
        sizes = op["args"][1:]
        if len(sizes) == 1 and sizes[0].startswith(("(", "[")):  # view((B, H, n, dh))
            sizes = sizes[0].strip("()[]").split(",")
        target = tuple(_number(a) for a in sizes if _number(a) is not None)
        if namer.sym(data) == "B, n, d" and namer.pats.get(target) == "B, H, n, dh":
            return {"id": "split-order-on-slice", "text": (
                "view(B, H, n, dh) straight from (B, n, d) puts the tokens where the heads belong; it raised only "
                "because this tensor is a slice of a larger one (a fused projection), and .contiguous() would hide "
                "the error, not fix it: split with .view(B, n, H, dh).transpose(1, 2)")}
        return {"id": "view-on-slice", "text": (
            f"view() on a slice (not a transpose) raised {message.split(':')[0]}: a view of a slice works only when "
            "it keeps the axes in their order; check the order of the view's sizes")}
    if any(namer.sym(t) in ("L, L", "1, 1, L, L") for t in op["in"]) and any(
            namer.sym(t) in SCORES_LIKE for t in op["in"]):
        return {"id": "mask-size-not-n", "text": (
            "the (context_length, context_length) mask meets the (n, n) scores without being cut to the sequence: "
            f"use mask[:n, :n] ({message})")}
    if op["op"] in MATMULS and len(op["in"]) >= 2 and namer.sym(op["in"][0]) == "B, H, n, dh" and \
            namer.sym(op["in"][1]) == "B, n, H, dh":
        return {"id": "keys-transposed-wrong", "text": (
            "the scores multiply q (B, H, n, dh) by keys transposed on the wrong axes (B, n, H, dh): use "
            f"k.transpose(2, 3) (or transpose(-2, -1)) to get (B, H, dh, n) ({message})")}
    return {"id": "raised", "text": f"this operation raised {message}"}


ROLE_NAMES = {"q": "queries", "k": "keys", "v": "values"}


def _operands(namer: _Namer, ops: list[dict]) -> dict[str, dict] | None:
    """The tensors that enter the attention as queries, keys and values (the first scores product q @ kᵀ and the
    mixing weights @ v, or a fused attention's q, k, v); None when the forward does not show all three."""
    for op in ops:
        if op["op"] == "scaled_dot_product_attention" and len(op["in"]) >= 3:
            return dict(zip("qkv", op["in"][:3]))
    scores = next((op for op in ops if namer.labels[op["i"]] == "scores" and op["op"] in MATMULS
                   and len(op["in"]) >= 2), None)
    mix = next((op for op in ops if namer.labels[op["i"]] == "mix values" and op["op"] in MATMULS), None)
    values = [t for t in (mix or {"in": []})["in"][:2] if not namer.derives_from(t, ("softmax",))
              and namer.sym(t) not in SCORES_LIKE]
    if scores is None or len(values) != 1:
        return None
    return {"q": scores["in"][0], "k": scores["in"][1], "v": values[0]}


def _split_roles(namer: _Namer, ops: list[dict], mistakes: dict[int, dict]) -> None:
    """A split without transpose on some projections only is named by the projections split so (every such step
    gets the same detector): the mistake differs from splitting all three wrongly (other numbers, another fix).
    Left as it is when the roles cannot be told."""
    wrong = [i for i, m in mistakes.items() if m["id"] == "split-without-transpose"]
    operands = _operands(namer, ops) if wrong else None
    if not operands:
        return
    feeds = {i: "".join(r for r, t in operands.items() if t.get("src") is not None and
                        i in namer.ancestors(t["src"]) | {t["src"]}) for i in wrong}
    split_wrong = "".join(r for r in "qkv" if any(r in roles for roles in feeds.values()))
    if not all(feeds.values()) or split_wrong == "qkv":
        return
    names = lambda roles: " and ".join(ROLE_NAMES[r] for r in roles)
    detector = "-and-".join(ROLE_NAMES[r] for r in split_wrong) + "-split-without-transpose"
    right = "".join(r for r in "qkv" if r not in split_wrong)
    for i, roles in feeds.items():
        also = "".join(r for r in split_wrong if r not in roles)
        mistakes[i] = {"id": detector, "text": (
            f"the {names(roles)} are split with view/reshape to (B, H, n, dh) straight from (B, n, d)"
            + (f" (and so are the {names(also)})" if also else "") + f", while the {names(right)} are split the "
            f"lesson's way: the {names(split_wrong)}' 'positions' are cut across several tokens, mixing tokens and "
            f"features; split them too with view(B, n, H, dh) and then transpose(1, 2)")}


def analyse(ops: list[dict], cfg: dict, complete: bool = True) -> tuple[list[Step], list[dict], list[str]]:
    """Name the recorded operations and find the known mistakes: (steps, mistakes, notes).  `complete`: the
    forward ran to the end (otherwise what is missing after the failing step is not a finding)."""
    namer = _Namer(ops, cfg)
    labels = namer.run()
    mistakes = dict(namer.mistakes)
    _split_roles(namer, ops, mistakes)
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
    listed = [{**m, "step": i + 1} for i, m in sorted(mistakes.items())]
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
WORKED_CONFIG = Config(d_in=WORKED["d"], d_out=WORKED["d"], heads=WORKED["heads"],
                       context_length=WORKED["context_length"], batch=WORKED["batch"], n=WORKED["n"])


def detectors() -> dict[str, list[str]]:
    """detector id -> the mutants that declare it (`MutantInfo.trace`), from the catalogue."""
    out: dict[str, list[str]] = {}
    for mid, entry in mutants.catalogue().items():
        for detector in entry.get("trace", []):
            out.setdefault(detector, []).append(mid)
    return out


def name_mistakes(found: list[dict]) -> list[dict]:
    """Each marked mistake with the one known mistake (mutant) that declares its detector, when there is one."""
    by_detector = detectors()
    for m in found:
        declared = by_detector.get(m["id"], [])
        m["mutant"] = declared[0] if len(declared) == 1 else None
    return found


def record(ctx, display: str = "") -> TraceResult:
    """Trace one forward pass of the worked example through the module behind `ctx` (called the proven way).
    Failures of the student's code end up in `result.error`, never as an exception."""
    cfg = WORKED_CONFIG
    result = TraceResult(display or ctx.subject.spec, "", dict(WORKED))
    try:
        result.construction = ctx.construction(cfg)
        inst = ctx.build(cfg)
        x = np.random.default_rng([ctx.seed, 31337]).standard_normal((cfg.batch, cfg.n, cfg.d_in))
        reply = inst.trace(x)
    except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied) as e:
        result.error = f"{getattr(e, 'stage', 'adapter')}: {e.message}"
        return result
    result.truncated = reply.truncated
    if reply.raised:
        result.error = f"your forward raised {reply.raised}"
    if reply.output:
        result.output_shape = reply.output.get("shape")
    steps, found, notes = analyse(reply.ops, WORKED, complete=not reply.raised and not result.truncated)
    result.steps, result.mistakes = steps, name_mistakes(found)
    name_mistakes([s.mistake for s in steps if s.mistake])
    result.notes += notes
    result.lesson_order = lesson_order(steps)
    result.missing = [s for s in LESSON_STEPS if s not in result.lesson_order]
    if result.output_shape is not None and result.output_shape != [cfg.batch, cfg.n, cfg.d_out]:
        result.notes.append(f"the output has shape {tuple(result.output_shape)}, expected "
                            f"({cfg.batch}, {cfg.n}, {cfg.d_out})")
    return result


def count_parameters(ctx, d: int, heads: int, qkv_bias: bool, n: int) -> tuple[int | None, str]:
    """The module's own parameter count when built with width d and `heads` heads, and a note."""
    if d % heads:
        return None, ""
    note = ""
    if qkv_bias and "qkv_bias" not in ctx.signature.accepts and not ctx.signature.config_param:
        note = "your constructor has no Q/K/V bias parameter: counted as it builds"
    try:
        built = ctx.subject.build(Config(d_in=d, d_out=d, heads=heads, qkv_bias=qkv_bias,
                                         context_length=max(1, min(n, 2048)), batch=1, n=1))
        return built.info.param_count, note
    except (TargetFailure, CannotDrive) as e:
        return None, f"building it with d={d}, H={heads} raised {e.message}"
