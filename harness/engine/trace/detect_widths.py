"""Detectors of the constructor's widths, read from what its numbers made: every head as wide as the whole layer
(its projections built d wide for each of H heads), the head width computed from the input's width on the line that
splits the heads (seen in the forward recorded with the widths apart), a divisibility guard that refuses the widths
the heads divide (seen when the worked example is refused and a width they do not divide is built).  A constructor's
mistake shows in forward, or in what it refuses: its line is the one that built the parameter, computed the width or
raised, each where the shapes agree with the mistake and with no other reading."""
from __future__ import annotations

import ast
import math

from harness.engine.rewrite import parse
from harness.engine.trace.detect_layout import _product, _projection
from harness.engine.trace.naming import Namer
from harness.engine.trace.registry import Findings, detector
from harness.engine.trace.vocabulary import MATMULS, VIEWS, number


@detector("heads-full-width", "heads-full-width-unprojected")
def heads_full_width(f: Findings) -> None:
    """Every head as wide as the whole layer (`full_width`), and the layer's output as the mistake leaves it: d wide
    through an output projection from the H·d features of the heads side by side (heads-full-width), or those H·d
    features returned with no output projection at all (heads-full-width-unprojected).  A layer whose output is H·d
    wide through a projection reads d_out as the width of one head (the book's Ch03_MHA_Wrapper): neither mistake,
    no mark.  A mistake of the layer's making, not of one step of its forward: told as the forward's as a whole, at
    the line that built the queries' projection that wide (the child notes where the constructor made each
    parameter), the line to change."""
    made = full_width(f)
    shape = f.output.get("shape") or []
    if made is None or len(shape) != 3:
        return
    d, heads = f.cfg["d"], f.cfg["heads"]
    projected = any(label == "output projection" for label in f.namer.labels)
    built = (f"every head is built here with its queries' projection {d} wide" if made.pop("caller", False) else
             f"the queries' projection built here is {d} wide for every head")
    said = (f"each of the {heads} heads computes its scores over {d} features, the layer's whole width: {built}, so "
            "the parameters grow with the number of heads")
    if projected and shape[-1] == d:
        f.mark_whole("heads-full-width", (
            f"{said}; give each head d_out / H = {d // heads} features: project once to d_out and split that into "
            "the heads"), made)
    elif not projected and shape[-1] == heads * d:
        f.mark_whole("heads-full-width-unprojected", (
            f"{said}, and the {heads} heads are returned side by side, {heads * d} features a token with no output "
            f"projection; give each head d_out / H = {d // heads} features (one projection to d_out, split into the "
            "heads), and project the merged heads with an output projection"), made)


def full_width(f: Findings) -> dict | None:
    """Every head as wide as the whole layer: the scores of all H heads are computed (B·H·n² entries, one score a
    query, key and head) but each head's queries and keys hold d features, not d / H, so the layer holds H
    full-width projections per role (a ModuleList of single-head layers each built d wide, or one Linear(d, H·d)).
    Read from the shapes alone: a layer that never splits computes B·n² scores, the lesson's layer sums over d / H.
    {"at", "code"} of the line that made the queries' projection, or None."""
    d, heads, n, batch = f.cfg["d"], f.cfg["heads"], f.cfg["n"], f.cfg["batch"]
    scores = f.named("scores")
    if heads < 2 or not scores or f.namer.fused:
        return None
    widths = {_contraction(f.ops[i]) for i in scores}
    if widths != {d} or sum(_product(f.ops[i]["out"]["shape"]) for i in scores) != batch * heads * n * n:
        return None
    return _queries_made(f, f.ops[scores[0]])


def _contraction(op: dict) -> int | None:
    """The number of features a product of queries and keys sums over: the queries' last axis (q @ kᵀ, bmm,
    baddbmm), or the product of the sizes of an einsum's summed letters."""
    ins = Namer.product_operands(op)
    if len(ins) < 2 or not all(t.get("shape") for t in ins[:2]):
        return None
    if op["op"] != "einsum":
        return ins[0]["shape"][-1] if op["op"] in MATMULS else None
    equation = (op["args"][0] if op["args"] else "").strip("'\"").replace(" ", "")
    if "->" not in equation or "." in equation:
        return None
    sides, result = equation.split("->")
    operands = sides.split(",")
    if len(operands) != 2 or len(operands[0]) != len(ins[0]["shape"]):
        return None
    summed = [k for k, letter in enumerate(operands[0]) if letter in operands[1] and letter not in result]
    return _product([ins[0]["shape"][k] for k in summed]) if summed else None


