"""Driving the child for a trace: one forward of the lesson's worked example, recorded by the child and analysed
here (`analysis`), its marks named after the known mistakes that declare them (from the catalogue); and the
module's own parameter count for the lesson's arithmetic."""
from __future__ import annotations

import dataclasses

import numpy as np

import mutants
from harness.engine import grouped
from harness.engine.mapping import frozen_constants, norms_left_out
from harness.engine.trace.analysis import analyse
from harness.engine.trace.result import TraceResult
from harness.engine.trace.steps import lesson_order
from harness.engine.trace.vocabulary import LESSON_STEPS, WORKED
from harness.wire import raised
from harness.wire.config import Config
from harness.wire.errors import CannotDrive, HarnessFailure, TargetFailure, WorkerDied

GROUPED_HEADS = 4  # a grouped-query layer's trace: 4 query heads, 2 key/value heads (harness.engine.grouped.configs)
GROUPED_HEAD_WIDTH = 6  # ... each 6 wide (d = 24): with the worked example's d = 8 the heads were 2 wide, as many as
# the key/value heads, and scores divided by sqrt(KV·dh) = 2 read as divided by dh = 2 (scale-by-dh marked where the
# report rightly named no mistake, a student's trial).  6: dh, sqrt(dh), sqrt(d), sqrt(H) and sqrt(KV·dh) all differ
WORKED_CONFIG = Config(d_in=WORKED["d"], d_out=WORKED["d"], heads=WORKED["heads"],
                       context_length=WORKED["context_length"], batch=WORKED["batch"], n=WORKED["n"])


TRACE_DROPOUT = 0.5  # the trace runs the layer in eval mode, where a dropout rate changes nothing of a correct layer;
# at 0 a dropout left on (F.dropout's training=True, SDPA's dropout_p=self.p) would be on at rate 0, unseen


def declared_by(form: str = "multi-head") -> dict[str, list[str]]:
    """detector id -> the mutants of the layer's form (harness.wire.form) that declare it (`MutantInfo.trace`),
    from the catalogue: a single-head layer's mark is named after a single-head mutant, a multi-head one's after
    a multi-head mutant, though both copy the same mistake."""
    out: dict[str, list[str]] = {}
    for mid, entry in mutants.catalogue().items():
        if mutants.form(mid) != form:
            continue
        for detector in entry.get("trace", []):
            out.setdefault(detector, []).append(mid)
    return out


def name_mistakes(found: list[dict], form: str = "multi-head") -> list[dict]:
    """Each marked mistake with the one known mistake (mutant) that declares its detector, when there is one."""
    by_detector = declared_by(form)
    for m in found:
        declared = by_detector.get(m["id"], [])
        m["mutant"] = declared[0] if len(declared) == 1 else None
    return found


