"""param-count: 3·d_in·d_out + d_out² plus d_out for each bias the module actually has.

The lesson: "count parameters with the setting you actually use".  So the biases are read off the module (which
of b_q, b_k, b_v, b_o it has); a missing or extra weight matrix, or a bias that contradicts an explicit qkv_bias
argument, is a failure.  Whether the output projection *should* have a bias is a lesson rule (out-proj-bias).
"""
from dataclasses import replace

from checks import check, failed, passed
from checks.construct import construct
from harness.engine.mapping import frozen_constants, norms_left_out, unread_beside_norms
from harness.engine.search import find_failure
from reference import param_count_formula

BIASES = ("bq", "bk", "bv", "bo")


def _explain_difference(extra: int, cfg) -> tuple[str, str]:
    """(what the difference looks like, its finding code), only when exactly one known pattern fits it: with tiny
    widths several patterns give the same number, and then none is named."""
    d_in, d = cfg.d_in, cfg.d_out
    patterns = [
        (extra in (-(d * d), -(d * d + d)), "no output projection (concatenation alone does not combine the heads)",
         "count: no output projection"),
        (extra > 0 and extra % (3 * d_in * d) == 0,
         f"{extra // max(1, 3 * d_in * d)} extra full-width sets of Q/K/V (heads of width d_out?)",
         "count: full-width heads"),
        (extra > 0 and extra % (d * d + d) == 0, f"{extra // (d * d + d)} extra Linear({d}, {d}) (a second output "
                                                 "projection?)", "count: extra projection"),
        (extra < 0 and -extra % (d_in * d) == 0, f"{-extra // (d_in * d)} of the Q/K/V projections are missing from "
                                                 "the module's parameters (kept in a plain list?)",
         "count: missing projections"),
    ]
    fitting = [(text, code) for fits, text, code in patterns if fits]
    return fitting[0] if len(fitting) == 1 else ("", "count: other")


def _bias_words(biases: set[str]) -> str:
    """A bias set in words: "biases b_k, b_o, b_q, b_v", "no bias"."""
    return "biases " + ", ".join(f"b_{b[1]}" for b in sorted(biases)) if biases else "no bias"


def _full_width(got: int, cfg) -> tuple[str, str] | None:
    """(what it looks like, "count: full-width heads") when `got` is exactly the count of H heads of width d_out each:
    H·3·d_in·d_out for W_q, W_k, W_v (H·d_out more for each Q/K/V bias), and an output projection from H·d_out
    (H·d_out² + d_out) or none (heads stacked side by side).  Exact, so it holds whatever the modular patterns of
    `_explain_difference` say: the difference from a lesson count with other biases fits none of them (raw
    Parameters W_q of (d, H·d) were told "no known mistake matches", a student's trial)."""
    h, d_in, d = cfg.heads, cfg.d_in, cfg.d_out
    if h < 2:
        return None
    qkv = {h * 3 * d_in * d + h * d * b for b in range(4)}
    outs = {"an output projection from H·d_out": {h * d * d, h * d * d + d}, "no output projection": {0}}
    for said, sizes in outs.items():
        if any(got == a + o for a in qkv for o in sizes):
            return (f"{h} heads each as wide as d_out={d} (W_q, W_k, W_v of {d_in}×{h}·{d}) and {said}: the count "
                    "grows with the number of heads", "count: full-width heads")
    return None


