"""Detectors of how the data is laid out: heads split or merged by a view without the transpose (on every
projection, or on some only), a grouped-query layer's key/value heads tiled instead of repeated, an operation that
raised (and what its tensors say of why), the caller's input changed
in place.  They run first: the later detectors read the scores, the softmax and the mask."""
from __future__ import annotations

import re

from harness.engine.trace.naming import Namer
from harness.engine.trace.registry import Findings, detector
from harness.engine.trace.vocabulary import (FUSED_MHA, HEADS_BEHIND, KEYS_WITH, LEADING_AXES, MATMULS, PASS_THROUGH,
                                             REINDEX, SCORES_LIKE, TRANSPOSES, VIEWS, is_weight, number)

SLICE_DETECTORS = ("split-order-on-slice", "view-on-slice")  # a view of a slice raised: not a missing contiguous()
ROLE_NAMES = {"q": "queries", "k": "keys", "v": "values"}
ATTENDED = ("mix values", "attention (fused)")  # the steps the heads' outputs come from


def _role_id(roles: str) -> str:
    return "-and-".join(ROLE_NAMES[r] for r in roles) + "-split-without-transpose"


ROLE_IDS = tuple(_role_id(roles) for roles in ("q", "k", "v", "qk", "qv", "kv"))  # some projections, not all three


def _view(namer: Namer, op: dict, before: str, after: str) -> bool:
    """Whether `op` is a view/reshape from the shape `before` to the shape `after` (the lesson's letters)."""
    return op["op"] in VIEWS and bool(op["in"]) and namer.sym(op["in"][0]) == before and \
        namer.sym(op.get("out")) == after


@detector("split-without-transpose")
def split_without_transpose(f: Findings) -> None:
    """A view/reshape to (B, H, n, dh) straight from (B, n, d), or to (B·H, n, dh), the heads folded into the batch
    for bmm (the same order in memory, a student's trial), or from (B, n, H, dh) (a second reshape where the
    transpose belongs, a student's trial): the heads' positions cut across tokens."""
    for op in f.ops:
        if _view(f.namer, op, "B, n, d", "B, H, n, dh"):
            f.mark(op["i"], {"id": "split-without-transpose", "text": (
                "view/reshape to (B, H, n, dh) straight from (B, n, d): the heads' 'positions' are cut across "
                "several tokens, mixing tokens and features; split with view(B, n, H, dh) and then "
                "transpose(1, 2)")})
        elif _view(f.namer, op, "B, n, d", "B·H, n, dh"):
            f.mark(op["i"], {"id": "split-without-transpose", "text": (
                "view/reshape to (B·H, n, dh) straight from (B, n, d): in memory that is (B, H, n, dh), so the "
                "heads' 'positions' are cut across several tokens, mixing tokens and features; split with "
                "view(B, n, H, dh).transpose(1, 2) first, then reshape(B·H, n, dh)")})
        elif _view(f.namer, op, "B, n, H, dh", "B, H, n, dh"):
            f.mark(op["i"], {"id": "split-without-transpose", "text": (
                "view/reshape (B, n, H, dh) -> (B, H, n, dh): a reshape keeps the values in their order, so the "
                "heads' 'positions' are cut across several tokens, mixing tokens and features; move the heads "
                "forward with transpose(1, 2), not a reshape")})


@detector("merge-without-transpose")
def merge_without_transpose(f: Findings) -> None:
    """A merge view/reshape (B, H, n, dh) -> (B, n, d) without the transpose first, or (B·H, n, dh) -> (B, n, d),
    the heads folded into the batch for bmm merged straight back (the same order in memory, a student's trial); or
    either viewed as (B, n, H, dh) on the way (`y.view(B, n, H, dh).reshape(B, n, d)`, another trial's)."""
    for op in f.ops:
        if _view(f.namer, op, "B, H, n, dh", "B, n, d"):
            f.mark(op["i"], {"id": "merge-without-transpose", "text": (
                "the heads are merged with view/reshape (B, H, n, dh) -> (B, n, d) without transpose(1, 2) "
                "first: each output row mixes several positions of one head; use "
                "transpose(1, 2).contiguous().view(B, n, d)")})
        elif _view(f.namer, op, "B·H, n, dh", "B, n, d"):
            f.mark(op["i"], {"id": "merge-without-transpose", "text": (
                "the heads are merged with view/reshape (B·H, n, dh) -> (B, n, d): in memory that is (B, H, n, dh), "
                "so each output row mixes several positions of one head; use view(B, H, n, dh).transpose(1, 2)"
                ".reshape(B, n, d)"), "written_title": (  # the catalogue's title speaks of (B, H, n, dh), which
                # this layer's tensor is not (a student's trial: heads folded into the batch for bmm)
                "Heads folded into the batch, (B·H, n, dh), merged into (B, n, d) by view or reshape straight "
                "away, without unfolding them and transpose(1, 2) back")})
        elif _view(f.namer, op, "B·H, n, dh", "B, n, H, dh") or _view(f.namer, op, "B, H, n, dh", "B, n, H, dh"):
            f.mark(op["i"], {"id": "merge-without-transpose", "text": (
                f"the heads are put behind the tokens with view/reshape to (B, n, H, dh): {HEADS_BEHIND} "
                "(B, H, n, dh), so each output row mixes several positions of one head; move them "
                "with view(B, H, n, dh).transpose(1, 2), then reshape(B, n, d)")})


