"""Naming a recorded forward's operations by the lesson's steps (project, split, move heads forward, scores, scale,
mask, softmax, mix values, merge, output projection), from each operation's name, its tensors' shapes and where its
inputs came from.  The namer also keeps the facts the detectors read beside the names: which operations apply a
mask, which multiply the scores by a number, which are a fused attention.  It judges nothing: marking mistakes is
the detectors' job (`detectors`)."""
from __future__ import annotations

import math

from harness.engine.trace.vocabulary import (ADD_PRODUCTS, ADDS, CATS, DIVIDES, DROPOUTS, FUSED_MHA, LESSON_STEPS,
                                             MASK_BUILDERS, MASK_LIKE, MATMULS, MULTIPLIES, PASS_THROUGH, SCALARS,
                                             SCORES_LIKE, SOFTMAXES, SPLITS, TRANSPOSES, VIEWS, is_weight, number,
                                             patterns)


RESHAPE_KINDS = {"view": VIEWS, "transpose": TRANSPOSES, "split": SPLITS, "slice": {"__getitem__"}}
RESHAPES = {  # the step a reshape from one of the lesson's shapes to another belongs to (a split: by its input)
    "view": {("B, n, d", "B, n, H, dh"): "split",
             ("B, n, d", "B, H, n, dh"): "split",  # without the transpose: detect_layout marks it
             ("B, n, d", "B·H, n, dh"): "split",  # without the transpose, heads folded into the batch: marked too
             ("B, n, 3d", "B, n, 3, H, dh"): "split",
             ("B, n, H, dh", "B, n, d"): "merge",
             ("B, H, n, dh", "B, n, d"): "merge",  # without the transpose: detect_layout marks it
             ("B, H, n, dh", "B·H, n, dh"): "move heads forward",
             ("B·H, n, dh", "B, H, n, dh"): "merge",
             ("B·H, n, dh", "B, n, d"): "merge",  # without the transpose: detect_layout marks it
             ("B, n, d", "B, n, dh, H"): "split",  # heads on strided features: detect_layout marks them where
             ("B, n, dh, H", "B, n, d"): "merge"},  # the rest of the layer does not undo them
    "transpose": {("B, n, H, dh", "B, H, n, dh"): "move heads forward",
                  ("B, n, 3, H, dh", "3, B, H, n, dh"): "move heads forward",
                  ("B, H, n, dh", "B, H, dh, n"): "scores",
                  ("B·H, n, dh", "B·H, dh, n"): "scores",
                  ("B, n, dh", "B, dh, n"): "scores",
                  ("B, H, n, dh", "B, n, H, dh"): "merge",
                  ("B, n, dh, H", "B, H, n, dh"): "move heads forward",
                  ("B, H, n, dh", "B, n, dh, H"): "merge"},
    "split": {"B, n, 3d": "project", "3, B, H, n, dh": "move heads forward", "B, n, 3, H, dh": "split"},
    "slice": {("B, n, d", "B, n, dh"): "split",
              ("3, B, H, n, dh", "B, H, n, dh"): "move heads forward",
              ("B, n, 3d", "B, n, d"): "project"},
}


WEIGHT_RESHAPES = {"unsqueeze", "expand", "expand_as", "view", "reshape", "contiguous", "transpose", "t", "permute",
                   "__getitem__"}  # a weight with a batch axis put in front, or turned: still the weight


