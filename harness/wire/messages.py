"""The typed messages that cross the process boundary, validated field by field when they are decoded.

Each request and each reply is a small dataclass.  `encode()` turns it into a frame (`harness.wire.protocol`: a JSON
header plus raw arrays); `decode_request` / `decode_reply` turn a frame back into the dataclass, checking every
field against its annotation (a string is a string, a list of ints is a list of ints, an array is a float64 array
of the declared rank), so that the trusted side never works with a value of a shape it did not expect, whatever a
hostile child sends.  A frame that does not fit raises `ProtocolError`.

Fields annotated `np.ndarray` (or `dict[str, np.ndarray]`) travel as raw arrays; everything else in the header.
"""
from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from harness.wire import protocol
from harness.wire.protocol import ProtocolError

JSON = Any  # a plain JSON value: constructor overrides given with --arg, a config object


# -- validation --------------------------------------------------------------------------------------------------------
# Each annotation is turned once into a checking function, and each message class into a plan of its fields: a frame
# crosses the boundary about 140 times per submission, and reading the annotations afresh each time cost the grader
# more than the frames themselves.
@functools.lru_cache(maxsize=None)
def _hints(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _is_array_type(tp) -> bool:
    return tp is np.ndarray or (typing.get_origin(tp) is dict and typing.get_args(tp)[1] is np.ndarray) or (
        _optional(tp) is not None and _is_array_type(_optional(tp)))


def _optional(tp):
    """X for `X | None`, else None."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and type(None) in typing.get_args(tp):
            return args[0]
    return None


@functools.lru_cache(maxsize=None)
def _checker(tp):  # noqa: C901 - one branch per kind of annotation, in one place
    """The function (value, where) -> value that checks a JSON value against `tp`, made once per annotation.
    Items of a list or an object are checked without their own path; only when one fails is the check run again
    item by item, so that the message names the exact place."""
    if tp is Any:
        return lambda value, where: value
    inner = _optional(tp)
    if inner is not None:
        check_inner = _checker(inner)
        return lambda value, where: None if value is None else check_inner(value, where)
    origin = typing.get_origin(tp)
    if origin is list:
        (item,) = typing.get_args(tp)
        check_item = _checker(item)

        def check_list(value, where):
            if not isinstance(value, list):
                raise ProtocolError(f"{where}: expected a list, got {type(value).__name__}")
            try:
                return [check_item(v, where) for v in value]
            except ProtocolError:
                for i, v in enumerate(value):
                    check_item(v, f"{where}[{i}]")
                raise
        return check_list
    if origin is dict:
        key, item = typing.get_args(tp)
        check_item = _checker(item)

        def check_dict(value, where):
            if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
                raise ProtocolError(f"{where}: expected an object with string keys")
            try:
                return {k: check_item(v, where) for k, v in value.items()}
            except ProtocolError:
                for k, v in value.items():
                    check_item(v, f"{where}.{k}")
                raise
        return check_dict
    if dataclasses.is_dataclass(tp):
        def check_record(value, where):
            if not isinstance(value, dict):
                raise ProtocolError(f"{where}: expected an object")
            return _from_fields(tp, value, {}, where)
        return check_record
    if tp is float:
        def check_number(value, where):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ProtocolError(f"{where}: expected a number, got {type(value).__name__}")
            return float(value)
        return check_number
    if tp in (str, int, bool):
        def check_plain(value, where):
            if type(value) is not tp:
                raise ProtocolError(f"{where}: expected {tp.__name__}, got {type(value).__name__}")
            return value
        return check_plain
    raise TypeError(f"unsupported annotation {tp!r}")  # our bug, not the child's


def _array(value, where: str) -> np.ndarray:
    if not isinstance(value, np.ndarray) or value.dtype != np.float64:
        raise ProtocolError(f"{where}: expected a float64 array")
    return value


@dataclass(frozen=True)
class _Field:
    """How one field of a message travels and is checked: `kind` is "array", "arrays" (a dict of arrays whose
    names are prefixed with the field's), or "json" (checked by `check`)."""
    name: str
    kind: str
    check: Any
    required: bool  # a frame without it is refused (no default; for an array, also not annotated `| None`)


@functools.lru_cache(maxsize=None)
def _plan(cls) -> tuple[_Field, ...]:
    hints = _hints(cls)
    plan = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        tp = hints[f.name]
        if _is_array_type(tp):
            kind = "array" if (_optional(tp) or tp) is np.ndarray else "arrays"
            plan.append(_Field(f.name, kind, None, _optional(tp) is None and f.default is dataclasses.MISSING))
        else:
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            plan.append(_Field(f.name, "json", _checker(tp), required))
    return tuple(plan)


def _from_fields(cls, header: dict, arrays: dict, where: str):
    values = {}
    for f in _plan(cls):
        if f.kind == "array":
            if f.name in arrays:
                values[f.name] = _array(arrays[f.name], f"{where}.{f.name}")
            elif f.required:
                raise ProtocolError(f"{where}: array {f.name!r} missing")
        elif f.kind == "arrays":
            prefix = f.name + "."
            values[f.name] = {k[len(prefix):]: _array(v, f"{where}.{k}") for k, v in arrays.items()
                              if k.startswith(prefix)}
        elif f.name in header:
            values[f.name] = f.check(header[f.name], f"{where}.{f.name}")
        elif f.required:
            raise ProtocolError(f"{where}: field {f.name!r} missing")
    return cls(**values)


def _to_fields(msg) -> tuple[dict, dict[str, np.ndarray]]:
    header, arrays = {}, {}
    for f in _plan(type(msg)):
        value = getattr(msg, f.name)
        if f.kind == "arrays":
            if isinstance(value, dict):
                arrays.update({f"{f.name}.{k}": v for k, v in value.items()})
        elif f.kind == "array":
            if value is not None:
                arrays[f.name] = value
        else:
            header[f.name] = _plain(value)
    return header, arrays


_SCALARS = (str, int, float, bool, type(None))


def _plain(value):
    if type(value) in _SCALARS:
        return value
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


# -- shared records ----------------------------------------------------------------------------------------------------
@dataclass
class Signature:
    """What the constructor lets mha-check choose: the checks build only configurations it can express."""

    params: list[str]
    separate_widths: bool  # d_in and d_out can differ
    accepts: dict[str, str]  # canonical key (width, d_in, d_out, heads, ...) -> the parameter that carries it
    config_param: str | None
    unfillable: list[str]  # required parameters mha-check has no value for
    unknown_overrides: list[str] = field(default_factory=list)  # --arg names the constructor does not take
    derived: dict[str, str] = field(default_factory=dict)  # parameter -> derived value it gets (head_dim: width/heads)


@dataclass
class Param:
    name: str
    shape: list[int]


@dataclass
class LayoutInfo:
    """One candidate reading of the module's parameters as the lesson's roles (wq, wk, wv, wo, bq, ..., bo)."""

    roles: dict[str, str]  # role -> how it is read, e.g. "W_query.weight", "c_attn.weight[0:6]"
    how: str
    notes: list[str] = field(default_factory=list)
    certain: bool = False  # unambiguous by structure: named nn.Linear layers, nn.MultiheadAttention


# -- requests ----------------------------------------------------------------------------------------------------------
@dataclass
class Request:
    op: ClassVar[str] = ""


@dataclass
class Load(Request):
    op: ClassVar[str] = "load"
    spec: str
    search_dir: str
    overrides: dict[str, JSON] = field(default_factory=dict)
    weight_map: dict[str, str] = field(default_factory=dict)
    submission: bool = True  # False only for mha-check's own code (its mutants, its reference): see child.target


@dataclass
class Build(Request):
    op: ClassVar[str] = "build"
    cfg: dict[str, JSON]
    seed: int = 0
    force_dropout: float | None = None  # set every nn.Dropout's p to this after construction (None: leave them)
    handle: int | None = None  # the number later requests call it by, chosen by the trusted side (None: the next)


@dataclass
class Forward(Request):
    op: ClassVar[str] = "forward"
    handle: int
    x: np.ndarray
    mode: str = "eval"
    noncontig: bool = False
    want_x_after: bool = False
    style: int = 0  # index in Built.call_styles: how forward is called (x alone, or with a causal mask)


@dataclass
class Vjp(Request):
    op: ClassVar[str] = "vjp"
    handle: int
    x: np.ndarray
    gy: np.ndarray
    mode: str = "eval"
    layout: int | None = None
    style: int = 0


@dataclass
class Jacobian(Request):
    op: ClassVar[str] = "jacobian"
    handle: int
    x: np.ndarray
    r: np.ndarray
    mode: str = "eval"
    style: int = 0


@dataclass
class ReadWeights(Request):
    op: ClassVar[str] = "read"
    handle: int
    layout: int


@dataclass
class WriteWeights(Request):
    op: ClassVar[str] = "write"
    handle: int
    layout: int
    weights: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class MetaForward(Request):
    op: ClassVar[str] = "meta"
    handle: int
    shape: list[int]
    style: int = 0


@dataclass
class Devices(Request):
    op: ClassVar[str] = "devices"
    handle: int
    x: np.ndarray
    style: int = 0


@dataclass
class Trace(Request):
    op: ClassVar[str] = "trace"
    handle: int
    x: np.ndarray
    limit: int = 400
    style: int = 0


@dataclass
class Bye(Request):
    op: ClassVar[str] = "bye"


# -- replies -----------------------------------------------------------------------------------------------------------
@dataclass
class Reply:
    pass


@dataclass
class Failed(Reply):
    """The student's code raised (stage: import, lookup, construct, forward, backward, ...), or our worker did
    (stage "harness")."""

    stage: str
    message: str
    notes: list[str] = field(default_factory=list)  # a failed load: what loading had left out (a notebook's cells)


@dataclass
class Loaded(Reply):
    name: str
    kind: str  # class or factory
    signature: Signature
    module_file: str | None = None
    settings: dict[str, str] = field(default_factory=dict)  # module-level sizes the class reads: n_embd -> "384"
    notes: list[str] = field(default_factory=list)  # what loading left out (a notebook's magics, its training loop)


@dataclass
class Built(Reply):
    handle: int
    param_count: int
    params: list[Param]
    buffers: list[Param]
    state_dict: list[str]
    plain_tensors: list[str]  # tensors kept as plain attributes (not buffers): they stay behind on .to()
    containers: list[str]  # plain lists, tuples or dicts holding modules or tensors: .to()/.eval() never reach them
    dropout_modules: int
    layouts: list[LayoutInfo]
    layout_problem: str = ""
    call_styles: list[str] = field(default_factory=list)  # ways to call forward (x alone, or with a causal mask)
    call_problem: str = ""  # why forward cannot be called by mha-check (then call_styles is empty)
    call_bare: list[bool] = field(default_factory=list)  # per style: gives forward its input only (no mask, no flag)


@dataclass
class Output(Reply):
    y: np.ndarray
    contiguous_input: bool = True
    x_after: np.ndarray | None = None


@dataclass
class Gradients(Reply):
    """One backward pass: the output, the input's gradient and, through a layout, every role's gradient."""

    no_graph: bool = False
    y: np.ndarray | None = None
    gx: np.ndarray | None = None
    grads: dict[str, np.ndarray] = field(default_factory=dict)
    unused: list[str] = field(default_factory=list)  # parameters that received no gradient at all


@dataclass
class JacobianResult(Reply):
    no_graph: bool = False
    shape: list[int] = field(default_factory=list)
    jac: np.ndarray | None = None


@dataclass
class Weights(Reply):
    weights: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class Done(Reply):
    pass


@dataclass
class Ready(Reply):
    """Sent once, unasked, by a single run's worker when its own imports (torch) are done and before any code of the
    student's runs: the time limit counts from here, so a slow start of ours is never charged to the student."""


@dataclass
class MetaResult(Reply):
    device: str
    shape: list[int]


@dataclass
class Created(Reply):
    call: str
    shape: list[int]
    at: str
    device: str | None = None  # the device= it was given ("'cpu'", "None", "cpu"), None when it had none


@dataclass
class Mix(Reply):
    op: str
    shape: list[int]
    at: str
    parameter: bool = False  # the tensor left behind is an nn.Parameter the module does not register


@dataclass
class DevicesResult(Reply):
    """One forward followed device by device: tensors made without device=, and where a tensor that would stay on
    the CPU meets one that moves with the module."""

    created: list[Created]
    mixes: list[Mix]


@dataclass
class TraceResult(Reply):
    ops: list[dict[str, JSON]]
    truncated: bool = False
    raised: str | None = None
    output: dict[str, JSON] | None = None


REQUESTS: dict[str, type[Request]] = {c.op: c for c in (Load, Build, Forward, Vjp, Jacobian, ReadWeights,
                                                         WriteWeights, MetaForward, Devices, Trace, Bye)}
REPLIES: dict[str, type[Reply]] = {c.__name__: c for c in (Failed, Loaded, Built, Output, Gradients, JacobianResult,
                                                            Weights, Done, Ready, MetaResult, DevicesResult,
                                                            TraceResult)}
ANSWERS: dict[type[Request], tuple[type[Reply], ...]] = {  # what each request may be answered with
    Load: (Loaded,), Build: (Built,), Forward: (Output,), Vjp: (Gradients,), Jacobian: (JacobianResult,),
    ReadWeights: (Weights,), WriteWeights: (Done,), MetaForward: (MetaResult,), Devices: (DevicesResult,),
    Trace: (TraceResult,), Bye: (Done,),
}


# -- frames ------------------------------------------------------------------------------------------------------------
def encode_batch(messages: list) -> bytes:
    """Several requests (or several replies) in one frame: {"batch": [{"type"/"op": ..., fields}, ...]}."""
    items, arrays = [], {}
    for i, msg in enumerate(messages):
        header, arrs = _to_fields(msg)
        tag = {"op": msg.op} if isinstance(msg, Request) else {"type": type(msg).__name__}
        items.append({**tag, **header})
        arrays.update({f"{i}:{k}": v for k, v in arrs.items()})
    return protocol.encode({"batch": items}, arrays)


def _split(header: dict, arrays: dict) -> list[tuple[dict, dict]]:
    items = header.get("batch")
    if not isinstance(items, list) or not items or not all(isinstance(i, dict) for i in items):
        raise ProtocolError("a frame must hold a non-empty 'batch' list of objects")
    out = [(item, {}) for item in items]
    for key, value in arrays.items():  # "3:wq" belongs to item 3; a name that fits no item is ignored
        index, colon, name = key.partition(":")
        if colon and index.isascii() and index.isdigit() and index == str(int(index)) and int(index) < len(out):
            out[int(index)][1][name] = value
    return out


def decode_requests(header: dict, arrays: dict) -> list[Request]:
    out = []
    for i, (item, arrs) in enumerate(_split(header, arrays)):
        cls = REQUESTS.get(item.get("op"))
        if cls is None:
            raise ProtocolError(f"request {i}: unknown op {item.get('op')!r}")
        out.append(_from_fields(cls, item, arrs, f"request {i} ({cls.op})"))
    return out


def decode_replies(header: dict, arrays: dict) -> list[Reply]:
    out = []
    for i, (item, arrs) in enumerate(_split(header, arrays)):
        cls = REPLIES.get(item.get("type"))
        if cls is None:
            raise ProtocolError(f"reply {i}: unknown type {item.get('type')!r}")
        out.append(_from_fields(cls, item, arrs, f"reply {i} ({cls.__name__})"))
    return out


def check_answer(request: Request, reply: Reply) -> Reply:
    """A reply of the kind the request asks for (or Failed); anything else is a protocol error."""
    if not isinstance(reply, (Failed,) + ANSWERS[type(request)]):
        raise ProtocolError(f"{request.op} answered with {type(reply).__name__}")
    if isinstance(request, Build) and isinstance(reply, Built) and request.handle not in (None, reply.handle):
        raise ProtocolError(f"build {request.handle} answered as {reply.handle}")
    return reply