@detector("merge-moves-batch")
def merge_moves_batch(f: Findings) -> None:
    """The heads' outputs (B, H, n, dh), mixed values, transposed or permuted so that the batch leaves the first axis
    (`transpose(0, 2)` where the lesson's merge is `transpose(1, 2)`) and then viewed back to (B, n, d): the view
    fits, and a batch of one sequence is right, but each row is assembled from other sequences' tokens.  A layer
    that answers sequence first, (n, B, d), rightly moves the batch: its view is to (n, B, d), never marked."""
    batch_first = [f.cfg.get("batch"), f.cfg.get("n"), f.cfg.get("d")]
    for op in f.ops:
        if op["op"] not in TRANSPOSES or op.get("raised") or not op["in"] or \
                f.namer.sym(op["in"][0]) != "B, H, n, dh" or not f.namer.derives_from(op["in"][0], ("mix values",)):
            continue
        order = _axes_order(op, len(op["in"][0].get("shape") or ()))
        viewed = any(later["op"] in VIEWS and later["in"] and later["in"][0].get("src") is not None and
                     op["i"] in f.namer.ancestors(later["in"][0]["src"]) | {later["in"][0]["src"]} and
                     (later.get("out") or {}).get("shape") == batch_first for later in f.ops[op["i"] + 1:])
        if order is not None and order[0] != 0 and viewed and not (_unfolded_heads_first(f, op["in"][0]) and
                                                                   order[0] == 1):
            f.mark(op["i"], {"id": "merge-moves-batch", "text": (
                f"{op['op']} moves the batch axis of the heads' outputs (B, H, n, dh) away from the front, so the "
                "merge back to (B, n, d) mixes the sequences of a batch (a batch of one hides it); swap the heads "
                "and the tokens only: transpose(1, 2)")}, keep_earlier=True)


def _unfolded_heads_first(f: Findings, t: dict) -> bool:
    """Tensor `t`, read as (B, H, n, dh), may as well be (H, B, n, dh): the worked example has as many sequences as
    heads (B = H = 2), and `t` is a view of heads folded into the batch (B·H, n, dh), which a layer may fold heads
    first (`view(H, B, n, dh)`, as torch's own multi-head attention does).  Its permute(1, 2, 0, 3) then merges
    right; the trace marked it as moving the batch where the numbers (batch-independence) found nothing."""
    src = t.get("src")
    if f.cfg.get("batch") != f.cfg.get("heads") or src is None:
        return False
    made = f.ops[src]
    return made["op"] in VIEWS and bool(made["in"]) and f.namer.sym(made["in"][0]) == "B·H, n, dh"


def _axes_order(op: dict, ndim: int) -> list[int] | None:
    """The new order of the axes a transpose/swapaxes (two axes) or permute (all of them) gives, or None when its
    arguments do not say."""
    args = [a for a in op["args"] if not str(a).startswith("<T")] or list(op["kwargs"].values())
    if len(args) == 1 and str(args[0]).startswith(("(", "[")):
        args = [a for a in str(args[0]).strip("()[]").replace(" ", "").split(",") if a]
    axes = [number(a) for a in args]
    if not ndim or any(a is None or a != int(a) or not -ndim <= a < ndim for a in axes):
        return None
    axes = [int(a) % ndim for a in axes]
    if op["op"] == "permute" and sorted(axes) == list(range(ndim)):
        return axes
    if op["op"] in ("transpose", "swapaxes", "swapdims") and len(axes) == 2:
        order = list(range(ndim))
        order[axes[0]], order[axes[1]] = order[axes[1]], order[axes[0]]
        return order
    return None


def _operands(namer: Namer, ops: list[dict]) -> dict[str, dict] | None:
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


@detector(*ROLE_IDS)
def split_roles(f: Findings) -> None:
    """A split without transpose on some projections only is named by the projections split so (every such step
    gets the same mark): the mistake differs from splitting all three wrongly (other numbers, another fix).
    Left as it is when the roles cannot be told."""
    namer = f.namer
    wrong = [i for i, m in f.at.items() if m["id"] == "split-without-transpose"]
    operands = _operands(namer, f.ops) if wrong else None
    if not operands:
        return
    feeds = {i: "".join(r for r, t in operands.items() if t.get("src") is not None and
                        i in namer.ancestors(t["src"]) | {t["src"]}) for i in wrong}
    split_wrong = "".join(r for r in "qkv" if any(r in roles for roles in feeds.values()))
    if not all(feeds.values()) or split_wrong == "qkv":
        return
    names = lambda roles: " and ".join(ROLE_NAMES[r] for r in roles)
    right = "".join(r for r in "qkv" if r not in split_wrong)
    for i, roles in feeds.items():
        also = "".join(r for r in split_wrong if r not in roles)
        how = "by a reshape of (B, n, H, dh), not a transpose" if f.at[i]["text"].startswith(
            "view/reshape (B, n, H, dh)") else "straight from (B, n, d)"
        f.mark(i, {"id": _role_id(split_wrong), "text": (
            f"the {names(roles)} are split with view/reshape to (B, H, n, dh) {how}"
            + (f" (and so are the {names(also)})" if also else "") + f", while the {names(right)} are split the "
            f"lesson's way: the {names(split_wrong)}' 'positions' are cut across several tokens, mixing tokens and "
            f"features; split them too with view(B, n, H, dh) and then transpose(1, 2)")})


