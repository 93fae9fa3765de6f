"""The student's own line, corrected, for the mistakes whose fix is local to one call.

The catalogue's fix is the mutant's line (`split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)`); a
student who wrote `queries = queries.view(b, self.num_heads, num_tokens, self.head_dim)` should read their own line
with the change made.  Only the line the trace pointed to is rewritten, from its syntax tree, and only when the
rewrite is unambiguous (exactly one call of the right shape on the line); otherwise None, and the report keeps the
catalogue's fix.  Nothing here runs the student's code: the line is parsed, never executed.
"""
from __future__ import annotations

import ast
import re
import threading

from harness.engine.trace.vocabulary import (HEADS_BEHIND, KEYS_WITH, LEADING_AXES, ONES_ON_ALLOWED, ONES_ON_FUTURE,
                                             PROJECTION_UNAPPLIED)

_AST_LOCK = threading.Lock()


def parse(source: str) -> ast.Module:
    """`ast.parse`, one thread at a time.  CPython 3.11 keeps the AST constructor's recursion count per interpreter,
    not per thread: two parses at once (diagnoses in threads beside the test suite's own parsing) can fail with
    "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905).  Every parse on the trusted
    side goes through here.  Text too deeply nested for the parser (`-` 6,100 times, `a[0]` 3,000 times: CPython's
    MemoryError and RecursionError) is no Python we can read, a SyntaxError like any other: the lines parsed here
    are the child's, and a patched worker's line of 6,101 characters crashed the parent before any report was
    written (red team 15)."""
    with _AST_LOCK:
        try:
            return ast.parse(source)
        except (MemoryError, RecursionError):
            raise SyntaxError("too deeply nested for Python's parser") from None


# INFO.rewrite kinds, with the note a line needs when the same mistake is also on other lines
KINDS = {"split": "", "split-all": " # and the other two projections alike",
         "split-pair": " # likewise the other projection split this way",
         "merge": "", "mask": "", "softmax": "", "fill": "", "scale": "", "dropout": "", "slice": "",
         "contiguous": "", "invert": "", "keys": "", "additive": "", "multiply": "", "diagonal": "",
         "repeat": " # and the other key/value heads' repeat alike", "key-projection": "", "buffer": "",
         "out-projection": "", "bias": "", "merge-width": "", "undrop": "", "past": "", "head-width": "",
         "divisible": "", "module-list": "", "detach": "", "advance": "", "cat-axis": "", "added": "", "residual": "",
         "rope-width": "", "after-softmax": "", "values": ""}


INVERTED = "row by row: x..; xx.; xxx;"  # what a trace mark says a mask hides when it is exactly the future's inverse


def own_line_fix(kind: str, code: str | None, told: str = "", scores_code: str = "") -> str | None:
    """`code` (one line, as written) with the mistake undone, or None when that is not a one-call change.  `kind`:
    "split" (one projection split with view(B, H, n, dh); or, when `told` says so, folded straight into the batch
    with view(B * H, n, dh)), "split-all" (all three), "split-pair" (two of them),
    "merge" (no transpose; heads folded into the batch, when `told` says so: unfolded first; viewed behind the
    tokens, when `told` says so: viewed as they are in memory, then transposed), "mask" (a
    masked_fill thrown away, SDPA not causal), "softmax" (over another axis than
    the keys'), "fill" (a finite fill value), "scale" (scores scaled by another number than 1/sqrt(head width), or
    not at all: the queries' own last axis, `q.size(-1)`, is the head width), "dropout" (F.dropout left at its
    default training=True), "slice" (a context-length mask used whole: cut to the scores' size), "contiguous"
    (a view straight after a transpose), "invert" (a mask that hides the past and shows the future: the positions
    it marks inverted, in masked_fill or in a fused attention's boolean attn_mask; only when `told`, the trace mark's
    text, says it hides exactly the past and the diagonal), "keys" (the keys transposed on other axes than their
    last two) and "additive" (a mask of -1e9 added to the scores, made by where or masked_fill: -inf instead; not
    for a product such as (1 - tril) * -1e9, where -inf times 0 is NaN), "multiply" (the scores multiplied by a
    mask that is 1 where a token may look: masked_fill where it is 0) and "diagonal" (a mask made by triu or tril
    with the wrong diagonal: triu marks what is hidden, from diagonal 1; tril what a token may see, to diagonal 0;
    a comparison of positions that hides the diagonal, `j >= i`, made strict)
    and "repeat" (a grouped-query layer's key/value heads tiled with .repeat along the heads axis: repeat_interleave
    on that axis, by the same number) and "key-projection" (the keys projected with the queries' weight: the key
    projection's own, both named in `told`, the trace mark's words) and "buffer" (a tensor kept as a plain attribute,
    `self.mask = ...`: registered with self.register_buffer("mask", ...)) and "out-projection" (the merged heads
    returned without the output projection the module made: applied to them on the return line, the projection
    named in `told`, the trace mark's words) and "bias" (the output projection built with nn.Linear(..., bias=False):
    the same call without it, bias=True being the default) and "merge-width" (the heads merged back to the input's
    width, view(B, n, C) with C read off x: -1, the heads' own width, in its place) and "undrop" (the causal mask
    passed through a dropout: the dropout call left out, its input in its place) and "past" (a mask made with
    tril(..., diagonal=-1), which marks the past, used as the positions to hide: triu(..., diagonal=1), the
    future) and "head-width" (the heads split with a head width computed on the line, `c // self.n_head` with c read
    off x: -1, the projection's own width divided among the heads) and "divisible" (a divisibility guard the wrong
    way round, `assert d % h` or `if d % h == 0: raise ...`: refusing only a non-zero remainder) and "module-list"
    (layers kept in a plain list or dict: the same list in nn.ModuleList, the dict in nn.ModuleDict) and "detach"
    (a weight, a projection's output, the scores or the weights detached from autograd: the one .detach() left
    out) and "advance" (a KV cache's count of cached tokens set to the call's length, `self.pos = n`: advanced by
    it, +=) and "cat-axis" (the new keys or values appended to the cache along another axis than the tokens': that
    torch.cat given the tokens' axis, which `told`, the trace mark's words, reads from the shapes it could not
    join) and "rope-width" (rotary frequencies whose exponent `arange(0, dh, 2) / d` is divided by another width
    than the one the arange runs to: divided by that one, the head width) and "residual" (the input added to the
    output projection's result, `return x + self.proj(y)`: the projection's result alone) and "values" (the attention
    weights applied to the keys, `probs @ k`: the values' variable in their place, both named in `told`).
    `scores_code`: the line
    that made the scores, where "scale" meets them scaled on a line of their own (`scores = scores /
    math.sqrt(self.hidden_size)`): its product names the queries; for "after-softmax" (the softmax's weights masked,
    `attn = attn.masked_fill(~m, 0.0)` or `attn * m`), the softmax's line: the mask moves onto its scores, with
    -inf, before it."""
    line = (code or "").strip()
    if not line or not line.isascii() or kind not in KINDS:
        return None  # ast column offsets are UTF-8 bytes: ASCII keeps them character offsets
    try:
        tree = parse(line)
    except SyntaxError:
        return None
    if len(tree.body) != 1 or tree.body[0].end_lineno != 1:
        return None
    line = line[:tree.body[0].end_col_offset]  # the student's comment would describe the line as it was
    if kind == "mask":
        return _mask(line, tree)
    if kind == "softmax":
        return _softmax(line, tree)
    if kind == "fill":
        return _fill(line, tree)
    if kind == "invert" and "row by row:" in told and INVERTED not in told:
        return None  # it hides something else than the past and the diagonal: inverting it would not be the future
    if kind == "key-projection":
        return _key_projection(line, tree, told)
    if kind == "values":
        return _values(line, tree, told)
    if kind == "out-projection":
        return _out_projection(line, tree, told)
    if kind == "cat-axis":
        return _cat_axis(line, tree, told)
    if kind == "added":
        return _added(line, tree, told)
    if kind == "slice" and LEADING_AXES in told:
        return _slice_last_axes(line, tree)
    if kind == "scale" and scores_code:
        return _scale(line, tree) or _scale_apart(line, tree, scores_code)
    if kind == "after-softmax":
        return _before_softmax(line, tree, scores_code) if scores_code else None
    if kind in LOCAL:
        return LOCAL[kind](line, tree)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and
             n.func.attr in ("view", "reshape") and not n.keywords and n.end_lineno == 1]
    if kind.startswith("split"):
        shared = any(isinstance(n, (ast.Lambda, ast.GeneratorExp, ast.ListComp)) for n in ast.walk(tree))
        note = "" if shared else KINDS[kind]
        if FOLDED_SPLIT in told:
            return _split_folded(line, [c for c in calls if len(c.args) == 3], note)
        return _split(line, [c for c in calls if len(c.args) == 4], note)
    if HEADS_BEHIND in told:  # viewed as (B, n, H, dh) while the heads are in front: view them as they are, then move
        return _split(line, [c for c in calls if len(c.args) == 4], "")  # (the same swap of two sizes as a split's)
    folded = FOLDED in told  # a shape passed whole (`reshape(x.shape)`) is a merge's too, not a folded one's
    return _merge(line, [c for c in calls if len(c.args) == 3 or len(c.args) == 1 and not folded], folded)