def _one_head_shared(got: int, cfg) -> tuple[str, str] | None:
    """(what it looks like, "count: one head shared") when `got` is exactly the count of ONE head's W_q, W_k, W_v
    (d_in × d_out/H each, with or without their biases) beside the lesson's output projection (with or without its
    bias): every head computes with the same weights.  A student's trial: `nn.ModuleList([Head(...)] * H)` repeats
    one module, which nn.ModuleList (and model.parameters()) holds once; head-invariance saw the count fall as heads
    were added, and this check's general fix (split the width, not full-width heads) said the opposite."""
    h, d_in, d = cfg.heads, cfg.d_in, cfg.d_out
    if h < 2 or d % h:
        return None
    dh = d // h
    qkv = {3 * d_in * dh + dh * b for b in range(4)}
    if any(got == a + o for a in qkv for o in (d * d, d * d + d)):
        return (f"the W_q, W_k and W_v of one head ({d_in}×{dh} each) serving all {h} heads: the same head module "
                f"repeated (`[head] * {h}`, which nn.ModuleList and model.parameters() hold once), so the count falls "
                "as heads are added and every head computes the same thing", "count: one head shared")
    return None


ONE_HEAD_FIX = """Give every head its own weights: build a new head for each
    (`nn.ModuleList([Head(...) for _ in range(num_heads)])`, not `[Head(...)] * num_heads`, which repeats one
    module), or, as the lesson does, one projection of width d_out each for the queries, keys and values, split into
    the heads by view."""


EXTRA_FIX = """The lesson's layer has W_q, W_k, W_v and one output projection. A further Linear(d_out, d_out) after
    it (say, after nn.MultiheadAttention, which has its own out_proj) adds d_out² + d_out parameters and computes
    nothing two linear maps in a row cannot: keep one output projection."""


PATTERN_FIXES = {"count: extra projection": EXTRA_FIX, "count: one head shared": ONE_HEAD_FIX}  # a pattern's own


def _extra_fix(extra: list[tuple[str, int]], difference: int) -> str:
    """The fix in the student's own names when the parameters beyond the count are exactly those that play no role
    (jadore's post-LN sublayer: layer_norm.weight and layer_norm.bias are the +16); the check's general fix speaks of
    qkv_bias and full-width heads, which such a class has neither of."""
    names = ", ".join(f"{name} ({size})" for name, size in extra)
    one = difference == 1
    return (f"The {difference} parameter{'' if one else 's'} beyond the lesson's count {'is' if one else 'are'} "
            f"{names}: {'it is not' if one else 'none of them is'} W_q, W_k, W_v, the output projection or one of "
            "their biases, which are the whole of the lesson's layer. Keep what "
            f"{'it computes' if one else 'they compute'} (a normalisation, a residual connection, a learned "
            "temperature, ...) outside the attention layer, or follow the lesson's layer exactly.")


LESSON_BIASES = "the output projection's bias alone, as the lesson has"  # where the biases cannot be read
BIAS_SETS = [set(), {"bo"}, {"bq", "bk", "bv"}, {"bq", "bk", "bv", "bo"}, {"bq", "bv", "bo"}]  # whisper: no b_k


QKV_BIAS_FIX = ("Pass the flag on to the Q, K and V projections: nn.Linear(d_in, d_out, bias=qkv_bias) for each (or "
                "for one fused (d_in, 3·d_out)); an nn.Linear has a bias unless it is given bias=False.")


def _expected(cfg, biases: set[str], kv: int | None = None, out_proj: bool = True) -> int:
    """The lesson's formula, 3·d_in·d_out + d_out² + d_out (+ 3·d_out with Q/K/V biases), for the biases a layer
    has: without an output bias d_out less, with only some Q/K/V biases d_out for each.  Grouped-query attention
    (W_k, W_v of `kv` = kv_heads · dh rows): d_in·d_out + 2·d_in·kv + d_out² + d_out, b_k and b_v of kv each.
    Without an output projection (the single-head form, harness.wire.form): no d_out² + d_out."""
    kv = cfg.d_out if kv is None else kv
    count = param_count_formula(cfg.d_in, cfg.d_out, kv_width=kv) - (0 if "bo" in biases else cfg.d_out)
    count -= 0 if out_proj else cfg.d_out * cfg.d_out
    return count + sum({"bq": cfg.d_out, "bk": kv, "bv": kv}[b] for b in {"bq", "bk", "bv"} & biases)