STRIDED = "B, n, dh, H"  # heads on strided features: head h takes features h, h + H, h + 2H, ...


@detector("split-strided", "merge-strided", "values-split-strided")
def strided_heads(f: Findings) -> None:
    """Heads on strided features (a view to (B, n, dh, H), then (B, H, n, dh)) where the rest of the layer does not
    undo them: every projection split so and the heads merged the lesson's way, the lesson's split merged back
    strided, the values alone split so.  Every projection split strided and merged back strided is the lesson's
    layer with its features renumbered (harness.engine.head_order.Strided): never marked.  Left unmarked, too, where
    the roles cannot be told, or for strided splits of other projections (no known mistake is theirs)."""
    namer = f.namer
    splits = [op["i"] for op in f.ops if _view(namer, op, "B, n, d", STRIDED)]
    merges = ([op["i"] for op in f.ops if op["op"] in TRANSPOSES and op["in"]
               and namer.sym(op["in"][0]) == "B, H, n, dh" and namer.sym(op.get("out")) == STRIDED]
              or [op["i"] for op in f.ops if _view(namer, op, STRIDED, "B, n, d")
                  and namer.derives_from(op["in"][0], ATTENDED)])  # (a rotary embedding's pairs stacked back
    # over the full width, (B, n, d/2, 2) -> (B, n, d), have that shape in the worked example: no heads' outputs)
    if not splits:
        for i in merges:
            f.mark(i, {"id": "merge-strided", "text": (
                "the heads are merged strided, (B, H, n, dh) -> (B, n, dh, H) -> (B, n, d): feature j of head h "
                "lands at j·H + h, not back where the split took it from (h·dh + j); merge with "
                "transpose(1, 2).contiguous().view(B, n, d)")}, keep_earlier=True)
        return
    operands = _operands(namer, f.ops)
    if merges or not operands:
        return  # merged back strided too: right on every projection, else not a mistake of the catalogue's
    feeds = {i: "".join(r for r, t in operands.items() if t.get("src") is not None and
                        i in namer.ancestors(t["src"]) | {t["src"]}) for i in splits}
    roles = "".join(r for r in "qkv" if any(r in fed for fed in feeds.values()))
    if roles == "qkv":
        for i in splits:
            f.mark(i, {"id": "split-strided", "text": (
                "view/reshape to (B, n, dh, H) and then (B, H, n, dh): head h takes features h, h + H, ... of every "
                "projection, but the merge puts its outputs back in the lesson's block h·dh to (h + 1)·dh, other "
                "features than it read; split with view(B, n, H, dh) and then transpose(1, 2)")}, keep_earlier=True)
    elif roles == "v":
        for i in splits:
            f.mark(i, {"id": "values-split-strided", "text": (
                "the values are split on strided features, view/reshape to (B, n, dh, H): head h weighs value "
                "features h, h + H, ... while its queries and keys are the lesson's block h·dh to (h + 1)·dh; split "
                "the values like them, with view(B, n, H, dh) and then transpose(1, 2)")}, keep_earlier=True)


@detector("keys-from-query-weights")
def keys_from_query_weights(f: Findings) -> None:
    """The keys projected by a second call of the queries' projection (`K = heads(self.W_Q(x))`, a student's trial):
    the key projection is never used.  Marked at the keys' projection, the line to change; a fused projection split
    in three is one call, never marked."""
    operands = _operands(f.namer, f.ops)
    if not operands:
        return
    q, k = _projection(f, operands["q"]), _projection(f, operands["k"])
    if q and k and q[0] != k[0] and q[1] == k[1]:
        own = _keys_twin(q[1], f)
        f.mark(k[0], {"id": "keys-from-query-weights", "text": (
            f"the keys are projected with {q[1]}, the weight the queries are projected with: the key projection"
            + (f" {own} is never used (it gets no gradient); {KEYS_WITH}{own}" if own else
               " is never used (it gets no gradient); project the keys with their own projection"))})


@detector("queries-and-keys-swapped")
def queries_and_keys_swapped(f: Findings) -> None:
    """The queries projected with the key projection and the keys with the query projection (`q = self.key(x)`,
    `k = self.query(x)`), read from the weights' names: each says the other's role in one word (`key` for `query`,
    `W_k` for `W_q`).  The scores come out transposed before the mask.  Marked at both projections, the lines to
    change; a fused projection split in three is one weight, never marked."""
    operands = _operands(f.namer, f.ops)
    if not operands:
        return
    q, k = _projection(f, operands["q"]), _projection(f, operands["k"])
    if q and k and q[0] != k[0] and _role_swapped(q[1], k[1]):
        if _swapped_in_the_product(f, operands, q[0], k[0]):
            return
        for i, weight, role in sorted(((q[0], q[1], "queries"), (k[0], k[1], "keys"))):
            f.mark(i, {"id": "queries-and-keys-swapped", "text": (
                f"the {role} are projected with {weight}, and the {'keys' if role == 'queries' else 'queries'} with "
                f"{k[1] if role == 'queries' else q[1]}: the query and key projections are swapped, so every score "
                "is the transposed one (token s asks token t); project the queries with the query projection and "
                "the keys with the key projection")}, keep_earlier=True)