def _text(line: str, node: ast.AST) -> str:
    return line[node.col_offset:node.end_col_offset]


def _split(line: str, views: list[ast.Call], note: str) -> str | None:
    """x.view(B, H, n, dh)  ->  x.view(B, n, H, dh).transpose(1, 2)"""
    if len(views) != 1:
        return None
    call = views[0]
    heads, tokens = call.args[1], call.args[2]
    return (line[:heads.col_offset] + _text(line, tokens) + line[heads.end_col_offset:tokens.col_offset] +
            _text(line, heads) + line[tokens.end_col_offset:call.end_col_offset] + ".transpose(1, 2)" +
            line[call.end_col_offset:] + note)


FOLDED_SPLIT = "to (B·H, n, dh) straight from (B, n, d)"  # in the trace mark of a split folded into the batch


def _split_folded(line: str, views: list[ast.Call], note: str) -> str | None:
    """x.view(B * H, n, dh)  ->  x.view(B, n, H, dh).transpose(1, 2).reshape(B * H, n, dh): the heads split behind
    the tokens and moved forward before they are folded into the batch (only where the first size is written as a
    product of the batch and the heads, whose names the fix needs)."""
    if len(views) != 1:
        return None
    call = views[0]
    folded, tokens, width = call.args
    if not (isinstance(folded, ast.BinOp) and isinstance(folded.op, ast.Mult)):
        return None
    batch, heads = _text(line, folded.left), _text(line, folded.right)
    split = f"{batch}, {_text(line, tokens)}, {heads}, {_text(line, width)}"
    start = call.args[0].col_offset
    return (line[:start] + split + line[width.end_col_offset:call.end_col_offset] + ".transpose(1, 2).reshape("
            + f"{_text(line, folded)}, {_text(line, tokens)}, {_text(line, width)})" + line[call.end_col_offset:]
            + note)


FOLDED = "(B·H, n, dh) -> (B, n, d)"  # in the trace mark of heads folded into the batch merged straight back


def _merge(line: str, views: list[ast.Call], folded: bool = False) -> str | None:
    """c.contiguous().view(B, n, d)  ->  c.transpose(1, 2).contiguous().view(B, n, d); heads folded into the batch,
    (B·H, n, dh) (`folded`): c.view(B, n, d)  ->  c.unflatten(0, (B, -1)).transpose(1, 2).contiguous().view(B, n, d)"""
    if len(views) != 1:
        return None
    call = views[0]
    receiver, contiguous = call.func.value, False
    while isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute) and \
            receiver.func.attr == "contiguous":
        receiver, contiguous = receiver.func.value, True
    if isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute) and \
            receiver.func.attr in ("transpose", "permute"):
        return None  # a transpose is there already: the mistake is elsewhere
    added = ".transpose(1, 2)" + ("" if contiguous or call.func.attr == "reshape" else ".contiguous()")
    if folded:  # (B·H, n, dh) unfolded to (B, H, n, dh) first, with the student's own batch size
        added = f".unflatten(0, ({_text(line, call.args[0])}, -1))" + added
    at = receiver.end_col_offset
    while at < len(line) and line[at] in ") \t":  # past the brackets around `(w @ v)`, to the method's dot
        at += 1
    if at >= len(line) or line[at] != ".":
        return None
    return line[:at] + added + line[at:]


def _mask(line: str, tree: ast.Module) -> str | None:
    """scores.masked_fill(m, -inf) (result thrown away)  ->  scores = scores.masked_fill(m, -inf);
    F.scaled_dot_product_attention(q, k, v[, is_causal=False])  ->  ...(q, k, v, is_causal=True)"""
    stmt = tree.body[0]
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
            isinstance(stmt.value.func, ast.Attribute) and stmt.value.func.attr == "masked_fill" and \
            isinstance(stmt.value.func.value, ast.Name):
        return f"{stmt.value.func.value.id} = {line}"
    sdpa = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and
            getattr(n.func, "attr", getattr(n.func, "id", "")) == "scaled_dot_product_attention"]
    if len(sdpa) != 1 or any(k.arg == "attn_mask" for k in sdpa[0].keywords) or len(sdpa[0].args) > 3:
        return None  # a mask passed in: the mistake is in that mask, not in this call
    call = sdpa[0]
    causal = next((k for k in call.keywords if k.arg == "is_causal"), None)
    if causal is not None:
        return line[:causal.value.col_offset] + "True" + line[causal.value.end_col_offset:]
    end = call.end_col_offset - 1  # the closing parenthesis
    return line[:end].rstrip() + ", is_causal=True" + line[end:]


def _softmax(line: str, tree: ast.Module) -> str | None:
    """torch.softmax(s, dim=1) / F.softmax(s, 1) / s.softmax(dim=-2)  ->  the same call with dim=-1"""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and
             getattr(n.func, "attr", getattr(n.func, "id", "")) == "softmax"]
    if len(calls) != 1:
        return None
    call = calls[0]
    if isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name) and call.func.value.id == "self":
        return None  # self.softmax(scores): an nn.Softmax module, whose axis __init__ set (FastNLP 0.5.0's
        # nn.Softmax(dim=2), Realzoo22: its scores had been offered as the axis, `self.softmax(-1)`)
    method = isinstance(call.func, ast.Attribute) and not (isinstance(call.func.value, (ast.Name, ast.Attribute))
                                                          and _text(line, call.func.value) in FUNCTION_HOMES)
    dim = next((k.value for k in call.keywords if k.arg == "dim"), None)
    if dim is None:
        position = 0 if method else 1
        dim = call.args[position] if len(call.args) > position else None
    if dim is None:
        return None
    return line[:dim.col_offset] + "-1" + line[dim.end_col_offset:]


