"""The words the trace analysis reads a recorded forward with: the lesson's steps and worked example, torch's
operation names grouped by what they do, and the worked example's shapes in the lesson's letters.  Data and small
readers of recorded values, nothing else: the naming, the detectors and the steps all speak this vocabulary."""
from __future__ import annotations

import re

import numpy as np

LESSON_STEPS = ("project", "split", "move heads forward", "scores", "scale", "mask", "softmax", "mix values",
                "merge", "output projection")
WORKED = {"d": 8, "heads": 2, "n": 3, "batch": 2, "context_length": 16}  # lesson LM3-T5, "A worked example"
FUSED_ATTENTION = ("scores", "scale", "mask", "softmax", "mix values")

VIEWS = {"view", "reshape", "unflatten", "flatten", "view_as", "reshape_as", "_unsafe_view"}
TRANSPOSES = {"transpose", "permute", "swapaxes", "swapdims", "movedim", "mT", "T", "transpose_", "t"}
MATMULS = {"matmul", "__matmul__", "__rmatmul__", "bmm", "mm", "einsum", "baddbmm", "addmm", "tensordot"}
ADD_PRODUCTS = {"baddbmm", "addmm", "addbmm"}  # beta·input + alpha·(a @ b): one call that may add the mask to the
# scores (its input) and scale them (alpha) as it makes them
SCALARS = {"div", "mul", "__truediv__", "__mul__", "__rmul__", "true_divide", "div_", "mul_", "__itruediv__",
           "__imul__", "multiply", "divide", "__div__"}
DIVIDES = {"div", "__truediv__", "true_divide", "div_", "__itruediv__", "divide", "__div__"}
REINDEX = {"__getitem__", "split", "chunk", "narrow", "unbind", "tensor_split", "split_with_sizes", "select",
           "squeeze", "unsqueeze", "expand", "contiguous"} | VIEWS  # re-index memory, compute nothing
SOFTMAXES = {"softmax", "log_softmax", "_softmax", "special_softmax"}
DROPOUTS = {"dropout", "dropout_", "alpha_dropout", "feature_alpha_dropout", "native_dropout"}
ADDS = {"add", "__add__", "__radd__", "add_", "__iadd__"}
MULTIPLIES = {"mul", "__mul__", "__rmul__", "mul_", "__imul__", "multiply"}
CREATORS = {"ones", "zeros", "full", "empty", "arange", "tensor", "Tensor", "eye", "rand", "randn"}  # new tensors, on
# the default device unless told
PASS_THROUGH = {"contiguous", "clone", "to", "float", "double", "type", "type_as", "detach", "squeeze", "unsqueeze",
                "expand", "expand_as", "__getitem__", "bool", "data"}
SPLITS = {"split", "chunk", "unbind", "tensor_split"}
CATS = {"cat", "concat", "concatenate", "stack", "hstack"}
MASK_BUILDERS = {"triu", "tril", "ones", "ones_like", "zeros", "full", "arange", "logical_not", "__invert__", "eq",
                 "__eq__", "ne", "__ne__", "gt", "__gt__", "lt", "__lt__", "ge", "__ge__", "le", "__le__", "bool",
                 "__getitem__", "to", "triu_", "tril_", "masked_fill", "view", "reshape", "unsqueeze", "float"}
MADE_A_BUFFER = "register it where it is made: self.register_buffer(name, tensor)"  # a trace mark's words (rewrite)
HEADS_BEHIND = "in memory the heads are still in front"  # a trace mark's words: y.view(B, n, H, dh) of heads in front
LEADING_AXES = "cuts the first two axes of a 4-d mask (axes of size 1), not its last two:"  # a trace mark's words
# that the own-line fix reads (harness.engine.rewrite): cut the mask on its last two axes instead
FUSED_MHA = {"multi_head_attention_forward", "_native_multi_head_attention"}

SCORES_LIKE = {"B, H, n, n", "B·H, n, n", "B, n, n"}
MASK_LIKE = {"n, n", "L, L", "1, 1, n, n", "1, 1, L, L"}