def _queries_made(f: Findings, op: dict) -> dict | None:
    """{"at", "code"} of the line that made the weight of the projection the queries of this product come from, or
    None where no parameter made by a line of the student's projects them."""
    made = _projection(f, Namer.product_operands(op)[0])
    if made is None:
        return None
    index, name = made
    weight = next((t for t in f.ops[index]["in"] if t.get("name") == name), {})
    where = weight.get("made") or {}
    if where.get("kind") != "parameter" or where.get("at") in (None, "?"):
        return None
    if where.get("outer_at") and _width_passed_in(where.get("code", ""), where.get("args") or []):
        return {"at": where["outer_at"], "code": where.get("outer_code", ""), "caller": True}  # it chose the width
    return {"at": where["at"], "code": where.get("code", "")}


def _width_passed_in(code: str, args: list[str]) -> bool:
    """The head's projection `nn.Linear(emb, head_size)` takes its output width from a parameter of the head's own
    constructor (`head_size`) other than its input width: the line that made every head full width is the caller's
    (`OneHead(emb, emb, block)`), not this one.  A head built `nn.Linear(emb, emb)` chose its width itself."""
    try:
        tree = parse(code.strip().rstrip(":"))
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and len(node.args) >= 2 and all(isinstance(a, ast.Name) for a in node.args[:2]):
            width_in, width_out = node.args[0].id, node.args[1].id
            return width_out in args and width_out != width_in
    return False


@detector("head-width-from-input")
def head_width_from_input(f: Findings) -> None:
    """The head width computed from the input's width on the line that splits the heads (`c // self.n_head`, with
    `b, t, c = x.shape`): recorded with the widths apart (`f.cfg["apart"]`: d_in below d_out), the forward raised at
    a view/reshape/unflatten of a tensor of d_out features a token into H heads of d_in // H.  With d_in = d_out (the
    worked example) it runs, so it is told at its line.  Only where that line computes the width itself (a `//` or
    `int(a / b)` in the call): a width kept in an attribute was computed elsewhere, in a line the forward never
    shows."""
    apart = f.cfg.get("apart") or {}
    op = next((op for op in apart.get("ops", ()) if op.get("raised")), None)
    if op is None or op["op"] not in VIEWS or not op["in"] or op.get("at") in (None, "?"):
        return
    b, n, heads, d_in, d_out = apart["batch"], apart["n"], apart["heads"], apart["d_in"], apart["d_out"]
    shape = op["in"][0].get("shape") or []
    sizes = [number(a) for a in _view_sizes(op)]
    if d_in // heads == d_out // heads or sizes[-2:] != [heads, d_in // heads] or not shape or \
            shape[-1] != d_out or _product(shape) != b * n * d_out or not _width_computed_on(op.get("code", "")):
        return
    f.mark_whole("head-width-from-input", (
        f"the head width is computed here from the input's width: with d_in = {d_in} and d_out = {d_out} this "
        f"{op['op']} asks for {heads} heads of {d_in} // {heads} = {d_in // heads} features, but the projections "
        f"hold {d_out} features a token, heads of {d_out} // {heads} = {d_out // heads}; compute the head width from "
        "the output width (d_out // H, or the projection's own last size), not from x's"),
        {"at": op["at"], "code": op.get("code", "")})


def _view_sizes(op: dict) -> list[str]:
    """The sizes a view/reshape (view(B, n, H, dh), view((B, n, H, dh))) or an unflatten (unflatten(-1, (H, dh)))
    was given, as recorded."""
    sizes = op["args"][2:] if op["op"] == "unflatten" else op["args"][1:]
    if len(sizes) == 1 and str(sizes[0]).startswith(("(", "[")):
        sizes = [s for s in str(sizes[0]).strip("()[]").replace(" ", "").split(",") if s]
    return [str(s) for s in sizes]


