"""Which member of the lesson's family a class is (its form), decided from its constructor, in both processes.

The lesson's layer is multi-head; the previous lesson's `CausalAttention(d_in, d_out, context_length, dropout,
qkv_bias=False)` is its single-head form: one head of width d_out, no head split, no output projection.  The
evidence is the constructor (the child's `Signature`): a class that takes no number of heads (nor a head width or a
number of key/value heads, nor a config object that could hold one) and takes a width has one head; a head width
without a number of heads (`head_size`) is then that head's width, d_out.  Both processes
read it from the same `Signature`: the trusted side builds heads=1 configurations and compares with a reference
without output projection; the child offers readings of the parameters without W_o.

A single head may also end in an output projection (fairseq's SingleHeadAttention: one head, then out_proj): the
lesson's layer with H = 1.  The constructor cannot tell the two apart, the parameters can: where no reading without
W_o exists, the child offers readings with one (`harness.child.worker`), and a layer whose readings all have a W_o
is checked as `SINGLE_HEAD_OUT_PROJ` (`readings_form`, asked by the trusted side's Context): the lesson's reference
with one head, its count the lesson's, its known mistakes the multi-head layer's (`family`); the proof still decides
whether such a reading reproduces the layer.

A form says what it changes, as data, so that another member of the family (grouped-query, rotary) can add its own:
`heads` (a fixed number of heads, or None: as the configuration says), `out_proj` (whether the layer has one) and
`not_applicable` (check id -> why that check's claim does not concern this form; the check then passes with that
text, never fails nor "cannot tell" for what the form does not define).
"""
from __future__ import annotations

from dataclasses import dataclass, field

HEADS_KEYS = ("heads", "kv_heads")  # configuration keys that say the class has several heads; a head width
# alone (`Head(n_embd, head_size, block_size)`) is one head's width: with one head, d_out
WIDTH_KEYS = ("width", "d_in", "d_out")


@dataclass(frozen=True)
class Form:
    name: str  # "multi-head" | "single-head"
    heads: int | None = None  # a number of heads fixed by the form (1 for single head); None: the configuration's
    out_proj: bool = True  # the layer has an output projection W_o
    not_applicable: dict[str, str] = field(default_factory=dict)  # check id -> why it does not apply
    evidence: str = ""  # why this form, for the report
    absent_steps: tuple[str, ...] = ()  # the lesson's steps (trace vocabulary) this form does not have
    mistakes: str = ""  # whose known mistakes this form can make (mutants.form): "" for the form's own name

    @property
    def single(self) -> bool:
        """One head, with or without an output projection."""
        return self.name.startswith("single-head")

    @property
    def family(self) -> str:
        """The member of the family whose catalogued mistakes apply (mutants.form): a single head followed by W_o
        is the lesson's layer with H = 1, so its mistakes are the multi-head layer's."""
        return self.mistakes or self.name


MULTI_HEAD = Form("multi-head")
_NO_HEADS = "it does not apply to a single-head layer"
SINGLE_HEAD = Form(
    "single-head", heads=1, out_proj=False,
    not_applicable={
        "view-order": f"{_NO_HEADS}: there are no heads to split into (B, H, n, dh) or merge back; the scores and "
                      "the output were compared with the single-head reference (reference-match)",
        "head-invariance": f"{_NO_HEADS}: its constructor takes no number of heads, so there is no count to compare "
                           "across head numbers",
        "divisibility": f"{_NO_HEADS}: one head of width d_out divides every width",
        "out-proj-bias": f"{_NO_HEADS}: the single-head layer (the previous lesson's CausalAttention) has no output "
                         "projection, so there is no bias to have",
    },
    evidence="the constructor takes no number of heads: checked as the single-head CausalAttention (one head of "
             "width d_out, no output projection)",
    absent_steps=("split", "move heads forward", "merge", "output projection"))
_ONE_HEAD = "it does not apply to a layer with one head"
SINGLE_HEAD_OUT_PROJ = Form(
    "single-head-out-proj", heads=1, out_proj=True, mistakes="multi-head",
    not_applicable={
        "view-order": f"{_ONE_HEAD}: there are no heads to split into (B, H, n, dh) or merge back; the scores and the "
                      "output were compared with the lesson's reference with one head (reference-match)",
        "head-invariance": f"{_ONE_HEAD}: its constructor takes no number of heads, so there is no count to compare "
                           "across head numbers",
        "divisibility": f"{_ONE_HEAD}: one head of width d_out divides every width",
    },
    evidence="the constructor takes no number of heads, and the layer's parameters read only with an output "
             "projection: checked as one head followed by W_o (the lesson's layer with one head)",
    absent_steps=("split", "move heads forward", "merge"))


def form_of(signature, overrides: dict | None = None) -> Form:
    """The form the constructor shows.  Single head only on evidence: a width is taken, and nothing that could carry
    a number of heads (a heads or key/value-heads parameter, a config object, `--arg NAME=@heads`, a parameter
    whose name mha-check cannot read, unless --arg gives it).  A head width without a number of heads is the single
    head's own width (d_out)."""
    overrides = overrides or {}
    carried = set(signature.accepts) | set(signature.derived.values())
    carried |= {v[1:] for v in overrides.values() if isinstance(v, str) and v.startswith("@")}
    bound = set(signature.accepts.values()) | set(signature.derived) | set(overrides)
    unread = [p for p in signature.params if p not in bound]  # a parameter mha-check cannot name (`n_h=4`) may
    # well be a number of heads left at its default: no evidence of a single head then
    if signature.config_param or carried & set(HEADS_KEYS) or not carried & set(WIDTH_KEYS) or unread:
        return MULTI_HEAD
    return SINGLE_HEAD


def readings_form(form: Form, layouts) -> Form:
    """The form the readings of the parameters show, for a constructor that shows a single head: a layer whose
    readings all have a W_o (the child offers such readings only where none without one exists) is one head followed
    by an output projection; otherwise, or without readings, the constructor's form stands."""
    if form is SINGLE_HEAD and layouts and all("wo" in layout.roles for layout in layouts):
        return SINGLE_HEAD_OUT_PROJ
    return form