def record(ctx, display: str = "", biased: bool = False) -> TraceResult:
    """Trace one forward pass of the worked example through the module behind `ctx` (called the proven way).
    Failures of the student's code end up in `result.error`, never as an exception.  `biased`: built with
    qkv_bias=True (a Q/K/V bias that forward never adds exists only there: harness.engine.diagnosis)."""
    cfg, worked, form = WORKED_CONFIG, dict(WORKED), None
    result = TraceResult(display or ctx.subject.spec, "", worked)
    try:
        form = ctx.form  # the worked example of the layer's own form: one head, no output projection for single
        cfg = dataclasses.replace(_grouped(ctx, ctx.shaped(cfg)), dropout=TRACE_DROPOUT, qkv_bias=biased)
        worked.update(heads=cfg.heads, **({} if form.out_proj else {"out_proj": False}),
                      **({"kv_heads": cfg.kv_heads, "d": cfg.d_out} if cfg.kv_heads else {}))
        construction = ctx.construction(cfg) + (
            f" (dropout {TRACE_DROPOUT} on purpose: the forward is recorded in eval() mode, where a correct layer "
            "drops nothing, and a dropout left on shows)" if ctx.accepts("dropout") else "")  # a student's trial asked
        inst = ctx.build(cfg)
        inst.info  # noqa: B018 - built now: "built as" only once it was (a student's trial read "built as
        # KausaleAufmerksamkeit()" above the error that said no such build could be made)
        result.construction = construction
        x = np.random.default_rng([ctx.seed, 31337]).standard_normal((cfg.batch, cfg.n, cfg.d_in))
        reply = inst.trace(x)
        styles = inst.info.call_styles
        result.call, result.call_ways = (styles[inst.style % len(styles)], len(styles)) if styles else ("", 1)
    except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied) as e:
        stage = getattr(e, "stage", None)  # none: mha-check's own limit, said alone ("adapter: ..." to a student)
        result.error = f"{stage}: {e.message}" if stage else e.message
        refused = _refused(ctx, cfg, e) if form is not None and isinstance(e, TargetFailure) else None
        if refused:  # no forward to record: what the constructor refused, and built instead, is the evidence
            _, found, _ = analyse([], {**worked, "refused": refused}, complete=False)
            result.mistakes = name_mistakes(found, form.family)
        return result
    result.truncated = reply.truncated
    if reply.raised:
        result.error = f"your forward raised {reply.raised}"
    if reply.output:
        result.output_shape = reply.output.get("shape")
    clean = not reply.raised and not reply.truncated
    apart = _widths_apart(ctx, cfg) if clean else None
    training = _in_training(inst, x) if clean and reply.lines else None
    long = _at_context_length(ctx, inst, cfg, reply.ops) if clean else None
    cached = _cached(ctx, cfg, inst, x) if clean else None
    indivisible = _indivisible(ctx, cfg, x) if clean else None
    steps, found, notes = analyse(reply.ops, {**worked, "params": _parameter_names(inst), "plain": _plain(inst),
                                            "roles": _roles(ctx), **({"apart": apart} if apart else {}),
                                            **({"shared_kv": True} if _shared_kv(inst) else {}),
                                            **({"long": long} if long else {}), **({"cache": cached} if cached else {}),
                                            **({"indivisible": indivisible} if indivisible else {}),
                                            "untouched": reply.untouched or [],
                                            "lines": reply.lines or [], **({"training": training} if training else {})},
                                  complete=not reply.raised and not result.truncated, output=reply.output)
    result.steps, result.mistakes = steps, name_mistakes(found, form.family)
    name_mistakes([s.mistake for s in steps if s.mistake], form.family)
    result.notes += notes
    result.lesson_order = lesson_order(steps)
    result.missing = [s for s in LESSON_STEPS if s not in result.lesson_order and s not in form.absent_steps]
    if result.output_shape is not None and result.output_shape != [cfg.batch, cfg.n, cfg.d_out]:
        result.notes.append(f"the output has shape {tuple(result.output_shape)}, expected "
                            f"({cfg.batch}, {cfg.n}, {cfg.d_out})")
    return result


MASK_ABSENT = ("no-mask-applied", "sdpa-without-causal")  # marks that say no mask hides the future


def withhold_under_a_guessed_call(ctx, result: TraceResult) -> None:
    """Where mha-check could not tell how to call the forward (no reading reproduced the module under any way of
    passing the mask, and leakage gave no evidence either: `Mapping.style` None, or the forward raised every way it
    was called: `Mapping.raised`), the trace calls it the first way tried, a guess, and what its marks see is what
    that guess does, not what the layer does: a sequence-first layer with its own mask layout (labml) was marked
    no-mask and softmax-wrong-axis while the report, rightly, could not tell.  The marks are then kept as a note,
    not named as mistakes (issue 28: never name a mistake without evidence; the trace and the report never
    disagree).  A forward that raised whichever way it was called keeps its marks, except that no mask hides the
    future where it takes one and the guess passed none (uvadlc's tutorial layer, whose merge raises, was told
    no-mask: it masks with the mask it is given)."""
    guessed = guessed_marks(ctx, result)
    if not guessed:
        return
    proof = ctx._mapping  # proven already (guessed_marks found it); Context.mapping would prove it again if not
    seen = ", ".join(dict.fromkeys(m.get("mutant") or m["id"] for m in guessed))
    why = "your forward raised whichever way mha-check called it, so it" if proof.raised else "mha-check"
    again = f"mha-check {result.target}{result.options}"
    result.notes.append(f"{why} could not tell how to call your forward (see `{again}`): "
                        f"this trace called it {result.call or 'the first way it tried'}, a guess, so what it shows "
                        f"under that call is not marked as a mistake (it would have been: {seen})")
    result.mistakes = [m for m in result.mistakes if m not in guessed]
    for step in result.steps:
        if step.mistake in guessed:
            step.mistake = None


def guessed_marks(ctx, result: TraceResult) -> list[dict]:
    """The marks of `result` that `withhold_under_a_guessed_call` withholds (what a guessed call shows), without
    changing `result`: the diagnosis leaves them out too, so the report never points at a mark the trace does not
    make (rela-transformer's ReLA: "trace marks the step that looks wrong (line 108)", the trace none)."""
    proof = getattr(ctx, "_mapping", None)
    if proof is None or (proof.style is not None and not proof.raised) or not result.mistakes:
        return []
    return [m for m in result.mistakes if not proof.raised or (m["id"] in MASK_ABSENT and result.call_ways > 1)]