def _width_computed_on(code: str) -> bool:
    """Whether the one view/reshape/unflatten call on this line computes its last size there: `c // self.n_head`,
    `int(c / h)`, not a name or an attribute set elsewhere."""
    try:
        tree = parse(code.strip())
    except SyntaxError:
        return False
    calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and
             c.func.attr in VIEWS and c.args]
    if len(calls) != 1:
        return False
    last = calls[0].args[-1]
    if isinstance(last, (ast.Tuple, ast.List)) and last.elts:
        last = last.elts[-1]
    if isinstance(last, ast.Call) and isinstance(last.func, ast.Name) and last.func.id == "int" and last.args:
        last = last.args[0]
    return isinstance(last, ast.BinOp) and isinstance(last.op, (ast.FloorDiv, ast.Div))


@detector("guard-refuses-divisible")
def guard_refuses_divisible(f: Findings) -> None:
    """A divisibility guard the wrong way round: the constructor refused the worked example (`f.cfg["refused"]`,
    harness.engine.trace.drive: d_out divisible by H) with its own ValueError or AssertionError, at a line that takes
    a remainder (`%`), and built the same width with a number of heads that does not divide it.  No forward ran: the
    line to change is the guard's."""
    refused = f.cfg.get("refused") or {}
    d_out, heads, other = refused.get("d_out"), refused.get("heads"), refused.get("built_heads")
    if not (d_out and heads and other) or d_out % heads or not d_out % other or "%" not in refused.get("code", "") or \
            refused.get("at") in (None, "", "?"):
        return
    f.mark_whole("guard-refuses-divisible", (
        f"this guard is the wrong way round: it refuses d_out = {d_out} with {heads} heads, which divide it "
        f"({d_out} % {heads} == 0), and lets d_out = {d_out} with {other} heads through, which do not "
        f"({d_out} % {other} == {d_out % other}); refuse only a non-zero remainder (assert d_out % heads == 0, or "
        "raise if d_out % heads != 0)"), {"at": refused["at"], "code": refused["code"]})


@detector("single-scaled-by-input-width")
def single_scaled_by_input_width(f: Findings) -> None:
    """A single head's scores scaled by the input's width: recorded with the widths apart (`f.cfg["apart"]`: d_in
    below d_out, the single-head form, run to the end), the numbers the scores are multiplied by on the way to the
    softmax come to 1/sqrt(d_in), where the queries dotted with the keys hold d_out features.  With d_in = d_out (the
    worked example) the scale is right, so it is told at its line, no step of its own: the line to change."""
    apart = f.cfg.get("apart") or {}
    if apart.get("raised") or apart.get("heads") != 1 or not apart.get("ops"):
        return
    d_in, d_out = apart["d_in"], apart["d_out"]
    namer = Namer(apart["ops"], {"d": d_out, "heads": 1, "n": apart["n"], "batch": apart["batch"],
                                 "context_length": apart["context_length"]})
    namer.run()
    softmaxes = [op["i"] for op in apart["ops"] if namer.labels[op["i"]] == "softmax"]
    if len(softmaxes) != 1 or namer.unread_scales or namer.fused:
        return
    ancestors = namer.ancestors(softmaxes[0])
    widths = {_contraction(apart["ops"][i]) for i in ancestors if namer.labels[i] == "scores"}
    factors = [(i, k) for i, k in namer.scale_factors if i in ancestors]
    total = math.prod(k for _, k in factors)
    where = apart["ops"][factors[-1][0]] if factors else {}
    if widths != {d_out} or d_in == d_out or not math.isclose(total, 1 / math.sqrt(d_in), rel_tol=1e-6) or \
            where.get("at") in (None, "?"):
        return
    f.mark_whole("single-scaled-by-input-width", (
        f"the scores are scaled by the input's width: with d_in = {d_in} and d_out = {d_out} they are divided by "
        f"sqrt({d_in}) = {math.sqrt(d_in):.4g}, but the queries and keys hold {d_out} features; divide by the square "
        f"root of the keys' width, sqrt({d_out}) = {math.sqrt(d_out):.4g} (their own last size, q.size(-1)), not x's"),
        {"at": where["at"], "code": where.get("code", "")})