FUNCTION_HOMES = {"torch", "F", "nn.functional", "torch.nn.functional", "functional", "torch.special"}


def _before_softmax(line: str, tree: ast.Module, softmax_code: str) -> str | None:
    """attn = attn.masked_fill(~m, 0.0) (or attn.masked_fill_(~m, 0), or attn = attn * m), after attn =
    sim.softmax(-1)  ->  "sim = sim.masked_fill(~m, float("-inf")) before attn = sim.softmax(-1), and delete this
    line": the positions this line zeroes are hidden in the scores the softmax reads.  None where the softmax's
    input is no plain name or attribute, or the line masks some other way."""
    try:
        made = parse(softmax_code.strip())
    except SyntaxError:
        return None
    calls = _calls(made, "softmax")
    if len(made.body) != 1 or len(calls) != 1:
        return None
    softmax_code = softmax_code.strip()[:made.body[0].end_col_offset]  # its comment left out
    call = calls[0]
    method = isinstance(call.func, ast.Attribute) and not (isinstance(call.func.value, (ast.Name, ast.Attribute))
                                                          and _text(softmax_code.strip(), call.func.value)
                                                          in FUNCTION_HOMES)
    source = call.func.value if method else (call.args[0] if call.args else None)
    if source is None or not _plain(source) or isinstance(source, ast.Subscript):
        return None
    scores = _text(softmax_code.strip(), source)
    fills = _calls(tree, "masked_fill", "masked_fill_")
    if len(fills) == 1 and fills[0].args:
        hidden = _text(line, fills[0].args[0])
    else:
        stmt, weights = tree.body[0], made.body[0]
        product = stmt.value if isinstance(stmt, ast.Assign) else None
        if not isinstance(product, ast.BinOp) or not isinstance(product.op, ast.Mult) or \
                not isinstance(weights, ast.Assign) or len(weights.targets) != 1:
            return None
        named = _text(softmax_code.strip(), weights.targets[0])  # the softmax's weights: the mask is the other side
        sides = [side for side in (product.left, product.right) if _text(line, side) != named]
        if len(sides) != 1:
            return None
        hidden = f"{_text(line, sides[0])} == 0"
    return (f'{scores} = {scores}.masked_fill({hidden}, float("-inf")) before {softmax_code.strip()}, and delete '
            "this line")


def _fill(line: str, tree: ast.Module) -> str | None:
    """s.masked_fill(m, -10.0) / s.masked_fill_(m, value=0.)  ->  the same call with float("-inf")"""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and
             n.func.attr in ("masked_fill", "masked_fill_")]
    if len(calls) != 1:
        return None
    call = calls[0]
    value = next((k.value for k in call.keywords if k.arg == "value"), call.args[1] if len(call.args) > 1 else None)
    if value is None:
        return None
    return line[:value.col_offset] + 'float("-inf")' + line[value.end_col_offset:]


def _calls(tree: ast.Module, *names: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and
            getattr(n.func, "attr", getattr(n.func, "id", "")) in names]


def _plain(node: ast.AST) -> bool:
    """A name or an attribute/subscript chain of names (`q`, `self.q_cache`, `qkv[0]`): cheap and safe to repeat."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return isinstance(node, ast.Name)


def _scale(line: str, tree: ast.Module) -> str | None:
    """q @ k.transpose(-2, -1) * C ** -0.5  ->  ... * q.size(-1) ** -0.5;  / math.sqrt(C)  ->  / math.sqrt(q.size(-1));
    torch.bmm(q, k.transpose(1, 2))  ->  torch.bmm(q, k.transpose(1, 2)) / q.size(-1) ** 0.5.  The head width is
    the queries' last axis whatever their layout ((B, H, n, dh), (B·H, n, dh), (B, n, H, dh) in an einsum)."""
    product = _one_product(tree, "baddbmm")
    if product is None:
        return None
    if getattr(getattr(product, "func", None), "attr", getattr(getattr(product, "func", None), "id", "")) == "baddbmm":
        return _alpha(line, product)
    queries = _queries(product)
    if queries is None:
        return None
    width = f"{_text(line, queries)}.size(-1)"
    scaled = [n for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.Mult)) and
              product in ast.walk(n.left) and product not in ast.walk(n.right)]
    if not scaled:  # never scaled: divide the product
        return line[:product.end_col_offset] + f" / {width} ** 0.5" + line[product.end_col_offset:]
    factor = scaled[-1].right  # the innermost: the one applied to the product itself
    roots = [n for n in _calls(ast.Module(body=[ast.Expr(factor)], type_ignores=[]), "sqrt") if len(n.args) == 1]
    powers = [n for n in ast.walk(factor) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow)]
    if len(roots) == 1 and not powers:
        old = roots[0].args[0]
    elif len(powers) == 1 and not roots:
        old = powers[0].left
    else:
        old, width = factor, width + (" ** 0.5" if isinstance(scaled[-1].op, ast.Div) else " ** -0.5")
    return line[:old.col_offset] + width + line[old.end_col_offset:]


def _one_product(tree: ast.Module, *more: str) -> ast.AST | None:
    """The one product of queries and keys on a line (q @ kᵀ, matmul, bmm, einsum, and the calls `more` names), or
    None where there is none or more than one."""
    products = [n for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult)]
    products += _calls(tree, "matmul", "bmm", "einsum", *more)
    return products[0] if len(products) == 1 else None


def _queries(product: ast.AST) -> ast.AST | None:
    """The queries a product multiplies, when a plain name or attribute: the left of q @ kᵀ, the first of matmul's
    or bmm's two, the first tensor after einsum's equation."""
    if isinstance(product, ast.BinOp):
        queries = product.left
    else:
        einsum = getattr(product.func, "attr", getattr(product.func, "id", "")) == "einsum"
        queries = product.args[1 if einsum else 0] if len(product.args) >= 2 else None
    return queries if queries is not None and _plain(queries) else None


def _scale_apart(line: str, tree: ast.Module, scores_code: str) -> str | None:
    """scores = scores / math.sqrt(self.hidden_size), the scores made on another line (`scores_code`, `scores =
    torch.matmul(q, k.transpose(-1, -2))`)  ->  scores = scores / math.sqrt(q.size(-1)): the one root or power in
    the line, its base replaced by the width of the queries that line's product names."""
    try:
        made = parse(scores_code.strip())
    except SyntaxError:
        return None
    product = _one_product(made)
    queries = _queries(product) if product is not None else None
    if queries is None:
        return None
    roots = [n.args[0] for n in _calls(tree, "sqrt") if len(n.args) == 1]
    powers = [n.left for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow)
              and isinstance(n.right, (ast.Constant, ast.UnaryOp))]
    if len(roots) + len(powers) != 1:
        return None
    old = (roots + powers)[0]
    return line[:old.col_offset] + f"{_text(scores_code.strip(), queries)}.size(-1)" + line[old.end_col_offset:]


