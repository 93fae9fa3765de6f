"""The typed messages that cross the process boundary, validated field by field when they are decoded.

Each request and each reply is a small dataclass.  `encode_batch()` puts several into one frame
(`harness.wire.protocol`: a JSON header plus raw arrays); `decode_requests` / `decode_replies` turn a frame back into
the dataclasses, checking every field against its annotation (`harness.wire.fields`: a string is a string, a list
of ints is a list of ints, an array is a float64 array), so that the trusted side never works with a value of a
shape it did not expect, whatever a hostile child sends.  A frame that does not fit raises `ProtocolError`.

Fields annotated `np.ndarray` (or `dict[str, np.ndarray]`) travel as raw arrays; everything else in the header.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from harness.wire import protocol
from harness.wire.fields import from_fields, to_fields
from harness.wire.protocol import ProtocolError

JSON = Any  # a plain JSON value: constructor overrides given with --arg, a config object


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
    rope_theta: float | None = None  # the rotary base the constructor got (its default, 10000, --arg), if any


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
    kv_width: int | None = None  # rows of W_k and W_v when narrower than d_out (grouped-query: kv_heads · dh)


@dataclass
class NormInfo:
    """A normalisation the module keeps inside itself (harness.child.norms): its name in the module, its class, and
    its parameters' names."""

    path: str
    kind: str
    params: list[str] = field(default_factory=list)


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
    origins: bool = False  # note where the constructor made each tensor attribute (for a trace): built once, not
    # twice (a constructor that prints would print twice)


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
    token_axis: int = 0  # 0: the output as it is, (B, n, d_out); k: an output of another shape read by its k-th
    # axis as the tokens' (moved after the batch, the other axes flattened): (B, H, n, dh) with k = 2
    hide_nothing: bool = False  # the style's mask given hiding no position: the layer's own mask alone
    spare_mask: int | None = None  # a flag style also given its optional mask hiding nothing (Style.arguments)


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
    mode: str = "eval"  # "train": the forward a training loop runs (a mask skipped there shows only so)
    chunks: list[int] = field(default_factory=list)  # with the layer's KV cache (harness.child.cache): x decoded in
    # these chunks, the last call recorded (a decoded token's mask, positions and lines show only there); [] a plain
    # forward
    reset: bool = True  # with chunks: the cache emptied first (reset_cache(), its lines recorded too)


@dataclass
class CacheRun(Request):
    """Decode x with the layer's KV cache (harness.child.cache): the chunks' lengths sum to x's length; `reset`
    empties the cache first (a new sequence)."""

    op: ClassVar[str] = "cache"
    handle: int
    x: np.ndarray
    chunks: list[int]
    reset: bool = True
    style: int = 0


@dataclass
class Bye(Request):
    op: ClassVar[str] = "bye"


@dataclass
class RunTests(Request):
    """Run the instructor's pytest files (harness.child.instructor) on the loaded target, whose class their
    `student_class` fixture gives.  `files`: relative path -> source, written by the child into a folder of its own
    before any of the student's code runs; `run`: the test ids to run ("file.py::test_name", a class's tests as
    "file.py::TestX::test_name"; every collected one when empty); `canary`: the path of the file, among `files`,
    that holds the one test that must fail (run last; see harness.engine.instructor); `seed`: the `mha_check_seed`
    fixture's value, so that tests drawing their inputs from it get new ones at every grade.  Answered with
    TestsCollected, then one TestOutcome per test as each ends (each its own frame, so that a hang or a crash is
    known to have happened in the test after the last one reported), then TestsDone."""

    op: ClassVar[str] = "tests"
    spec: str
    search_dir: str
    files: dict[str, str]
    submission: bool = True
    run: list[str] = field(default_factory=list)
    canary: str = ""
    test_seconds: float = 30.0
    seed: int = 0  # the `mha_check_seed` fixture: the child's seed (a digest of a grade's drawn one)


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
    call_masked: list[bool] = field(default_factory=list)  # per style: gives forward a mask tensor
    call_spare: list[bool] = field(default_factory=list)  # per style: a flag style whose forward also takes a mask
    config_reads: dict[str, str] = field(default_factory=dict)  # settings the constructor read off its config
    # object -> the configuration key each stands for (num_key_value_heads -> kv_heads): a grouped layer's evidence
    frozen: list[str] = field(default_factory=list)  # parameters with requires_grad=False: a constant kept as a
    # parameter (tsai's scale), or a frozen weight
    norms: list[NormInfo] = field(default_factory=list)  # normalisations kept inside (a pre-norm, a post-LN)
    unread_flags: list[str] = field(default_factory=list)  # the constructor's causal flag, when it is only stored
    # (self.causal = causal) and never read (harness.child.construct.unread_flag)
    inert_masks: list[str] = field(default_factory=list)  # registered buffers over the context (last two axes the
    # context length) holding one value everywhere: a mask of the layer's own that hides nothing
    weight_norm: list[str] = field(default_factory=list)  # weights whose normalisation (W = g * v / ||v||) the
    # child folded into one plain parameter after building ("in_proj_q.weight"): the report says so
    init_at: dict[str, str] = field(default_factory=dict)  # {"at", "code"}: the `def __init__` line of the built
    # module's class, in the student's files ({} where it has none of its own there): where a guard belongs


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
    kept: list[str] = field(default_factory=list)  # tensors held as plain attributes after that forward (a mask
    # the forward cached on the module for its next calls is among them)


