"""Detectors of a KV cache's mistakes, read from the worked example decoded with the layer's own cache
(`f.cfg["cache"]`, harness.engine.trace.drive.CACHE_TRACES: each decode's last call recorded, the plain forward never
runs those lines).  What a call's masking hides is read from the scores the softmax gets (their -inf pattern) or
from what a fused attention is told; a decoded query must see every cached key and itself, and a call's new tokens
must not see those after them.  Each mark is told at the student's line to change, found in the recorded call: the
masking, the append that raised, the positions made from 0, the counter set instead of advanced, the reset."""
from __future__ import annotations

import ast
import re

import numpy as np

from harness.engine.rewrite import parse
from harness.engine.trace.registry import Findings, detector
from harness.engine.trace.vocabulary import ADDS, PASS_THROUGH, SCALARS, SOFTMAXES, VIEWS, sdpa_argument

APPEND_ERROR = "must match except in dimension"  # torch.cat's words when the shapes differ off the appended axis


def _line(op: dict) -> dict | None:
    """{"at", "code"} of the student's line that ran an operation, or None."""
    at = op.get("call_at", op.get("at"))
    return {"at": at, "code": op.get("code", "")} if at not in (None, "?") else None


def _hidden(call: dict) -> tuple[np.ndarray, dict] | None:
    """What the recorded call's attention hides: (an array (new tokens, keys), True where a query does not see a
    key, over every batch entry and head alike), and the operation that applied it; None where it cannot be read (no
    softmax and no fused attention, several, or a pattern of other axes)."""
    ops = call["ops"]
    softmaxes = [op for op in ops if op["op"] in SOFTMAXES]
    fused = [op for op in ops if op["op"] == "scaled_dot_product_attention"]
    new = call["chunks"][-1]
    keys = sum(call["chunks"])
    if len(softmaxes) == 1 and not fused:
        scores = softmaxes[0]["in"][0] if softmaxes[0]["in"] else {}
        shape = scores.get("shape") or []
        if len(shape) < 2 or shape[-2:] != [new, keys]:
            return None
        pattern = np.array(scores["pattern"], bool) if scores.get("neginf") and scores.get("pattern") is not None \
            else np.zeros(shape, bool)
        src = scores.get("src")
        applied = ops[src] if isinstance(src, int) and 0 <= src < len(ops) else softmaxes[0]
        return _same_everywhere(pattern.reshape(-1, new, keys)), applied
    if len(fused) == 1 and not softmaxes:
        op = fused[0]
        q, k = (op["in"][j].get("shape") or [] for j in (0, 1)) if len(op["in"]) >= 2 else ([], [])
        if len(q) < 2 or len(k) < 2 or q[-2] != new or k[-2] != keys:
            return None
        mask = op["in"][3] if len(op["in"]) > 3 and op["in"][3].get("pattern") is not None else None
        if mask is not None:
            keep = np.array(mask["pattern"], bool)
            if keep.shape[-2:] != (new, keys):
                return None
            return _same_everywhere(~keep.reshape(-1, new, keys)), op
        if sdpa_argument(op, "is_causal") == "True":  # torch's triangle is aligned top-left
            return np.triu(np.ones((new, keys), bool), 1), op
        return np.zeros((new, keys), bool), op
    return None


def _same_everywhere(stack: np.ndarray) -> np.ndarray | None:
    return stack[0] if len(stack) and all((s == stack[0]).all() for s in stack) else None


def _wrongly_hidden(call: dict) -> tuple[list[int], dict] | None:
    """The cached keys a recorded call's queries should see and do not (keys at or before the query's position),
    and the operation that hid them; None where nothing right is hidden or the masking cannot be read."""
    found = _hidden(call)
    if found is None or found[0] is None:
        return None
    hidden, op = found
    new, keys = hidden.shape
    start = keys - new  # the first new token's position
    wrong = sorted({k for r in range(new) for k in range(keys) if k <= start + r and hidden[r, k]})
    return (wrong, op) if wrong else None