class Namer:
    """The lesson's name of every recorded operation (`run`), and the shape words (`sym`) and data flow
    (`ancestors`, `derives_from`) that both the names and the detectors are read from."""

    def __init__(self, ops: list[dict], cfg: dict):
        self.ops = ops
        d, H, n, B, L = cfg["d"], cfg["heads"], cfg["n"], cfg["batch"], cfg["context_length"]
        self.dh = d // H
        self.d = d
        self.params = set(cfg.get("params") or ())  # the module's parameter names (a learned temperature is one)
        self.pats = {shape: name for name, shape in reversed(patterns(B, n, d, H, self.dh, L))}
        self.labels: list[str] = []
        self.scale_factors: list[tuple[int, float]] = []  # (operation, the number it multiplies the scores by)
        self.weights_factors: list[tuple[int, float]] = []  # (operation, the number it multiplies the attention
        # weights by: a scale applied after the softmax, before the weights mix the values)
        self.unread_scales: list[int] = []  # operations scaling the scores by a tensor of the layer's own (a learned
        # temperature, one a head): a scale whose value the trace does not judge (the numbers do)
        self.heads = H
        self.mask_ops: list[int] = []  # operations that apply a mask to the scores
        self.fused: list[int] = []  # fused attentions (scaled_dot_product_attention, nn.MultiheadAttention)
        self.also: dict[int, tuple[str, ...]] = {}  # operation -> the steps it takes besides its name's (baddbmm
        # making the scores also scales and masks them)

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

    def weight_like(self, info: dict) -> bool:
        """A parameter or buffer, or a matrix computed from them and from constants only, never from the input:
        `self.W_o.T`, or a weight drawn in forward (`nn.Parameter(torch.randn(d, d))`, marked by detect_params).
        Multiplied with the data, it projects it (`ctx @ self.W_o.T` is the output projection, not a mixing of
        values)."""
        if is_weight(info) or self._stretched_weight(info):
            return True
        src = info.get("src")
        if src is None or len(info.get("shape") or ()) != 2:
            return False
        return not any(t.get("name") == "x" or t.get("src") is None and not t.get("name")
                       for a in self.ancestors(src) | {src} for t in self.ops[a]["in"])

    def _stretched_weight(self, info: dict) -> bool:
        """A parameter (not a buffer) given a batch axis for torch.bmm, by shape operations alone:
        `self.W_q.unsqueeze(0).expand(B, -1, -1)` is W_q, and bmm with it projects (a student's trial, every product
        a bmm: the projections went unnamed, so trace marked the scale and the output projection missing, while the
        report found both).  A mask buffer expanded for baddbmm is no weight."""
        seen = 0
        while info.get("src") is not None and seen < 8:
            op = self.ops[info["src"]]
            if op["op"] not in WEIGHT_RESHAPES or not op["in"]:
                return False
            info, seen = op["in"][0], seen + 1
        return seen > 0 and is_weight(info) and len(info.get("shape") or ()) == 2 and \
            (info.get("made") or {}).get("kind") == "parameter"  # (a mask buffer expanded for baddbmm is no weight)

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

    def name(self, op: dict) -> str:
        """The lesson's step an operation belongs to ("" when none): the first rule that knows, in this order."""
        for rule in (self._fused, self._projection, self._weighting, self._masking, self._product, self._scaling,
                     self._reshaping, self._mask_building, self._carried):
            label = rule(op)
            if label is not None:
                return label
        return ""

    def _fused(self, op: dict) -> str | None:
        if op["op"] == "scaled_dot_product_attention":
            self.fused.append(op["i"])
            return "attention (fused)"
        if op["op"] in FUSED_MHA:
            self.fused.append(op["i"])
            return "attention (nn.MultiheadAttention)"
        return None

    def _projection(self, op: dict) -> str | None:
        """A weight parameter meets the data: a projection, the output's once the data went through the attention.
        The weight may be a matrix or hold one per head (`einsum("btd,hde->bhte", x, W_q)` with W_q of shape
        (H, d, dh), or (3, H, d, dh) for q, k and v at once)."""
        name, ins = op["op"], op["in"]
        data = ins[0] if ins else None
        params = [t for t in ins if self.weight_like(t)]
        if (name == "linear" or (name in MATMULS and any(len(p["shape"]) >= 2 for p in params))) and data:
            source = next((t for t in ins if not self.weight_like(t)), data)
            if self.derives_from(source, ("mix values", "attention (fused)", "merge")):
                return "output projection"
            return "project"
        return None

    def _weighting(self, op: dict) -> str | None:
        if op["op"] in SOFTMAXES:
            return "softmax"
        if op["op"] in DROPOUTS:
            return "dropout"
        return None

    def _masking(self, op: dict) -> str | None:
        """An operation that applies a mask to the scores (masked_fill, an assignment, where, adding -inf (also to
        some heads' scores only), adding a mask of finite values made from a mask (`torch.where(mask, -1e9, 0)`), or
        multiplying by an (n, n) mask of 0s and 1s, as `wei * tril` after the softmax)."""
        name, ins = op["op"], op["in"]
        data = ins[0] if ins else None
        if (name in ("masked_fill", "masked_fill_") and data and self.sym(data) not in MASK_LIKE) or \
                (name == "__setitem__" and data and (self.sym(data) in SCORES_LIKE or
                                                     self.derives_from(data, ("scores",)))) or \
                (name == "where" and len(ins) >= 2 and any(self.sym(t) in SCORES_LIKE for t in ins[1:])) or \
                (name in ADDS and len(ins) >= 2 and any(t.get("neginf") for t in ins) and
                 any(self.sym(t) in SCORES_LIKE or self.derives_from(t, ("scores",)) for t in ins)) or \
                (name in ADDS and len(ins) >= 2 and any(self.sym(t) in SCORES_LIKE for t in ins) and
                 any(self.sym(t) in MASK_LIKE and (is_weight(t) or self.derives_from(t, ("mask",))) for t in ins)) or \
                (name in MULTIPLIES and len(ins) >= 2 and any(self.sym(t) in SCORES_LIKE for t in ins[:2]) and
                 any(self.sym(t) in MASK_LIKE for t in ins[:2])):  # weights * tril: a mask of 0s and 1s
            self.mask_ops.append(op["i"])
            return "mask"
        return None

    def _product(self, op: dict) -> str | None:
        """A product of two data tensors: the scores (q @ kᵀ), or the weights mixing the values."""
        ins, so = self.product_operands(op), self.sym(op.get("out"))
        if op["op"] not in MATMULS or len(ins) < 2:
            return None
        if any(self.sym(t) in SCORES_LIKE or self.derives_from(t, ("softmax",)) for t in ins[:2]) and \
                so not in SCORES_LIKE:
            return "mix values"
        if so not in SCORES_LIKE:
            return None
        if op["op"] in ADD_PRODUCTS:
            self._added_and_scaled(op)
        return "scores"

    @staticmethod
    def product_operands(op: dict) -> list[dict]:
        """The two tensors a product multiplies: baddbmm(input, q, kᵀ) multiplies its second and third (its first,
        the input, is added to the product)."""
        return op["in"][1:] if op["op"] in ADD_PRODUCTS else op["in"]

    def _added_and_scaled(self, op: dict) -> None:
        """Scores made by baddbmm(mask, q, kᵀ, alpha=1/sqrt(dh)): alpha scales them, and an input holding -inf or
        made from a mask masks them, in the product itself (a notebook's layer was told no-scaling and no-mask)."""
        kwargs = op["kwargs"]
        alpha = number(kwargs.get("alpha", "1"))
        also = ()
        if alpha is not None and alpha != 0 and math.isfinite(alpha):
            self.scale_factors.append((op["i"], alpha))
            also += ("scale",) if alpha != 1 else ()
        added = op["in"][0] if op["in"] and op["args"][:1] == ["<T0>"] else None
        if added is not None and number(kwargs.get("beta", "1")) != 0 and \
                (added.get("neginf") or self.derives_from(added, ("mask",))):
            self.mask_ops.append(op["i"])
            also += ("mask",)
        self.also[op["i"]] = also

    def _scaling(self, op: dict) -> str | None:
        """Projected data multiplied (or divided) by a number before any softmax."""
        data = op["in"][0] if op["in"] else None
        if op["op"] not in SCALARS or data is None:
            return None
        factor = self._scalar_factor(op)
        other = op["in"][1] if len(op["in"]) == 2 else None
        if factor is not None and other is not None and other.get("name") in self.params:
            factor = None  # a one-number parameter (`scores / self.temperature`): learned, its value not judged here
        if factor is not None and not self.derives_from(data, ("softmax",)) and self.derives_from(data, ("project",)):
            self.scale_factors.append((op["i"], factor))
            return "scale"
        if factor is not None and self.derives_from(data, ("softmax",)) and \
                not self.derives_from(data, ("mix values", "attention (fused)")):
            self.weights_factors.append((op["i"], factor))  # `softmax(scores) * scale`: named after its data
            return None
        if factor is None and other is not None and other.get("name") != "x" and \
                self._learned_scale_shape(other.get("shape") or [1]) and \
                not self.derives_from(other, ("project",)) and not self.derives_from(other, ("mask",)) \
                and not self.derives_from(data, ("softmax",)) and self.derives_from(data, ("project",)):
            self.unread_scales.append(op["i"])  # `scores * self.log_tau.exp()`, log_tau of shape (H, 1, 1)
            return "scale"
        return None

    def _learned_scale_shape(self, shape: list[int]) -> bool:
        """A tensor of the layer's own that can scale the queries or the scores: one number per head (a learned
        temperature, (H, 1, 1)) or one per dimension of the heads or of the width (TimesFM's per-dimension scale,
        `q * 1.44 / sqrt(dh) * softplus(per_dim_scale)`, shape (dh,): a trace marked it "never scaled" where the
        report named nothing).  Rotary tables hold a token axis and half widths, so they are not taken for one."""
        if math.prod(shape) <= self.heads:
            return True
        sizes = [s for s in shape if s != 1]
        return len(sizes) == 1 and shape[-1] in (self.dh, self.d)

    def _reshaping(self, op: dict) -> str | None:
        """A view, transpose, split or slice from one of the lesson's shapes to another (RESHAPES)."""
        name, ins = op["op"], op["in"]
        if not ins:
            return None
        kind = next((k for k, names in RESHAPE_KINDS.items() if name in names), None)
        if kind is None:
            return None
        before, after = self.sym(ins[0]), self.sym(op.get("out"))
        return RESHAPES[kind].get(before if kind == "split" else (before, after))

    def _mask_building(self, op: dict) -> str | None:
        """Merging the heads by concatenation, or building and slicing the mask (everything (n, n) / (L, L))."""
        name, ins, so = op["op"], op["in"], self.sym(op.get("out"))
        if name in CATS and so == "B, n, d" and ins and all(self.derives_from(t, ("mix values",)) for t in ins):
            return "merge"
        if name in MASK_BUILDERS and (so in MASK_LIKE or so == "n") and \
                all(s in MASK_LIKE or s in ("n", "") for s in (self.sym(t) for t in ins)):
            return "mask"
        if name in MASK_BUILDERS and so in MASK_LIKE and not ins:
            return "mask"
        return None

    def _carried(self, op: dict) -> str | None:
        """An operation that raised, or one that only carries its data on (a copy, a view, a cast, adding a bias),
        is named after the step that made its data."""
        name, ins, so = op["op"], op["in"], self.sym(op.get("out"))
        data = ins[0] if ins else None
        if data is None or self.label_of(data) not in LESSON_STEPS:
            return None
        if op.get("raised"):
            return self.label_of(data)  # it raised, so no output shape: named after what it worked on
        if (name in PASS_THROUGH or name in VIEWS or name in ADDS) and so is not None:
            if name in ADDS and not any(t.get("name") for t in ins[1:]) and len(ins) > 1:
                return ""
            return self.label_of(data)
        return None

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