def _alpha(line: str, call: ast.Call) -> str | None:
    """torch.baddbmm(mask, q, kᵀ, alpha=C ** -0.5)  ->  ...(mask, q, kᵀ, alpha=q.size(-1) ** -0.5); mask.baddbmm(q,
    kᵀ) alike: the product's alpha is its scale, and its queries are the first of the two it multiplies."""
    method = isinstance(call.func, ast.Attribute) and _text(line, call.func.value) not in FUNCTION_HOMES
    operands = call.args[0 if method else 1:]
    if len(operands) < 2 or not _plain(operands[0]):
        return None
    width = f"{_text(line, operands[0])}.size(-1) ** -0.5"
    told = next((k.value for k in call.keywords if k.arg == "alpha"), None)
    if told is None:
        end = call.end_col_offset - 1  # the closing parenthesis
        fixed = line[:end].rstrip() + ", alpha=" + width + line[end:]
    else:
        fixed = line[:told.col_offset] + width + line[told.end_col_offset:]
    return _without_beta(fixed)


def _without_beta(line: str) -> str:
    """The baddbmm call without a `beta` that scales its mask (`beta=1.0 / math.sqrt(hs)`: the scale given to the
    mask instead of the scores, a student's trial, whose fix kept it): the mask is added as it is, beta=1.  A beta of
    0 stays: it discards an uninitialised input (GPT-2's torch.baddbmm(empty, q, kᵀ, beta=0, alpha=...))."""
    call = next(iter(_calls(parse(line), "baddbmm")), None)
    beta = next((k for k in call.keywords if k.arg == "beta"), None) if call is not None else None
    if beta is None or (isinstance(beta.value, ast.Constant) and beta.value.value in (0, 1)):
        return line
    start = line.rfind(",", 0, beta.col_offset)
    return line[:start] + line[beta.value.end_col_offset:]


def _dropout(line: str, tree: ast.Module) -> str | None:
    """F.dropout(att, p)  ->  F.dropout(att, p, training=self.training); scaled_dot_product_attention(q, k, v,
    dropout_p=p)  ->  (..., dropout_p=p if self.training else 0.0): SDPA knows nothing of the module's mode."""
    calls = [c for c in _calls(tree, "dropout") if c.args]
    if not calls:
        return _dropout_p(line, tree)
    if len(calls) != 1:
        return None
    call = calls[0]
    told = next((k for k in call.keywords if k.arg == "training"), None)
    old = told.value if told is not None else (call.args[2] if len(call.args) > 2 else None)
    if old is not None:
        return line[:old.col_offset] + "self.training" + line[old.end_col_offset:]
    end = call.end_col_offset - 1
    return line[:end].rstrip() + ", training=self.training" + line[end:]


def _dropout_p(line: str, tree: ast.Module) -> str | None:
    """The one scaled_dot_product_attention's `dropout_p=p`, a rate that is on in eval too: `p if self.training else
    0.0`; None where it is 0 (no dropout) or already reads the mode."""
    given = [k for c in _calls(tree, "scaled_dot_product_attention") for k in c.keywords if k.arg == "dropout_p"]
    if len(given) != 1 or (isinstance(given[0].value, ast.Constant) and not given[0].value.value) or \
            any(isinstance(n, ast.Attribute) and n.attr == "training" for n in ast.walk(given[0].value)):
        return None
    value = given[0].value
    text = _text(line, value)
    if isinstance(value, (ast.IfExp, ast.Lambda, ast.NamedExpr)):
        text = f"({text})"
    return line[:value.col_offset] + f"{text} if self.training else 0.0" + line[value.end_col_offset:]


def _slice(line: str, tree: ast.Module) -> str | None:
    """wei.masked_fill(self.tril == 0, -inf)  ->  wei.masked_fill(self.tril[..., :wei.size(-1), :wei.size(-1)] == 0,
    -inf): the mask cut to the scores' own size (`...` keeps leading axes of size 1)."""
    calls = [c for c in _calls(tree, "masked_fill", "masked_fill_") if c.args and isinstance(c.func, ast.Attribute)]
    if len(calls) != 1 or not _plain(calls[0].func.value):
        return None
    mask = calls[0].args[0]
    while True:  # down to the mask itself: past `== 0`, `~`, `.bool()`
        if isinstance(mask, ast.Compare):
            mask = mask.left
        elif isinstance(mask, ast.UnaryOp):
            mask = mask.operand
        elif isinstance(mask, ast.Call) and isinstance(mask.func, ast.Attribute) and not mask.args:
            mask = mask.func.value
        else:
            break
    if isinstance(mask, ast.Subscript) and isinstance(mask.slice, ast.Slice) and mask.slice.lower is None and \
            mask.slice.upper is not None and mask.slice.step is None:  # self.bias[:T]: its rows cut, not its columns
        return line[:mask.slice.end_col_offset] + ", :" + _text(line, mask.slice.upper) + \
            line[mask.slice.end_col_offset:]
    if not isinstance(mask, (ast.Name, ast.Attribute)):
        return None  # a slice is there already, or the mask is computed on the line: the mistake is elsewhere
    n = f"{_text(line, calls[0].func.value)}.size(-1)"
    return line[:mask.end_col_offset] + f"[..., :{n}, :{n}]" + line[mask.end_col_offset:]


def _slice_last_axes(line: str, tree: ast.Module) -> str | None:
    """self.mask[:T, :T] == 0  ->  self.mask[:, :, :T, :T] == 0: a (1, 1, L, L) mask sliced on its first two axes
    (the trace said so), cut on its last two with the line's own bounds."""
    cuts = [n for n in ast.walk(tree) if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Tuple) and
            len(n.slice.elts) == 2 and all(isinstance(e, ast.Slice) for e in n.slice.elts)]
    if len(cuts) != 1:
        return None
    inner = cuts[0].slice
    return line[:inner.col_offset] + ":, :, " + line[inner.col_offset:]


def _contiguous(line: str, tree: ast.Module) -> str | None:
    """y.transpose(1, 2).view(B, T, C)  ->  y.transpose(1, 2).contiguous().view(B, T, C)"""
    views = [c for c in _calls(tree, "view") if isinstance(c.func, ast.Attribute) and
             isinstance(c.func.value, ast.Call) and getattr(c.func.value.func, "attr", "") in ("transpose", "permute")]
    if len(views) != 1:
        return None
    at = views[0].func.value.end_col_offset
    return line[:at] + ".contiguous()" + line[at:]