@dataclass
class TraceResult(Reply):
    ops: list[dict[str, JSON]]
    truncated: bool = False
    raised: str | None = None
    output: dict[str, JSON] | None = None
    lines: list[dict[str, JSON]] | None = None  # the lines of the module's forward in the order it ran them
    # ({"at", "code"}, a line run again after another counted again): where two modes' paths part
    untouched: list[dict[str, JSON]] | None = None  # where the constructor made each parameter the forward never
    # read ({"at", "code", "path", "kind"}): a layer made and never used is told at its line


@dataclass
class CacheResult(Reply):
    """What decoding with the cache gave: `api` "" when the layer shows no cache (then `problem` says why it cannot
    be driven, or is "" for a layer without one); the outputs of the chunks run, joined along the tokens; whether the
    cache held every token fed after each call; the student's error and the chunk that raised it (-1: none)."""

    api: str = ""
    kind: str = ""
    problem: str = ""
    y: np.ndarray | None = None
    grows: bool = False
    raised: str = ""
    raised_at: int = -1


@dataclass
class TestsCollected(Reply):
    """The tests the child's pytest collected, in the order they will run, and what could not be collected (a
    file that raised on import: "file.py: the error")."""

    ids: list[str]
    errors: list[str] = field(default_factory=list)


@dataclass
class TestOutcome(Reply):
    """One test run by the child's pytest: `outcome` passed, failed, error (in a fixture or its teardown), skipped
    or ours (mha-check could not give the test the student's class: which class to check is unclear); `message`:
    the assertion's or the exception's words, as pytest summarises them."""

    id: str
    outcome: str
    message: str = ""


@dataclass
class TestsDone(Reply):
    pass


REQUESTS: dict[str, type[Request]] = {c.op: c for c in (Load, Build, Forward, Vjp, Jacobian, ReadWeights,
                                                         WriteWeights, MetaForward, Devices, Trace, CacheRun, Bye,
                                                         RunTests)}
REPLIES: dict[str, type[Reply]] = {c.__name__: c for c in (Failed, Loaded, Built, Output, Gradients, JacobianResult,
                                                            Weights, Done, Ready, MetaResult, DevicesResult,
                                                            TraceResult, CacheResult, TestsCollected,
                                                            TestOutcome, TestsDone)}
ANSWERS: dict[type[Request], tuple[type[Reply], ...]] = {  # what each request may be answered with
    Load: (Loaded,), Build: (Built,), Forward: (Output,), Vjp: (Gradients,), Jacobian: (JacobianResult,),
    ReadWeights: (Weights,), WriteWeights: (Done,), MetaForward: (MetaResult,), Devices: (DevicesResult,),
    Trace: (TraceResult,), CacheRun: (CacheResult,), Bye: (Done,), RunTests: (TestsDone,),
}


# -- frames ------------------------------------------------------------------------------------------------------------
MEASURED = "_measured_fields"  # where `frame_size` leaves a message's fields for the frame that sends it


def frame_size(msg) -> int:
    """The bytes of a frame holding `msg` alone, as `encode_batch([msg])` makes it; the message's fields are kept on
    it, so that the frame that then sends it does not make them again (issue 27: the worker measured every module's
    description, `Built`, by encoding it, then encoded it once more to send it).  For a message nothing changes
    between the two: the worker's replies are not touched once made."""
    fields = to_fields(msg)
    msg.__dict__[MEASURED] = fields
    return len(_frame([(msg, fields)]))


def encode_batch(messages: list) -> bytes:
    """Several requests (or several replies) in one frame: {"batch": [{"type"/"op": ..., fields}, ...]}."""
    return _frame([(msg, msg.__dict__.pop(MEASURED, None) or to_fields(msg)) for msg in messages])


# The longest text a reply may hold, anywhere in it (a reading's `how` and notes, a crash's words, a line the trace
# recorded, a parameter's name, a key of a recorded operation): the parent reads, parses and prints each of them, on
# the time the student's limit counts, and every other text of a reply was bounded only by the frame's header (1 MB;
# red team 16: a patched worker's texts of 150,000 characters made a report of 183,000).  The honest worker cuts a
# longer text, with a mark (`cut_text`); the parent refuses a reply holding one as a corrupted channel (`_longest`).
MAX_TEXT = 8192