@detector("built-to-input-width")
def built_to_input_width(f: Findings) -> None:
    """A multi-head layer built to the input's width throughout, its output width never used: recorded with the
    widths apart (`f.cfg["apart"]`: d_in below d_out, run to the end), it returns d_in features a token, and every
    projection's weight is made of d_in-wide blocks, none of d_out (a layer that gets the output width wrong on one
    line only, its output projection say, has a d_out-wide weight elsewhere: not this).  Told at the line that made
    the first projection, the first that should have been d_out wide, where that line does not name the
    constructor's output width: one that does (`nn.Linear(d, d_out)`) got a value set on another line, which the
    forward does not show."""
    apart = f.cfg.get("apart") or {}
    if apart.get("raised") or apart.get("heads", 1) < 2 or not apart.get("ops"):
        return
    b, n, d_in, d_out = apart["batch"], apart["n"], apart["d_in"], apart["d_out"]
    if (apart.get("output") or {}).get("shape") != [b, n, d_in] or d_in == d_out or \
            f.cfg.get("out_proj") is False:
        return
    weights = [t for op in apart["ops"] if op["op"] in ("linear", *MATMULS) for t in op["in"]
               if (t.get("made") or {}).get("kind") == "parameter" and len(t.get("shape") or ()) == 2]
    if not weights or any(size % d_in or size % d_out == 0 for t in weights for size in t["shape"]):
        return
    made = weights[0]["made"]
    if made.get("at") in (None, "?") or _names(made.get("code", "")) & {apart.get("d_out_name"), None}:
        return  # a line that names the output width used a value set elsewhere (`d_out = d` above): not its own
    f.mark_whole("built-to-input-width", (
        f"the layer is built to the input's width throughout: with d_in = {d_in} and d_out = {d_out} this "
        f"projection's weight is {tuple(weights[0]['shape'])}, no projection has {d_out} features, and the output "
        f"has {d_in} features a token, not {d_out}; build the projections, the heads and the output projection "
        "from the output width d_out"), {"at": made["at"], "code": made.get("code", "")})


def _names(code: str) -> set[str | None]:
    """The names and attributes a line of code reads ({None} where it does not parse)."""
    try:
        tree = parse(code.strip())
    except SyntaxError:
        return {None}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}


@detector("kv-projections-full-width")
def kv_projections_full_width(f: Findings) -> None:
    """A grouped-query layer (traced with KV key/value heads for H query heads, KV < H) whose keys and values are
    projected as wide as the queries: d features a token, H heads of d / H, where the layer takes KV key/value heads
    of KV·d / H features together.  The number of key/value heads is taken and never used; the outputs are plain
    multi-head attention, so only the parameter count shows it.  Told at the line that made the keys' projection
    weight (the values' too, where another line made it): the line to change.  Read from the shapes of a projection
    by a parameter of the student's, not fused with the queries' (a fused projection's output holds every role)."""
    heads, kv, d = f.cfg.get("heads"), f.cfg.get("kv_heads"), f.cfg.get("d")
    if not kv or not heads or not d or not 1 <= kv < heads or heads % kv or d % heads:
        return
    roles: dict[str, list[dict]] = {"keys": [], "values": []}
    for i in f.named("scores"):
        operands = Namer.product_operands(f.ops[i])
        roles["keys"] += operands[1:2]
    for i in f.named("mix values"):
        operands = Namer.product_operands(f.ops[i])
        roles["values"] += [t for t in operands[:2] if not f.namer.derives_from(t, ("softmax",))][:1]
    for i in f.namer.fused:
        if f.ops[i]["op"] == "scaled_dot_product_attention":
            roles["keys"] += f.ops[i]["in"][1:2]
            roles["values"] += f.ops[i]["in"][2:3]
    found_by_role: dict[str, list[tuple[int, str]]] = {}
    for role, tensors in roles.items():
        for t in tensors:
            found = _projection(f, t)
            if found is None:
                return
            found_by_role.setdefault(role, []).append(found)
    # a projection feeding several roles (fused [K; V] split after: transformer-toolkit's GroupedQueryAttention; or
    # fused [Q; K; V]) holds them all: full width there is d a role it feeds, and a grouped [K; V] of KV = H / 2 heads
    # is d wide and right (realzoo19: it was marked at its fused kv Linear)
    queries = [t for i in f.named("scores") for t in Namer.product_operands(f.ops[i])[:1]] + \
        [f.ops[i]["in"][0] for i in f.namer.fused if f.ops[i]["op"] == "scaled_dot_product_attention"]
    fed: dict[int, set[str]] = {}
    for role, founds in found_by_role.items():
        for index, _ in founds:
            fed.setdefault(index, set()).add(role)
    for t in queries:
        found = _projection(f, t)
        if found is not None and len(fed.get(found[0], ())) >= 2:  # only a projection the keys and values share:
            fed[found[0]].add("queries")  # a query operand can resolve to a keys-only projection (the gqa mutant)
    made: dict[str, dict] = {}
    for role, founds in found_by_role.items():
        for index, name in founds:
            out = (f.ops[index].get("out") or {}).get("shape") or []
            weight = next((w for w in f.ops[index]["in"] if w.get("name") == name), {})
            where = weight.get("made") or {}
            full = len(fed[index]) * d
            if not out or out[-1] != full or where.get("kind") != "parameter" or where.get("at") in (None, "?"):
                return  # a projection kv·d / H wide, or one fused with the queries' (3·d wide): not this
            made.setdefault(role, {"at": where["at"], "code": where.get("code", "")})
    if set(made) != {"keys", "values"}:
        return
    width = kv * d // heads
    for role, where in made.items():
        if role == "values" and where["at"] == made["keys"]["at"]:
            continue
        f.mark_whole("kv-projections-full-width", (
            f"the {role}' projection built here is {d} features wide, one head of {d // heads} for each of the "
            f"{heads} query heads: the {kv} key/value heads the layer takes are never used; build the key and value "
            f"projections {kv} x {d // heads} = {width} wide and share each key/value head among {heads // kv} query "
            "heads (repeat_interleave after the split)"), where)