def _swapped_in_the_product(f: Findings, operands: dict, queries_made: int, keys_made: int) -> bool:
    """Marks the scores product, and says so, where each projection's line names its tensor after its own weight
    (`q = x @ self.W_q`, `k = x @ self.W_k`) and the product takes them the other way round (`k @ q.transpose(-2,
    -1)`): the product is the line to change, not the projections (student trial 21 was sent to `q = xh @
    self.W_q`, and swapping the weights there, as the mark implied, passed with `q` holding the keys)."""
    first, second = _assigned(f.ops[queries_made].get("code", "")), _assigned(f.ops[keys_made].get("code", ""))
    product = next((op for op in f.ops if f.namer.labels[op["i"]] == "scores" and op["op"] in MATMULS and
                    any(t is operands["q"] for t in op["in"])), None)
    if not first or not second or product is None or not _role_swapped(first, second):
        return False
    f.mark(product["i"], {"id": "queries-and-keys-swapped", "text": (
        f"the scores are `{first}` @ `{second}`ᵀ, the keys times the queries: every score is the transposed one "
        f"(token s asks token t); compute `{second}` @ `{first}`ᵀ"), "remedy": (
        f"Multiply the queries by the transposed keys ({second} @ {first}ᵀ), not the keys by the transposed queries: "
        f"{first} @ {second}ᵀ is every score transposed, each token asking the tokens that would ask it.")},
        keep_earlier=True)
    return True


@detector("values-from-keys")
def values_from_keys(f: Findings) -> None:
    """The attention weights applied to the keys (`ctx = probs @ k`, a student's trial), or the keys passed as the
    values of a fused attention (`scaled_dot_product_attention(q, k, k)`): what is mixed is the very tensor the
    scores took as keys, so the value projection never reaches the output.  Read from the data flow: the values
    operand is the keys operand or a tensor it was made from (a fused projection split in three gives the values a
    split of their own, never marked).  Marked at the mixing step, the line to change; the mark names the keys' and
    the values' variables where their lines assign one (`k = ...`, `v = self.wv(x)...`), which the fix swaps.  Only
    where the proven reading has a value projection of its own: a layer with one tensor for both (PaLM's shared kv,
    multi-query by design) meant the keys as values."""
    operands, roles = _operands(f.namer, f.ops), f.cfg.get("roles") or {}
    if not operands or not roles.get("wv") or roles.get("wv") == roles.get("wk"):
        return  # no value projection of its own to have meant: one tensor for both by design (PaLM's shared kv)
    k, v = operands["k"].get("src"), operands["v"].get("src")
    if k is None or v is None or not _same_tensor(f, operands["k"], operands["v"]):
        return
    mix = next((op for op in f.ops if any(t is operands["v"] for t in op["in"])), None)
    if mix is None:
        return
    keys_name = _assigned(f.ops[v].get("code", ""))
    made = next((op for op in f.ops if any(t.get("name") == roles["wv"] for t in op["in"] if isinstance(t, dict))),
                None)
    values_name = _assigned(made.get("code", "")) if made else None
    said = (f"`{keys_name}` (the keys), not `{values_name}` (the values)" if keys_name and values_name and
            keys_name != values_name else "the keys, not the values")
    f.mark(mix["i"], {"id": "values-from-keys", "text": (
        f"the attention weights multiply {said}: each output is a weighted average of the keys, and the value "
        "projection never reaches the output (it gets no gradient); multiply the weights by the values")},
        keep_earlier=True)


def _same_tensor(f: Findings, keys: dict, values: dict) -> bool:
    """Whether the values operand is the keys operand, or the tensor the keys operand was made from (`k` of `q @
    k.transpose(-2, -1)`): the same operation's output with the same numbers.  The numbers tell apart the three
    tensors one operation gives (`q, k, v = qkv.permute(2, 0, 3, 1, 4)`: one source, three tensors)."""
    seen = [keys] + [t for a in f.namer.ancestors(keys["src"]) | {keys["src"]} for t in f.ops[a]["in"]
                     if isinstance(t, dict)]
    return values.get("columns") is not None and any(
        t.get("src") == values["src"] and t.get("shape") == values.get("shape") and
        t.get("columns") == values["columns"] for t in seen)


def _assigned(code: str) -> str | None:
    """The one plain name a line assigns (`k = self.wk(x).view(...)` -> "k"), or None."""
    found = re.match(r"\s*([A-Za-z_]\w*)\s*=(?!=)", code or "")
    return found.group(1) if found else None


def _role_swapped(queries_weight: str, keys_weight: str) -> bool:
    """Whether the queries' weight is named as a key projection and the keys' as its query twin (`key.weight` and
    `query.weight`, `W_k` and `W_q`): one role word exchanged for the other gives the other name."""
    for query, key in _QUERY_WORDS:
        for hit in re.finditer(rf"(?<![A-Za-z]){key}(?![a-z])|(?<=[Ww]){key}(?![a-z])", queries_weight):
            if queries_weight[:hit.start()] + query + queries_weight[hit.end():] == keys_weight:
                return True
    return False


_QUERY_WORDS = (("queries", "keys"), ("Queries", "Keys"), ("query", "key"), ("Query", "Key"), ("q", "k"), ("Q", "K"))


