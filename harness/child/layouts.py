"""Child side: find which of the student's parameters play the roles Q, K, V, output projection and biases.

Roles are found by structure and by name, never by searching for a mapping that makes the output right: a module
that uses its query projection for keys keeps `k` mapped to its key projection and fails, as it should.  The only
freedom tried by output is the orientation of raw square matrices (`x @ W` or `W @ x` are the same layer written two
ways); the trusted side chooses among the candidates by proving which one reproduces the module's own output.

Every role is stored in nn.Linear convention: weights (out, in), read and written through views of the parameters.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import re
from dataclasses import dataclass, field

import torch
import torch.nn as nn

WEIGHTS = ("wq", "wk", "wv", "wo")
BIASES = ("bq", "bk", "bv", "bo")
_KIND_TOKENS = {"w", "weight", "weights", "b", "bias", "biases", "mat", "matrix", "param", "params", "proj_weight",
                "linear", "layer", "lin", "fc", "heads", "head", "per", "list", "layers", "s"}
_ROLE_NAMES = {
    "q": {"q", "query", "queries", "wq", "toq", "qproj", "queryproj", "qlinear", "linearq", "qnet", "querynet"},
    "k": {"k", "key", "keys", "wk", "tok", "kproj", "keyproj", "klinear", "lineark", "knet", "keynet"},
    "v": {"v", "value", "values", "wv", "tov", "vproj", "valueproj", "vlinear", "linearv", "vnet", "valuenet"},
    "qkv": {"qkv", "wqkv", "toqkv", "qkvproj", "cattn", "inproj", "kqv", "fusedqkv", "qkvnet", "attn", "inprojection",
            "qkvlinear"},
    "kv": {"kv", "tokv", "wkv", "kvproj", "kvlinear", "keysvalues", "keyvalue", "keyvalues", "kvnet"},
    "o": {"o", "out", "output", "proj", "projection", "cproj", "dense", "wo", "outproj", "oproj", "toout", "fcout",
          "outlinear", "linearout", "outputproj", "outputlinear", "wout", "projout", "outputprojection", "resid",
          "concatproj", "combine", "mix", "merge", "unifyheads", "final", "outnet", "o_proj"},
}


def _tokens(name: str) -> list[str]:
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return [t.lower() for t in re.split(r"[^A-Za-z0-9]+", name) if t]


def _by_name(fn):
    """`fn` of a name, remembered for up to 4,096 plain `str` names: a pure function of the text, asked for every
    parameter at every build (issue 27: a submission's thirty-odd builds read the same names); a name of another type
    (a str subclass of the student's, whose equality is its own) is read afresh every time."""
    remembered = functools.lru_cache(maxsize=4096)(fn)
    return functools.wraps(fn)(lambda name: remembered(name) if type(name) is str else fn(name))


_PREFIXES = ("w", "b", "to", "proj", "cast")  # W_query, bq, tokeys (peterbloem/former: tokeys, toqueries), proj_q,
# cast_queries (sgrvinod's tutorial: cast_queries, cast_keys_values, cast_output)


@_by_name
def role_of(name: str) -> str | None:
    """'W_query' -> 'q', 'c_attn' -> 'qkv', 'out_proj' -> 'o', 'bq' -> 'q', 'tokeys' -> 'k', 'heads' -> None.
    A name that says its role decides the reading: read by position instead, `tokeys` declared first was taken for
    W_q, and the correct layer was told it had swapped its queries and keys."""
    toks = _tokens(name)
    joined = "".join(t for t in toks if t not in _KIND_TOKENS) or "".join(toks)
    plural = [joined[:-1]] if len(joined) > 1 and joined.endswith("s") else []  # qs, ks, vs: one Linear a head
    for candidate in (joined, "".join(toks), *plural):
        for role, names in _ROLE_NAMES.items():
            if candidate in names:
                return role
    for prefix in _PREFIXES:
        if len(joined) > len(prefix) and joined.startswith(prefix):
            for role, names in _ROLE_NAMES.items():
                if joined[len(prefix):] in names:
                    return role
    return None


@_by_name
def _generic(name: str) -> bool:
    """A name that says what a layer is, not what it does: `linear`, `fc`, `layer`."""
    return all(t in _KIND_TOKENS for t in _tokens(name))


@dataclass
class Piece:
    """Part of a role in nn.Linear convention: `param` (or, for per-head 3-D parameters, its head `index` along
    `head_axis`: `param[index]` for (H, ., .), `param[:, index]` for (d, H, dh) as in einsum('btd,dhe->bhte')),
    transposed when `transpose`, rows `rows` of it; the pieces of a role are joined along `axis` (0: stacked output
    rows, as heads of Q/K/V are; 1: side by side input columns, as heads of a per-head output projection are).
    `part`: (axis, index) of a 4-D fused per-head parameter's role axis (w_qkv of shape (3, H, d, dh) used as
    einsum('btd,shde->sbhte')), selected first; `head_axis` is then an axis of the parameter itself."""

    param: torch.Tensor
    name: str
    transpose: bool = False
    rows: slice | None = None
    index: int | None = None
    axis: int = 0
    head_axis: int = 0
    part: tuple[int, int] | None = None

    def _head_axis_left(self) -> int:
        """The heads axis once the role axis (`part`) is taken out."""
        return self.head_axis - (self.part is not None and self.head_axis > self.part[0])

    def _select(self, t: torch.Tensor) -> torch.Tensor:
        t = t if self.part is None else t.select(*self.part)
        t = t if self.index is None else t.select(self._head_axis_left(), self.index)
        t = t.t() if self.transpose else t
        return t if self.rows is None else t[self.rows]

    def view(self) -> torch.Tensor:
        return self._select(self.param)

    def grad(self) -> torch.Tensor:
        g = self.param.grad
        return torch.zeros_like(self.view()) if g is None else self._select(g)

    def describe(self) -> str:
        """`W_q[1]`, `W_q[:, 1]` (heads second); a 4-D fused one `w_qkv[0][1]` (role, then head), `qkv[:, 0][1]`
        (heads first): chained indices, each axis kept in the text as the trusted side reads it (its _reading)."""
        index = lambda axis, i: f"[{', '.join([':'] * axis + [str(i)])}]"
        part = "" if self.part is None else index(*self.part)
        head = "" if self.index is None else index(self._head_axis_left(), self.index)
        s = self.name + part + head + (".T" if self.transpose else "")
        if self.rows is not None:
            s += f"[{self.rows.start}:{self.rows.stop}" + (f":{self.rows.step}]" if self.rows.step else "]")
        return s


@dataclass
class Layout:
    roles: dict[str, list[Piece]]
    how: str  # how the layout was recognised, for the report
    notes: list[str] = field(default_factory=list)
    certain: bool = False  # the only reading of the parameters, by structure (the trusted side may rely on it)
    kv_width: int | None = None  # rows of W_k and W_v when narrower than d_out (grouped-query attention)

    def covers(self, module: nn.Module) -> bool:
        """Every parameter of the module plays a role: nothing left over that could change the output."""
        used = {id(p.param) for pieces in self.roles.values() for p in pieces}
        return all(id(p) in used for p in module.parameters())

    def read(self, grad: bool = False) -> dict[str, torch.Tensor]:
        out = {}
        for role, pieces in self.roles.items():
            parts = [(p.grad() if grad else p.view()).detach() for p in pieces]
            out[role] = torch.cat(parts, pieces[0].axis) if len(parts) > 1 else parts[0].clone()
        return out

    @torch.no_grad()
    def write(self, values: dict[str, torch.Tensor]) -> None:
        for role, pieces in self.roles.items():
            value, start = values[role], 0
            for p in pieces:
                v = p.view()
                size = v.shape[p.axis]
                v.copy_(value[start:start + size] if p.axis == 0 else value[:, start:start + size])
                start += size

    def describe(self) -> dict[str, str]:
        return {role: " + ".join(p.describe() for p in pieces) for role, pieces in self.roles.items()}


ROLE_NAMES = {"wq": "W_q", "wk": "W_k", "wv": "W_v", "wo": "W_o", "bq": "b_q", "bk": "b_k", "bv": "b_v",
              "bo": "b_o"}  # the lesson's names, for messages a student reads


def _expected_shapes(d_in: int, d_out: int, d_kv: int | None = None) -> dict[str, tuple]:
    kv = d_out if d_kv is None else d_kv
    return {"wq": (d_out, d_in), "wk": (kv, d_in), "wv": (kv, d_in), "wo": (d_out, d_out),
            "bq": (d_out,), "bk": (kv,), "bv": (kv,), "bo": (d_out,)}


def kv_widths(d_out: int, heads: int, kv_heads: int | None) -> list[int | None]:
    """The heights of W_k and W_v to try, in order: the configuration's (kv_heads · dh; None for d_out, plain
    multi-head), then d_out, then dh (multi-query: a class with one shared key/value head and no parameter for it).
    Other numbers of key/value heads are only tried when the configuration asks for them (its kv_heads)."""
    if heads <= 0 or d_out % heads:
        return [None]
    dh = d_out // heads
    first = None if not kv_heads or kv_heads == heads else kv_heads * dh
    return list(dict.fromkeys([first, None] + ([dh] if heads > 1 else [])))  # dh: one shared key/value head


def _validate(roles: dict[str, list[Piece]], d_in: int, d_out: int, d_kv: int | None = None,
              out_proj: bool = True) -> str | None:
    """Why `roles` is not a reading of the layer's parameters, or None.  `d_kv`: the height of W_k and W_v
    (grouped-query attention; None: d_out).  `out_proj=False`: the single-head form (harness.wire.form), whose
    W_q, W_k, W_v are the whole layer: no W_o is expected, and one found is no part of it."""
    if not out_proj and ("wo" in roles or "bo" in roles):
        return "found an output projection, which the single-head layer does not have"
    missing = [r for r in WEIGHTS if r not in roles and (out_proj or r != "wo")]
    if missing:
        return "found no parameter for " + ", ".join(ROLE_NAMES[r] for r in missing)
    shapes = _expected_shapes(d_in, d_out, d_kv)
    for role, pieces in roles.items():
        views = [p.view() for p in pieces]
        if any(v.dim() != len(shapes[role]) for v in views):
            return f"{ROLE_NAMES[role]}: pieces of unexpected rank"
        axis = pieces[0].axis
        got = list(views[0].shape)
        got[axis] = sum(v.shape[axis] for v in views)
        if any(v.shape[1 - axis] != views[0].shape[1 - axis] for v in views if v.dim() == 2):
            return f"{ROLE_NAMES[role]}: pieces of different shapes"
        if tuple(got) != shapes[role]:
            return (f"{ROLE_NAMES[role]} made of {' + '.join(p.describe() for p in pieces)} would have shape "
                    f"{tuple(got)}, not {shapes[role]}")
    return None


def _mha_layout(m: nn.MultiheadAttention, prefix: str) -> dict[str, list[Piece]]:
    E = m.embed_dim
    roles: dict[str, list[Piece]] = {}
    if m.in_proj_weight is not None:
        for i, r in enumerate("qkv"):
            roles["w" + r] = [Piece(m.in_proj_weight, prefix + "in_proj_weight", rows=slice(i * E, (i + 1) * E))]
    else:
        for r in "qkv":
            roles["w" + r] = [Piece(getattr(m, f"{r}_proj_weight"), f"{prefix}{r}_proj_weight")]
    if m.in_proj_bias is not None:
        for i, r in enumerate("qkv"):
            roles["b" + r] = [Piece(m.in_proj_bias, prefix + "in_proj_bias", rows=slice(i * E, (i + 1) * E))]
    roles["wo"] = [Piece(m.out_proj.weight, prefix + "out_proj.weight")]
    if m.out_proj.bias is not None:
        roles["bo"] = [Piece(m.out_proj.bias, prefix + "out_proj.bias")]
    return roles


@dataclass
class _Entry:
    role: str  # q, k, v, qkv, o
    kind: str  # w or b
    param: torch.Tensor
    name: str
    linear: bool  # nn.Linear weight (out, in): orientation known
    head: int | None
    per_head: bool = False  # a 3-D raw parameter with a heads axis: one matrix per head
    head_axes: tuple[int, ...] = (0,)  # the axes of a 3-D parameter as long as the number of heads (tried in order)
    head_axis: int = 0  # the one read as the heads axis in this reading
    fused_ways: tuple[tuple[int, int, bool], ...] = ()  # a 4-D fused per-head q/k/v parameter: its readings
    # (role axis, heads axis, transposed), `_fused_ways`
    fused: tuple[int, int, bool] | None = None  # the one read in this reading
    fused_bias: tuple[torch.Tensor, str] | None = None  # its 3-D bias b_qkv (3, H, dh), and the bias's name


def _head_index(module: nn.Module, qualname: str, heads: int) -> int | None:
    """The index in a ModuleList/Sequential of `heads` per-head modules that this parameter sits in, if any."""
    parts = qualname.split(".")
    node = module
    for part in parts[:-1]:
        child = getattr(node, part, None) if not part.isdigit() else node[int(part)]
        if isinstance(node, (nn.ModuleList, nn.Sequential)) and part.isdigit() and len(node) == heads > 1:
            return int(part)
        if child is None:
            return None
        node = child
    return None


LINEAR_LIKE = {"weight": "w", "W": "w", "w": "w", "kernel": "w", "weights": "w", "bias": "b", "b": "b",
               "biases": "b"}  # parameter names of a Linear-like module (HF's Conv1D, a course's own Linear)


def _collect(module: nn.Module, heads: int) -> tuple[list[_Entry], list[str]]:
    entries, unknown, fused, fused_biases = [], [], [], []
    for qual, p in module.named_parameters():
        owner_name, _, pname = qual.rpartition(".")
        owner = module.get_submodule(owner_name) if owner_name else module
        is_linear = isinstance(owner, nn.Linear) and pname in ("weight", "bias")
        if is_linear or (pname in LINEAR_LIKE and owner_name):  # nn.Linear, or a Linear-like module of its own
            path = owner_name.split(".")
            # a ModuleList of per-head layers (q_heads.0.weight): the list's name carries the role
            label = path[-2] if path[-1].isdigit() and len(path) > 1 else path[-1]
            if is_linear and len(path) > 1 and _generic(label):  # labml: `self.query = Prepare(...)` holding
                label = path[-2]  # `.linear`: the module's own name carries the role
            kind = LINEAR_LIKE[pname]
        else:
            label = pname
            kind = "w" if p.dim() >= 2 else "b"
        role = role_of(label)
        if p.dim() == 4 and role in ("qkv", None) and (ways := _fused_ways(tuple(p.shape), heads)):
            fused.append(_Entry("qkv", "w", p, qual, False, None, fused_ways=ways, fused=ways[0]))
            continue
        if p.dim() == 3 and role == "qkv" and _bias_name(label) and _bias_ways(tuple(p.shape), heads, True):
            fused_biases.append((p, qual))
            continue
        axes = tuple(a for a in range(3) if p.shape[a] == heads) if p.dim() == 3 else ()
        if role is None or p.dim() > 3 or (p.dim() == 3 and (not axes or role in ("qkv", "kv"))):
            unknown.append(qual)
            continue
        entries.append(_Entry(role, kind, p, qual, is_linear, _head_index(module, qual, heads), p.dim() == 3,
                              axes or (0,), axes[0] if axes else 0))
    if len(fused) == 1 and not any(e.kind == "w" and e.role != "o" for e in entries):  # the only q/k/v there is
        if len(fused_biases) == 1:
            fused[0].fused_bias = fused_biases[0]
            fused_biases = []
        return [*fused, *entries], unknown + [name for _, name in fused_biases]
    return entries, unknown + [e.name for e in fused] + [name for _, name in fused_biases]


def _bias_name(label: str) -> bool:
    """`b_qkv`, `qkv_bias`, `bqkv`: a name that says bias (a 3-D fused q/k/v parameter is a weight otherwise)."""
    toks = _tokens(label)
    return any(t in ("b", "bias", "biases") for t in toks) or toks[0].startswith("b") and role_of(toks[0][1:]) == "qkv"


def _bias_ways(shape: tuple[int, ...], heads: int, role_first: bool) -> list[tuple[int, int]]:
    """The (role axis, heads axis) readings of a fused per-head bias b_qkv (3, H, dh), (H, 3, dh)...: those that put
    the role before the heads as its weight does (`role_first`) first, as a layer writes the two alike."""
    ways = [(r, h) for r, h in itertools.permutations(range(3), 2) if shape[r] == 3 and shape[h] == heads]
    return sorted(ways, key=lambda w: (w[0] < w[1]) != role_first)


def _fused_how(entries: list[_Entry]) -> str:
    """How a 4-D fused q/k/v parameter is read, its axes named in order: ' (fused q/k/v per head, axes (role head d
    dh))' for w_qkv (3, H, d, dh) used as x @ W.  The axes are in the text: the trusted side finds the same reading
    on a configuration with 3 heads, where the role and heads axes are both 3 long (Context._same_layout)."""
    e = next(e for e in entries if e.fused)
    role, head, transposed = e.fused
    names = iter(("d", "dh") if transposed else ("dh", "d"))
    axes = ["role" if a == role else "head" if a == head else next(names) for a in range(4)]
    return f" (fused q/k/v per head, axes ({' '.join(axes)}))"


def _fused_ways(shape: tuple[int, ...], heads: int) -> tuple[tuple[int, int, bool], ...]:
    """The readings of a 4-D parameter as the three projections, one matrix per role and head: w_qkv (3, H, d, dh)
    as in einsum('btd,shde->sbhte'), (H, 3, d, dh), (d, 3, H, dh), (3, d, H, dh)...  The axis of length 3 is the
    role, q, k, v in that order (no name tells another); the axis as long as the heads, the heads; the other two
    hold one head's matrix, (d, dh) used as x @ W (transposed) or (dh, d).  Every assignment the sizes allow is
    offered (with 3 heads, or heads 3 wide, the role and heads axes may trade places; with d = dh both
    orientations fit): the trusted side proves which one reproduces the output, the sizes leave the rest to
    `_validate`.  (role axis, heads axis, transposed), the role axis before the heads one first; () for none."""
    ways = []
    for role, head in itertools.permutations(range(4), 2):
        if shape[role] == 3 and shape[head] == heads:
            ways += [(role, head, True), (role, head, False)]
    return tuple(sorted(ways, key=lambda w: (w[0] > w[1], w)))


def _head_axis_choices(entries: list[_Entry]) -> list[list[_Entry]]:
    """The entries once per reading of the heads axis of their 3-D per-head parameters: (H, d, dh) as in
    einsum('btd,hde->bhte'), (d, H, dh) as in einsum('btd,dhe->bhte'), (d, dh, H)...  Q, K and V share one axis (they
    are written alike), the output projection has its own; the first axis as long as the heads comes first, so a
    layer whose heads lead is read as before.  Where the sizes leave one axis (the usual case) there is one reading."""
    groups = {"in": [i for i, e in enumerate(entries) if e.per_head and e.role != "o"],
              "o": [i for i, e in enumerate(entries) if e.per_head and e.role == "o"]}
    options = []
    for members in groups.values():
        common = [a for a in entries[members[0]].head_axes if all(a in entries[i].head_axes for i in members)] \
            if members else [None]
        options.append(common or [entries[members[0]].head_axes[0]])
    fused = [i for i, e in enumerate(entries) if e.fused_ways]  # a 4-D fused q/k/v: each of its readings
    choices = []
    for axis_in, axis_o, *ways in itertools.product(*options, *[entries[i].fused_ways for i in fused]):
        choice = list(entries)
        for group, axis in zip(groups.values(), (axis_in, axis_o)):
            for i in group:
                choice[i] = dataclasses.replace(entries[i], head_axis=axis)
        for i, way in zip(fused, ways):
            choice[i] = dataclasses.replace(entries[i], fused=way, head_axis=way[1])
        choices.append(choice)
    return choices


def _without_heads(e: _Entry) -> tuple[int, ...]:
    """The shape of one head's matrix of a per-head 3-D parameter (the heads axis taken out)."""
    return tuple(n for a, n in enumerate(e.param.shape) if a != e.head_axis)


def _reading(roles: dict[str, list[Piece]]) -> tuple:
    """What a layout reads, for telling two candidates apart: each role's pieces (parameter, rows, orientation)."""
    return tuple(sorted((r, tuple((p.name, (p.rows.start, p.rows.stop, p.rows.step) if p.rows else None, p.transpose,
                                   p.index,
                                   p.axis, p.part, p.head_axis) for p in pieces)) for r, pieces in roles.items()))


ROLE_ORDERS = ("qkv", "kqv", "qvk", "kvq", "vqk", "vkq")  # the declared order first


Readings = list[tuple[dict[str, list[Piece]], str]]  # candidate roles, and how they were recognised


def _by_position(module: nn.Module, d_in: int, d_out: int, heads: int, d_kv: int | None = None,
                 out_proj: bool = True, orders: tuple[str, ...] = ROLE_ORDERS) -> Readings:
    """No names we know: three Linear(d_in, d_out) then one Linear(d_out, d_out), or one fused Linear(d_in, 3·d_out)
    (read as [Q; K; V] and, with several heads, as [q_h; k_h; v_h] per head).  Grouped-query (`d_kv`): only a
    fused Linear(d_in, d_out + 2·d_kv), read as [Q; K; V].  Without an output projection (the single-head form):
    the three Linear(d_in, d_out), or the fused one, alone.  Q, K and V in each of the `orders` (every order when no
    name says which is which)."""
    linears = [(n, m) for n, m in module.named_modules() if isinstance(m, nn.Linear)]
    if not out_proj:
        return _by_position_no_out(linears, d_in, d_out, orders, heads)
    if d_kv is not None:
        return _fused_grouped(linears, d_in, d_out, d_kv, heads)
    fused = [(n, m) for n, m in linears if (m.out_features, m.in_features) == (3 * d_out, d_in)]
    square = [(n, m) for n, m in linears if (m.out_features, m.in_features) == (d_out, d_out)]
    proj = [(n, m) for n, m in linears if (m.out_features, m.in_features) == (d_out, d_in)]
    readings: list[tuple[dict[str, list[Piece]], str]] = []
    how = "by position of the nn.Linear layers (names not recognised)"
    if len(fused) == 1 and len(square) == 1 and len(linears) == 2:
        (fn, f), (on, o) = fused[0], square[0]
        dh = d_out // heads
        blocks = [(lambda i: [slice(i * d_out, (i + 1) * d_out)], " (fused q/k/v)")]
        if heads > 1:
            blocks.append((lambda i: [slice((3 * h + i) * dh, (3 * h + i + 1) * dh) for h in range(heads)],
                           " (fused q/k/v, per head)"))
        blocks += _interleaved(d_out, heads) if orders != ("qkv",) else []
        for rows_of, order in blocks:
            for roles_order in (orders if "interleaved" not in order else orders[:1]):
                readings.append((_fused_roles(f, fn, rows_of, roles_order), how + order + _order_note(roles_order)))
    elif heads_read := _per_head_slots(module, d_in, d_out, heads):  # (with one head too: the reading proven with
        # several is found again, by its name, on a configuration with one)
        slots, kind = heads_read
        used = {id(m) for slot in slots for _, m in slot}
        rest = [(n, m) for n, m in linears if id(m) not in used]
        if len(rest) != 1 or (rest[0][1].out_features, rest[0][1].in_features) != (d_out, d_out):
            return []
        readings += _separate_orders(slots, f"{how} ({kind})", orders)
        (on, o), = rest
    elif len(linears) == 4 and (d_in != d_out and len(proj) == 3 and len(square) == 1
                                or d_in == d_out and len(square) == 4):
        readings += _separate_orders([[lin] for lin in (linears[:3] if d_in == d_out else proj)], how, orders)
        on, o = linears[3] if d_in == d_out else square[0]
    else:
        return []
    for roles, _ in readings:
        roles["wo"] = [Piece(o.weight, on + ".weight")]
        if o.bias is not None:
            roles["bo"] = [Piece(o.bias, on + ".bias")]
    return [(_in_lesson_order(roles), how) for roles, how in readings]


def _in_lesson_order(roles: dict[str, list[Piece]]) -> dict[str, list[Piece]]:
    """W_q, W_k, W_v, W_o, then the biases, whatever order the roles were assigned in (for the report)."""
    return {role: roles[role] for role in sorted(roles, key=_ROLE_RANK.__getitem__)}


AXES = "role", "head", "dim"  # the three axes a fused projection's rows may be laid out along, in some order


def _interleaved(d_out: int, heads: int) -> list[tuple]:
    """The fused layouts other than [Q; K; V] blocks and [q_h; k_h; v_h] per head: rows interleaved along the
    role, head and head-width axes in another order (einops' `'b t (d k h) -> k b h t d'` puts the head fastest,
    then the role: W_q's rows of head h are h, h + 3H, h + 6H, ...).  Each gives (rows_of(role) -> one strided
    slice per head, how), read in the declared role order only (so many readings are tried for the mistakes too)."""
    dh = d_out // heads
    size = {"role": 3, "head": heads, "dim": dh}
    found = []
    for order in itertools.permutations(AXES):
        if order in (("role", "head", "dim"), ("head", "role", "dim")):
            continue  # the two usual layouts (with one head, some of the others read the same rows: they are kept,
            # under their own names, so that a layout proven with several heads is found again with one: see
            # Context._same_layout)
        stride = {a: int(math.prod(size[b] for b in order[i + 1:])) for i, a in enumerate(order)}

        def rows_of(role: int, stride=stride) -> list[slice]:
            return [slice(role * stride["role"] + h * stride["head"],
                          role * stride["role"] + h * stride["head"] + (dh - 1) * stride["dim"] + 1,
                          stride["dim"] if stride["dim"] > 1 else None) for h in range(heads)]
        found.append((rows_of, f" (fused q/k/v, interleaved as ({' '.join(order)}))"))
    return found


def _by_position_no_out(linears: list, d_in: int, d_out: int, orders: tuple[str, ...],
                        heads: int = 1) -> list[tuple[dict[str, list[Piece]], str]]:
    """The readings by position of a layer without an output projection (the single-head form, or a multi-head
    layer that has none: `without_out_proj`): Q, K, V in each of the `orders` of three Linear(d_in, d_out), or of
    the blocks of one fused Linear(d_in, 3·d_out), or its rows interleaved (`_interleaved`; with several heads,
    also [q_h; k_h; v_h] per head, as `_by_position` reads a fused projection)."""
    how = "by position of the nn.Linear layers (names not recognised)"
    shapes = [(m.out_features, m.in_features) for _, m in linears]
    if shapes == [(3 * d_out, d_in)]:
        (n, f), = linears
        block = lambda i: [slice(i * d_out, (i + 1) * d_out)]
        dim_role = lambda i: [slice(i, 3 * (d_out - 1) + i + 1, 3)]  # einops' '(d k)': W_q's rows 0, 3, 6, ...
        found = ([(_fused_roles(f, n, block, order), how + " (fused q/k/v)" + _order_note(order)) for order in orders]
                 + [(_fused_roles(f, n, dim_role, "qkv"), how + " (fused q/k/v, interleaved as (dim role))")])
        if heads > 1 and d_out % heads == 0:
            dh = d_out // heads
            per_head = lambda i: [slice((3 * h + i) * dh, (3 * h + i + 1) * dh) for h in range(heads)]
            found += [(_fused_roles(f, n, per_head, order), how + " (fused q/k/v, per head)" + _order_note(order))
                      for order in orders]
        return found
    if shapes != [(d_out, d_in)] * 3:
        return []
    return _separate_orders([[lin] for lin in linears], how, orders)


def _fused_roles(f: nn.Linear, name: str, rows_of, order: str) -> dict[str, list[Piece]]:
    """W (and b) of each role in `order` read from rows of one fused Linear: `rows_of(i)`, the i-th block's slices
    (one per head where the heads are interleaved), joined in that order; in the lesson's role order."""
    roles = {}
    for i, r in enumerate(order):
        roles["w" + r] = [Piece(f.weight, name + ".weight", rows=s) for s in rows_of(i)]
        if f.bias is not None:
            roles["b" + r] = [Piece(f.bias, name + ".bias", rows=s) for s in rows_of(i)]
    return _in_lesson_order(roles)


def _order_note(order: str) -> str:
    return "" if order == "qkv" else f" (declared as {', '.join(order)})"


def _separate_orders(slots: list[list[tuple[str, nn.Linear]]], how: str,
                     orders: tuple[str, ...]) -> list[tuple[dict[str, list[Piece]], str]]:
    """Three same-shaped projections whose names say nothing: every assignment of the roles q, k, v to them, the
    declared order first.  Each is a plausible reading, so a correct layer is reproduced under one of them (keys
    declared first is as correct as queries first); read only in the declared order, it was told it had swapped its
    queries and keys, the mirror image of a correct layer, which proves nothing.  A projection (a slot) is one
    Linear, or one Linear a head (`_per_head_slots`), whose weights are stacked in head order, as the heads' outputs
    are concatenated."""
    readings = []
    for order in orders:
        roles = {}
        for r, slot in zip(order, slots):
            roles["w" + r] = [Piece(m.weight, n + ".weight") for n, m in slot]
            if all(m.bias is not None for _, m in slot):
                roles["b" + r] = [Piece(m.bias, n + ".bias") for n, m in slot]
        readings.append((_in_lesson_order(roles), how + _order_note(order)))
    return readings


def _per_head_slots(module: nn.Module, d_in: int, d_out: int,
                    heads: int) -> tuple[list[list[tuple[str, nn.Linear]]], str] | None:
    """Per-head projections whose names say nothing, as three slots of one Linear(d_in, d_out/H) a head (in head
    order), and how they are held: an nn.ModuleList of H modules each holding three such Linear layers (Karpathy's
    `heads[h].a/.b/.c`: a slot is the h-th module's i-th Linear, declared order), or three nn.ModuleLists of H of
    them (`a[h]`, `b[h]`, `c[h]`: a slot per list).  None for anything else: as many heads as the configuration's
    (with one head, a list of one), every projection the same shape."""
    if heads < 1 or d_out % heads:
        return None
    shape = (d_out // heads, d_in)

    def linears(m: nn.Module, prefix: str) -> list[tuple[str, nn.Linear]]:
        return [(prefix + n, c) for n, c in m.named_modules() if isinstance(c, nn.Linear)]

    modules, lists, inside = [], [], []
    for name, node in module.named_modules():
        prefix = f"{name}." if name else ""
        if not isinstance(node, nn.ModuleList) or len(node) != heads or not linears(node, prefix) \
                or any(prefix.startswith(outer) for outer in inside):  # (a list within a list of heads: its own)
            continue
        inside.append(prefix)
        if all(isinstance(c, nn.Linear) for c in node):
            lists.append([(f"{prefix}{i}", c) for i, c in enumerate(node)])
        else:
            modules.append([linears(c, f"{prefix}{i}.") for i, c in enumerate(node)])
    if len(modules) == 1 and not lists and all(len(own) == 3 for own in modules[0]):
        slots, kind = [list(slot) for slot in zip(*modules[0])], "per-head modules"
    elif len(lists) == 3 and not modules:
        slots, kind = lists, "per-head lists"
    else:
        return None
    if any((m.out_features, m.in_features) != shape for slot in slots for _, m in slot):
        return None
    return slots, kind


_ROLE_RANK = {name: i for i, name in enumerate(WEIGHTS + BIASES)}


def _fused_grouped(linears: list, d_in: int, d_out: int, d_kv: int,
                   heads: int) -> list[tuple[dict[str, list[Piece]], str]]:
    """A grouped layer's one fused Linear(d_in, d_out + 2·d_kv), read as [Q; K; V] blocks (gpt-fast, mamba) and,
    with several key/value groups, per group as [its query heads; its key head; its value head] (litgpt's
    (n_query_groups, q_per_kv + 2, head_size) view): the proof decides between them."""
    fused = [(n, m) for n, m in linears if (m.out_features, m.in_features) == (d_out + 2 * d_kv, d_in)]
    square = [(n, m) for n, m in linears if (m.out_features, m.in_features) == (d_out, d_out)]
    if not (len(fused) == 1 and len(square) == 1 and len(linears) == 2):
        return []
    (fn, f), (on, o) = fused[0], square[0]
    how = "by position of the nn.Linear layers (names not recognised) (fused q/k/v, grouped"
    cuts = _grouped_rows(d_out, d_kv)
    blocks = [(lambda i: [cuts[i]], how + ")")]
    dh = d_out // heads
    kv = d_kv // dh if dh else 0
    if kv >= 1 and kv * dh == d_kv and heads % kv == 0:  # (one group: the same rows as [Q; K; V], kept under its own
        # name so that a layout proven with several groups is found again with one: see Context._same_layout)
        blocks.append((lambda i: _per_group_rows(i, kv, heads // kv, dh), how + ", per group [q..; k; v])"))
    readings = []
    for rows_of, text in blocks:
        roles = _fused_roles(f, fn, rows_of, "qkv")
        roles["wo"] = [Piece(o.weight, on + ".weight")]
        if o.bias is not None:
            roles["bo"] = [Piece(o.bias, on + ".bias")]
        readings.append((roles, text))
    return readings


def _per_group_rows(role: int, groups: int, per_group: int, dh: int) -> list[slice]:
    """Rows of role `role` (0 = q, 1 = k, 2 = v) when each key/value group's rows are [its per_group query heads;
    its key head; its value head], group after group."""
    width = (per_group + 2) * dh
    start = 0 if role == 0 else (per_group + role - 1) * dh
    size = per_group * dh if role == 0 else dh
    return [slice(g * width + start, g * width + start + size) for g in range(groups)]


def _grouped_rows(d_out: int, d_kv: int) -> tuple[slice, slice, slice]:
    """[Q; K; V] rows of a fused grouped projection of height d_out + 2·d_kv."""
    return slice(0, d_out), slice(d_out, d_out + d_kv), slice(d_out + d_kv, d_out + 2 * d_kv)


def _orientations(entries: list[_Entry], d_in: int, d_out: int, heads: int,
                  d_kv: int | None = None) -> list[dict[int, bool]]:
    """Transpose flags for raw matrices: fixed by shape, or both tried per group (q/k/v together, o alone)."""
    fixed, groups = {}, {"in": [], "o": []}
    for i, e in enumerate(entries):
        if e.kind != "w" or e.linear or e.fused:  # (a 4-D fused one: its reading says)
            fixed[i] = bool(e.fused and e.fused[2])
            continue
        kv = d_out if d_kv is None else d_kv
        rows = {"qkv": d_out + 2 * kv, "kv": 2 * kv, "o": d_out, "k": kv, "v": kv}.get(e.role, d_out)
        cols = d_out if e.role == "o" else d_in
        if e.head is not None:
            rows = e.param.shape[0] if e.param.shape[1] == d_in else e.param.shape[1]
        if e.per_head:  # one (dh, d_in) block per head for Q/K/V, one (d_out, dh) column block for the output
            rows, cols = (d_out, d_out // heads) if e.role == "o" else (d_out // heads, d_in)
        shape = _without_heads(e) if e.per_head else tuple(e.param.shape)
        if shape == (rows, cols) and shape != (cols, rows):
            fixed[i] = False
        elif shape == (cols, rows) and shape != (rows, cols):
            fixed[i] = True
        else:
            groups["o" if e.role == "o" else "in"].append(i)
    choices = []
    for flags in itertools.product(*[(False, True) if g else (False,) for g in groups.values()]):
        combo = dict(fixed)
        for g, flag in zip(groups.values(), flags):
            combo.update({i: flag for i in g})
        choices.append(combo)
    return choices


def _assemble(entries: list[_Entry], flags: dict[int, bool], d_out: int, heads: int,
              per_head_qkv: bool = False, d_kv: int | None = None) -> dict[str, list[Piece]]:
    """Pieces per role.  A fused q/k/v parameter is read as [Q; K; V] blocks, or with `per_head_qkv` as
    [q_0; k_0; v_0; q_1; ...] (qkv.view(B, n, H, 3 * dh).chunk(3, -1), common in encoder/decoder code)."""
    dh = d_out // heads
    roles: dict[str, list[tuple]] = {}
    for i, e in enumerate(entries):
        piece = Piece(e.param, e.name, transpose=flags[i])
        order = (e.head if e.head is not None else 0,)
        if e.fused:
            role_axis, head_axis, _ = e.fused
            for j, r in enumerate("qkv"):
                roles.setdefault("w" + r, []).extend(
                    ((h,), Piece(e.param, e.name, flags[i], index=h, head_axis=head_axis, part=(role_axis, j)))
                    for h in range(e.param.shape[head_axis]))
            if e.fused_bias is not None:
                bias, name = e.fused_bias
                role_b, head_b = _bias_ways(tuple(bias.shape), heads, role_axis < head_axis)[0]
                for j, r in enumerate("qkv"):
                    roles["b" + r] = [((h,), Piece(bias, name, index=h, head_axis=head_b, part=(role_b, j)))
                                      for h in range(bias.shape[head_b])]
        elif e.per_head:
            for h in range(e.param.shape[e.head_axis]):
                roles.setdefault(e.kind + e.role, []).append(
                    ((h,), Piece(e.param, e.name, flags[i], index=h, axis=1 if e.role == "o" else 0,
                                 head_axis=e.head_axis)))
        elif e.role == "qkv" and e.head is not None:  # one head's own module, Linear(d, 3 * dh): [q_h; k_h; v_h]
            for j, r in enumerate("qkv"):
                roles.setdefault(e.kind + r, []).append(
                    (order, Piece(e.param, e.name, flags[i], slice(j * dh, (j + 1) * dh))))
        elif e.role == "qkv" and per_head_qkv:
            for h in range(heads):
                for j, r in enumerate("qkv"):
                    start = (3 * h + j) * dh
                    roles.setdefault(e.kind + r, []).append(
                        (order + (h,), Piece(e.param, e.name, flags[i], slice(start, start + dh))))
        elif e.role == "qkv" and d_kv is not None:
            for r, cut in zip("qkv", _grouped_rows(d_out, d_kv)):
                roles.setdefault(e.kind + r, []).append((order, Piece(e.param, e.name, flags[i], cut)))
        elif e.role == "kv":  # k, v = to_kv(x).chunk(2, dim=-1): [K; V] blocks
            kv = d_out if d_kv is None else d_kv
            for j, r in enumerate("kv"):
                roles.setdefault(e.kind + r, []).append(
                    (order, Piece(e.param, e.name, flags[i], slice(j * kv, (j + 1) * kv))))
        elif e.role == "qkv":
            for j, r in enumerate("qkv"):
                roles.setdefault(e.kind + r, []).append(
                    (order, Piece(e.param, e.name, flags[i], slice(j * d_out, (j + 1) * d_out))))
        else:
            roles.setdefault(e.kind + e.role, []).append((order, piece))
    return {r: [p for _, p in sorted(ps, key=lambda t: t[0])] for r, ps in roles.items()}


def explicit(module: nn.Module, mapping: dict[str, str], d_in: int, d_out: int,
             heads: int = 1, d_kv: int | None = None, out_proj: bool = True) -> tuple[list[Layout], str]:
    """The user's own mapping (`--map q=W_query --map o=proj.weight.T --map qkv=c_attn`): a module name stands for
    its weight and bias, `.T` marks a matrix used as x @ W, `qkv` is a fused q/k/v projection.  The user names the
    fused parameter, not the order of its rows: with several heads it is read as [Q; K; V] blocks and as
    [q_0; k_0; v_0; q_1; ...] per head, and the proof decides (several readings are never "certain")."""
    params = dict(module.named_parameters())
    fused = any(r in ("qkv", "wqkv") and getattr(params.get(t.removesuffix(".T")), "ndim", 2) != 4
                for r, t in mapping.items())  # (a 4-D one has no rows to order: `_fused_pieces` reads its axes)
    readings = [False, True] if heads > 1 and fused and d_kv is None else [False]
    layouts = []
    for per_head in readings:
        found, problem = _explicit_roles(module, mapping, d_in, d_out, heads, per_head, d_kv, out_proj)
        if problem:
            return [], problem
        layouts += [Layout(roles, "as given by --map" + (" (fused q/k/v, per head)" if per_head else ""))
                    for roles in found]
    return layouts, ""


def _explicit_roles(module: nn.Module, mapping: dict[str, str], d_in: int, d_out: int, heads: int,
                    per_head: bool, d_kv: int | None = None, out_proj: bool = True) -> tuple[list[dict], str]:
    """The readings of the user's mapping: one, or one per way of reading a 3-D per-head parameter where its sizes
    allow several (with one head, (d, 1, dh) has two axes of length 1: the proof on the base configuration decides,
    and the same reading is then found on the others)."""
    params = dict(module.named_parameters())
    modules = dict(module.named_modules())
    roles: dict[str, list[Piece]] = {}
    per_head_options: dict[str, list[list[Piece]]] = {}
    fused_options: list[dict[str, list[Piece]]] = []  # a 4-D fused q/k/v parameter's readings
    dh = d_out // heads
    for given, target in mapping.items():
        role = {"q": "wq", "k": "wk", "v": "wv", "o": "wo", "out": "wo", "qkv": "wqkv"}.get(given, given)
        transpose = target.endswith(".T")
        name = target[:-2] if transpose else target
        heads_of = _per_head_modules(modules.get(name)) if role.startswith("w") else []
        bias_name = name + ".bias"
        if name in params:
            found = {role: params[name]}
            bias_name = _sibling_bias(name, params) if role.startswith("w") else None
            if bias_name is not None:  # a Linear's weight named: its bias goes with it, as with the module's name
                found["b" + role[1:]] = params[bias_name]
        elif name in modules and isinstance(getattr(modules[name], "weight", None), torch.Tensor):
            m = modules[name]
            found = {role: m.weight}
            if getattr(m, "bias", None) is not None and role.startswith("w"):
                found["b" + role[1:]] = m.bias
        elif heads_of and role != "wqkv":  # one Linear a head (nn.ModuleList qs): its weights joined, heads in order
            axis = 1 if role == "wo" else 0
            roles[role] = [Piece(m.weight, f"{name}.{i}.weight", transpose, axis=axis) for i, m in enumerate(heads_of)]
            if all(getattr(m, "bias", None) is not None for m in heads_of) and axis == 0:
                roles["b" + role[1:]] = [Piece(m.bias, f"{name}.{i}.bias") for i, m in enumerate(heads_of)]
            continue
        else:
            return [], (f"--map {given}={target}: no parameter or module of that name, nor a list of one Linear a head "
                        f"(parameters: {', '.join(params)})")
        for r, p in found.items():
            qual = name if r == role else bias_name
            if r == "wqkv" and p.dim() == 4:
                fused_options = _fused_pieces(p, qual, transpose, d_in, d_out, heads) if d_kv is None else []
                if not fused_options:
                    return [], (f"--map {given}={target}: a 4-D parameter of shape {tuple(p.shape)} is not W_q, W_k "
                                f"and W_v of {heads} heads of width {dh} from {d_in} features (an axis of length 3 "
                                f"for q, k, v, one of {heads} for the heads, and one head's matrix)")
                roles.update(fused_options[0])
            elif r in ("wqkv", "bqkv"):
                for i, sub in enumerate("qkv"):
                    rows = [slice((3 * h + i) * dh, (3 * h + i + 1) * dh) for h in range(heads)] if per_head else \
                        [slice(i * d_out, (i + 1) * d_out)] if d_kv is None else [_grouped_rows(d_out, d_kv)[i]]
                    roles.setdefault(r[0] + sub, [Piece(p, qual, transpose and p.dim() == 2, cut) for cut in rows])
            elif p.dim() == 3 and r in ("wq", "wk", "wv", "wo"):
                options = _per_head_pieces(p, qual, r, transpose, d_in, d_out, heads, d_kv)
                if not options:
                    return [], (f"--map {given}={target}: a 3-D parameter of shape {tuple(p.shape)} is not one "
                                f"matrix per head for {ROLE_NAMES[r]} with {heads} heads of width {dh}")
                roles[r], per_head_options[r] = options[0], options
            elif r not in roles or r == role:
                roles[r] = [Piece(p, qual, transpose and p.dim() == 2)]
    problem = _validate(roles, d_in, d_out, d_kv, out_proj)
    if problem:
        return [], f"--map: {problem}"
    groups = [[r for r in per_head_options if r != "wo"], [r for r in per_head_options if r == "wo"]]
    readings = []
    for picked in itertools.product(*[_shared_ways(per_head_options, g) for g in groups if g],
                                    *([fused_options] if fused_options else [])):
        readings.append({**roles, **{r: pieces for way in picked for r, pieces in way.items()}})
    return readings, ""


def _sibling_bias(name: str, params: dict[str, torch.Tensor]) -> str | None:
    """`to_out.bias` for `--map o=to_out.weight`: a weight named by its parameter's name brings the bias beside it
    (a 1-D parameter), as naming the module does.  Read without it, a correct layer's output bias was "a parameter
    that plays no role in the lesson's layer" (param-count failed) and no reading reproduced its output (student
    trial 20)."""
    if not name.endswith(".weight"):
        return None
    sibling = name[:-len("weight")] + "bias"
    return sibling if getattr(params.get(sibling), "ndim", 0) == 1 else None


def _fused_pieces(p: torch.Tensor, name: str, transpose: bool, d_in: int, d_out: int,
                  heads: int) -> list[dict[str, list[Piece]]]:
    """A 4-D parameter named with --map qkv=NAME, read as W_q, W_k, W_v one matrix per role and head
    (`_fused_ways`): each reading whose head matrices are (dh, d_in) in Linear convention, those used as x @ W[r, h]
    (`.T`, as einsum('btd,shde->sbhte') uses them) first where the user wrote .T, else last; [] for none."""
    dh = d_out // heads
    found = []
    for role_axis, head_axis, flip in _fused_ways(tuple(p.shape), heads):
        rest = [n for a, n in enumerate(p.shape) if a not in (role_axis, head_axis)]
        if (rest[::-1] if flip else rest) != [dh, d_in]:
            continue
        found.append((flip != transpose, {"w" + r: [Piece(p, name, flip, index=h, head_axis=head_axis,
                                                         part=(role_axis, j)) for h in range(heads)]
                                          for j, r in enumerate("qkv")}))
    return [roles for _, roles in sorted(found, key=lambda t: t[0])]


def _shared_ways(options: dict[str, list[list[Piece]]], group: list[str]) -> list[dict[str, list[Piece]]]:
    """The readings of W_q, W_k, W_v named with --map as 3-D parameters that read them alike (the same heads axis
    and orientation, as they are written alike): with one head every axis may fit, and each role read its own way
    made 216 readings of one layer."""
    def way(pieces: list[Piece]) -> tuple:
        return pieces[0].head_axis, pieces[0].transpose
    common = [w for w in (way(o) for o in options[group[0]]) if all(w in map(way, options[r]) for r in group)]
    if not common:  # nothing read alike: each role its own first reading
        return [{r: options[r][0] for r in group}]
    return [{r: next(o for o in options[r] if way(o) == w) for r in group} for w in common]


def _per_head_pieces(p: torch.Tensor, name: str, role: str, transpose: bool, d_in: int, d_out: int, heads: int,
                     d_kv: int | None) -> list[Piece]:
    """A 3-D parameter named with --map for one role, read as one matrix per head: its heads axis is the first as
    long as the number of heads whose other two sizes make one head's block ((dh, d_in) for W_q, W_k, W_v and
    (d_out, dh) for W_o, in either orientation); the orientation is the one the sizes allow.  Every heads axis and
    orientation that fits gives a reading (several only where sizes coincide, `.T`'s first: each head's matrix used
    as x @ W[h]); none: []."""
    kv = d_out if d_kv is None else d_kv
    block = (d_out, d_out // heads) if role == "wo" else ((d_out if role == "wq" else kv) // heads, d_in)
    readings = []
    for axis in (a for a in range(3) if p.shape[a] == heads):
        rest = tuple(n for a, n in enumerate(p.shape) if a != axis)
        fits = [t for t in (False, True) if (rest[::-1] if t else rest) == block]
        for flip in sorted(fits, key=lambda t: t != transpose):
            readings.append([Piece(p, name, flip, index=h, axis=1 if role == "wo" else 0, head_axis=axis)
                             for h in range(heads)])
    return readings


def _per_head_modules(module: nn.Module | None) -> list[nn.Module]:
    """The children of a container that each hold one weight matrix (nn.ModuleList of per-head Linear layers), in
    order; [] for anything else."""
    if module is None or isinstance(getattr(module, "weight", None), torch.Tensor):
        return []
    children = list(module.children())
    ok = children and all(isinstance(getattr(c, "weight", None), torch.Tensor) and c.weight.dim() == 2
                          for c in children)
    return children if ok else []


def discover(module: nn.Module, d_in: int, d_out: int, heads: int, mapping: dict[str, str] | None = None,
             kv_heads: int | None = None, out_proj: bool = True) -> tuple[list[Layout], str]:
    """All candidate layouts and, when there is none, what was tried.  A layout is `certain` when it is the only
    reading and covers every parameter (named nn.Linear layers, nn.MultiheadAttention, --map); otherwise the
    trusted side must see one reproduce the module's own output before relying on it.  W_k and W_v may be
    narrower than d_out (grouped-query attention): the configuration's kv_heads · dh rows first, then d_out, then
    one shared key/value head (`kv_widths`); the first height that gives a reading is used.  `out_proj=False`: the
    single-head form, read as W_q, W_k, W_v alone (harness.wire.form)."""
    first = ""
    for d_kv in kv_widths(d_out, heads, kv_heads):
        found, problem = _discover(module, d_in, d_out, heads, mapping, d_kv, out_proj)
        if found:
            for layout in found:
                layout.kv_width = d_kv
            return found, ""
        first = first or problem
    return [], first


NO_OUT_PROJ = " (no output projection found: W_q, W_k and W_v alone, W_o read as the identity)"


def without_out_proj(module: nn.Module, d_in: int, d_out: int, heads: int, mapping: dict[str, str] | None = None,
                     kv_heads: int | None = None) -> list[Layout]:
    """The readings of a multi-head layer that has no output projection (the heads concatenated and returned, as
    in CS224n's and many a course's first layer), offered where no reading with one exists: W_q, W_k and W_v alone,
    as the single-head form is read.  Never certain, whatever the names say: the trusted side uses one only where,
    with W_o taken as the identity (the lesson's layer without its last step), the reference or a known mistake
    reproduces the module's own output (harness.engine.mapping); a layer whose projection mha-check did not
    recognise is then not reproduced, and stays undecided.  None where a parameter's name says it is an output
    projection (`to_out` beside a `to_kv` no name reads): the layer has one, and reading its Linear layers by
    position as W_q, W_k, W_v would take that projection for one of them."""
    if any(e.role == "o" for e in _collect(module, heads)[0]) or any(
            r in ("o", "out", "wo", "bo") for r in (mapping or {})):
        return []
    found, _ = discover(module, d_in, d_out, heads, mapping, kv_heads, out_proj=False)
    for layout in found:
        layout.certain = False
        layout.how += NO_OUT_PROJ
    return found


def _discover(module: nn.Module, d_in: int, d_out: int, heads: int, mapping: dict[str, str] | None,
              d_kv: int | None, out_proj: bool = True) -> tuple[list[Layout], str]:
    if mapping:
        found, problem = explicit(module, mapping, d_in, d_out, heads, d_kv, out_proj)
        for layout in found:
            layout.certain = len(found) == 1  # the user said so, and there is only one way to read it
        return found, problem
    mhas = [(n, m) for n, m in module.named_modules() if isinstance(m, nn.MultiheadAttention)]
    if len(mhas) == 1:
        if d_kv is not None:
            return [], "nn.MultiheadAttention has as many key/value heads as heads"
        name, m = mhas[0]
        roles = _mha_layout(m, name + "." if name else "")
        problem = _validate(roles, d_in, d_out, None, out_proj)
        if problem is None:
            layout = Layout(roles, "torch.nn.MultiheadAttention inside the module")
            layout.certain = layout.covers(module)
            if not layout.certain:
                layout.notes.append("parameters outside the nn.MultiheadAttention play no role in this mapping")
            return [layout], ""
        return [], f"found an nn.MultiheadAttention but: {problem}"
    collected, unknown = _collect(module, heads)
    tried = []
    if collected:
        fused = any(e.role == "qkv" and not e.fused_ways for e in collected)  # a fused Linear's rows (2-D)
        whole = any(e.role == "qkv" and not e.fused_ways and e.head is None for e in collected)  # the whole
        # layer's rows, in [Q; K; V] blocks or per head (a head's own module has one order: [q_h; k_h; v_h])
        for per_head_qkv, entries in itertools.product(
                (False, True) if whole and heads > 1 and d_kv is None else (False,), _head_axis_choices(collected)):
            for flags in _orientations(entries, d_in, d_out, heads, d_kv):
                roles = _assemble(entries, flags, d_out, heads, per_head_qkv, d_kv)
                problem = _validate(roles, d_in, d_out, d_kv, out_proj)
                if problem is None:
                    notes = [f"parameters with no role: {', '.join(unknown)}"] if unknown else []
                    how = "by parameter names" + (
                        _fused_how(entries) if any(e.fused for e in entries) else
                        " (per-head modules)" if any(e.head is not None for e in collected) else
                        " (per-head matrices)" if any(e.per_head for e in entries) else
                        " (fused q/k/v, per head)" if per_head_qkv else " (fused q/k/v)" if fused else "")
                    tried.append(Layout(roles, how, notes))
                elif not tried:
                    problem_by_name = problem
        if tried:
            if len(tried) == 1 and not fused and not any(e.role == "kv" or e.fused for e in collected):  # [K; V] is the
                tried[0].certain = tried[0].covers(module)  # usual order of a fused key/value, not a proof
            if fused:  # `qkv = ModuleList([Linear, Linear, Linear])` is q, k, v, not three heads of a fused q/k/v
                seen = {_reading(lay.roles) for lay in tried}  # (with 3 heads both read; the proof decides)
                tried += [Layout(roles, how) for roles, how in _by_position(module, d_in, d_out, heads, d_kv,
                                                                            out_proj, orders=("qkv",))
                          if _validate(roles, d_in, d_out, d_kv, out_proj) is None and _reading(roles) not in seen]
            return tried, ""
        by_name = f"by names: {problem_by_name}"
    else:
        by_name = "by names: no parameter name says q, k, v, qkv or out"
    found = [Layout(roles, how) for roles, how in _by_position(module, d_in, d_out, heads, d_kv, out_proj)
             if _validate(roles, d_in, d_out, d_kv, out_proj) is None]
    if found:
        return found, ""
    has = _linears_held(module)
    if not out_proj:
        return [], (f"{by_name}; by position: not exactly three Linear({d_in}, {d_out}), nor one fused "
                    f"Linear({d_in}, {3 * d_out}) (a single-head layer has no output projection){has}")
    expected = (f"four Linear({d_in}, {d_out}) (W_q, W_k, W_v, then the output projection)" if d_in == d_out else
                f"three Linear({d_in}, {d_out}) and one Linear({d_out}, {d_out})")  # "three Linear(8, 8) and one
    # Linear(8, 8)" read as a riddle (student trial 20)
    return [], (f"{by_name}; by position: not exactly {expected}, "
                f"nor one fused Linear({d_in}, {3 * d_out}) and one Linear({d_out}, {d_out}){has}")


def _linears_held(module: nn.Module) -> str:
    """What the module holds instead, in the same words: ", where your layer has 6 Linear(8, 8) and 1 Linear(16, 8)"
    (a student's trial read "not three Linear(8, 8) and one Linear(8, 8)" as nonsense beside six of them)."""
    counts: dict[tuple[int, int], int] = {}
    for mod in module.modules():
        if isinstance(mod, nn.Linear):
            counts[(mod.in_features, mod.out_features)] = counts.get((mod.in_features, mod.out_features), 0) + 1
    if not counts:
        return ", where your layer has no nn.Linear"
    return ", where your layer has " + ", ".join(f"{c} Linear({i}, {o})" for (i, o), c in counts.items())