@detector("built-indivisible")
def built_indivisible(f: Findings) -> None:
    """No guard against a width the heads do not divide: the constructor built the worked example's width d_out with
    heads that do not divide it (`f.cfg["indivisible"]`, harness.engine.trace.drive), and then either a parameter it
    made has an axis of H·(d_out // H) features, fewer than d_out (the heads silently cover only part of the width:
    the first such line in the file is the evidence), or that module's forward raised, far from the cause.  Told at
    the constructor's `def __init__` line, where the guard belongs, when it is known; else at the first short
    parameter's line (a forward that raised, with no constructor known, is told on the forward as a whole)."""
    built = f.cfg.get("indivisible") or {}
    d_out, heads = built.get("d_out"), built.get("heads")
    if not d_out or not heads or not d_out % heads:
        return
    inner = heads * (d_out // heads)
    short = [p for p in built.get("params", ()) if inner in (p.get("shape") or ()) and
             _line_number(p["at"]) is not None]
    guard = ("at the top of __init__, raise a ValueError (or assert) when the width is not divisible by the number "
             "of heads")
    init = built.get("init") or {}
    if short:
        first = min(short, key=lambda p: _line_number(p["at"]))
        here = f"the parameter made at {first['at']}" if init else "this parameter"
        f.mark_whole("built-indivisible", (
            f"nothing refuses a width the heads do not divide: built with d_out = {d_out} and {heads} heads, {here} "
            f"has {inner} = {heads} x {d_out // heads} features where the layer's width is {d_out}, so "
            f"{d_out - inner} features are silently dropped; {guard}"), init or {"at": first["at"],
                                                                        "code": first["code"]})
    elif built.get("raised") and not _refuses_late(built["raised"]):
        at = f" at {built['raised_at']}" if built.get("raised_at") else ""
        f.mark_whole("built-indivisible", (
            f"nothing refuses a width the heads do not divide: built with d_out = {d_out} and {heads} heads, the "
            f"layer's forward then raised{at}, far from the cause ({built['raised']}); {guard}"), init or None)


def _refuses_late(raised: str) -> bool:
    """The forward's own refusal of the width (`assert d % h == 0, "... must be divisible by the number of heads"`,
    torchtext's container): the layer refuses, only in forward rather than in its constructor, so "nothing refuses"
    would be untrue; the divisibility check says what it raised."""
    kind = raised.split(":", 1)[0].rsplit(".", 1)[-1]
    return kind in ("AssertionError", "ValueError") and "divisib" in raised.lower()


def _line_number(at: str) -> int | None:
    try:
        return int(str(at).rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return None