@detector("cache-append-wrong-axis")
def cache_append_wrong_axis(f: Findings) -> None:
    """The new keys or values appended to the cache along another axis than the tokens': the prompt ran, the next
    call raised in torch.cat, whose shapes then differ off the axis it appends along.  Told at the line that
    raised."""
    cache = f.cfg.get("cache") or {}
    for name in ("decode", "third"):
        said = cache.get(name, {}).get("said") or {}  # what raised, read by the drive (harness.wire.raised)
        if APPEND_ERROR in said.get("text", "") and said.get("at") and "cat" in said.get("code", ""):
            axis = _tokens_axis(cache[name]["ops"])
            mark = {"text": (
                f"decoding a token after the prompt raised here ({said['kind']}: {said['text']}): the new keys or "
                "values are appended to the cache along an axis that is not the tokens' (their shapes differ there, "
                "the prompt's tokens against the one new token); append along "
                + (f"{TOKENS_AXIS}{axis}" if axis is not None else "the tokens' axis"))}
            if axis is not None:  # the catalogue's words are its mutant's layout, (B, n, H, dh): these are the layer's
                mark["symptom"] = (
                    f"Your cache holds the tokens on axis {axis}, where the prompt's keys and values and a new "
                    "token's differ in size; torch.cat appends them along another axis, on which they cannot be "
                    "joined: the prompt runs, and generation crashes at the first token decoded after it.")
            f.mark_whole("cache-append-wrong-axis", mark, {"at": said["at"], "code": said["code"]})
            return


TOKENS_AXIS = "the tokens' axis, dim="  # the words a rewrite reads the axis from (harness.engine.rewrite, "cat-axis")


def _tokens_axis(ops: list[dict]) -> int | None:
    """The one axis on which the cached tensor and the new one torch.cat could not join differ (the tokens': the
    cache holds the prompt's, the new tensor one), read from the operation that raised; None where it is not one."""
    op = next((op for op in ops if op.get("raised") and op["op"] == "cat"), None)
    shapes = [t.get("shape") for t in (op or {}).get("in", ())]
    if len(shapes) != 2 or not all(shapes) or len(shapes[0]) != len(shapes[1]):
        return None
    apart = [a for a, (p, q) in enumerate(zip(*shapes)) if p != q]
    return apart[0] if len(apart) == 1 else None


@detector("cache-mask-not-offset", "cache-position-set")
def cache_positions(f: Findings) -> None:
    """A decoded token's mask hides cached keys it must see.  After a prompt of 2, token 2 alone: hidden keys there
    mean the mask's rows are not offset by the cached tokens (rows from 0: `mask[:n, :keys]`), told at the line that
    masks.  Right there but wrong for token 2 after tokens 0 and 1 fed one a call: the count of cached tokens is set
    to the call's length instead of advanced by it (right after a prompt, 1 after each single token), told at the
    line of forward that sets the module's counter that way, the one such line the call ran."""
    cache = f.cfg.get("cache") or {}
    decode, third = cache.get("decode"), cache.get("third")
    if decode and not decode["raised"]:
        found = _wrongly_hidden(decode)
        if found:
            wrong, op = found
            where = _line(_rows_cut(decode["ops"], op))
            if where:
                f.mark_whole("cache-mask-not-offset", (
                    f"decoding token 2 after a prompt of 2, with keys 0, 1 and 2 cached, the mask applied here hides "
                    f"key(s) {', '.join(map(str, wrong))}: its rows are not those of the new token's position; cut "
                    "the mask's rows from the number of cached tokens on (mask[start:start + n, :keys]), not from "
                    "0"), where)
            return
    if third and not third["raised"] and decode and not decode["raised"]:
        found = _wrongly_hidden(third)
        where = _set_counter(third["lines"]) if found else None
        if where:
            f.mark_whole("cache-position-set", (
                f"token 2 fed alone after tokens 0 and 1 (one a call) has key(s) "
                f"{', '.join(map(str, found[0]))} hidden, while after a prompt of 2 it is right: the count of "
                "cached tokens is set here to this call's length, not advanced by it; add the call's tokens to it "
                "(+=)"), where)


FILLS = {"masked_fill", "masked_fill_", "where"}  # the operations that hide scores with a mask operand
MASK_CARRIES = PASS_THROUGH | VIEWS | {"eq", "__eq__", "ne", "__ne__", "logical_not", "__invert__", "bitwise_not"}