def _invert(line: str, tree: ast.Module) -> str | None:
    """s.masked_fill(self.tril[:T, :T] == 1, -inf)  ->  ... != 1 ...;  masked_fill(~m, ...)  ->  masked_fill(m, ...);
    sdpa(q, k, v, attn_mask=m)  ->  sdpa(q, k, v, attn_mask=~m) (a boolean attn_mask says what to keep)"""
    fills = [c for c in _calls(tree, "masked_fill", "masked_fill_") if c.args]
    fused = [c for c in _calls(tree, "scaled_dot_product_attention")
             if any(k.arg == "attn_mask" for k in c.keywords) or len(c.args) > 3]
    if len(fills) + len(fused) != 1:
        return None
    call = (fills or fused)[0]
    mask = call.args[0] if fills else next((k.value for k in call.keywords if k.arg == "attn_mask"), None)
    mask = mask if mask is not None else call.args[3]
    if isinstance(mask, ast.UnaryOp) and isinstance(mask.op, ast.Invert):
        return line[:mask.col_offset] + _text(line, mask.operand) + line[mask.end_col_offset:]
    if isinstance(mask, ast.Compare) and len(mask.ops) == 1 and isinstance(mask.ops[0], (ast.Eq, ast.NotEq)):
        right = mask.comparators[0]
        between = line[mask.left.end_col_offset:right.col_offset]
        flipped = between.replace("==", "!=") if isinstance(mask.ops[0], ast.Eq) else between.replace("!=", "==")
        return line[:mask.left.end_col_offset] + flipped + line[right.col_offset:]
    if isinstance(mask, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)):
        return line[:mask.col_offset] + "~" + line[mask.col_offset:]
    return line[:mask.col_offset] + "~(" + _text(line, mask) + ")" + line[mask.end_col_offset:]


def _keys(line: str, tree: ast.Module) -> str | None:
    """q @ k.transpose(1, 2)  ->  q @ k.transpose(-2, -1);  queries @ keys.T  ->  queries @ keys.transpose(-2, -1)"""
    products = [n for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult)]
    products += [c for c in _calls(tree, "matmul", "bmm") if len(c.args) == 2]
    if len(products) != 1:
        return None
    keys = products[0].right if isinstance(products[0], ast.BinOp) else products[0].args[1]
    if isinstance(keys, ast.Attribute) and keys.attr == "T":
        return line[:keys.value.end_col_offset] + ".transpose(-2, -1)" + line[keys.end_col_offset:]
    if isinstance(keys, ast.Call) and isinstance(keys.func, ast.Attribute) and keys.func.attr == "transpose" and \
            len(keys.args) == 2 and not keys.keywords:
        return line[:keys.args[0].col_offset] + "-2, -1" + line[keys.args[1].end_col_offset:]
    return None


def _additive(line: str, tree: ast.Module) -> str | None:
    """scores + torch.where(self.mask[:n, :n], -1e9, 0.0)  ->  scores + torch.where(self.mask[:n, :n], float("-inf"),
    0.0): the one large negative number written as an argument of where or masked_fill."""
    found = []
    for call in _calls(tree, "where", "masked_fill", "masked_fill_"):
        for arg in list(call.args) + [k.value for k in call.keywords]:
            try:
                value = ast.literal_eval(arg)
            except ValueError:
                continue
            if isinstance(value, (int, float)) and -1e300 < value <= -1e4:
                found.append(arg)
    if len(found) != 1:
        return None
    return line[:found[0].col_offset] + 'float("-inf")' + line[found[0].end_col_offset:]


def _added(line: str, tree: ast.Module, told: str) -> str | None:
    """att = att + self.causal_mask[:N, :N]  ->  att = att.masked_fill(self.causal_mask[:N, :N].bool(), float("-inf"))
    where the mask's 1s mark the future (`told`: the trace's words), `... == 0` where they mark what a token may see:
    an assignment of one sum, one of whose terms is the assigned name (the scores).  The mask is a float of 0s and
    1s, and masked_fill takes a boolean one: told "masked_fill" alone, a student wrote masked_fill(mask, -inf), which
    raises."""
    hides = ".bool()" if ONES_ON_FUTURE in told else " == 0" if ONES_ON_ALLOWED in told else None
    found = _scores_and_mask(line, tree, ast.Add) if hides else None
    if found is None:
        return None
    stmt, scores, mask = found
    return line[:stmt.value.col_offset] + f'{scores}.masked_fill({mask}{hides}, float("-inf"))' + \
        line[stmt.value.end_col_offset:]


def _multiply(line: str, tree: ast.Module) -> str | None:
    """wei = wei * self.tril[:T, :T]  ->  wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf")): an
    assignment of one product, one of whose factors is the assigned name (the scores); the other factor keeps
    what it is (1 where a token may look, or ~mask), so it hides exactly what the product zeroed."""
    found = _scores_and_mask(line, tree, ast.Mult)
    if found is None:
        return None
    _, scores, mask = found
    return f'{scores} = {scores}.masked_fill({mask} == 0, float("-inf"))'


def _scores_and_mask(line: str, tree: ast.Module, op: type) -> tuple[ast.Assign, str, str] | None:
    """An assignment of one binary operation `op` (a sum, a product), one operand of which is the assigned name (the
    scores): (the assignment, the scores' name, the other operand's text, parenthesised unless it is a name, an
    attribute, a subscript or a call).  None for anything else, or a constant operand (`att * 0.5` is a scale)."""
    stmt = tree.body[0]
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.BinOp)
            and isinstance(stmt.value.op, op)):
        return None
    target = ast.get_source_segment(line, stmt.targets[0])
    left, right = (ast.get_source_segment(line, side) for side in (stmt.value.left, stmt.value.right))
    mask = stmt.value.right if left == target else stmt.value.left if right == target else None
    if mask is None or isinstance(mask, ast.Constant):
        return None
    text = ast.get_source_segment(line, mask)
    return stmt, target, text if isinstance(mask, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)) else f"({text})"


def _diagonal(line: str, tree: ast.Module) -> str | None:
    """torch.triu(torch.ones(n, n))  ->  torch.triu(torch.ones(n, n), diagonal=1);  torch.tril(ones, diagonal=-1)
    ->  torch.tril(ones, diagonal=0);  m.triu(2)  ->  m.triu(1).  A triu marks the hidden positions (the future:
    from diagonal 1), a tril those a token may see (the past and itself: up to diagonal 0), whichever way the line
    writes it; the line that made the mask, which trace points to when the mask is made wrongly (issue 28)."""
    calls = _calls(tree, "triu", "tril", "triu_", "tril_")
    if not calls:
        return _strict(line, tree)
    if len(calls) != 1:
        return None
    call = calls[0]
    want = "1" if getattr(call.func, "attr", getattr(call.func, "id", "")).startswith("triu") else "0"
    method = isinstance(call.func, ast.Attribute) and _text(line, call.func.value) not in FUNCTION_HOMES
    told = next((k.value for k in call.keywords if k.arg == "diagonal"), None)
    if told is None and len(call.args) > (0 if method else 1):
        told = call.args[0 if method else 1]
    if told is not None:
        try:
            if str(ast.literal_eval(told)) == want:
                return None  # the diagonal is right: the mistake is elsewhere
        except ValueError:
            pass
        return line[:told.col_offset] + want + line[told.end_col_offset:]
    if want == "0":
        return None  # tril's default is 0 already
    end = call.end_col_offset - 1  # the closing parenthesis
    return line[:end].rstrip() + (", " if call.args or call.keywords else "") + "diagonal=1" + line[end:]


