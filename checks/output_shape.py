"""output-shape: forward(x) returns a finite tensor of shape (B, n, d_out).

An exception or a wrong shape means no other forward-based check can measure anything: they are skipped.  NaN or
inf values are a failure too, but the dependents still run (the leakage map of a NaN row still says something).
"""
import re

import numpy as np

from checks import cannot_tell, check, failed, passed
from checks.contiguity import contiguity
from harness.wire import raised
from harness.wire.errors import TargetFailure


@check(
    id="output-shape",
    claim="forward(x) returns a finite tensor of shape (B, n, d_out) for inputs of shape (B, n, d_in)",
    explanation="""Attention maps each of the n tokens of each of the B sequences to a vector of width d_out. A
    different shape, NaN or inf values, or an exception mean the layer cannot be used in a model.""",
    fix="""Return `self.out_proj(context)` where context has shape (B, n, d_out); NaN usually means a row of scores
    was entirely masked (a mask that also hides the diagonal).""",
    needs=(contiguity,),
    example="""x: (B, n, d_in) = (2, 3, 8), d_out = 8, H = 2 -> y must be (2, 3, 8) with every value finite
    with d_in = 6, d_out = 8: x (2, 3, 6) -> y (2, 3, 8)
    fail: y (2, 2, 3, 4) (heads never merged), or an exception, e.g. masked_fill with an unsliced (16, 16) mask
      on (2, 2, 3, 3) scores: 'The size of tensor a (16) must match the size of tensor b (3) ...'
    fail: y (2, 3, 8) with 16 NaN values at token 0: a mask that also hides the diagonal makes
      row 0 = softmax([-inf, -inf, -inf]) = [nan, nan, nan]""",
)
def output_shape(ctx):
    proof = ctx.mapping
    if proof.style is None:
        return cannot_tell(f"mha-check could not tell how to call your forward: {proof.problem}",
                           help="check a factory that returns a module whose forward(x) applies the causal mask "
                                "itself")

    def holds(cfg):
        inst = ctx.build(cfg)
        try:
            y = inst.forward(ctx.input(cfg))
        except TargetFailure as e:  # a constructor that refuses the configuration included: judged here too
            if e.message.startswith("forward returned"):
                return failed(e.message, finding=_raised_finding(e.message, cfg))
            return _raised(e.message, cfg, inst)
        want = (cfg.batch, cfg.n, cfg.d_out)
        if y.shape != want:
            finding = _shape_finding(y.shape, cfg)
            if finding == D_IN_WIDE and _holds_width(inst, cfg.d_out):
                finding = PROJECTED_TO_D_IN
            tokens = {"usable_for": measurable(y.shape, cfg)} if measurable(y.shape, cfg) else {}
            return failed(f"output has shape {y.shape}{_letters(y.shape, cfg)}, expected {want}",
                          observed=str(y.shape),
                          expected=str(want), finding=finding, fix=MERGE_FIX if finding == "heads never merged" else
                          BACK_TO_D_IN_FIX if finding == PROJECTED_TO_D_IN else SHAPE_FIX, **tokens)
        if not np.all(np.isfinite(y)):
            bad = np.argwhere(~np.isfinite(y))
            positions = sorted({int(t) for t in bad[:, 1]})
            return failed(f"output has {len(bad)} NaN/inf values, at token positions {positions}",
                          observed="non-finite values", expected="finite values", usable=True,
                          finding="non-finite at the " + ("first token" if positions == [0] else
                                                          "last token" if positions == [cfg.n - 1] else "tokens"))
        return None

    return ctx.find_failure(holds) or passed("shape (B, n, d_out) and finite values for every configuration tried")


WEIGHT_FREE = ("batch-independence", "eval-determinism", "input-untouched", "mask-buffer")  # any output shape


def measurable(shape, cfg) -> list[str]:
    """The checks that still decide on an output of the wrong shape (issue 28: a wrong shape must not hide the
    evidence of the checks that need no reading of the weights): with the batch first, batch independence, eval
    determinism, the input left untouched and the mask's device; with an axis of the tokens too, causal leakage
    (by gradient along that axis)."""
    if len(tuple(shape)) < 1 or shape[0] != cfg.batch:
        return []
    return list(WEIGHT_FREE) + (["causal-leakage"] if tokens_axes(shape, cfg) else [])


def tokens_axes(shape, cfg) -> list[int]:
    """The axes after the batch's that may be the tokens' in an output of the wrong shape: the batch first, and an
    axis as long as the sequence (two or more on a configuration where another size equals n: causal-leakage then
    judges no leak there)."""
    shape = tuple(shape)
    if len(shape) < 2 or shape[0] != cfg.batch:
        return []
    return [axis for axis in range(1, len(shape)) if shape[axis] == cfg.n]