def _rows_cut(ops: list[dict], applied: dict) -> dict:
    """The operation that chose which rows of the mask a decoded call uses: from what fed the softmax, back over
    the scaling (`softmax(scores / dh ** 0.5)`) to the masking, then along its mask operand to the slice of the mask
    (`mask_bool = self.mask.bool()[:n, :keys]` on a line of its own, then `scores.masked_fill_(mask_bool, ...)`):
    the line to change.  Where there is no such slice, the masking; where the masking cannot be read, `applied`."""
    op, steps = applied, 0
    while op["op"] not in FILLS | ADDS and op["op"] in SCALARS | PASS_THROUGH and steps < 8:
        src = op["in"][0].get("src") if op["in"] else None
        if not isinstance(src, int) or not 0 <= src < len(ops):
            return applied
        op, steps = ops[src], steps + 1
    if op["op"] not in FILLS | ADDS:
        return applied
    masks = op["in"][:1] if op["op"] == "where" else op["in"][1:]
    todo, seen = [t.get("src") for t in masks], 0
    while todo and seen < 8:
        src, seen = todo.pop(0), seen + 1
        if not isinstance(src, int) or not 0 <= src < len(ops) or ops[src]["op"] not in MASK_CARRIES | {"narrow"}:
            continue
        if ops[src]["op"] in ("__getitem__", "narrow"):
            return ops[src] if _line(ops[src]) else op
        todo += [t.get("src") for t in ops[src]["in"][:1]]
    return op


def _set_counter(lines: list[dict]) -> dict | None:
    """The one line forward ran that sets an attribute of the module to a value read from no attribute of the
    module and no call (`self.pos = n`, `self.offset = T`), where no line adds to that attribute (`+=`); None where
    there is not exactly one."""
    sets, added = {}, set()
    for line in lines:
        if line.get("fn") == "reset":
            continue
        try:
            tree = parse(line.get("code", "").strip())
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Attribute):
                added.add(node.target.attr)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                    isinstance(node.targets[0], ast.Attribute) and isinstance(node.targets[0].value, ast.Name) and \
                    node.targets[0].value.id == "self" and _plain_count(node.value):
                sets.setdefault(node.targets[0].attr, {"at": line["at"], "code": line.get("code", "")})
    found = [where for attr, where in sets.items() if attr not in added]
    return found[0] if len(found) == 1 else None


def _plain_count(value: ast.expr) -> bool:
    """A value made of local names and numbers only (`n`, `T`, `x.shape[1]` is not): no attribute, call or
    subscript."""
    return all(isinstance(n, (ast.Name, ast.Constant, ast.BinOp, ast.operator, ast.Load)) for n in ast.walk(value)) \
        and any(isinstance(n, ast.Name) for n in ast.walk(value))


@detector("cache-chunk-unmasked")
def cache_chunk_unmasked(f: Findings) -> None:
    """Two new tokens fed in one call after a prompt of 1: the first of them (position 1) sees the second (key 2),
    while a single decoded token is right.  Told at the line where the prompt's call and this one part (`if
    past_kv is None:` before the masking), read from the lines each ran; where both ran the same lines, at the line
    that masks (a fused attention told is_causal only without a cache)."""
    cache = f.cfg.get("cache") or {}
    chunk, first, decode = cache.get("chunk"), cache.get("first"), cache.get("decode")
    if not chunk or chunk["raised"] or not first or not decode or decode["raised"] or _wrongly_hidden(decode):
        return
    found = _hidden(chunk)
    if found is None or found[0] is None or found[0][0, -1]:  # the chunk's first token does not see the last key
        return
    masked = _hidden(first)
    if masked is None or masked[0] is None or not masked[0][0, -1]:  # the prompt itself is not masked: not this
        return
    op = masked[1]
    if op.get("call_at") not in (None, op.get("at")):  # masked in a helper of forward (an inner attention module):
        # forward's lines do not show where the calls part; the line that masks is the one to change
        where = _line({k: v for k, v in op.items() if k != "call_at"})
        if where:
            f.mark_whole("cache-chunk-unmasked", (
                "two new tokens fed in one call after a cached prompt are not masked among themselves: the first "
                "sees the second, while the prompt's call is masked here; mask every call, cached or not, with the new "
                "tokens' rows of the causal mask over every key held"), where)
        return
    at = op.get("at")
    ran = [line["at"] for line in first["lines"] if line.get("fn") != "reset"]
    chunked = {line["at"] for line in chunk["lines"] if line.get("fn") != "reset"}
    if at not in ran:
        return
    parting = next((line for line in reversed([ln for ln in first["lines"] if ln.get("fn") != "reset"]
                                              [:ran.index(at) + 1]) if line["at"] in chunked), None)
    if parting is None:
        return
    f.mark_whole("cache-chunk-unmasked", (
        "two new tokens fed in one call after a cached prompt are not masked among themselves: the first sees the "
        f"second, while the prompt's call is masked (it parts from the prompt's way at {parting['at']}); mask every "
        "call, cached or not, with the new tokens' rows of the causal mask over every key held"),
        {"at": parting["at"], "code": parting.get("code", "")})


