"""Detectors of a rotary position embedding (RoPE) written wrongly.  A rotation is a product, on the queries' or
keys' way from their projection into the scores, of the projected tensor with a table of positions (cos, sin, or
complex phases, made from the module's tensors or constants, never from the input: detect_layout's `_rotations`).
The child keeps the values of small tensors that do not depend on the input, so the table is read, not guessed
(`reading`): which frequencies, from which width, at which positions.  A product whose table reads as no rotary
table (another position scheme) is no rotation here, and marks nothing.

- keys-not-rotated: the queries are turned, the keys come straight from their projection (only re-indexed);
- keys-rotated-out-of-step: the keys are turned by the queries' table read at other positions;
- rotated-before-split: the full-width projection is turned by one spectrum over d, before the head split;
- frequencies-from-model-width: the heads are turned by theta^(-2i/d), the head width's place taken by d, marked at
  the line that made the frequencies where the constructor's record says (`spectrum_at`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.engine.trace.detect_layout import _made_of, _operands, _rotations
from harness.engine.trace.registry import Findings, detector
from harness.engine.trace.vocabulary import PASS_THROUGH, REINDEX, TRANSPOSES
from reference.rotary import OTHER_THETAS, THETA, frequencies

THETAS = (THETA, *OTHER_THETAS)
SHIFTS = (0, 1, -1, 2, -2)  # the positions a table's first row may stand for (0: the lesson's)
CLOSE = 1e-6  # a table made in float32 (the constructor's default) and moved to float64 agrees to about 1e-7 at the
# worked example's positions; the spectra differ by 1e-3 and more there


@dataclass(frozen=True)
class Reading:
    """What a table of positions is: `spectrum` "head" (theta^(-2i/dh), i < dh/2: the lesson's), "model"
    (theta^(-2i/d), i < dh/2) or "full" (theta^(-2i/d), i < d/2: one spectrum over the whole width); its base, and
    the position its first row stands for."""
    spectrum: str
    theta: float
    shift: int


def spectra(d: int, heads: int) -> dict[str, tuple[int, int]]:
    """spectrum -> (pairs, the width the frequencies are computed from), for width d and `heads` heads; the wrong
    ones only where they differ from the lesson's (with one head all three are the same)."""
    dh = d // heads
    out = {"head": (dh // 2, dh)}
    if heads > 1:
        out.update(model=(dh // 2, d), full=(d // 2, d))
    return out


def table(t: dict, n: int) -> np.ndarray | None:
    """A recorded tensor's values as an (n, columns) table (axes of size 1 dropped, complex numbers rebuilt), or
    None when it has no values or no such shape."""
    if "values" not in t:
        return None
    a = np.asarray(t["values"], dtype=float)
    if t.get("complex"):
        a = a[..., 0] + 1j * a[..., 1]
    a = a.reshape([s for s in a.shape if s != 1])
    return a if a.ndim == 2 and a.shape[0] == n else None


def _layouts(freqs: np.ndarray, columns: int) -> list[np.ndarray]:
    """The ways `freqs` fill `columns` columns: as they are (interleaved pairs, complex phases), twice over
    (rotate-half) or each twice in a row (interleaved tables of the full head width)."""
    if columns == len(freqs):
        return [freqs]
    if columns == 2 * len(freqs):
        return [np.concatenate([freqs, freqs]), np.repeat(freqs, 2)]
    return []


def reading(t: dict, cfg: dict) -> Reading | None:
    """What the table `t` is, read off its values: cos, sin (either sign) or complex phases of positions times one
    of the spectra, at positions 0..n-1 shifted by one of SHIFTS; None when it is none of them."""
    n = cfg["n"]
    a = table(t, n)
    if a is None:
        return None
    for shift in SHIFTS:
        positions = np.arange(n, dtype=float) + shift
        for spectrum, (pairs, width) in spectra(cfg["d"], cfg["heads"]).items():
            for theta in THETAS:
                for freqs in _layouts(frequencies(pairs, width, theta), a.shape[1]):
                    angles = np.outer(positions, freqs)
                    if any(np.allclose(a, ref, rtol=0, atol=CLOSE) for ref in _tables(angles, np.iscomplexobj(a))):
                        return Reading(spectrum, theta, shift)
    return None


def _tables(angles: np.ndarray, complex_: bool) -> list[np.ndarray]:
    if complex_:
        return [np.exp(1j * angles), np.exp(-1j * angles)]
    return [np.cos(angles), np.sin(angles), -np.sin(angles)]


def turns(f: Findings, t: dict) -> list[tuple[int, Reading]]:
    """The rotations on the way from the projections to tensor `t` whose table reads as a rotary table, in the
    order the forward made them: (operation, reading)."""
    out = []
    for i in sorted(_rotations(f, t)):
        data = [x for x in f.ops[i]["in"] if f.namer.derives_from(x, ("project",))]
        factor = next(x for x in f.ops[i]["in"] if x not in data)
        read = reading(factor, f.cfg)
        if read is not None:
            out.append((i, read))
    return out


def straight(f: Findings, t: dict) -> bool:
    """`t` comes from a projection through re-indexing alone (views, transposes, slices, copies): nothing turned
    it, nothing computed with it."""
    src = t.get("src")
    while src is not None:
        op = f.ops[src]
        if f.namer.labels[src] == "project":
            return True
        if op["op"] not in REINDEX | TRANSPOSES | PASS_THROUGH or not op["in"]:
            return False
        src = op["in"][0].get("src")
    return False


def _called(op: dict) -> dict:
    """{"at", "code"}: the line of forward that led to `op` (the call of a helper such as spin(q, phases), not the
    helper's own line, which turns the keys as well as the queries), when known."""
    at, code = op.get("call_at", op.get("at")), op.get("call_code", op.get("code", ""))
    return {"at": at, "code": code} if at not in (None, "?") else {}


@detector("keys-not-rotated")
def keys_not_rotated(f: Findings) -> None:
    """The queries are turned by a rotary table on their way into the scores, while the keys come there straight
    from their projection: the scores then depend on the query's position, not on the distance."""
    operands = _operands(f.namer, f.ops)
    if not operands:
        return
    turned = turns(f, operands["q"])
    if not turned or not straight(f, operands["k"]):
        return
    i = turned[0][0]
    f.mark(i, {"id": "keys-not-rotated", "text": (
        "the queries are rotated here by the rotary embedding, but the keys reach the scores straight from their "
        "projection, never rotated: a turned query against an unturned key gives scores that depend on where the "
        "query sits, not on how far apart the two tokens are; rotate the keys by their positions as the queries "
        "are"), **_called(f.ops[i])}, keep_earlier=True)


@detector("keys-rotated-out-of-step")
def keys_rotated_out_of_step(f: Findings) -> None:
    """The queries are turned at positions 0..n-1 and the keys by the same spectrum at positions shifted: every
    score sees the distance off by the shift."""
    operands = _operands(f.namer, f.ops)
    if not operands:
        return
    queries, keys = turns(f, operands["q"]), turns(f, operands["k"])
    if not queries or not keys or any(r.shift for _, r in queries):
        return
    spectrum = {(r.spectrum, r.theta) for _, r in queries}
    if any(r.shift == 0 or (r.spectrum, r.theta) not in spectrum for _, r in keys):
        return
    i, read = keys[0]
    n, shift = f.cfg["n"], read.shift
    f.mark(i, {"id": "keys-rotated-out-of-step", "text": (
        f"the keys are rotated here at positions {shift}..{n - 1 + shift}, {abs(shift)} "
        f"{'ahead of' if shift > 0 else 'behind'} the queries' 0..{n - 1}, by the same table: every score sees the "
        f"distance t - s {'-' if shift > 0 else '+'} {abs(shift)} instead of t - s; rotate the queries and the keys "
        "with the same positions"), **_called(f.ops[i])}, keep_earlier=True)


@detector("rotated-before-split")
def rotated_before_split(f: Findings) -> None:
    """A rotation of the queries or keys by one spectrum over the model width (theta^(-2i/d), i < d/2): a table
    that wide turns the d features of a token at once, before the head split (a per-head tensor has dh), and
    gives the heads different slices of it, not each the head width's spectrum.  (A table of the head width
    repeated for every head, applied before the split, is the lesson's rotation: it reads as the head width's
    spectrum, not marked.)"""
    operands = _operands(f.namer, f.ops)
    if not operands:
        return
    for role in "qk":
        for i, read in turns(f, operands[role]):
            if read.spectrum == "full":
                f.mark(i, {"id": "rotated-before-split", "text": (
                    f"the {'queries' if role == 'q' else 'keys'} are rotated here before the head split, over the "
                    f"full width d = {f.cfg['d']}, by one spectrum theta^(-2i/d): head h gets the slower "
                    "frequencies of pairs h·dh/2 ... of it, not the head width's; split into heads first, then "
                    "rotate each head with tables of the head width"), **_called(f.ops[i])}, keep_earlier=True)
                return


@detector("frequencies-from-model-width")
def frequencies_from_model_width(f: Findings) -> None:
    """The heads (after the split) turned by frequencies theta^(-2i/d), i < dh/2: the exponent divided by the
    model width, not the head width.  The line to change is the one that made the frequencies, when the
    constructor's record has it (`spectrum_at`), else the rotation's."""
    operands = _operands(f.namer, f.ops)
    if not operands:
        return
    for role in "qk":
        for i, read in turns(f, operands[role]):
            if read.spectrum == "model":
                factor = next(x for x in f.ops[i]["in"] if not f.namer.derives_from(x, ("project",)))
                f.mark(i, {"id": "frequencies-from-model-width", "text": (
                    f"the rotary frequencies are theta^(-2i/{f.cfg['d']}), from the model width d, not "
                    f"theta^(-2i/{f.cfg['d'] // f.cfg['heads']}) from the head width dh: the slower pairs turn too "
                    "fast; compute the frequencies from the head width"),
                    **(_spectrum_line(f, factor) or _called(f.ops[i]))}, keep_earlier=True)
                return


def _spectrum_line(f: Findings, t: dict) -> dict:
    """{"at", "code"}: the constructor's line that made the frequencies of the table `t` was made from (a buffer's
    record, `spectrum_at`), when exactly one line did; {} otherwise."""
    made = [t.get("made")] if t.get("made") else []
    if t.get("src") is not None:
        made += [x["made"] for a in f.namer.ancestors(t["src"]) | {t["src"]} for x in f.ops[a]["in"]
                 if x.get("made")]
    lines = {(m["spectrum_at"], m.get("spectrum_code", "")) for m in made if m.get("spectrum_at")}
    if len(lines) != 1 or not _made_of(f, t):
        return {}
    at, code = lines.pop()
    return {"at": at, "code": code}


@detector("rotation-pairs-mismatched")
def rotation_pairs_mismatched(f: Findings) -> None:
    """A rotation whose partner tensor pairs the features one way while its table gives the two features of a pair
    different angles (fixes28b item 1): cos/sin tables of the interleaved layout (`repeat_interleave`: columns
    a0, a0, a1, a1, ...) with rotate_half's partner (x_i with x_{i + dh/2}), or the half layout (`cat((f, f))`)
    with rotate-every-two's (x_2m with x_2m+1).  Then x_i turns by one angle and its partner by another: no rotation
    (lengths change, and the scores depend on where the tokens sit, not on t - s only).  Read from the numbers: the
    partner is a signed permutation of the tensor it was made from (which feature goes with which), and the table's
    columns of a pair differ."""
    operands = _operands(f.namer, f.ops)
    if not operands:
        return
    n = f.cfg["n"]
    for role in "qk":
        for i in sorted(_rotations(f, operands[role])):
            data = [x for x in f.ops[i]["in"] if f.namer.derives_from(x, ("project",))]
            factor = next((x for x in f.ops[i]["in"] if x not in data), None)
            tab = table(factor, n) if factor is not None and len(data) == 1 else None
            if tab is None or np.iscomplexobj(tab) or reading(factor, f.cfg) is None:
                continue
            pairs = _partner_pairs(f, data[0], tab.shape[1])
            if pairs is None:
                continue
            apart = [c for c, j in enumerate(pairs) if not np.allclose(tab[:, c], tab[:, j], rtol=0, atol=CLOSE)]
            if not apart:
                continue
            w = tab.shape[1]
            interleaved = all(pairs[c] == c ^ 1 for c in range(w))
            paired = "(x0, x1), (x2, x3), ... (interleaved)" if interleaved else \
                f"(x_i, x_i+{w // 2}) (rotate-half)"
            tables = "cat((freqs, freqs)) (rotate-half's layout)" if interleaved else \
                "repeat_interleave (the interleaved layout)"
            right = "each frequency twice in a row (repeat_interleave(2, dim=-1))" if interleaved else \
                "the frequencies twice over (torch.cat((freqs, freqs), dim=-1))"
            mark = {"id": "rotation-pairs-mismatched", "text": (
                f"the {'queries' if role == 'q' else 'keys'} are turned here with partners paired {paired}, but by "
                f"cos/sin tables laid out by {tables}: feature {apart[0]} and its partner {pairs[apart[0]]} get "
                "different angles, so this is no rotation (the scores depend on where the tokens sit, not on t - s "
                f"only); build the tables with {right}, or pair the features as the tables do"), **_called(f.ops[i])}
            f.mark(i, mark, keep_earlier=True)
            return


def _prints(t: dict, width: int) -> np.ndarray | None:
    """One number per feature of a recorded tensor (..., width): the child's column prints (`columns`), or the same
    weighted sums over its values where it kept them; None where neither was recorded."""
    if (t.get("shape") or [None])[-1] != width:
        return None
    if t.get("columns") is not None and len(t["columns"]) == width:
        return np.asarray(t["columns"], dtype=float)
    if "values" in t and not t.get("complex"):
        flat = np.asarray(t["values"], dtype=float).reshape(-1, width)
        return (flat * (np.sin(np.arange(1, flat.shape[0] + 1)) + 1.5)[:, None]).sum(0)
    return None


def _partner_pairs(f: Findings, t: dict, width: int) -> list[int] | None:
    """For a tensor `t` (..., width) made from an earlier tensor of its shape by moving and negating features
    (rotate_half's cat((-x2, x1)), rotate-every-two's stack((-x2, x1)).flatten), the feature of that tensor each of
    its features is (pairs[c] = j: t[..., c] = ±s[..., j]), read off the column prints; None where `t` is no such
    partner (the identity: the rotation's cos term), pairs no features two by two, or the prints are not recorded."""
    src, mine = t.get("src"), _prints(t, width)
    if src is None or mine is None:
        return None
    scale = max(float(np.abs(mine).max()), 1e-300)
    for a in sorted(f.namer.ancestors(src) | {src}, reverse=True):
        for s in f.ops[a]["in"]:
            theirs = _prints(s, width) if s.get("shape") == t.get("shape") else None
            if theirs is None or np.allclose(np.abs(theirs), 0):
                continue
            pairs = []
            for c in range(width):
                j = [j for j in range(width) if abs(abs(mine[c]) - abs(theirs[j])) <= 1e-9 * scale]
                if len(j) != 1 or abs(theirs[j[0]]) <= 1e-9 * scale:
                    break
                pairs.append(j[0])
            if len(pairs) == width and pairs != list(range(width)) and all(pairs[pairs[c]] == c for c in range(width)):
                return pairs
    return None