def _refused(ctx, cfg: Config, e: TargetFailure) -> dict | None:
    """What the constructor refused: the worked example, whose width its heads divide, with a ValueError or
    AssertionError of its own at a line of the student's; and the number of heads (3) that does not divide that
    width with which it builds (a guard the wrong way round).  {"at", "code", "d_out", "heads", "built_heads"}, or
    None where the refusal is of another kind, or the class refuses the indivisible width too."""
    said = raised.parse(e.message) if e.stage == "construct" else None
    if said is None or said.kind.rsplit(".", 1)[-1] not in ("ValueError", "AssertionError") or not said.at or \
            cfg.kv_heads or cfg.d_out % cfg.heads or not cfg.d_out % INDIVISIBLE_HEADS:
        return None
    try:
        ctx.built(dataclasses.replace(cfg, heads=INDIVISIBLE_HEADS, dropout=0.0)).info  # noqa: B018 - built now
    except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied):
        return None
    return {"at": said.at, "code": said.code, "d_out": cfg.d_out, "heads": cfg.heads, "built_heads": INDIVISIBLE_HEADS}


INDIVISIBLE_HEADS = 3  # the worked example's width, 8, with heads that do not divide it


def _indivisible(ctx, cfg: Config, x: np.ndarray) -> dict | None:
    """What the constructor builds for the worked example's width with heads that do not divide it, where it builds
    one (the lesson's rule refuses it): {"d_out", "heads", "params": [{"at", "code", "shape"}: where it made each
    parameter its forward read, or left unread], "raised" and "raised_at" where that forward raised, "init" ({"at",
    "code"}: the constructor's `def __init__` line, where the guard belongs, when known)}, from that module's forward
    recorded (its lines, not its numbers); None where it refuses, or the layer is grouped, or nothing is known."""
    try:
        if cfg.kv_heads or cfg.d_out % cfg.heads or not cfg.d_out % INDIVISIBLE_HEADS or \
                ctx.form.name != "multi-head":
            return None
        inst = ctx.subject.build(dataclasses.replace(cfg, heads=INDIVISIBLE_HEADS, dropout=0.0), None,
                                 "trace-indivisible")
        proof = ctx.mapping  # called as the worked example was (ParlAI's forward asserts that a mask is given:
        inst.style = proof.style if proof.style is not None else 0  # called bare, its raise was said to be the width's)
        reply = inst.trace(x)
        init = inst.info.init_at or {}
    except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied):
        return None
    params, seen = [], set()
    for t in [t for op in reply.ops for t in op["in"]] + [{"made": u, "shape": None} for u in reply.untouched or ()]:
        made = t.get("made") or {}
        if made.get("kind") == "parameter" and made.get("at") not in (None, "?") and \
                (made.get("path"), made["at"]) not in seen:
            seen.add((made.get("path"), made["at"]))
            params.append({"at": made["at"], "code": made.get("code", ""), "shape": t.get("shape")})
    failed = next((op for op in reversed(reply.ops) if op.get("raised")), {})
    said = raised.parse(reply.raised) if reply.raised else None
    crash = {"raised": f"{said.kind}: {said.text}"[:200] if said else str(reply.raised)[:200],
             **({"raised_at": failed["at"]} if failed.get("at") not in (None, "?", "mha-check") else
                {"raised_at": said.at} if said and said.at else {})} if reply.raised else {}
    if not params and not crash:
        return None
    return {"d_out": cfg.d_out, "heads": INDIVISIBLE_HEADS, "params": params, **crash,
            **({"init": {"at": init["at"], "code": init.get("code", "")}} if init.get("at") else {})}


APART_D_IN = 6  # the widths apart: d_in = 6 beside the worked example's d_out = 8 (as the first required configuration)