def _strict(line: str, tree: ast.Module) -> str | None:
    """torch.where(j >= i, -inf, 0.0)  ->  torch.where(j > i, -inf, 0.0): positions compared into the mask that
    hides the diagonal (student trial 21), made strict.  A mask that hides the diagonal marks the hidden positions
    (a comparison of what may be seen that leaves out the diagonal is strict already, and left to the words)."""
    compared = [n for n in ast.walk(tree) if isinstance(n, ast.Compare)]
    if len(compared) != 1 or len(compared[0].ops) != 1 or not isinstance(compared[0].ops[0], (ast.GtE, ast.LtE)):
        return None
    node = compared[0]
    between = line[node.left.end_col_offset:node.comparators[0].col_offset]
    strict = between.replace(">=", ">", 1) if isinstance(node.ops[0], ast.GtE) else between.replace("<=", "<", 1)
    return line[:node.left.end_col_offset] + strict + line[node.comparators[0].col_offset:]


def _detach(line: str, tree: ast.Module) -> str | None:
    """k = self.W_k(x).detach()  ->  k = self.W_k(x);  F.linear(x, self.W_q.weight.detach())  ->  F.linear(x,
    self.W_q.weight): the one `.detach()` on the line, its tensor in its place (no line of the kind: None, the
    mistake's remedy in words then, as for the weights computed under torch.no_grad())."""
    calls = [c for c in _calls(tree, "detach", "detach_") if isinstance(c.func, ast.Attribute) and not c.args
             and not c.keywords]
    if len(calls) != 1:
        return None
    call, held = calls[0], calls[0].func.value
    text = _text(line, held) if isinstance(held, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) else \
        f"({_text(line, held)})"  # `(a + b).detach() * c`: the parentheses stay
    statement = tree.body[0]
    if isinstance(statement, ast.Assign) and statement.value is call and len(statement.targets) == 1 and \
            _text(line, statement.targets[0]) == text:
        return None  # `k = k.detach()` undone is `k = k`: the line is to be deleted, which words say better
    return line[:call.col_offset] + text + line[call.end_col_offset:]


def _repeat(line: str, tree: ast.Module) -> str | None:
    """k.repeat(1, self.n_rep, 1, 1)  ->  k.repeat_interleave(self.n_rep, dim=1), each such call on the line (the
    keys and the values on one line, or a generator over both); with one call, the other is on a line of its own."""
    calls = [n for n in _calls(tree, "repeat") if isinstance(n.func, ast.Attribute) and not n.keywords and
             len(n.args) >= 2 and not any(isinstance(a, ast.Starred) for a in n.args)]
    if not calls and not _calls(tree, "repeat", "tile"):
        return _expand_group_first(line, tree)
    if not calls or len(calls) != len(_calls(tree, "repeat", "tile")):
        return None
    for call in sorted(calls, key=lambda c: c.col_offset, reverse=True):
        grown = [(i, a) for i, a in enumerate(call.args) if not (isinstance(a, ast.Constant) and a.value == 1)]
        if len(grown) != 1:
            return None
        axis, times = grown[0]
        line = (line[:call.func.value.end_col_offset] + f".repeat_interleave({_text(line, times)}, dim={axis})" +
                line[call.end_col_offset:])
    shared = len(calls) > 1 or any(isinstance(n, (ast.GeneratorExp, ast.ListComp, ast.Return)) for n in ast.walk(tree))
    # (a helper's `return x.repeat(...)` serves the keys and the values alike)
    return line + ("" if shared else KINDS["repeat"])


def _expand_group_first(line: str, tree: ast.Module) -> str | None:
    """t.unsqueeze(1).expand(B, group, kv, n, dh)  ->  t.unsqueeze(2).expand(B, kv, group, n, dh), and t[:, None]
    alike (t[:, :, None]): the new axis after the key/value heads, not before them, so that the reshape to H heads
    gives each key/value head to consecutive query heads (student11; own_gqa_expand_group_first.py had its remedy in
    words).  One expand, its receiver an unsqueeze(1) or a subscript with None second, at least three sizes."""
    calls = _calls(tree, "expand")
    if len(calls) != 1 or not isinstance(calls[0].func, ast.Attribute) or calls[0].keywords or \
            len(calls[0].args) < 3 or any(isinstance(a, ast.Starred) for a in calls[0].args):
        return None
    call, held = calls[0], calls[0].func.value
    a, b = call.args[1], call.args[2]
    sizes = line[:a.col_offset] + _text(line, b) + line[a.end_col_offset:b.col_offset] + _text(line, a) + \
        line[b.end_col_offset:call.end_col_offset]
    head = line[:held.col_offset]
    if isinstance(held, ast.Call) and isinstance(held.func, ast.Attribute) and held.func.attr == "unsqueeze" and \
            len(held.args) == 1 and not held.keywords and isinstance(held.args[0], ast.Constant) and \
            held.args[0].value == 1:
        receiver = line[held.col_offset:held.args[0].col_offset] + "2" + line[held.args[0].end_col_offset:
                                                                            held.end_col_offset]
    elif isinstance(held, ast.Subscript) and isinstance(held.slice, ast.Tuple) and len(held.slice.elts) >= 2 and \
            isinstance(held.slice.elts[1], ast.Constant) and held.slice.elts[1].value is None and \
            isinstance(held.slice.elts[0], ast.Slice):
        elts = held.slice.elts
        if len(elts) >= 3 and not (isinstance(elts[2], ast.Slice) and elts[2].lower is None and
                                   elts[2].upper is None and elts[2].step is None):
            return None
        rest = [_text(line, e) for e in elts[3:]]
        receiver = f"{_text(line, held.value)}[{', '.join([':', ':', 'None', *rest])}]"
    else:
        return None
    fixed = head + receiver + sizes[held.end_col_offset:] + line[call.end_col_offset:]
    shared = any(isinstance(n, (ast.GeneratorExp, ast.ListComp, ast.Return)) for n in ast.walk(tree))
    return fixed + ("" if shared else KINDS["repeat"])


def _rope_width(line: str, tree: ast.Module) -> str | None:
    """theta ** (torch.arange(0, self.head_dim, 2).float() / d_model)  ->  ... / self.head_dim): the exponent's
    divisor is the width the one arange of step 2 runs to, the head width, where it was another plain name (the
    model width).  None where the line has no such arange, or not exactly one division of it by another name."""
    aranges = [c for c in _calls(tree, "arange") if len(c.args) == 3 and not c.keywords and
               isinstance(c.args[2], ast.Constant) and c.args[2].value == 2]
    if len(aranges) != 1 or not _plain(aranges[0].args[1]):
        return None
    arange, end = aranges[0], _text(line, aranges[0].args[1])
    divided = [n for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) and
               any(a is arange for a in ast.walk(n.left)) and _plain(n.right)]
    if len(divided) != 1 or _text(line, divided[0].right) == end:
        return None
    right = divided[0].right
    return line[:right.col_offset] + end + line[right.end_col_offset:]


_QUERIES_WEIGHT = re.compile(r"the keys are projected with (\S+), the weight the queries are projected with")
_KEYS_WEIGHT = re.compile(re.escape(KEYS_WITH) + r"(\S+)$")