def cut_text(text: str) -> str:
    """`text` within MAX_TEXT characters: its start and a mark saying how long it was, with a digest of it so that two
    long texts differing only past the cut (two parameters' names) stay two texts."""
    if len(text) <= MAX_TEXT:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    mark = f"…[{len(text):,} characters, cut by mha-check; {digest}]"
    return text[:MAX_TEXT - len(mark)] + mark


def _cut_texts(value):
    """A plain JSON value with every text in it (keys too) within MAX_TEXT; the value itself where none is longer."""
    if isinstance(value, str):
        return cut_text(value)
    if isinstance(value, list):
        return [_cut_texts(v) for v in value]
    if isinstance(value, dict):
        return {cut_text(k): _cut_texts(v) for k, v in value.items()}
    return value


def _longest(value) -> int:
    """The length of the longest text in a decoded JSON value, keys too (iterative: a header may nest deep)."""
    longest, stack = 0, [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            longest = max(longest, len(v))
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, dict):
            longest = max(longest, max(map(len, v), default=0))
            stack.extend(v.values())
    return longest


def _frame(encoded: list) -> bytes:
    """The frame of (message, its `to_fields`) pairs, in order; a reply's texts cut to MAX_TEXT (`cut_text`)."""
    items, arrays = [], {}
    for i, (msg, (header, arrs)) in enumerate(encoded):
        tag = {"op": msg.op} if isinstance(msg, Request) else {"type": type(msg).__name__}
        header = header if isinstance(msg, Request) else _cut_texts(header)
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
        out.append(from_fields(cls, item, arrs, f"request {i} ({cls.op})"))
    return out


def decode_replies(header: dict, arrays: dict) -> list[Reply]:
    out = []
    for i, (item, arrs) in enumerate(_split(header, arrays)):
        cls = REPLIES.get(item.get("type"))
        if cls is None:
            raise ProtocolError(f"reply {i}: unknown type {item.get('type')!r}")
        longest = _longest(item)
        if longest > MAX_TEXT:
            raise ProtocolError(f"reply {i} ({cls.__name__}): a text {longest} characters long sent, where "
                                f"mha-check's worker sends at most {MAX_TEXT}")
        out.append(from_fields(cls, item, arrs, f"reply {i} ({cls.__name__})"))
    return out


# The most readings of the parameters and ways to call forward a Built may offer, and their product: the trusted
# parent tries each pair against the reference and every catalogued mistake (about 40 ms a pair), so a worker patched
# to repeat one reading 200,000 times would have held it for hours (a red team's trial: 2,000 took 75 s; no limit of
# the child's counts it).  Our worker offers at most 16 readings, 68 styles (a layer taking position ids: every
# convention of positions and masks) and 272 pairs on the zoos and the real-code zoo (measured with each file's
# Build): the bounds leave room for 16 readings of a layer with that many styles, and cap the parent's work at
# about a minute and a half.
MAX_LAYOUTS, MAX_CALL_STYLES, MAX_READINGS_TRIED = 64, 256, 2048
# The longest text of one role in a reading (`W_query.weight`, `heads.0.q.weight + heads.1.q.weight + ...`): a piece
# per head, each a parameter's name and its index, well under 1,000 characters in the zoos; the report shows the
# reading matched and every reading tried, so a patched worker's reading of 800,000 characters (red team 15) made a
# report of 1.6 MB, and each character a step of the parent's work on it.
MAX_ROLE_TEXT = 8192


def check_answer(request: Request, reply: Reply) -> Reply:
    """A reply of the kind the request asks for (or Failed); anything else is a protocol error."""
    if not isinstance(reply, (Failed,) + ANSWERS[type(request)]):
        raise ProtocolError(f"{request.op} answered with {type(reply).__name__}")
    if isinstance(reply, Built):
        layouts, styles = len(reply.layouts), len(reply.call_styles)
        if layouts > MAX_LAYOUTS or styles > MAX_CALL_STYLES or layouts * styles > MAX_READINGS_TRIED:
            raise ProtocolError(f"{layouts} readings of the parameters and {styles} ways to call forward offered, "
                                f"where mha-check's worker offers at most {MAX_LAYOUTS}, {MAX_CALL_STYLES} and "
                                f"{MAX_READINGS_TRIED} pairs")
        longest = max((len(text) for lay in reply.layouts for text in lay.roles.values()), default=0)
        if longest > MAX_ROLE_TEXT:
            raise ProtocolError(f"a reading of the parameters {longest} characters long offered, where mha-check's "
                                f"worker offers at most {MAX_ROLE_TEXT}")
    if isinstance(request, Build) and isinstance(reply, Built) and request.handle not in (None, reply.handle):
        raise ProtocolError(f"build {request.handle} answered as {reply.handle}")
    return reply
