"""view-order: compare the module, under transplanted weights, with the reference and with the view-order mistakes
of the lesson computed by the reference itself: the split with view(B, H, n, dh) on every projection or on some of
them only (the queries, the keys, the values, or two of them), the merge without the transpose back, and both; and
heads on strided features (view(B, n, dh, H).permute(0, 3, 1, 2): head h takes features h, h + H, ...) where the
rest of the layer does not undo them: a strided split with another merge, a strided merge after another split, a
strided split on some projections only.  A strided split merged back strided is none of these: it is the lesson's
layer with its features renumbered, a reading proven before any check runs (harness.engine.head_order.Strided).
Two weight sets are tried: random ones, and ones with W_q = W_k = 0 (uniform causal attention), where scaling and
softmax mistakes vanish but view-order ones do not (there only the values' split and the merge show)."""
import functools
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType

import numpy as np

from checks import check, failed, passed
from checks.output_shape import output_shape
from harness.engine.compare import close, close_each
from reference import numpy_ref

ROLE_NAMES = {"q": "queries", "k": "keys", "v": "values"}
SPLIT_ALL = "heads are split with view(B, H, n, dh) straight from (B, n, d)"
MERGE = "merged without transpose(1, 2)"
WHOLE = {  # the mistake on every projection: the lesson's own wording
    ("view-bhnd", "lesson"): (SPLIT_ALL + ": that mixes tokens and features; split with view(B, n, H, dh) and then "
                              "transpose(1, 2)", "its heads split with view(B, H, n, dh)"),
    ("lesson", "no-transpose"): ("heads are merged without moving the head axis back: (B, H, n, dh) viewed as "
                                 "(B, n, d) mixes tokens; merge with transpose(1, 2).contiguous().view(B, n, d)",
                                 "its heads " + MERGE),
    ("view-bhnd", "no-transpose"): ("heads are split with view(B, H, n, dh) and merged without the transpose back",
                                    "its heads split with view(B, H, n, dh) and " + MERGE),
}

STRIDED_SPLIT = "split on strided features with view(B, n, dh, H)"
MERGED_STRIDED = "merged back strided with permute(0, 2, 3, 1)"
SPLIT_RIGHT = "split with view(B, n, H, dh) and then transpose(1, 2)"
MERGE_RIGHT = "merge with transpose(1, 2).contiguous().view(B, n, d)"
STRIDED = {  # the mistakes of heads on strided features, on every projection (the split and merged alike: no mistake)
    ("strided", "lesson"): (f"heads are {STRIDED_SPLIT} (head h takes features h, h + H, ...) but merged back the "
                            "lesson's way, so each head's outputs land on other features than it read: "
                            + SPLIT_RIGHT, f"its heads {STRIDED_SPLIT} and merged the lesson's way"),
    ("lesson", "strided"): (f"heads are {MERGED_STRIDED}: feature j of head h lands at j·H + h instead of h·dh + j, "
                            f"where it was split from; {MERGE_RIGHT}", f"its heads {MERGED_STRIDED}"),
    ("view-bhnd", "strided"): (f"heads are split with view(B, H, n, dh) and {MERGED_STRIDED}: {SPLIT_RIGHT}, and "
                               + MERGE_RIGHT, f"its heads split with view(B, H, n, dh) and {MERGED_STRIDED}"),
    ("strided", "no-transpose"): (f"heads are {STRIDED_SPLIT} and {MERGE}: {SPLIT_RIGHT}, and {MERGE_RIGHT}",
                                  f"its heads {STRIDED_SPLIT} and {MERGE}"),
}
ALIKE = ("strided", "strided")  # a reading where W_o renumbers the merged features (harness.engine.head_order.Strided)
ALIKE_WITHOUT_OUT_PROJ = (  # where there is no W_o to renumber them: the merged heads are the output
    f"heads are {STRIDED_SPLIT} and {MERGED_STRIDED}: without an output projection the merged heads are your "
    "output, and feature j of head h comes out at j·H + h instead of h·dh + j; " + SPLIT_RIGHT + ", and "
    + MERGE_RIGHT, f"its heads {STRIDED_SPLIT} and {MERGED_STRIDED}")
MERGE_WORDS = {"lesson": "", "no-transpose": MERGE, "strided": MERGED_STRIDED}


def _names(roles: str) -> str:
    words = [ROLE_NAMES[r] for r in roles]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _partial(split: str, merge: str, others_seen: bool) -> tuple[str, str]:
    """(the mistake, what the wrong layer does) for a split mistake on some projections only; `others_seen`: the
    weights showed that the other projections are split right (not so with W_q = W_k = 0)."""
    how, _, roles = split.partition(":")
    rest = "".join(r for r in "qkv" if r not in roles)
    strided = how == "strided"
    how_split = STRIDED_SPLIT.removeprefix("split ") if strided else "with view(B, H, n, dh) straight from (B, n, d)"
    mistake = f"the {_names(roles)} are split into heads {how_split}"
    mistake += f" (the {_names(rest)} the lesson's way)" if others_seen else ""
    mistake += f" and the heads are {MERGE_WORDS[merge]}" if merge != "lesson" else ""
    mistake += (f": head h then takes features h, h + H, ... of the {_names(roles)}, not the lesson's block of "
                "features h·dh to (h + 1)·dh" if strided else
                f": that mixes tokens and features in the {_names(roles)}")
    mistake += "; split every projection with view(B, n, H, dh) and then transpose(1, 2)"
    done = f"its {_names(roles)} " + (STRIDED_SPLIT if strided else "split with view(B, H, n, dh)")
    done += f" and its heads {MERGE_WORDS[merge]}" if merge != "lesson" else ""
    return mistake, done