def _keys_twin(name: str, f: Findings) -> str | None:
    """The key projection's name, where the queries' weight `name` says its role in a word that, said of the keys
    instead, names exactly one parameter the forward never uses (`q_lin.weight` -> `k_lin.weight`, `W_Q` -> `W_K`,
    `proj.query.weight` -> `proj.key.weight`); None otherwise (a student's trial: the fix said "the key projection"
    while the layer's was k_lin).  `f.cfg["params"]`: the module's parameter names, when the recording passed them."""
    params = set(f.cfg.get("params") or ())
    used = {t["name"] for op in f.ops for t in op["in"] if isinstance(t, dict) and t.get("name")}
    twins = set()
    for query, key in _QUERY_WORDS:
        for hit in re.finditer(rf"(?<![A-Za-z]){query}(?![a-z])|(?<=[Ww]){query}(?![a-z])", name):
            twin = name[:hit.start()] + key + name[hit.end():]
            if twin in params and twin not in used:
                twins.add(twin)
    return twins.pop() if len(twins) == 1 else None


def _projection(f: Findings, t: dict) -> tuple[int, str] | None:
    """(the operation, the weight's name) of the last projection by a parameter that a tensor comes from, or None."""
    src = t.get("src")
    if src is None:
        return None
    for a in sorted(f.namer.ancestors(src) | {src}, reverse=True):
        if f.namer.labels[a] == "project":
            weights = [w["name"] for w in f.ops[a]["in"] if is_weight(w)]
            return (a, weights[0]) if weights else None
    return None


TILES = {"repeat", "tile"}  # copy a whole tensor side by side: [k0, k1, k0, k1] along the axis repeated


@detector("kv-heads-tiled")
def kv_heads_tiled(f: Findings) -> None:
    """A grouped-query layer (traced with KV key/value heads for H query heads, KV > 1) whose key/value heads are
    copied with `.repeat` (or `.tile`) along the heads axis: [k0, k1, k0, k1], so query head h meets key/value head
    h % KV, where its group's is h // (H / KV) (repeat_interleave, or expand then reshape, gives [k0, k0, k1, k1]).
    Read from the shapes: the one axis repeated goes from KV to H, in a tensor made from a projection."""
    heads, kv = f.cfg.get("heads"), f.cfg.get("kv_heads")
    if not kv or not heads or not 1 < kv < heads or heads % kv:
        return
    for op in f.ops:
        if op["op"] not in TILES or op.get("raised") or not op["in"] or not f.namer.derives_from(op["in"][0],
                                                                                                 ("project",)):
            continue
        before, after = op["in"][0].get("shape") or [], (op.get("out") or {}).get("shape") or []
        repeats = [number(a) for a in _sizes(op)]
        if len(repeats) != len(before) or len(after) != len(before):
            continue
        grown = [a for a, r in enumerate(repeats) if r != 1]
        if len(grown) == 1 and before[grown[0]] == kv and after[grown[0]] == heads:
            f.mark(op["i"], {"id": "kv-heads-tiled", "text": (
                f"the {kv} key/value heads are copied with .{op['op']}, which tiles them ([k0, k1, k0, k1]): query "
                f"head h meets key/value head h % {kv}, not its group's h // {heads // kv}; repeat each one with "
                f".repeat_interleave({heads // kv}, dim={grown[0]})")},
                keep_earlier=True)
    for op in f.ops:  # the same tiling written with expand: a new axis of size 1 before the key/value heads' axis
        axis = _expanded_before_kv(f, op, heads, kv)
        if axis is not None:
            f.mark(op["i"], {"id": "kv-heads-tiled", "text": (
                f"expand stretches a new axis placed before the {kv} key/value heads, and the reshape that merges "
                f"the two tiles them ([k0, k1, k0, k1]): query head h meets key/value head h % {kv}, not its "
                f"group's h // {heads // kv}; put the new axis after the key/value heads (t[:, :, None].expand(B, "
                f"{kv}, {heads // kv}, n, dh)) or use .repeat_interleave({heads // kv}, dim={axis})"),
                "written_title": (  # the catalogue's title speaks of .repeat, which this line has not (fixes28)
                    "Key/value heads expanded along a new axis before them, then merged: tiled as .repeat tiles "
                    "them, not each repeated in turn as .repeat_interleave does: query heads paired with the wrong "
                    "key/value heads")},
                keep_earlier=True)


def _expanded_before_kv(f: Findings, op: dict, heads: int, kv: int) -> int | None:
    """The axis of the key/value heads when `op` is an expand, of a tensor made from a projection, that stretches
    one axis of size 1 to H / KV right before an axis of size KV, and a view/reshape then merges those two axes
    into H: group-major, the tiling of `.repeat` (a student's trial: `t[:, None].expand(B, H // KV, KV, n, dh)
    .reshape(B, H, n, dh)`); the right order stretches an axis after the key/value heads (`t[:, :, None]`)."""
    if op["op"] != "expand" or op.get("raised") or not op["in"] or not f.namer.derives_from(op["in"][0],
                                                                                              ("project",)):
        return None
    before, after = op["in"][0].get("shape") or [], (op.get("out") or {}).get("shape") or []
    if len(before) != len(after) or len(before) < 3:
        return None
    grown = [a for a, (b, c) in enumerate(zip(before, after)) if b != c]
    if len(grown) != 1 or before[grown[0]] != 1 or after[grown[0]] != heads // kv:
        return None
    a = grown[0]
    if a + 1 >= len(after) or after[a + 1] != kv:
        return None
    merged = list(after[:a]) + [heads] + list(after[a + 2:])
    for later in f.ops[op["i"] + 1:]:
        if later["op"] in VIEWS and later["in"] and later["in"][0].get("src") == op["i"] and \
                list((later.get("out") or {}).get("shape") or []) == merged:
            return a
    return None