def _input_width_family(ctx, cfg, got: int, bias_sets, out_proj: bool, count_of) -> bool:
    """A layer that takes separate input and output widths but computes Q, K and V in the input width, only its
    output projection going to d_out (timm's Attention without attn_head_dim, Sockeye's MultiHeadSelfAttention(
    depth_att, heads, depth_out)): 3·d_in² + d_in·d_out + biases where d_in != d_out, and the lesson's count where
    d_in = d_out.  harness.engine.mapping.prove checks such a layer with d_in = d_out; its count is not a mistake
    either (it was failed when the forward could not run for the proof: a layer that raises in float64)."""
    if cfg.d_in == cfg.d_out or ctx.grouped or not out_proj:
        return False
    d_in, d_out = cfg.d_in, cfg.d_out
    family = {3 * d_in * d_in + d_in * d_out + d_in * len({"bq", "bk", "bv"} & b) + (d_out if "bo" in b else 0)
              for b in bias_sets}
    if got not in family:
        return False
    square = replace(cfg, d_in=d_out)
    return count_of(square) in {_expected(square, b, None, out_proj) for b in bias_sets}


def _kv_width(ctx, cfg, inst) -> int | None:
    """The height of W_k and W_v the count is judged with: kv_heads · dh for a layer that takes a number of
    key/value heads (the configuration asked for it), else the readings' (one shared key/value head, recognised by
    its shape); None: d_out, plain multi-head attention."""
    if ctx.grouped:
        return cfg.value("kv_heads") * cfg.head_width
    found = {layout.kv_width for layout in inst.layouts}
    return next(iter(found)) if len(found) == 1 else None


def _biases(inst, out_proj: bool = True) -> set[str] | None:
    """The biases the module has, when every candidate reading of its parameters agrees; None when unknown.  A
    multi-head layer read without an output projection (harness.child.layouts.without_out_proj) whose every
    parameter is one of W_q, W_k, W_v or their biases is counted against the lesson's layer with its output
    projection's bias: the whole nn.Linear(d_out, d_out) is what it lacks.  With a parameter no reading takes (it
    may be a projection mha-check did not recognise), the biases are unknown."""
    missing = _without_out_proj(inst, out_proj)
    if missing and unread_beside_norms(inst.info):
        return None
    found = {frozenset(r for r in layout.roles if r in BIASES) | ({"bo"} if missing else set())
             for layout in inst.layouts}
    return set(next(iter(found))) if len(found) == 1 else None


def _without_out_proj(inst, out_proj: bool) -> bool:
    """The multi-head layer's readings have no W_o (harness.child.layouts.without_out_proj)."""
    return out_proj and bool(inst.layouts) and all("wo" not in layout.roles for layout in inst.layouts)