@detector("cache-rope-from-zero")
def cache_rope_from_zero(f: Findings) -> None:
    """Token 2 decoded alone after a prompt of 2 is turned by the rotary table's row of position 0 (the prompt's
    first token's), not of position 2: the rotary positions of a call start at 0, not at the number of cached
    tokens.  Read from the rotary tables' values, the decoded call's against the prompt's at the same line; told at
    the line that made the positions (`torch.arange(T)`), else the line that cut the table."""
    cache = f.cfg.get("cache") or {}
    first, decode = cache.get("first"), cache.get("decode")
    if not first or not decode or decode["raised"] or _wrongly_hidden(decode):
        return
    prompt = {}
    for op in first["ops"]:
        out = op.get("out") or {}
        if out.get("values") is not None:
            prompt.setdefault((op["op"], op.get("at")), np.array(out["values"], float))
    for op in decode["ops"]:
        out = op.get("out") or {}
        if out.get("values") is None or (op["op"], op.get("at")) not in prompt:
            continue
        mine, theirs = np.array(out["values"], float), prompt[(op["op"], op.get("at"))]
        axis = _token_axis(theirs.shape, mine.shape)
        if axis is None:
            continue
        row0, row2 = np.take(theirs, [0], axis=axis), np.take(theirs, [2], axis=axis)
        if np.allclose(mine, row0, rtol=1e-9, atol=1e-12) and not np.allclose(row0, row2, rtol=1e-6, atol=1e-9):
            where = _positions_made(decode["ops"], op) or _line(op)
            if where:
                f.mark_whole("cache-rope-from-zero", (
                    "token 2, decoded alone after a prompt of 2, is rotated by the table's row of position 0, as if it "
                    "were the first token: the positions of a call are made from 0 here, not from the number of "
                    "cached tokens; start them at the cache's count (arange(start, start + n))"), where)
            return


def _token_axis(prompt: tuple, decoded: tuple) -> int | None:
    """The axis a rotary table of the prompt's 3 tokens has where the decoded call's has 1, all others alike."""
    if len(prompt) != len(decoded):
        return None
    apart = [a for a, (p, d) in enumerate(zip(prompt, decoded)) if p != d]
    return apart[0] if len(apart) == 1 and prompt[apart[0]] == 3 and decoded[apart[0]] == 1 else None


def _positions_made(ops: list[dict], table: dict) -> dict | None:
    """The line of the `arange` the table was cut with, where one made its index."""
    seen, todo = set(), [t.get("src") for t in table["in"]]
    while todo:
        src = todo.pop()
        if not isinstance(src, int) or src in seen or not 0 <= src < len(ops):
            continue
        seen.add(src)
        if ops[src]["op"] == "arange":
            return _line(ops[src])
        todo += [t.get("src") for t in ops[src]["in"]]
    return None


@detector("cache-not-reset")
def cache_not_reset(f: Findings) -> None:
    """The prompt fed again after reset_cache() is not computed as on the first, empty cache: it raised, or its
    operations, shapes or masking differ: the reset leaves something of the earlier sequence (the count of cached
    tokens, or the keys and values).  Told at reset_cache()'s last line, where what is missing belongs."""
    cache = f.cfg.get("cache") or {}
    first, again = cache.get("first"), cache.get("again")
    resets = [line for line in (again or {}).get("lines", []) if line.get("fn") == "reset"]
    if not first or not again or not resets or _same_call(first, again):
        return
    what = f"raised {again['raised']}" if again["raised"] else "is computed differently (its shapes or masking)"
    f.mark_whole("cache-not-reset", (
        f"after reset_cache(), the same prompt {what} than on the first, empty cache: the reset leaves something of "
        "the earlier sequence (the count of cached tokens, or the keys and values); set every part of the cache "
        "back here: the keys and values to None and the position to 0"),
        {"at": resets[-1]["at"], "code": resets[-1].get("code", "")})


def _same_call(a: dict, b: dict) -> bool:
    """Two recorded calls that ran the same operations on the same shapes with the same masking."""
    if a["raised"] or b["raised"]:
        return not (bool(a["raised"]) ^ bool(b["raised"]))
    key = lambda op: (op["op"], op.get("at"), (op.get("out") or {}).get("shape"), (op.get("out") or {}).get("pattern"))
    return [key(op) for op in a["ops"]] == [key(op) for op in b["ops"]]