def _raised(message: str, cfg, inst):
    """forward raised: the exception, its line and, for a misspelt name, the name meant (among the module's own
    attribute names, as the child listed them when it was built) and a fix about names, not shapes."""
    read = raised.parse(message)
    info = inst.answered_info if inst is not None else None
    if read is not None and info is not None:
        read = raised.with_meant(read, raised.attribute_names(
            [p.name for p in info.params + info.buffers] + info.state_dict + info.plain_tensors + info.containers))
    details = {"raised": read.to_dict()} if read is not None else {}
    meant = f"; did you mean '{read.meant}'?" if read is not None and read.meant else ""
    finding = _raised_finding(message, cfg)
    return failed(f"forward raised {message}{meant}", finding=finding, fix=_raised_fix(read, finding, message),
                  **details)


def _raised_fix(read: raised.Raised | None, finding: str, message: str) -> str:
    """What to change for a forward that raised: the name's spelling, the key/value heads' repeat, the precision, or
    (anything else) the shapes from the line that raised."""
    if read is not None and read.name:
        return name_fix(read)
    if finding == EXPANDED:
        return EXPAND_FIX
    return DTYPE_FIX if DTYPE_MISMATCH.search(message) else RAISED_FIX


def name_fix(read: raised.Raised) -> str:
    """The fix for a misspelt or undefined name: the spelling, not the shapes.  When the error says the name was
    asked of a value (`'Tensor' object has no attribute 'dim_head'`), the name may well be defined, on the module:
    the fix then says what it was asked of rather than to define it."""
    at = f" ({read.at})" if read.at else ""
    owner = VALUE_OWNER.search(read.text) if read.kind == "AttributeError" and not read.meant else None
    if owner is not None and owner["type"] in VALUE_TYPES:
        return (f"At the line the error names{at}, `{read.name}` is asked of a {VALUE_TYPES[owner['type']]}, which "
                f"has no such attribute: use one it has there, or, if `{read.name}` is your module's own (set in "
                f"`__init__`), reach it through `self.{read.name}`.")
    meant = f"`{read.meant}`, not `{read.name}`" if read.meant else f"a name your code defines, not `{read.name}`"
    return (f"Use {meant}, at the line the error names{at}: a name must be spelt "
            "exactly as where it is defined (an attribute as `__init__` sets it, `self.W_query = nn.Linear(...)`, "
            "is used as `self.W_query(x)`).")


VALUE_OWNER = re.compile(r"^'(?P<type>\w+)' object has no attribute")
VALUE_TYPES = {"Tensor": "tensor", "Size": "torch.Size", "int": "number (int)", "float": "number (float)",
               "tuple": "tuple", "list": "list", "NoneType": "None", "str": "string", "dict": "dict"}


RAISED_FIX = """Start at the line the error names and follow the shapes back from it: `mha-check trace FILE:Class`
    shows every tensor's shape in the lesson's letters (B, n, H, dh) and marks the step that raised."""
DTYPE_MISMATCH = re.compile(r"expected scalar type \w+ but found \w+|must have the same dtype|to have the same "
                            r"dtype|found dtype \w+ but expected \w+|Input type \(\w+\) and (weight|bias) type")
# torch's words when tensors of two precisions meet (matmul, linear, index_put, conv)
DTYPE_FIX = """mha-check builds your module and its input in float64 (and once in float32, as in training), and a tensor
    of another precision met them at the line the error names: one your forward casts (`.float()`, `.half()`) or
    makes in a fixed precision.  Keep the input's precision: make tensors with `dtype=x.dtype` (or `.to(x.dtype)`),
    and cast back after a step computed in float32 (`torch.softmax(s.float(), dim=-1).to(v.dtype)`): the layer then
    runs in any precision, as a model trained in half precision needs."""
EXPAND_FIX = """Repeat the key/value heads for their query heads: `k.repeat_interleave(H // KV, dim=1)` on
    (B, KV, n, dh) (Llama's repeat_kv is the same); `.expand` only stretches an axis of size 1, so it shares a
    single key/value head (multi-query) and raises for 2 or more."""
SHAPE_FIX = """Return `self.out_proj(context)` where context has shape (B, n, d_out): d_out wide, whatever d_in is,
    and the heads merged back into it."""
BACK_TO_D_IN_FIX = """Your layer works in d_out but returns d_in features: its last step maps back to the input's
    width. The lesson's output projection maps d_out to d_out (nn.Linear(d_out, d_out)); look at the output
    projection's sizes, or at whatever your forward returns last."""
