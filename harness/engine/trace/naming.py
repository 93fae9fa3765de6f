"""Naming a recorded forward's operations by the lesson's steps (project, split, move heads forward, scores, scale,
mask, softmax, mix values, merge, output projection), from each operation's name, its tensors' shapes and where its
inputs came from.  The namer also keeps the facts the detectors read beside the names: which operations apply a
mask, which multiply the scores by a number, which are a fused attention.  It judges nothing: marking mistakes is
the detectors' job (`detectors`)."""
from __future__ import annotations

import math

from harness.engine.trace.vocabulary import (ADDS, CATS, DIVIDES, DROPOUTS, FUSED_MHA, LESSON_STEPS, MASK_BUILDERS,
                                             MASK_LIKE, MATMULS, PASS_THROUGH, SCALARS, SCORES_LIKE, SOFTMAXES, SPLITS,
                                             TRANSPOSES, VIEWS, is_weight, number, patterns)


class Namer:
    """The lesson's name of every recorded operation (`run`), and the shape words (`sym`) and data flow
    (`ancestors`, `derives_from`) that both the names and the detectors are read from."""

    def __init__(self, ops: list[dict], cfg: dict):
        self.ops = ops
        d, H, n, B, L = cfg["d"], cfg["heads"], cfg["n"], cfg["batch"], cfg["context_length"]
        self.dh = d // H
        self.d = d
        self.pats = {shape: name for name, shape in reversed(patterns(B, n, d, H, self.dh, L))}
        self.labels: list[str] = []
        self.scale_factors: list[tuple[int, float]] = []  # (operation, the number it multiplies the scores by)
        self.mask_ops: list[int] = []  # operations that apply a mask to the scores
        self.fused: list[int] = []  # fused attentions (scaled_dot_product_attention, nn.MultiheadAttention)

    def sym(self, info: dict | None) -> str | None:
        """A recorded tensor's shape in the lesson's letters ("B, n, d"), or None when the lesson has no name for it."""
        return None if info is None else self.pats.get(tuple(info["shape"]))

    def ancestors(self, index: int) -> set[int]:
        """Every operation whose output flows into operation `index`."""
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
        """The name of the step that made a tensor ("" for the input, a weight, or an unnamed step)."""
        src = info.get("src")
        return self.labels[src] if src is not None and src < len(self.labels) else ""

    def derives_from(self, info: dict, labels) -> bool:
        """Whether a tensor was made by, or from the output of, a step with one of these names."""
        src = info.get("src")
        if src is None:
            return False
        return any(self.labels[a] in labels for a in self.ancestors(src) | {src} if a < len(self.labels))

    def run(self) -> list[str]:
        """Name every operation in order (a name may depend on the names of the operations before it)."""
        for op in self.ops:
            self.labels.append(self.name(op))
        return self.labels

    def name(self, op: dict) -> str:  # noqa: C901 - one rule per shape transition, in the lesson's order
        name, ins, out = op["op"], op["in"], op.get("out")
        si = [self.sym(t) for t in ins]
        so = self.sym(out)
        data = ins[0] if ins else None
        params = [t for t in ins if is_weight(t)]
        i = op["i"]
        if name == "scaled_dot_product_attention":
            self.fused.append(i)
            return "attention (fused)"
        if name in FUSED_MHA:
            self.fused.append(i)
            return "attention (nn.MultiheadAttention)"
        # projections: a weight parameter meets the data
        if (name == "linear" or (name in MATMULS and any(len(p["shape"]) == 2 for p in params))) and data:
            source = next((t for t in ins if not is_weight(t)), data)
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
                return "split"  # without the transpose: detect_layout marks it
            if a == "B, n, 3d" and b == "B, n, 3, H, dh":
                return "split"
            if a == "B, n, H, dh" and b == "B, n, d":
                return "merge"
            if a == "B, H, n, dh" and b == "B, n, d":
                return "merge"  # without the transpose: detect_layout marks it
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
            value = number(args[1])
        elif len(ins) == 1 and "other" in op["kwargs"]:
            value = number(op["kwargs"]["other"])
        elif len(ins) == 2 and ins[1].get("value") is not None and len(ins[0]["shape"]) > 0:
            value = number(ins[1]["value"])
        if value is None or value == 0 or not math.isfinite(value):
            return None
        return 1.0 / value if op["op"] in DIVIDES else value