def _key_projection(line: str, tree: ast.Module, told: str) -> str | None:
    """k = self.W_q(x)  ->  k = self.W_k(x);  k = einsum("bnd,ed->bne", x, self.q_lin.weight)  ->  the same with
    self.k_lin.weight: the one part of the weights' names that differs (`q_lin` / `k_lin`, `query` / `key` of a
    ModuleDict) written in place of the queries' on the line, where it is there exactly once; the names are the
    trace mark's (`told`), which says the key projection's only when that parameter exists and the forward never
    uses it.  None otherwise (the fix is then said in words)."""
    queries, keys = _QUERIES_WEIGHT.search(told), _KEYS_WEIGHT.search(told)
    if not queries or not keys:
        return None
    q_path, k_path = queries.group(1).split("."), keys.group(1).split(".")
    differ = [(a, b) for a, b in zip(q_path, k_path) if a != b]
    if len(q_path) != len(k_path) or len(differ) != 1 or not differ[0][1].isidentifier():
        return None
    old, new = differ[0]
    spots = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == old] + \
        [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == old] + \
        [n.slice for n in ast.walk(tree) if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant)
         and n.slice.value == old]
    if len(spots) != 1:
        return None
    spot = spots[0]
    if isinstance(spot, ast.Attribute):
        return line[:spot.end_col_offset - len(old)] + new + line[spot.end_col_offset:]
    if isinstance(spot, ast.Name):
        return line[:spot.col_offset] + new + line[spot.end_col_offset:]
    quote = line[spot.col_offset]
    return line[:spot.col_offset] + quote + new + quote + line[spot.end_col_offset:]


_MIXED_KEYS = re.compile(r"multiply `([A-Za-z_]\w*)` \(the keys\), not `([A-Za-z_]\w*)` \(the values\)")
_MIXERS = {"matmul": 1, "bmm": 1, "scaled_dot_product_attention": 2}  # call -> the argument that is mixed


def _values(line: str, tree: ast.Module, told: str) -> str | None:
    """ctx = probs @ k  ->  ctx = probs @ v: the keys' variable, where it is what the weights multiply (the right
    operand of @, matmul's or bmm's second argument, a fused attention's third), replaced by the values' variable;
    both names are the trace mark's (`told`), read from the lines that assign them.  Only where exactly one such
    operand is on the line; None otherwise (the fix is then said in words)."""
    names = _MIXED_KEYS.search(told)
    if not names:
        return None
    keys, values = names.groups()
    mixed = [n.right for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult)]
    mixed += [n.args[_MIXERS[_called(n)]] for n in ast.walk(tree) if isinstance(n, ast.Call)
              and _called(n) in _MIXERS and len(n.args) > _MIXERS[_called(n)]]
    spots = [n for n in mixed if isinstance(n, ast.Name) and n.id == keys]
    if len(spots) != 1:
        return None
    return line[:spots[0].col_offset] + values + line[spots[0].end_col_offset:]


_UNAPPLIED = re.compile(re.escape(PROJECTION_UNAPPLIED) + r"(self(?:\.[A-Za-z_]\w*)+) to the merged heads")
_DROPOUT = re.compile(r"drop", re.IGNORECASE)


def _out_projection(line: str, tree: ast.Module, told: str) -> str | None:
    """return y  ->  return self.c_proj(y);  return self.resid_dropout(y)  ->  return self.resid_dropout(self.c_proj(y))
    (a dropout applied to the output stays outermost, as the lesson's layer has it); of a tuple returned, the first
    element.  Only on a `return` line and where `told`, the trace mark's words, names the projection the module
    made and never applied; None otherwise (the fix is then said in words)."""
    made = _UNAPPLIED.search(told)
    stmt = tree.body[0]
    if not made or not isinstance(stmt, ast.Return) or stmt.value is None:
        return None
    heads = stmt.value.elts[0] if isinstance(stmt.value, ast.Tuple) and stmt.value.elts else stmt.value
    if isinstance(heads, ast.Call) and len(heads.args) >= 1 and _DROPOUT.search(_text(line, heads.func)):
        heads = heads.args[0]  # self.resid_dropout(y), F.dropout(y, p, self.training)
    return line[:heads.col_offset] + f"{made.group(1)}({_text(line, heads)})" + line[heads.end_col_offset:]


def _buffer(line: str, tree: ast.Module) -> str | None:
    """self.mask = torch.triu(...)  ->  self.register_buffer("mask", torch.triu(...)): a tensor kept as a plain
    attribute, made where it was made, registered."""
    stmt = tree.body[0]
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Attribute)
            and isinstance(stmt.targets[0].value, ast.Name)):
        return None
    target = stmt.targets[0]
    return f'{target.value.id}.register_buffer("{target.attr}", {_text(line, stmt.value)})'


def _residual(line: str, tree: ast.Module) -> str | None:
    """return x + self.proj(y)  ->  return self.proj(y): the one sum on the line of a bare name (the input) and a
    call (the projection), the call kept; None where the line has no such sum or several."""
    sums = [n for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add) and
            {type(n.left), type(n.right)} == {ast.Name, ast.Call}]
    if len(sums) != 1:
        return None
    kept = sums[0].right if isinstance(sums[0].right, ast.Call) else sums[0].left
    return line[:sums[0].col_offset] + _text(line, kept) + line[sums[0].end_col_offset:]


def _bias(line: str, tree: ast.Module) -> str | None:
    """self.c_proj = nn.Linear(n_embd, n_embd, bias=False)  ->  self.c_proj = nn.Linear(n_embd, n_embd): the one
    Linear on the line built with bias=False, the keyword left out (bias=True is the default); None where several
    Linears on the line are (which one is the output projection is not the line's to say)."""
    off = [(call, kw) for call in ast.walk(tree) if isinstance(call, ast.Call) and _called(call) == "Linear"
           for kw in call.keywords if kw.arg == "bias" and isinstance(kw.value, ast.Constant) and
           kw.value.value is False]
    if len(off) != 1:
        return None
    call, kw = off[0]
    before = [n.end_col_offset for n in (*call.args, *call.keywords) if n is not kw and n.end_col_offset <=
              kw.col_offset]
    if not before:
        return None
    return line[:max(before)] + line[kw.end_col_offset:]


def _merge_width(line: str, tree: ast.Module) -> str | None:
    """y.transpose(1, 2).contiguous().view(B, T, C)  ->  ....view(B, T, -1): the one view/reshape of three sizes on
    the line, its last size (the input's width) left to the heads' own, heads times head width."""
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and
             n.func.attr in ("view", "reshape") and len(n.args) == 3 and not n.keywords]
    if len(calls) != 1 or isinstance(calls[0].args[2], (ast.Constant, ast.UnaryOp)):
        return None
    last = calls[0].args[2]
    return line[:last.col_offset] + "-1" + line[last.end_col_offset:]


def _undrop(line: str, tree: ast.Module) -> str | None:
    """hide = self.attn_dropout(self.hide[:n, :n]) > 0  ->  hide = self.hide[:n, :n] > 0;  self.dropout(self.mask)
    .bool()  ->  self.mask.bool(): the one dropout call on the line (a module or function named for dropout, given
    the mask first) replaced by the mask it was given; the dropout on the weights, on a line of its own, stays."""
    calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and _DROPOUT.search(_called(c))]
    if len(calls) != 1 or not calls[0].args or isinstance(calls[0].args[0], ast.Starred):
        return None
    call = calls[0]
    return line[:call.col_offset] + _text(line, call.args[0]) + line[call.end_col_offset:]