@detector("kv-features-repeated")
def kv_features_repeated(f: Findings) -> None:
    """A grouped-query layer (traced with KV key/value heads for H query heads) whose key/value projections, still
    flat (B, n, KV·dh), are widened to H·dh with repeat_interleave along the features: each feature is written
    H / KV times side by side, so after the split a query head meets a few features of a key/value head, each
    repeated, where the lesson repeats whole heads after the split."""
    heads, kv, d = f.cfg.get("heads"), f.cfg.get("kv_heads"), f.cfg.get("d")
    if not kv or not heads or not d or not 1 <= kv < heads or heads % kv:
        return
    width = kv * d // heads
    for op in f.ops:
        if op["op"] != "repeat_interleave" or op.get("raised") or not op["in"] or \
                not f.namer.derives_from(op["in"][0], ("project",)):
            continue
        before, after = op["in"][0].get("shape") or [], (op.get("out") or {}).get("shape") or []
        if len(before) == 3 and len(after) == 3 and before[-1] == width and after[-1] == d and \
                before[:2] == after[:2]:
            f.mark(op["i"], {"id": "kv-features-repeated", "text": (
                f"repeat_interleave widens the flat key/value projection ({width} features: {kv} heads of "
                f"{d // heads}) to {d} by repeating each feature {heads // kv} times, not each head: a query head "
                f"meets a few features of a key/value head, each written twice over; split into the {kv} "
                f"key/value heads first, then repeat each whole head with .repeat_interleave({heads // kv}, "
                "dim=1)")}, keep_earlier=True)


def _sizes(op: dict) -> list[str]:
    """The sizes a repeat/tile was given, however written: repeat(1, 2, 1, 1), repeat((1, 2, 1, 1)), tile(x, dims)."""
    args = [a for a in op["args"] if not str(a).startswith("<T")] or list(op["kwargs"].values())
    if len(args) == 1 and str(args[0]).startswith(("(", "[")):
        return [a for a in str(args[0]).strip("()[]").replace(" ", "").split(",") if a]
    return [str(a) for a in args]


@detector("view-on-transposed", *SLICE_DETECTORS, "mask-size-not-n", "keys-transposed-wrong", "kv-heads-expanded",
          "raised")
def raised(f: Findings) -> None:
    """The operation that raised (the forward stops there): a view after a transpose or of a slice, a mask not cut
    to the sequence, keys transposed on the wrong axes; else only that it raised."""
    for op in f.ops:
        if op.get("raised"):
            f.mark(op["i"], _raised(f.namer, op))


@detector("view-on-transposed-in-training")
def view_in_training(f: Findings) -> None:
    """A view that raised only in training mode (`f.cfg["training"]["raised_ops"]`): scaled_dot_product_attention
    with dropout_p > 0 returns its output laid out otherwise on the CPU, so `y.transpose(1, 2).view(B, n, d)` runs in
    eval mode and raises in training.  Marked on the eval forward's view at the same line, when that view's tensor
    comes from a transpose (a student's trial: trace showed nothing, the report named view-without-contiguous)."""
    ops = (f.cfg.get("training") or {}).get("raised_ops") or []
    failed = next((op for op in ops if op.get("raised")), None)
    if failed is None or failed["op"] not in VIEWS or "view size is not compatible" not in failed["raised"]:
        return
    for op in f.ops:
        if op["op"] == failed["op"] and op.get("at") and op.get("at") == failed.get("at") and op["in"] and \
                _made_by_transpose(f.namer, op["in"][0]):
            f.mark(op["i"], {"id": "view-on-transposed-in-training", "text": (
                f"in train() mode (dropout on) this view() raised {failed['raised'].split(':')[0]}: the tensor after "
                "the transpose is not contiguous there (scaled_dot_product_attention with dropout lays its output "
                "out otherwise), though it happens to be in eval(); call .contiguous() before .view(), or use "
                ".reshape()"), "symptom": (
                "forward raises \"view size is not compatible with input tensor's size and stride\" in train() mode "
                "with dropout, so the layer cannot be trained; in eval() mode the view happens to work, as the "
                "tensor before it is laid out otherwise there.")})
            return


@detector("input-changed-in-place")
def input_changed_in_place(f: Findings) -> None:
    """An in-place operation on the caller's input x."""
    for op in f.ops:
        if not op.get("raised") and op.get("inplace") and op["in"] and op["in"][0].get("name") == "x":
            f.mark(op["i"], {"id": "input-changed-in-place", "text": (
                f"{op['op']} changes the caller's input tensor x in place; compute a new tensor instead "
                "(x = x / c, not x /= c)")}, keep_earlier=True)


ONE_AXIS = "n, context_length"


def _cut_on_one_axis(namer: Namer, op: dict) -> bool:
    """A context-length mask cut to the sequence on one of its last two axes only (`self.bias[:T] == 0`, student
    trial 21): (n, L) or (L, n) meeting the (n, n) scores, L the context length.  The report named mask-not-sliced
    with no line, and trace marked the raise alone."""
    square = {name: shape for shape, name in namer.pats.items()}
    n, L = square["n, n"][0], square["L, L"][0]
    return L != n and any(tuple(t.get("shape") or ())[-2:] in ((n, L), (L, n)) for t in op["in"])