WRITES = {"__setitem__", "copy_", "index_copy_", "index_put_"}  # a cache written in place
_SUBSCRIPTED = re.compile(r"(self\.\w+)\s*\[")


@detector("cache-empty-slots-read")
def cache_empty_slots_read(f: Findings) -> None:
    """A decoded call whose attention reads more key slots than tokens were fed, and lets a query see some of those
    after them: a cache preallocated (with zeros) for more tokens and read whole, not up to the tokens fed so far.
    Read from the shapes of the scores the softmax gets and their -inf pattern; told at the line that reads the
    cache back unsliced (a line after the in-place write that names the written attribute without an index), else
    at the line that makes the scores (fixes28)."""
    cache = f.cfg.get("cache") or {}
    for name in ("decode", "chunk"):
        call = cache.get(name)
        if not call or call["raised"]:
            continue
        fed, new = sum(call["chunks"]), call["chunks"][-1]
        for op in call["ops"]:
            if op["op"] not in SOFTMAXES or not op["in"]:
                continue
            scores = op["in"][0]
            shape = scores.get("shape") or []
            if len(shape) < 2 or shape[-2] != new or shape[-1] <= fed:
                continue
            hidden = np.array(scores["pattern"], bool).reshape(-1, new, shape[-1]) if scores.get("neginf") and \
                scores.get("pattern") is not None else np.zeros((1, new, shape[-1]), bool)
            if hidden[..., fed:].all():
                continue  # the slots after the tokens fed are masked: read, but never attended
            where = _read_back(call, shape[-1]) or _line(_scores_made(call, scores) or op)
            if where:
                f.mark_whole("cache-empty-slots-read", (
                    f"decoding after {fed - new} cached token(s), the attention reads {shape[-1]} key slots where "
                    f"{fed} tokens were fed: the cache is read whole, and its {shape[-1] - fed} empty (zero) slots "
                    "get weight too; read it up to the tokens fed so far (cache[:, :, :ptr + n]), or mask the rest"),
                    where)
            return


def _read_back(call: dict, slots: int) -> dict | None:
    """{"at", "code"} of the line that reads a cache written in place back whole: after the write (an in-place
    assignment into a tensor with `slots` positions, `self.cache_k[:, :, a:b] = k`), a line that names the written
    attribute without an index (`k, v = self.cache_k, self.cache_v`)."""
    ops, lines = call["ops"], call.get("lines") or []
    for op in ops:
        if op["op"] not in WRITES or not op["in"] or slots not in (op["in"][0].get("shape") or ()):
            continue
        named = _SUBSCRIPTED.search(op.get("code") or "")
        at = [i for i, line in enumerate(lines) if line.get("at") == op.get("at")]
        if not named or not at:
            continue
        read = re.compile(re.escape(named.group(1)) + r"(?![\w\[]|\s*\[)")
        for line in lines[at[-1] + 1:]:
            code = line.get("code") or ""
            if read.search(code.split("=", 1)[1] if "=" in code else ""):
                return {"at": line["at"], "code": code.strip()}
    return None


def _scores_made(call: dict, scores: dict) -> dict | None:
    """The product that made the scores the softmax gets (through scaling and masking), or None."""
    ops, src = call["ops"], scores.get("src")
    while isinstance(src, int) and 0 <= src < len(ops):
        if ops[src]["op"] in ("matmul", "__matmul__", "bmm", "einsum"):
            return ops[src]
        src = ops[src]["in"][0].get("src") if ops[src]["in"] else None
    return None


_JOINED_FROM = re.compile(r"cat\(\s*[\[(]\s*(self\.\w+|[A-Za-z_]\w*\s*\[[^\]]+\]|[A-Za-z_]\w*\.\w+)")
# the cached keys joined first: an attribute of the layer (`self.cache_k`), or a part of the cache handed in
# (`layer_past[0]`, `past.key`)
_NAMES = re.compile(r"[A-Za-z_]\w*")