MERGE_FIX = """Merge the heads back before the output projection: `(w @ v).transpose(1, 2).contiguous().view(B, n,
    d_out)`, then return `self.out_proj(...)` of it."""


def _normalised(message: str) -> str:
    """The error text without numbers and without where it happened: stable across configurations."""
    return re.sub(r"\d+", "#", re.sub(r"\(at .*", "", message))[:160].strip()


SIZES = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)")
EXPAND = re.compile(r"expanded size of the tensor \((\d+)\) must match the existing size \((\d+)\) at "
                    r"non-singleton dimension")
EXPANDED = "key/value heads expanded"  # .expand of several key/value heads to the query heads (the multi-query idiom)
VIEW = re.compile(r"shape '\[([\d, -]+)\]' is invalid for input of size (\d+)")
UNFLATTEN = re.compile(r"unflatten: Provided sizes \[([\d, -]+)\] don't multiply up to the size of dim -?\d+ \((\d+)\)")


def _raised_finding(message: str, cfg) -> str:
    """What an exception says about the mistake, when its numbers tell: a mask of the wrong size, a merge view to
    the input width; otherwise the error text without its numbers."""
    sizes = SIZES.search(message)
    at_mask = "mask" in message.partition("(at ")[2].lower()  # the student's line that raised works on a mask
    if sizes and at_mask:
        a, b = sorted(int(v) for v in sizes.groups())
        if {a, b} == {cfg.context_length, cfg.n} and cfg.context_length != cfg.n:
            return "mask not cut to n"
        if b == cfg.n and a < cfg.n and a != cfg.context_length and a not in (cfg.heads, cfg.head_width):
            return "mask smaller than the context length"  # a size of heads or head width: scores shaped wrong
    expand = EXPAND.search(message)
    if expand and cfg.kv_heads and (int(expand.group(1)), int(expand.group(2))) == (cfg.heads, cfg.kv_heads):
        return EXPANDED  # the heads, stretched from the key/value heads: only an axis of size 1 stretches
    view = VIEW.search(message)
    if view:
        dims, size = [int(v) for v in view.group(1).split(",")], int(view.group(2))
        if len(dims) == 3 and dims[2] == cfg.d_in != cfg.d_out and size == dims[0] * dims[1] * cfg.d_out:
            return "merge view to d_in"
        if len(dims) == 4 and cfg.heads in dims[1:3] and dims[3] == cfg.d_in // cfg.heads != cfg.head_width:
            return "head width from d_in"
    unflatten = UNFLATTEN.search(message)  # `unflatten(-1, (H, dh))` (a student's trial): its sizes are (H, dh)
    if unflatten:
        dims, size = [int(v) for v in unflatten.group(1).split(",")], int(unflatten.group(2))
        if dims == [cfg.heads, cfg.d_in // cfg.heads] and cfg.d_in // cfg.heads != cfg.head_width and \
                size == cfg.d_out:
            return "head width from d_in"
    return "raised: " + _normalised(message)


def _letters(shape, cfg) -> str:
    """What a wrong output shape is, in the lesson's letters, when it is one of the per-head shapes: (B, H, n, dh)
    is the attention's output before the heads were merged back (a forward returning `w @ v`)."""
    for letters, dims in (("(B, H, n, dh)", (cfg.batch, cfg.heads, cfg.n, cfg.head_width)),
                          ("(B, n, H, dh)", (cfg.batch, cfg.n, cfg.heads, cfg.head_width))):
        if tuple(shape) == dims:
            return f" = {letters} (the heads not merged back into one vector per token)"
    return ""


D_IN_WIDE = "output width d_in"
PROJECTED_TO_D_IN = "output width d_in, though d_out is used"  # a layer that uses d_out (its projections, say) and
# still returns d_in features, an output projection nn.Linear(d_out, d_in): not d-out-ignored's pattern, whose every
# projection is d_in wide (student trial 21 was told its constructor ignored d_out, which it did not)


def _holds_width(inst, width: int) -> bool:
    """Whether the module built holds a parameter with an axis of `width` (d_out, where it differs from d_in)."""
    info = inst.answered_info
    return info is not None and any(width in tuple(p.shape) for p in info.params)


def _shape_finding(shape, cfg) -> str:
    if len(shape) == 3 and shape[:2] == (cfg.batch, cfg.n) and shape[2] == cfg.heads * cfg.d_out:
        return "output width heads x d_out"
    if len(shape) == 3 and shape[:2] == (cfg.batch, cfg.n) and shape[2] == cfg.d_in != cfg.d_out:
        return D_IN_WIDE
    if len(shape) == 4:
        return "heads never merged"
    return "wrong shape"