@check(
    id="param-count",
    claim="the parameter count is 3·d_in·d_out + d_out² + d_out for each bias the layer has (no H in it)",
    explanation="""Q, K and V are three (d_in × d_out) matrices and the output projection is d_out × d_out, plus
    d_out for each bias vector: 264 for d = 8 with an output bias; 2,360,064 for GPT-2 small without Q/K/V biases,
    2,362,368 with them. Another count means a missing or extra piece.""",
    fix="""Use three nn.Linear(d_in, d_out, bias=qkv_bias) (or one fused (d_in, 3·d_out)) and one
    nn.Linear(d_out, d_out); split the width among the heads instead of giving each head its own full-width
    projections.""",
    needs=(construct,),
    example="""formula: 3·d_in·d_out + d_out² + d_out per bias (b_o in the lesson; b_q, b_k, b_v with qkv_bias=True)
    d = 8: 3·8·8 + 8² + 8 = 192 + 72 = 264, the same for H = 1, 2 and 4
    GPT-2 small (d = 768): 2,360,064 without Q/K/V biases, 2,362,368 with them (+ 3·768)
    typical wrong counts at d = 8: 192 (no output projection, -72), 520 with H = 2 (every head its own 8 -> 8 Q,
      K, V), 336 (an extra, unused Linear(8, 8))""",
)
def param_count(ctx):
    explicit_qkv = "qkv_bias" in ctx.signature.accepts or bool(ctx.signature.config_param)
    out_proj = ctx.form.out_proj
    bias_sets = BIAS_SETS if out_proj else [b - {"bo"} for b in BIAS_SETS]
    formula = "3·{0}·{1} + {1}² + biases" if out_proj else "3·{0}·{1} + biases (one head, no output projection)"

    def counted(inst) -> int:
        return inst.info.param_count - norms_left_out(inst.info)[0] - sum(size for _, size in
                                                                         frozen_constants(inst.info))

    def everywhere(pattern, got: int, cfg) -> tuple[str, str] | None:
        """An exact count pattern (`_full_width`, `_one_head_shared`), only when every required configuration's count
        is that pattern's too: with the small widths of one configuration an unused Linear(6, 8) gave the count of
        two full-width heads."""
        said = None if ctx.grouped else pattern(got, cfg)
        if said and all(pattern(counted(ctx.built(other)), other) for other in ctx.required_configs()):
            return said
        return None

    input_width = []  # configurations counted as Q/K/V in the input width (_input_width_family)

    def prop(cfg):
        inst = ctx.built(cfg)  # counting needs no forward pass
        norm_note = norms_left_out(inst.info)[1]
        got = counted(inst)
        biases = _biases(inst, out_proj)
        kv = _kv_width(ctx, cfg, inst)
        allowed = sorted({_expected(cfg, b, kv, out_proj) for b in bias_sets}) if biases is None else \
            [_expected(cfg, biases, kv, out_proj)]
        if biases is not None and explicit_qkv and "qkv_bias" in ctx.signature.accepts:
            has = {"bq", "bk", "bv"} & biases
            if cfg.qkv_bias and len(has) < 3 or not cfg.qkv_bias and has:
                found = ", ".join(f"b_{b[1]}" for b in sorted(has)) or "no bias"
                return failed(f"built with qkv_bias={cfg.qkv_bias}, the Q/K/V projections have {found}: the "
                              "constructor takes qkv_bias and does not follow it",
                              observed=f"Q/K/V biases: {found}",
                              expected="b_q, b_k, b_v" if cfg.qkv_bias else "no Q/K/V bias",
                              finding="qkv_bias ignored", fix=QKV_BIAS_FIX)
        if got in allowed:
            return None
        if _input_width_family(ctx, cfg, got, bias_sets, out_proj, lambda c: counted(ctx.built(c))):
            input_width.append(cfg)
            return None
        explained = {_explain_difference(got - a, cfg) for a in allowed} - {("", "count: other")}
        lesson = {"bo"} if out_proj else set()  # where the biases cannot be read: the count of the bias set whose
        # difference a known pattern explains (all four biases beside a doubled W_q: +72, its rows), else the
        # lesson's, as trace and explain give it (a student's trial was told "288 with any set of biases", the
        # nearest count, where both said 264)
        wide = everywhere(_full_width, got, cfg) or everywhere(_one_head_shared, got, cfg)  # H full-width heads,
        # or one head for all: told from the lesson's count, whatever fits the rest
        fitting = [a for a in allowed if _explain_difference(got - a, cfg)[0]] if not wide else []
        want = allowed[0] if biases is not None else min(fitting, key=lambda a: abs(a - got)) if fitting else \
            _expected(cfg, lesson, kv, out_proj)
        unread = next((b for b in bias_sets if _expected(cfg, b, kv, out_proj) == want), lesson)  # the set it is
        looks_like, code = wide or (next(iter(explained)) if len(explained) == 1 else
                                                      ("", "count: other"))
        if kv is not None and kv != cfg.d_out and biases is not None and got == _expected(cfg, biases):
            looks_like, code = (f"W_k and W_v of {cfg.d_out} rows, one key/value head per query head: the number of "
                                f"key/value heads ({kv // cfg.head_width}) is taken but not used",
                                "count: kv heads ignored")
        fix = PATTERN_FIXES.get(code, "")
        extra = [p for p in unread_beside_norms(inst.info) if p not in frozen_constants(inst.info)]
        if got > want and extra and sum(size for _, size in extra) == got - want and not looks_like:
            fix = _extra_fix(extra, got - want)
        which = (" with the output projection's bias and " + (f"{', '.join(sorted(biases - {'bo'}))}" if
                                                              biases - {"bo"} else "no Q/K/V bias")
                 if biases is not None and _without_out_proj(inst, out_proj) else
                 f" with {_bias_list(biases)}" if biases is not None else
                 f" with {LESSON_BIASES if unread == lesson and out_proj else _bias_words(unread)} ({min(allowed)} "
                 f"to {max(allowed)} with other biases)")
        shown = formula.format(cfg.d_in, cfg.d_out) if kv is None or kv == cfg.d_out else \
            (f"{cfg.d_in}·{cfg.d_out} + 2·{cfg.d_in}·{kv} (K/V of {kv // cfg.head_width} key/value heads) + "
             f"{cfg.d_out}² + biases")
        return failed(f"{got} parameters; {shown} gives {want}{which} "
                      f"(difference {got - want:+d})" + (f"; looks like {looks_like}" if looks_like else "")
                      + (f": exactly {', '.join(name for name, _ in extra)}, which "
                         f"{'plays' if len(extra) == 1 else 'play'} no role in the lesson's layer"
                         if fix and fix not in PATTERN_FIXES.values() else "") + norm_note,
                      observed=str(got), expected=str(want), parameters=[[p.name, p.shape] for p in inst.info.params],
                      finding=code, fix=fix)

    # the required configurations only: counting is exact, and widths of 1 or 2 (where a shrink would go)
    # make different mistakes give the same difference
    configs = ctx.required_configs()
    if ctx.accepts("qkv_bias"):
        configs += [replace(cfg, qkv_bias=True) for cfg in configs]
    failure = find_failure(ctx, prop, generated=False, required=configs)
    if failure:
        return failure
    base = ctx.built(ctx.base)
    grouped = ctx.grouped or any(layout.kv_width for layout in base.layouts)
    constants = frozen_constants(base.info)
    aside = (f"; {', '.join(name for name, _ in constants)} (requires_grad=False, a constant of the layer, not a "
             "weight it learns) not counted, as a buffer would not be") if constants else ""
    return passed(
        ("d_in·d_out + 2·d_in·(kv_heads·dh) + d_out² (grouped-query) + the biases the layer has, " if grouped else
         "3·d_in·d_out + d_out² + the biases the layer has, " if out_proj else
         "3·d_in·d_out + the Q/K/V biases the layer has (the single-head form: no output projection), ")
        + "for every configuration tried" + aside + norms_left_out(base.info)[1]
        + ("; where d_in != d_out your layer maps Q, K and V in the input width (3·d_in² + d_in·d_out + biases: "
           "only its output projection goes to d_out), counted as the lesson's layer with d_in = d_out"
           if input_width else ""),
        **({"form": "grouped"} if grouped else {} if out_proj else {"form": ctx.form.name}))


def _bias_list(biases: set[str]) -> str:
    """The biases the layer was read with, in words: "with biases bo" and "with biases none" read as a typo (student
    trial 20)."""
    if not biases:
        return "no bias"
    shown = [b[0] + "_" + b[1:] for b in sorted(biases, key=lambda b: "qkvo".find(b[-1]))]  # bq -> b_q
    if len(shown) == 1:
        return f"the bias {shown[0]} alone"
    return "the biases " + ", ".join(shown[:-1]) + " and " + shown[-1]