def _widths_apart(ctx, cfg: Config) -> dict | None:
    """The forward recorded once more with the input narrower than the output (d_in = 6, d_out = 8), where the
    constructor takes the two widths apart and the worked example (d_in = d_out) ran clean: a step that uses the
    input's width where the output's belongs (the heads merged back to x's width C) raises only there, and a single
    head's scores scaled by the input's width (`C ** -0.5`) are scaled by the wrong number only there, and a layer
    built to the input's width throughout returns d_in features only there.  {"ops", "raised" (None where it ran to
    the end), "output", "d_in", "d_out", "batch", "n", "heads", "context_length", "d_out_name" (the constructor's
    parameter for the output width, when it has one)}; None where it was not recorded
    whole (or could not be built: a limit of the layer, not a finding)."""
    try:
        if not ctx.separate_widths or cfg.kv_heads or ctx.form.name not in ("multi-head", "single-head"):
            return None
        wide = dataclasses.replace(cfg, d_in=APART_D_IN)
        x = np.random.default_rng([ctx.seed, 31338]).standard_normal((wide.batch, wide.n, wide.d_in))
        reply = ctx.build(wide).trace(x)
    except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied):
        return None
    if reply.truncated:
        return None
    return {"ops": reply.ops, "raised": reply.raised or None, "output": reply.output or {}, "d_in": wide.d_in,
            "d_out": wide.d_out, "batch": wide.batch, "n": wide.n, "heads": wide.heads,
            "context_length": wide.context_length, "d_out_name": ctx.signature.accepts.get("d_out")}


def _in_training(inst, x) -> dict | None:
    """The same forward recorded in training mode, as a training loop runs it: {"ops", "lines"} when it ran to the end
    (a mask applied only in eval mode is missing there, and the lines show where the two modes part); {"raised_ops"}
    when it raised where eval mode runs; None otherwise.
    The module is put back in eval mode by the next call that wants it (every check says its mode)."""
    try:
        reply = inst.trace(x, mode="train")
    except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied):
        return None
    if reply.raised and not reply.truncated:  # a view that only training's layout refuses (SDPA with dropout):
        return {"raised_ops": reply.ops}  # detect_layout.view_in_training marks it on the eval forward's step
    if reply.raised or reply.truncated or not reply.lines:
        return None
    return {"ops": reply.ops, "lines": reply.lines}


def _at_context_length(ctx, inst, cfg: Config, ops: list[dict]) -> dict | None:
    """The forward recorded once more with as many tokens as the context length the constructor was given, where the
    worked example's forward read a square tensor the constructor made (a mask) of fewer positions than that
    (`torch.ones(8, 8)` for any context length): a sequence the module was built for meets it only there.
    {"ops", "raised", "n"} when that forward raised; None otherwise (no such tensor, no context length taken, or
    it could not be run: a limit of ours, not a finding)."""
    if not ctx.accepts("context_length") or not any(_short_square(t, cfg) for op in ops for t in op["in"]):
        return None
    try:
        x = np.random.default_rng([ctx.seed, 31339]).standard_normal((cfg.batch, cfg.context_length, cfg.d_in))
        reply = inst.trace(x)
    except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied):
        return None
    if not reply.raised or reply.truncated:
        return None
    return {"ops": reply.ops, "raised": reply.raised, "n": cfg.context_length}


CACHE_TRACES = (  # (name, chunks, module): the worked example's 3 tokens decoded with the layer's KV cache after its
    # reset, the last call recorded; each on a module of its own that nothing else has run, but "again", which follows
    # "third" on its module (a reset that leaves the position would shift every later decode on a shared one)
    ("first", [3], "first"),  # the prompt alone, on an empty cache: what every later prompt must repeat
    ("decode", [2, 1], "decode"),  # token 2 alone after a prompt of 2: it sees keys 0, 1 and 2
    ("chunk", [1, 2], "chunk"),  # tokens 1 and 2 in one call after a prompt of 1: token 1 must not see token 2
    ("third", [1, 1, 1], "third"),  # token 2 after tokens 0 and 1, one call each: the position advanced twice
    ("again", [3], "third"),  # the prompt once more, after reset_cache(): as "first"
)


def _cached(ctx, cfg: Config, inst, x: np.ndarray) -> dict | None:
    """The worked example decoded with the layer's KV cache (harness.child.cache), each decode's last call
    recorded (CACHE_TRACES): {name: {"ops", "raised", "lines", "output", "chunks"}}, where a decoded token's mask,
    rotary positions and lines show (the plain forward never runs them).  None where the layer shows no cache
    mha-check can drive, or the prompt alone could not be recorded; a decode that could not be recorded is left out
    (the chunk of two new tokens where forward is called with a mask or flag of mha-check's, which fits one new token
    only)."""
    bare = getattr(getattr(inst, "info", None), "call_bare", None) or []
    out = {}
    for name, chunks, module in CACHE_TRACES:
        if name == "chunk" and not (0 <= inst.style < len(bare) and bare[inst.style]):
            continue
        try:
            reply = ctx.build(cfg, fresh=f"trace-cache-{module}").trace(x, chunks=chunks)
        except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied):
            if name == "first":
                return None
            continue
        if reply.truncated or (name == "first" and reply.raised):
            return None
        said = raised.parse(reply.raised) if reply.raised else None
        out[name] = {"ops": reply.ops, "raised": reply.raised or None, "lines": reply.lines or [],
                     "output": reply.output or {}, "chunks": chunks,
                     **({"said": said.to_dict()} if said else {})}  # (what raised, where: the detectors read no wire)
    return out