def _raised(namer: Namer, op: dict) -> dict:
    """What an operation that raised shows: which mistake, when its tensors tell."""
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
        target = tuple(number(a) for a in sizes if number(a) is not None)
        if namer.sym(data) == "B, n, d" and namer.pats.get(target) == "B, H, n, dh":
            return {"id": "split-order-on-slice", "text": (
                "view(B, H, n, dh) straight from (B, n, d) puts the tokens where the heads belong; it raised only "
                "because this tensor is a slice of a larger one (a fused projection), and .contiguous() would hide "
                "the error, not fix it: split with .view(B, n, H, dh).transpose(1, 2)")}
        return {"id": "view-on-slice", "text": (
            f"view() on a slice (not a transpose) raised {message.split(':')[0]}: a view of a slice works only when "
            "it keeps the axes in their order; check the order of the view's sizes")}
    fused = op["op"] in FUSED_MHA or op["op"] == "scaled_dot_product_attention"  # its attn_mask meets the scores
    if any(namer.sym(t) in ("L, L", "1, 1, L, L") for t in op["in"]) and (fused or any(
            namer.sym(t) in SCORES_LIKE for t in op["in"])):
        if any(_sliced_on_leading_axes(namer, t) for t in op["in"]):
            return {"id": "mask-size-not-n", "title": (
                "A (1, 1, context_length, context_length) mask sliced with [:n, :n]: the slice cuts its first two "
                "axes, not the last two"), "text": (
                f"the slice [:n, :n] {LEADING_AXES} the mask stays (1, 1, context_length, context_length) and meets "
                f"the (n, n) scores uncut: use mask[:, :, :n, :n] ({message})")}
        return {"id": "mask-size-not-n", "text": (
            "the (context_length, context_length) mask meets the (n, n) scores without being cut to the sequence: "
            f"use mask[:n, :n] ({message})")}
    if _cut_on_one_axis(namer, op) and (fused or any(namer.sym(t) in SCORES_LIKE for t in op["in"])):
        return {"id": "mask-size-not-n", "text": (
            f"the mask is cut to the sequence on one axis only ([:n] cuts its rows): ({ONE_AXIS}) meets the (n, n) "
            f"scores; cut both, mask[:n, :n] ({message})")}
    if op["op"] in MATMULS and len(op["in"]) >= 2 and namer.sym(op["in"][0]) == "B, H, n, dh" and \
            namer.sym(op["in"][1]) == "B, n, H, dh":
        return {"id": "keys-transposed-wrong", "text": (
            "the scores multiply q (B, H, n, dh) by keys transposed on the wrong axes (B, n, H, dh): use "
            f"k.transpose(2, 3) (or transpose(-2, -1)) to get (B, H, dh, n) ({message})")}
    shapes = [list(t.get("shape") or []) for t in op["in"][:2]]
    if op["op"] in MATMULS and len(shapes) == 2 and len(shapes[0]) == 3 and shapes[1] == shapes[0][::-1] and \
            namer.sym(op["in"][0]) in ("B, n, d", "B, n, dh"):  # one head: keys.T on (B, n, d) reverses every axis
        return {"id": "keys-transposed-wrong", "text": (
            "the scores multiply the queries (B, n, d) by keys with every axis reversed: keys.T on a batch gives "
            f"(d, n, B); use keys.transpose(1, 2) (or transpose(-2, -1)) to get (B, d, n) ({message})")}
    if op["op"] in ("expand", "expand_as") and op["in"] and namer.derives_from(op["in"][0], ("project",)) and \
            "expanded size" in message:  # (B, KV, n, dh).expand(B, H, n, dh): only an axis of size 1 stretches
        return {"id": "kv-heads-expanded", "text": (
            "the key/value heads are shared with .expand, which only stretches an axis of size 1 (multi-query, one "
            "key/value head): with several key/value heads it raises; repeat each one for its group of query heads "
            f"with .repeat_interleave(H // KV, dim=1) ({message})")}
    return {"id": "raised", "text": f"this operation raised {message}"}


def _sliced_on_leading_axes(namer: Namer, info: dict) -> bool:
    """A (1, 1, L, L) mask that went through a slice which kept it (1, 1, L, L): `mask[:n, :n]` written for a 2-d
    mask, on a 4-d buffer, cuts the two axes of size 1 (a student's trial was told to slice a mask it had sliced)."""
    src = info.get("src")
    while src is not None and src < len(namer.ops):
        op = namer.ops[src]
        if op["op"] == "__getitem__" and op["in"]:
            return namer.sym(op["in"][0]) == "1, 1, L, L" and namer.sym(op.get("out")) == "1, 1, L, L"
        if op["op"] not in REINDEX | PASS_THROUGH | {"eq", "__eq__", "ne", "__ne__", "logical_not", "__invert__"} \
                or not op["in"]:
            return False
        src = op["in"][0].get("src")
    return False


def _made_by_transpose(namer: Namer, info: dict) -> bool:
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


PRODUCTS = {"mul", "__mul__", "__rmul__"}