def _past(line: str, tree: ast.Module) -> str | None:
    """torch.tril(torch.ones(L, L), diagonal=-1)  ->  torch.triu(torch.ones(L, L), diagonal=1);  ones.tril(-1)  ->
    ones.triu(1): the one tril on the line, below the diagonal, made the mask that hides the past (the trace read it
    so); the same positions above the diagonal are the future it meant to hide, whatever the line does with them
    next (`.bool()`, `== 1`, `* -inf`)."""
    calls = _calls(tree, "tril", "tril_", "triu", "triu_")
    if len(calls) != 1 or not _called(calls[0]).startswith("tril"):
        return None
    call = calls[0]
    method = isinstance(call.func, ast.Attribute) and _text(line, call.func.value) not in FUNCTION_HOMES
    told = next((k.value for k in call.keywords if k.arg == "diagonal"), None)
    if told is None and len(call.args) > (0 if method else 1):
        told = call.args[0 if method else 1]
    try:
        if told is None or ast.literal_eval(told) != -1:
            return None
    except ValueError:
        return None
    name = call.func.end_col_offset - len(_called(call))  # the name's own place: `tril` of torch.tril / x.tril
    fixed = line[:told.col_offset] + "1" + line[told.end_col_offset:]
    return fixed[:name] + "triu" + fixed[name + len("tril"):]


def _module_list(line: str, tree: ast.Module) -> str | None:
    """self.projections = [nn.Linear(d, d) for _ in range(3)]  ->  self.projections = nn.ModuleList([nn.Linear(d, d)
    for _ in range(3)]); a dict of layers in nn.ModuleDict: an assignment of one list or dict (written out or
    comprehended) that builds layers, the container named as the layers' own module is (`nn.`, `torch.nn.`); None
    where the layers are named bare (`Linear(...)`: whether ModuleList is imported is not the line's to say)."""
    statement = tree.body[0]
    value = statement.value if isinstance(statement, (ast.Assign, ast.AnnAssign)) else None
    kind = {ast.List: "ModuleList", ast.ListComp: "ModuleList", ast.Dict: "ModuleDict",
            ast.DictComp: "ModuleDict"}.get(type(value))
    if kind is None:
        return None
    layers = [c for c in ast.walk(value) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)]
    homes = {_text(line, c.func.value) for c in layers}
    home = next((h for h in homes if h.split(".")[-1] == "nn"), None)  # nn.Linear, torch.nn.Linear
    if home is None:
        return None
    return f"{line[:value.col_offset]}{home}.{kind}({_text(line, value)}){line[value.end_col_offset:]}"


def _head_width(line: str, tree: ast.Module) -> str | None:
    """q.view(b, t, self.n_head, c // self.n_head)  ->  q.view(b, t, self.n_head, -1): the one view, reshape or
    unflatten on the line whose last size (of a tuple of sizes too) is computed there, by // or int(a / b), left to
    the projection's own width divided among the heads."""
    lasts = []
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
                call.func.attr in ("view", "reshape", "unflatten") and call.args and not call.keywords:
            last = call.args[-1]
            last = last.elts[-1] if isinstance(last, (ast.Tuple, ast.List)) and last.elts else last
            if _divided(last):
                lasts.append(last)
    if len(lasts) != 1:
        return None
    return line[:lasts[0].col_offset] + "-1" + line[lasts[0].end_col_offset:]


def _divided(node: ast.AST) -> bool:
    """`a // b`, `a / b` or `int(a / b)`: a size computed by a division."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "int" and node.args:
        node = node.args[0]
    return isinstance(node, ast.BinOp) and isinstance(node.op, (ast.FloorDiv, ast.Div))


def _divisible(line: str, tree: ast.Module) -> str | None:
    """assert d % h, ...  ->  assert d % h == 0, ...; assert d % h != 0 (or > 0)  ->  == 0; if d % h == 0: raise ...
    ->  if d % h != 0: raise ...; if not d % h: raise ...  ->  if d % h: raise ...: a guard the wrong way round,
    refusing only a non-zero remainder."""
    stmt = tree.body[0]
    test = stmt.test if isinstance(stmt, (ast.Assert, ast.If)) else None
    if isinstance(stmt, ast.If) and not (len(stmt.body) == 1 and isinstance(stmt.body[0], ast.Raise) and
                                         not stmt.orelse):
        return None
    right = "== 0" if isinstance(stmt, ast.Assert) else "!= 0"
    wrong = (ast.NotEq, ast.Gt) if isinstance(stmt, ast.Assert) else (ast.Eq,)
    if _remainder(test):  # assert d % h: true when it does not divide
        return line[:test.end_col_offset] + f" {right}" + line[test.end_col_offset:] if \
            isinstance(stmt, ast.Assert) else None
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], wrong) and \
            _remainder(test.left) and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == 0:
        return line[:test.left.end_col_offset] + f" {right}" + line[test.end_col_offset:]
    if isinstance(stmt, ast.If) and isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and \
            _remainder(test.operand):  # if not d % h: raise
        return line[:test.col_offset] + _text(line, test.operand) + line[test.end_col_offset:]
    return None


def _remainder(node: ast.AST | None) -> bool:
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod)


def _called(call: ast.Call) -> str:
    """The name a call calls: `Linear` of nn.Linear(...), torch.nn.Linear(...) and Linear(...)."""
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")


def _advance(line: str, tree: ast.Module) -> str | None:
    """self.pos = n  ->  self.pos += n: a count of cached tokens set to the call's length instead of advanced by it
    (one attribute of the module set to a value that does not read it)."""
    stmt = tree.body[0]
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Attribute)):
        return None
    target = stmt.targets[0]
    if any(isinstance(n, ast.Attribute) and n.attr == target.attr and ast.dump(n.value) == ast.dump(target.value)
           for n in ast.walk(stmt.value)):
        return None
    return line[:target.end_col_offset] + " += " + line[stmt.value.col_offset:]


CAT_AXIS = re.compile(r"the tokens' axis, dim=(-?\d+)")  # harness.engine.trace.detect_cache.TOKENS_AXIS


def _cat_axis(line: str, tree: ast.Module, told: str) -> str | None:
    """torch.cat([cache, k], dim=1)  ->  torch.cat([cache, k], dim=2): the one torch.cat of the line appends along the
    tokens' axis, which the trace mark's words give (read from the shapes that could not be joined)."""
    said = CAT_AXIS.search(told)
    cats = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and
            n.func.attr in ("cat", "concat", "concatenate") and n.end_lineno == 1]
    if said is None or len(cats) != 1:
        return None
    call = cats[0]
    dim = next((k.value for k in call.keywords if k.arg in ("dim", "axis")), None)
    if dim is None and len(call.args) == 2:
        dim = call.args[1]
    if dim is None:
        return line[:call.end_col_offset - 1] + f", dim={said[1]}" + line[call.end_col_offset - 1:]
    return line[:dim.col_offset] + said[1] + line[dim.end_col_offset:]


LOCAL = {"scale": _scale, "dropout": _dropout, "slice": _slice, "contiguous": _contiguous, "invert": _invert,
         "keys": _keys, "additive": _additive, "multiply": _multiply, "diagonal": _diagonal, "repeat": _repeat,
         "buffer": _buffer, "bias": _bias, "merge-width": _merge_width, "undrop": _undrop,
         "past": _past, "head-width": _head_width, "divisible": _divisible, "module-list": _module_list,
         "detach": _detach, "advance": _advance, "rope-width": _rope_width, "residual": _residual}