def _short_square(t: dict, cfg: Config) -> bool:
    """A tensor the constructor made (not a parameter) whose last two axes are of one size, at least the worked
    example's n and less than the context length it was built with."""
    shape = t.get("shape") or []
    return "made" in t and t["made"].get("kind") != "parameter" and len(shape) >= 2 and shape[-1] == shape[-2] and \
        cfg.n <= shape[-1] < cfg.context_length


def _parameter_names(inst) -> list[str]:
    """The module's parameter names, for detectors that name a parameter the forward never used (the key
    projection of a layer that projects its keys with the queries' weight); [] when the build did not say."""
    return [p.name for p in getattr(getattr(inst, "info", None), "params", None) or ()]


def _roles(ctx) -> dict[str, str]:
    """role -> the parameters it is read from (`wo`: `c_proj.weight`), of the proven mapping: a detector that finds a
    role's parameters never used names them in the student's words (an output projection made and never applied);
    {} where the parameters have no certain reading."""
    try:
        mapping = ctx.mapping
    except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied):
        return {}
    return dict(mapping.description) if mapping.certain else {}


def _shared_kv(inst) -> bool:
    """Whether a reading of the parameters has key/value projections narrower than the queries' (one key/value head
    shared, a multi-query layer with no constructor parameter for it): out-proj-bias holds such a layer, as a grouped
    one, to the Llama family's projections without biases, and the trace's out-proj-without-bias follows it."""
    return any(getattr(layout, "kv_width", None) for layout in getattr(inst, "layouts", None) or ())


def _plain(inst) -> list[str]:
    """The module's tensors kept as plain attributes (not parameters, not buffers), by attribute path: a mask among
    them is the mistake detect_mask's mask-kept-as-attribute marks; [] when the build did not say."""
    return list(getattr(getattr(inst, "info", None), "plain_tensors", None) or ())


def _grouped(ctx, cfg: Config) -> Config:
    """A grouped-query layer is traced grouped, as its first required configuration is checked: 4 query heads
    sharing 2 key/value heads (or the number given with --arg where it divides 4), so that the forward shows how
    the key/value heads are shared (with as many as the heads, `.repeat` and `.repeat_interleave` look the same)."""
    try:
        if not ctx.grouped:
            return cfg
    except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied):
        return cfg
    heads = GROUPED_HEADS
    kv = grouped.preferred_kv(ctx.signature, ctx.subject.overrides, ctx._config_reads)
    d = heads * GROUPED_HEAD_WIDTH
    return dataclasses.replace(cfg, heads=heads, kv_heads=kv if kv and heads % kv == 0 and kv < heads else 2,
                               d_out=d, d_in=d if cfg.d_in == cfg.d_out else cfg.d_in)


def count_parameters(ctx, d: int, heads: int, qkv_bias: bool, n: int) -> tuple[int | None, str, int | None]:
    """The module's own parameter count when built with width d and `heads` heads, a note, and the size of its
    bias vectors (its 1-D parameters named `bias`, `*_bias`: what the trace's arithmetic may call Q/K/V biases)."""
    if d % heads:
        return None, "", None
    note = ""
    if qkv_bias and "qkv_bias" not in ctx.signature.accepts and not ctx.signature.config_param:
        note = "your constructor has no Q/K/V bias parameter: counted as it builds"
    try:
        built = ctx.subject.build(Config(d_in=d, d_out=d, heads=heads, qkv_bias=qkv_bias,
                                         context_length=max(1, min(n, 2048)), batch=1, n=1))
        held, said = norms_left_out(built.info)
        frozen = frozen_constants(built.info)  # as param-count: a constant kept as a frozen parameter
        constants = (f"not counted: {', '.join(name for name, _ in frozen)} (requires_grad=False, a constant of the "
                     "layer, not a weight it learns)") if frozen else ""
        biases = sum(p.shape[0] for p in built.info.params
                     if len(p.shape) == 1 and p.name.rsplit(".", 1)[-1].endswith("bias"))
        return (built.info.param_count - held - sum(size for _, size in frozen),
                "; ".join(filter(None, (note, said.removeprefix("; "), constants))), biases)
    except (TargetFailure, CannotDrive) as e:
        return None, f"building it with d={d}, H={heads} raised {e.message}", None