def patterns(B: int, n: int, d: int, H: int, dh: int, L: int) -> list[tuple[str, tuple]]:
    """The shapes the lesson names, in its letters, for one configuration (earlier names win a tie)."""
    return [("B, n, d", (B, n, d)), ("B, n, H, dh", (B, n, H, dh)), ("B, H, n, dh", (B, H, n, dh)),
            ("B, H, dh, n", (B, H, dh, n)), ("B, H, n, n", (B, H, n, n)), ("B, n, 3d", (B, n, 3 * d)),
            ("B, n, 3, H, dh", (B, n, 3, H, dh)), ("3, B, H, n, dh", (3, B, H, n, dh)),
            ("B·H, n, dh", (B * H, n, dh)), ("B·H, dh, n", (B * H, dh, n)), ("B·H, n, n", (B * H, n, n)),
            ("B, n, dh", (B, n, dh)), ("B, dh, n", (B, dh, n)), ("B, n, n", (B, n, n)), ("n, n", (n, n)),
            ("L, L", (L, L)), ("1, 1, n, n", (1, 1, n, n)), ("1, 1, L, L", (1, 1, L, L)),
            ("B, n, dh, H", (B, n, dh, H)),  # heads on strided features: view(B, n, dh, H) (detect_layout)
            ("d, d", (d, d)),
            ("3d, d", (3 * d, d)), ("d", (d,)), ("3d", (3 * d,)), ("n", (n,)), ("", ())]


NUMPY_SCALAR = re.compile(r"^np\.(?:float|int|uint)\d*\((.*)\)$")  # numpy 2 writes its scalars as np.float64(2.0)


def number(text) -> float | None:
    """A recorded argument as a number (the recorder writes arguments as text), or None.  A numpy scalar counts:
    `scores / np.sqrt(dk)` (Hugging Face's CTRL) is recorded as div(np.float64(2.0)), and was not seen as a scale."""
    if text is None:
        return None
    text = str(text)
    wrapped = NUMPY_SCALAR.match(text)
    try:
        return float(wrapped.group(1) if wrapped else text)
    except ValueError:
        return None


SDPA_PARAMETERS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")


def sdpa_argument(op: dict, name: str, default: str | None = None) -> str | None:
    """The recorded argument `name` of a scaled_dot_product_attention call, given by keyword or by position (a
    DTensor test calls it `(q, k, v, None, p, self.use_attn_mask)`: its is_causal, the sixth positional, was not
    read, and a causal layer was marked as called without a mask)."""
    if name in op.get("kwargs", {}):
        return op["kwargs"][name]
    k = SDPA_PARAMETERS.index(name)
    args = op.get("args", [])
    return args[k] if op.get("op") == "scaled_dot_product_attention" and len(args) > k else default


PROJECTION_UNAPPLIED = "apply "  # a heads-not-projected mark's words before the output projection made and never
# applied (`self.c_proj`), then " to the merged heads" (harness.engine.rewrite reads it there)
KEYS_WITH = "project the keys with "  # a keys-from-query-weights mark's last words, then the key projection's own
# name (harness.engine.rewrite reads it there)


WEIGHT_ORIGINS = ("parameter", "unregistered")  # the kinds of a module tensor's origin (`made`) that are a layer's
# weights, registered or in a plain list: no mask, whatever its values


def is_weight(t: dict) -> bool:
    """A recorded tensor that is one of the module's parameters or buffers (the input is recorded as "x")."""
    return bool(t.get("name")) and t["name"] != "x"


def square_pattern(pattern, n: int):
    """An (n, n) boolean array from a recorded pattern (leading axes of size 1 dropped), or None."""
    if pattern is None:
        return None
    a = np.asarray(pattern, dtype=bool)
    while a.ndim > 2:
        a = a[0]
    return a if a.shape == (n, n) else None

ONES_ON_FUTURE = "; its 1s mark the future"  # said by the mask-added mark (detect_mask), read by the own-line fix
ONES_ON_ALLOWED = "; its 1s mark what each token may see"  # (harness.engine.rewrite, "added"): where to fill