@functools.lru_cache(maxsize=None)
def mistakes(qk_seen: bool = True, without_out_proj: bool = False) -> Mapping[tuple[str, str], tuple[str, str]]:
    """(split, merge) -> (the mistake, what the wrong layer does), for every known view-order mistake that the
    weights can show: with W_q = W_k = 0 (`qk_seen` False) the split of the queries and keys leaves no trace, so
    only the values' split and the merge are told apart.  A strided split merged back strided is one only in a layer
    read without an output projection (`without_out_proj`).  Made once (read-only): the check asks for it on every
    configuration."""
    whole = {**WHOLE, **STRIDED, **({ALIKE: ALIKE_WITHOUT_OUT_PROJ} if without_out_proj else {})}
    out = dict(whole) if qk_seen else {k: whole[k] for k in (("lesson", "no-transpose"), ("lesson", "strided"))}
    partial = numpy_ref.PARTIAL_SPLITS if qk_seen else ("view-bhnd:v", "strided:v")
    for split in partial:
        for merge in numpy_ref.MERGES:
            out[split, merge] = _partial(split, merge, qk_seen)
    if not qk_seen:  # uniform attention: the values split strided and merged back strided are the reference there
        del out["strided:v", "strided"]
    return MappingProxyType(out)


def _zero_qk(w):
    return replace(w, wq=np.zeros_like(w.wq), wk=np.zeros_like(w.wk), bq=None, bk=None)


@check(
    id="view-order",
    claim="each head takes its features from every token alike (no head mixes tokens) and the heads are merged back "
          "in the order they were split (the lesson: view(B, n, H, dh).transpose(1, 2), transposed back before the "
          "merge)",  # what was verified, whatever the code uses (a student's trial: "split with view" of an einsum)
    explanation="""Splitting (B, n, d) with view(B, H, n, dh) gives the same shape as the right way but cuts the
    memory in the wrong order: each "head" gets pieces of several tokens. The shapes agree, the results are wrong,
    and only a comparison with a reference catches it. The same holds for merging without the transpose back, and
    for a split that is wrong on one projection only (the queries, say, while the keys and values are right). Heads
    on strided features (view(B, n, dh, H).permute(0, 3, 1, 2): head h takes features h, h + H, ...) mix no tokens,
    but a merge that does not put them back there, or such a split of one projection only, gives each head other
    features than the rest of the layer expects; split and merged back alike, they are the lesson's layer with its
    weights' rows and columns renumbered, which mha-check reads and passes.""",
    fix="""Split: `t.view(B, n, H, dh).transpose(1, 2)`; merge: `ctx.transpose(1, 2).contiguous().view(B, n, d)`.""",
    needs=(output_shape,),
    weights=True,
    example="""x: (2, 3, 8), H = 2, dh = 4; with the same weights the reference is computed the right way and wrongly:
      split with view(2, 2, 3, 4) (no transpose) and/or merge with view(2, 3, 8) without transpose(1, 2)
      the wrong split on all of q, k, v or on some only: q.view(2, 2, 3, 4) with k and v split right is caught too
    the wrong split gives head 0 'positions' = token 0 f0-3, token 0 f4-7, token 1 f0-3
    fail: your y differs from the reference and equals one of the wrong versions (within 1e-5)
    second weight set W_q = W_k = 0: all scores 0, weights [[1, 0, 0], [1/2, 1/2, 0], [1/3, 1/3, 1/3]] for any
      scale, so a scaling mistake vanishes there while a view-order mistake still moves y (by ~1); so does the
      split of q and k, so there only the split of v and the merge are named""",
)
def view_order(ctx):
    bare = ctx.without_out_proj  # (a layer with no W_o: its merged heads are its output, nothing renumbers them)

    def holds(cfg):
        inst = ctx.build(cfg)
        x = ctx.input(cfg)
        base = ctx.weights_for(inst, "view")
        zero = _zero_qk(base)
        ctx.transplant(inst, base)
        y_base, _, y_zero = inst.calls([inst.forward_request(x), inst.write_request(ctx.transplanted(inst, zero)),
                                        inst.forward_request(x)])
        for w, y, known in ((base, y_base.y, mistakes(without_out_proj=bare)),
                            (zero, y_zero.y, mistakes(qk_seen=False))):
            if close(y, numpy_ref.forward(x, cfg.heads, w, rope=ctx.rope)):
                continue
            theirs = numpy_ref.forward_many(x, cfg.heads, w, known, rope=ctx.rope)
            found = [pair for pair, equal in zip(theirs, close_each(y, list(theirs.values()))) if equal]
            if len(found) == 1:  # (several: these weights cannot tell them apart, as W_q = W_k = 0 with as many
                (split, merge), = found  # heads as the head width cannot tell the values split strided from the
                mistake, done = known[split, merge]  # heads merged strided; another configuration can)
                return failed(mistake, observed=f"your output equals the lesson's layer with {done}",
                              expected="output equals the reference", finding=f"view:{split}/{merge}")
        return None

    return ctx.find_failure(holds, min_heads=2, min_n=2) or passed("no view-order mistake: outputs never match a "
                                                                   "wrong split or merge")