@detector("values-rotated")
def values_rotated(f: Findings) -> None:
    """The values turned by the rotary embedding: on the way from their projection to the mixing weights @ v, they
    are multiplied by a tensor of positions (one with a token axis, made from the module's buffers or from constants,
    never from the input: cos, sin) that also multiplies the queries or the keys on their way into the scores.
    RoPE belongs on the queries and keys only.  Marked at the first such product on the values' way, at the line of
    forward that called it (a helper such as rope(v, cos, sin) runs it on its own line, the same for q, k and v)."""
    operands = _operands(f.namer, f.ops)
    if not operands:
        return
    on_scores = {key for role in "qk" for key in _rotations(f, operands[role]).values()}
    for i, key in sorted(_rotations(f, operands["v"]).items()):
        if key in on_scores and not _turned_back(f, key):
            op = f.ops[i]
            at, code = op.get("call_at", op.get("at")), op.get("call_code", op.get("code", ""))
            f.mark(i, {"id": "values-rotated", "text": (
                "the values are rotated here by the rotary embedding (multiplied by the same positions' cos/sin as "
                "the queries and keys): RoPE turns the queries and keys only, so that their scores depend on the "
                "distance between tokens; the values carry content, not position: leave them as projected"),
                **({"at": at, "code": code} if at not in (None, "?") else {})}, keep_earlier=True)
            return


def _turned_back(f: Findings, key: frozenset) -> bool:
    """The mixed values turned back by the same rotary tables (RoPER, GeoV's "rotary embeddings with relative
    distances": each value enters rotated by its key's position and each query's output is rotated back by its own,
    so a value enters rotated by the distance): a design of its own, not the values rotated by mistake, which the
    trace had marked where the report, rightly, could not tell (no reference of mha-check's is RoPER)."""
    n = f.cfg["n"]
    for op in f.ops:
        if op["op"] not in PRODUCTS or len(op["in"]) != 2:
            continue
        data = [x for x in op["in"] if f.namer.derives_from(x, ("mix values",))]
        factor = [x for x in op["in"] if x not in data]
        if len(data) == 1 and len(factor) == 1 and n in (factor[0].get("shape") or ()) and \
                _made_of(f, factor[0]) == key:
            return True
    return False


def _rotations(f: Findings, t: dict) -> dict[int, frozenset]:
    """The products on the way from the projections to tensor `t` of a projected tensor with a tensor of positions
    (not made from the input, one of its axes the tokens'): operation -> what that factor was made from (the
    module's tensors by name, the operations that created tensors of their own: `arange`), so that the same cos
    read twice (self.cos[pos] in a helper called for q and for v) is recognised as one."""
    namer, n = f.namer, f.cfg["n"]
    if t.get("src") is None:
        return {}
    found = {}
    for a in namer.ancestors(t["src"]) | {t["src"]}:
        op = f.ops[a]
        if op["op"] not in PRODUCTS or len(op["in"]) != 2:
            continue
        data = [x for x in op["in"] if namer.derives_from(x, ("project",))]
        factor = [x for x in op["in"] if x not in data]
        if len(data) != 1 or len(factor) != 1 or n not in (factor[0].get("shape") or ()):
            continue
        key = _made_of(f, factor[0])
        if key:
            found[a] = key
    return found


def _made_of(f: Findings, t: dict) -> frozenset:
    """The module tensors (by name) and the tensor-creating operations a tensor was made from; empty when any of
    it came from the input (x) or from nowhere the trace knows."""
    if t.get("name") == "x":
        return frozenset()
    if t.get("src") is None:
        return frozenset({t["name"]}) if t.get("name") else frozenset()
    made = set()
    for a in f.namer.ancestors(t["src"]) | {t["src"]}:
        ins = f.ops[a]["in"]
        if any(x.get("name") == "x" for x in ins):
            return frozenset()
        made |= {x["name"] for x in ins if x.get("name")}
        if not ins:
            made.add(a)
    return frozenset(made)


@detector("merge-view-to-input-width")
def merge_view_to_input_width(f: Findings) -> None:
    """The heads merged back to the input's width: recorded with the widths apart (`f.cfg["apart"]`: d_in below
    d_out, harness.engine.trace.drive), the forward raised at a view/reshape to (B, n, d_in) of a tensor holding d_out
    features a token.  With d_in = d_out (the worked example) it runs, so it is told at its line, no step of its own:
    the line to change."""
    apart = f.cfg.get("apart") or {}
    op = next((op for op in apart.get("ops", ()) if op.get("raised")), None)
    if op is None or op["op"] not in VIEWS or not op["in"] or op.get("at") in (None, "?"):
        return
    sizes = op["args"][1:]
    if len(sizes) == 1 and sizes[0].startswith(("(", "[")):  # view((B, n, C))
        sizes = sizes[0].strip("()[]").split(",")
    target = [number(a) for a in sizes]
    b, n, d_in, d_out = apart["batch"], apart["n"], apart["d_in"], apart["d_out"]
    shape = op["in"][0].get("shape") or []
    if target != [b, n, d_in] or len(shape) != 4 or b * n * d_out != _product(shape) or d_in == d_out:
        return
    f.mark_whole("merge-view-to-input-width", (
        f"the heads are merged back to the input's width: with d_in = {d_in} and d_out = {d_out} this "
        f"{op['op']} to ({b}, {n}, {d_in}) raised, for the heads hold {d_out} features a token; merge them into "
        "the output width, heads times head width (or -1), not x's last size"), {"at": op["at"],
                                                                                 "code": op.get("code", "")})


def _product(shape: list) -> int:
    out = 1
    for v in shape:
        out *= v
    return out