@detector("cache-keys-rotated-twice")
def cache_keys_rotated_twice(f: Findings) -> None:
    """A decoded call that joins the cached keys (an attribute of the layer, from an earlier call) with the new
    ones and then turns the joined keys by a table of positions (a rotary rotation: a product with a table of the
    layer's own), where the prompt's call stored the keys after it had turned them: each cached key is turned a
    second time at every call.  Read from the data flow of the decoded call (the join, then the product) and from
    the order the prompt's call ran its lines in (the rotation's line, then the line that stores the attribute);
    told at the decoded call's rotation (fixes28)."""
    cache = f.cfg.get("cache") or {}
    first, decode = cache.get("first"), cache.get("decode")
    if not first or not decode or decode["raised"] or first["raised"]:
        return
    ops, fed = decode["ops"], sum(decode["chunks"])
    for j, join in enumerate(ops):
        attribute = _JOINED_FROM.search(join.get("code") or "")
        if join["op"] != "cat" or not attribute or len(join["in"]) != 2 or join["in"][0].get("src") is not None \
                or join["in"][0].get("name") or join["in"][1].get("src") is None:
            continue
        turned = _turned_after(ops, j, fed)
        if turned is None:
            continue
        at = turned.get("call_at", turned.get("at"))  # the line of forward that called the rotation
        line = {"at": at, "code": (turned.get("call_code") or turned.get("code") or "").strip()} \
            if at not in (None, "?") else None
        joined = attribute.group(1)
        stored_after = _stored_after_turning(first, joined, turned) if joined.startswith("self.") else \
            _returned_after_turning(first, turned)
        if line and stored_after:
            f.mark_whole("cache-keys-rotated-twice", (
                f"the cached keys ({attribute.group(1)}) are joined with the new ones and then rotated with them, at "
                "positions 0 .. cached + n - 1, but they went into the cache already rotated: each cached key is "
                "rotated again at every call; rotate the new keys alone (at their positions) before they join the "
                "cache, or cache the keys unrotated"), line)
            return


def _turned_after(ops: list[dict], join: int, fed: int) -> dict | None:
    """A product, after operation `join`, of a tensor made from the join's output with a table of the layer's own
    (a tensor not made from the input, with `fed` rows: one per key), or None."""
    made_from = {join}
    for i in range(join + 1, len(ops)):
        op = ops[i]
        ins = op.get("in") or []
        if any(t.get("src") in made_from for t in ins):
            made_from.add(i)
            if op["op"] in SCALARS and len(ins) == 2:
                table = next((t for t in ins if t.get("src") not in made_from), None)
                if table is not None and table.get("values") is not None and fed in (table.get("shape") or ()):
                    return op
    return None


def _returned_after_turning(first: dict, turned: dict) -> bool:
    """A cache handed in and returned (`layer_past`, returned as `present`; fixes28b): in the prompt's call, what
    forward returns beside its output holds the keys the rotation's line assigned, named on the return line or on a
    line that ran after the rotation's and assigns a name the return line gives (`present = (k, v)`): the cache the
    next call is handed was already turned."""
    lines = first.get("lines") or []
    at = turned.get("call_at", turned.get("at"))
    turning = [i for i, line in enumerate(lines) if line.get("at") == at]
    code = (turned.get("call_code") or turned.get("code") or "").split("#")[0]
    if not turning or "=" not in code:
        return False
    keys = set(_NAMES.findall(code.split("=", 1)[0]))  # `k = k * cos + ...`: k
    returned = ((first.get("output") or {}).get("returned") or {}).get("code") or ""
    rest = _after_first_item(returned.split("#")[0].strip().removeprefix("return"))
    given = set(_NAMES.findall(rest))
    for line in lines[turning[0] + 1:]:
        left, _, right = (line.get("code") or "").split("#")[0].partition("=")
        if right and not right.startswith("=") and set(_NAMES.findall(left)) & given:
            given |= set(_NAMES.findall(right))
    return bool(keys & given)


def _after_first_item(expression: str) -> str:
    """What a return expression gives after its first item (the output): `self.out(y), present` -> ` present`."""
    depth = 0
    for i, c in enumerate(expression):
        depth += c in "([{"
        depth -= c in ")]}"
        if c == "," and depth == 0:
            return expression[i + 1:]
    return ""


def _stored_after_turning(first: dict, attribute: str, turned: dict) -> bool:
    """In the prompt's call, the line that assigns `attribute` ran after the line of forward that turned the keys
    (the decoded call's rotation is called from that same line): what went into the cache was already turned."""
    lines = first.get("lines") or []
    at = turned.get("call_at", turned.get("at"))
    turning = [i for i, line in enumerate(lines) if line.get("at") == at]
    store = re.compile(re.escape(attribute) + r"\b[^=\[]*=(?!=)")
    stores = [i for i, line in enumerate(lines) if store.search((line.get("code") or "").split("#")[0])]
    return bool(turning and stores and stores[-1] > turning[0])
