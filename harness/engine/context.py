"""What a check works with: the student's module behind the child process, inputs, weights and the reference.

The runner makes one `Context` per target.  Everything random is drawn from generators seeded by (seed, what it
is for), so the same target and seed always give the same inputs, weights and verdicts.  Checks reach the child
only through this object (and the `Instance`s it builds), never through process control directly.
"""
from __future__ import annotations

import dataclasses
import functools
import re
import time
import zlib

import numpy as np

import mutants
from harness.engine import fitting, grouped, head_order
from harness.engine import mapping as mapping_proof
from harness.engine import search
from harness.engine import unproven_call
from harness.engine.compare import close
from harness.engine.mapping import Mapping
from harness.engine.trace.drive import record
from harness.engine.trace.result import TraceResult
from harness.sandbox import scratch
from harness.sandbox.pool import ZygoteError
from harness.sandbox.subject import Instance, Subject
from harness.wire import messages as m
from harness.wire.errors import CannotDrive, HarnessFailure, TargetFailure, WorkerDied
from harness.wire.config import FLOAT32, Config
from harness.wire.form import Form, form_of, readings_form
from reference import numpy_ref
from reference.rotary import with_rope


_SIZES = re.compile(r"\[((?::, )*)\d+(:\d+)?\]")  # W_q[0], c_attn.weight[8:16]; W_q[:, 0] (heads second) keeps
# its axis: W_q[:, ]


@functools.lru_cache(maxsize=1024)  # a few dozen texts per layer, asked about a thousand times (_same_layout)
def _reading(text: str) -> frozenset:
    """A role's reading without sizes: which parameters, and which of them transposed."""
    return frozenset(_SIZES.sub(lambda m: f"[{m.group(1)}]" if m.group(1) else "", piece.strip())
                     for piece in text.split("+"))


_LIST_INDEX = re.compile(r"\.\d+\.")  # heads.0.wq: the module list's index inside a dotted name


@functools.lru_cache(maxsize=1024)
def _alike(text: str) -> frozenset:
    """A role's reading without sizes nor the index of a module in a list (`heads.0.wq.T + heads.1.wq.T` and
    `heads.0.wq.T` alike): which parameters of each list element, and which of them transposed, whatever the number
    of heads.  A parameter list's own index (`mats.0`) stays: there the index is the role."""
    return frozenset(_LIST_INDEX.sub(".#.", piece) for piece in _reading(text))


def _row_family(how: str) -> str:
    """How a fused projection's rows are grouped, whatever found them: a grouped layer's rows laid out per key/value
    group ([q..; k; v], litgpt) are, where there are as many groups as heads (kv_heads = heads: a plain layer,
    whose readings are named otherwise), the per-head layout [q_h; k_h; v_h]."""
    return "per head" if "per group" in how or "per head" in how else how[how.find("(fused"):]


class Context:
    def __init__(self, subject: Subject, seed: int = 0, examples: int = 6, meta_subject=None):
        self.subject = subject
        self.meta_subject = meta_subject  # () -> Subject or None: a child whose meta device is warm (meta_forward)
        self.seed = seed
        self.examples = examples
        self._mapping: Mapping | None = None
        self.call_evidence: unproven_call.CallEvidence | None = None  # how forward is called where no proof said
        self._recorded: dict[bool, TraceResult] = {}
        self.square_only = False  # set by `construct` when the constructor refuses d_in != d_out
        self.head_width: int | None = None  # set by `construct` when the class refuses narrow heads by design: the
        # head width every configuration mha-check makes then has at least (`fitted`)
        self._inputs: dict[tuple, np.ndarray] = {}  # drawn once per (tag, configuration): most checks ask again
        self._layout_chosen: dict[tuple, int] = {}  # _same_layout's answer for each list of candidates
        self._config_reads: dict[str, str] | None = None  # what a config object was read for (grouped), once
        self._readings_form: Form | None = None  # a single head's form as its readings show it, once decided

    # -- what the run was asked: the target as typed, its folder, --arg, whether it is a grade --------------------
    @property
    def spec(self) -> str:
        return self.subject.spec

    @property
    def search_dir(self) -> str:
        return self.subject.search_dir

    @property
    def overrides(self) -> dict:
        return self.subject.overrides

    @property
    def grading(self) -> bool:
        return self.subject.grading

    @property
    def load_notes(self) -> list:
        """What loading the target left out (a notebook's cells skipped), as the subject heard it."""
        return self.subject.notes

    # -- what the constructor allows ------------------------------------------------------------------------------
    @property
    def loaded(self) -> m.Loaded:
        return self.subject.load()

    @property
    def signature(self) -> m.Signature:
        return self.loaded.signature

    @property
    def constructor_form(self) -> Form:
        """Which member of the lesson's family the constructor shows (harness.wire.form): multi-head, or the
        single-head CausalAttention (heads=1, no output projection)."""
        return form_of(self.signature, self.subject.overrides)

    @property
    def form(self) -> Form:
        """The form the layer is checked as: the constructor's (`constructor_form`), except that a single head whose
        parameters read only with an output projection is one head followed by W_o (harness.wire.form.
        readings_form), read off the base configuration's build, or, where a layer taking d_in and d_out apart
        has no reading there, off the build with d_in = d_out (where harness.engine.mapping.prove checks it).
        Decided once; a build that fails leaves the constructor's form, undecided (the checks say why)."""
        form = self.constructor_form
        if not form.single or form.out_proj:
            return form
        if self._readings_form is None:
            try:
                layouts = self.subject.build(self.base).info.layouts
                if not layouts and self.separate_widths:
                    layouts = self.subject.build(dataclasses.replace(self.base, d_in=self.base.d_out)).info.layouts
            except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied):
                return form
            self._readings_form = readings_form(form, layouts)
        return self._readings_form

    def shaped(self, cfg: Config) -> Config:
        """`cfg` as the form allows it: a form with a fixed number of heads (single head: 1) gets that number (the
        constructor's form says it: both single-head forms have one head)."""
        fixed = self.constructor_form.heads
        return cfg if fixed is None or cfg.heads == fixed else dataclasses.replace(cfg, heads=fixed)

    def accepts(self, key: str) -> bool:
        return key in self.signature.accepts or bool(self.signature.config_param)

    @property
    def separate_widths(self) -> bool:
        if self.square_only:
            return False
        return self.signature.separate_widths or bool(self.signature.config_param and
                                                      "d_in" in self.signature.accepts)

    def required_configs(self) -> list[Config]:
        """Always tried: batch > 1; n < context_length and n == context_length; n, heads and head width distinct;
        d_in != d_out where the constructor allows it (d_in a multiple of the heads, as some layers demand); even
        head widths (rotary embeddings need them); and a long sequence in a batch of one (context_length 64 = n): a
        mask whose size is hard-coded to a small number shows there."""
        sep = self.separate_widths
        if self.grouped:  # grouped-query: kv_heads below the heads, and equal (harness.engine.grouped)
            return [self.fitted(cfg) for cfg in grouped.configs(sep, grouped.preferred_kv(
                self.signature, self.subject.overrides, self._config_reads))]
        return [self.fitted(self.shaped(cfg)) for cfg in (
                Config(d_in=6 if sep else 8, d_out=8, heads=2, context_length=7, batch=2, n=5),
                Config(d_in=9 if sep else 6, d_out=6, heads=3, context_length=4, batch=2, n=4),
                Config(d_in=12 if sep else 8, d_out=8, heads=4, context_length=64, batch=1, n=64))]

    def fitted(self, cfg: Config) -> Config:
        """`cfg` with heads as wide as the class accepts (`head_width`, found by construct when the class refuses
        narrow heads by design, e.g. `assert head_dim % 8 == 0`): the same heads, key/value heads, tokens and
        context, d_out = heads * head_width (d_in too where it equals d_out).  Unchanged for every class that
        builds the lesson's narrow heads, which is every class that does not refuse them: only a refusal pays."""
        wide = self.head_width
        if wide is None or cfg.heads <= 0 or cfg.d_out % cfg.heads or cfg.head_width % wide == 0:
            return cfg
        d_out = cfg.heads * wide
        return dataclasses.replace(cfg, d_out=d_out, d_in=d_out if cfg.d_in == cfg.d_out else cfg.d_in)

    @property
    def grouped(self) -> bool:
        """A grouped-query layer: its constructor takes a number of key/value heads (or a group size), or reads one
        off its config object."""
        if grouped.is_grouped(self.signature):
            return True
        if self._config_reads is None:
            self._config_reads = {}  # kept if the probe raises: a plain layer, as without the probe
            self._config_reads = self._probe_config()
        return grouped.is_grouped(self.signature, self._config_reads)

    def _probe_config(self) -> dict[str, str]:
        """What a class built from a config object reads off it (harness.child.construct.config_reads), from one
        build of the grouped configuration, which the checks reuse when the class is grouped.  A constructor that
        refuses it, or a target mha-check cannot drive, reads as nothing: construct judges those builds itself."""
        if not self.signature.config_param:
            return {}
        try:
            return dict(self.subject.build(grouped.probe(self.separate_widths)).info.config_reads)
        except (TargetFailure, CannotDrive):
            return {}

    @property
    def base(self) -> Config:
        return self.required_configs()[0]

    def construction(self, cfg: Config) -> str:
        """How mha-check calls the constructor for `cfg`, e.g. "MyAttn(d_model=6, n_heads=2, block_size=7)"."""
        loaded, sig = self.loaded, self.signature
        args = [f"{p}={cfg.value(k)}" for k, p in sig.accepts.items()]
        args += [f"{p}={cfg.value(k)}" for p, k in sig.derived.items()]
        args += [f"{p}={cfg.value(v[1:]) if isinstance(v, str) and v.startswith('@') else v!r}"
                 for p, v in self.subject.overrides.items() if p not in sig.derived]
        if sig.config_param and sig.config_param.startswith("**"):  # `**cfg`: called with the keys it reads
            args.append(self._config_values(cfg).removeprefix(": ") or f"{sig.config_param}")
        elif sig.config_param:
            args.append(f"{sig.config_param}=<config object{self._config_values(cfg)}>")
        return f"{loaded.name}({', '.join(args)})"

    def _config_values(self, cfg: Config) -> str:
        """The settings the class read off its config object, with the values mha-check gave them: ": n_embd=8,
        n_head=2" (a student's trial saw only "<config object>"); "" where the build cannot say."""
        try:
            reads = self.built(cfg).info.config_reads
        except (TargetFailure, CannotDrive):
            return ""
        return (": " + ", ".join(f"{name}={cfg.value(key)}" for name, key in reads.items())) if reads else ""

    # -- random but reproducible ------------------------------------------------------------------------------------
    def recorded(self, biased: bool = False) -> TraceResult:
        """One recorded forward of the lesson's worked example (`harness.engine.trace.drive.record`), made once per
        target: contiguity (to tell a transpose from a slice) and the diagnosis (the marks) both read it.  `biased`:
        the layer built with qkv_bias=True instead, where a Q/K/V bias forward never adds exists (the diagnosis asks
        for it where parameters-used found one without a gradient)."""
        if biased not in self._recorded:
            self._recorded[biased] = record(self, biased=biased)
        return self._recorded[biased]

    def rng(self, *key) -> np.random.Generator:
        return np.random.default_rng([self.seed, zlib.crc32(repr(key).encode())])

    def input(self, cfg: Config, tag: str = "x") -> np.ndarray:
        """The same array for the same (tag, configuration), as a copy of its own: a check may change it."""
        if (tag, cfg) not in self._inputs:
            self._inputs[tag, cfg] = _made_of(cfg, self.rng(tag, cfg).standard_normal((cfg.batch, cfg.n, cfg.d_in)))
        return self._inputs[tag, cfg].copy()

    def build(self, cfg: Config, force_dropout: float | None = None, fresh: str = "") -> Instance:
        """The module built for `cfg`, called the proven way (style) and, when the mapping is certain, with the
        layout that reads the parameters as the proof did.  `fresh`: a module of its own, under that name, that no
        other check has run (`Subject.build`)."""
        inst = self.subject.build(cfg, force_dropout, fresh) if fresh else self.subject.build(cfg, force_dropout)
        proof = self.mapping
        inst.style = proof.style if proof.style is not None else 0
        if proof.index is not None:  # picked when wanted: picking reads the Build's answer (see Instance)
            inst.choose_layout_later(lambda built: self._same_layout(built.layouts) if built.layouts else None)
            if proof.head_order is not None and not inst.head_order_known:
                self._order_heads(inst)
        return inst

    def _order_heads(self, inst: Instance) -> None:
        """The order in which this instance merges its heads, where the proof read the layer's heads in another
        order (harness.engine.head_order): the proven order on the base configuration's module; on another, one
        round trip (weights of ours written in the plain order, one forward) and the order its output shows, or the
        plain order where none reproduces it (then the checks compare it so, and say where it differs).  Only for
        such a layer: a layer read in the plain order pays nothing.  Two configurations sharing the instance may
        both ask (harness.engine.together): the first answer stays, and both find the same."""
        proof = self.mapping
        if inst.cfg.ctor_key() == self.base.ctor_key():
            inst.head_order, inst.head_order_known = proof.head_order, True
            return
        cfg = inst.cfg
        try:
            w = self.weights_for(inst, "head-order")
            x = self.input(cfg, "head-order")
            probe = m.WriteWeights(inst.handle, inst.layout, self.transplanted(inst, w))  # the plain order
            y = inst.calls([probe, inst.forward_request(x)])[1].y
            order = head_order.find(x, cfg.heads, w, y, self.rope, proof.head_order.on_out)
            if order is None and proof.how == "mistake":
                order = self._order_under_mistake(x, cfg.heads, w, y, proof.head_order.on_out)
        except (TargetFailure, CannotDrive):  # the checks meet the same failure and say what it is
            order = None
        if not inst.head_order_known:
            inst.head_order, inst.head_order_known = order, True

    def _order_under_mistake(self, x: np.ndarray, heads: int, w: numpy_ref.Weights, y: np.ndarray,
                             on_out: bool):
        """The order of the heads in which a known mistake the proof named reproduces `y` (harness.engine.head_order.
        find_with), for a layer proven by that mistake under a head order (harness.engine.mapping._mistake_reordered):
        its order on another configuration, read as the reference's is, from its own output, and asked only where
        the reference reproduces `y` under no order (`find` said none).  None where the reference reproduces `y` in
        the plain order (the mirror rule: no mistake where the lesson's layer is), or where no named mistake does
        under any order pointed to."""
        if close(y, numpy_ref.forward(x, heads, w, rope=self.rope)):
            return None
        for mid in self.mapping.mistakes:
            if mid in mutants.variants():
                order = head_order.find_with(x, heads, w, y, _variant(mid, x, heads, self.rope, y), self.rope, on_out)
                if order is not None:
                    return order
        return None

    # -- configurations -------------------------------------------------------------------------------------------
    def find_failure(self, prop, min_heads: int = 1, min_n: int = 1, generated: bool = True, required=None,
                     after=()):
        """`prop(cfg)` (None: fine; an Outcome: broken) asked of the required configurations and `examples` drawn
        ones (and `after`, judged last), all together (harness.engine.together: their round trips in one frame per
        step), and the smallest failing configuration found, or None (harness.engine.search.find_failure)."""
        return search.find_failure(self, prop, min_heads, min_n, generated, required, after)

    # -- the child, for checks that do not call the module the proven way (they count, inspect or batch) --------
    def load(self) -> m.Loaded:
        """Import the target in the child (construct judges what this raises)."""
        return self.subject.load()

    @property
    def compiled_left_out(self) -> str:
        """The report's sentence for the submission's compiled files, which its copy left out and so never ran
        (harness.sandbox.scratch.compiled_note); "" for none."""
        left = self.subject.compiled
        return scratch.compiled_note(left) if left else ""

    def built(self, cfg: Config) -> Instance:
        """The module built for `cfg` as it is, without the proven call or mapping: for checks that only count its
        parameters, read what the child says of it, or run before any proof exists (construct)."""
        return self.subject.build(cfg)

    def build_ahead(self, instances: list[Instance]) -> None:
        """Build these instances in one round trip (a constructor that raises is raised when the instance is asked)."""
        self.subject.build_ahead(instances)

    def frame(self, groups: list[tuple[Instance, list[m.Request]]]) -> list[list[m.Reply] | BaseException]:
        """Requests on several instances in one round trip; each group's replies, or what it raised."""
        return self.subject.frame(groups)

    def frame_or_raise(self, groups: list[tuple[Instance, list[m.Request]]]) -> list[list[m.Reply]]:
        """`frame`, raising what the first failing group raised: for groups judged only all together."""
        return self.subject.frame_or_raise(groups)

    def _same_layout(self, layouts: list[m.LayoutInfo]) -> int:
        """The candidate that reads the parameters as the proven mapping does (same names, same orientation, same
        fused order): the number of candidates depends on the shapes, so an index proven on one configuration means
        nothing on another (with d_in = d_out every raw matrix is ambiguous, with d_in != d_out only the square
        ones).  Each configuration's module offers the same few lists of candidates: each list is weighed once."""
        key = tuple((tuple(layout.roles.items()), layout.how) for layout in layouts)
        if key not in self._layout_chosen:
            self._layout_chosen[key] = self._weigh_layouts(layouts)
        return self._layout_chosen[key]

    def _weigh_layouts(self, layouts: list[m.LayoutInfo]) -> int:
        proven = self.mapping

        def agreement(i: int) -> tuple:
            layout = layouts[i]
            same = sum(_reading(p) == _reading(proven.description.get(r, "")) for r, p in layout.roles.items())
            alike = sum(_alike(p) == _alike(proven.description.get(r, "")) for r, p in layout.roles.items())
            # (per-head modules name each head: proven with two, their orientation is found again with one, where
            # a head's matrix is square and both are offered; a student's trial took the wrong one and failed a
            # correct layer)
            return (same, alike, layout.how == proven.layout_how,
                    _row_family(layout.how) == _row_family(proven.layout_how), -i)

        return max(range(len(layouts)), key=agreement)

    # -- the meta device --------------------------------------------------------------------------------------------
    def meta_forward(self, inst: Instance, x: np.ndarray) -> m.MetaResult:
        """`inst` moved to PyTorch's meta device and run on an input of x's shape, with the verdict a single run
        gives, where `inst`'s own child does it.

        The first run on the meta device imports 0.7 s of torch (torch._dynamo) in the child that does it.  In batch
        grading `meta_subject` gives a fresh child of the meta template, which has done that once for the batch
        (`harness.child.zygote._meta_template`): a twin of `inst` is built there (same configuration, same seed,
        called the same way) and run once on x on the CPU first, as `inst` has been in its own child (a tensor a
        first forward caches on the CPU then stays behind in both).  The twin only saves time, never changes a
        verdict we can see differ: if it cannot be made, built or run on the CPU, or its process dies, the run is
        made in `inst`'s own child after all, as in a single run.  What the run prints joins the submission's
        output, as a single run's would.  Making and building the twin is ours to pay for, not the student's: that
        time does not count against the submission's time limit (a first twin waits for the meta template to warm
        up)."""
        twin = self._twin(inst, x)
        if twin is None:
            return inst.meta_forward(x.shape)
        mark, died = twin.subject.output_mark(), False
        try:
            return twin.meta_forward(x.shape)
        except (WorkerDied, ZygoteError):  # its process, or the meta zygote it came from (killed from outside)
            died = True  # made again in inst's own child: a single run's outcome, the death of its process included
        finally:
            if not died:  # what the run printed, where a single run's report shows it
                self.subject.add_output(twin.subject.output_after(mark))
            _close_twin(twin.subject)
        return inst.meta_forward(x.shape)

    def _twin(self, inst: Instance, x: np.ndarray) -> Instance | None:
        """`inst` built again in a child of the meta template and run once on x, or None; its time budget is what
        was left of the submission's when it was asked for (see meta_forward)."""
        asked = time.monotonic()
        subject = self.meta_subject() if self.meta_subject is not None else None
        if subject is None:
            return None
        try:
            twin = subject.build(inst.cfg)
            twin.style = inst.style
            twin.forward(x)
        except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied, ZygoteError):
            _close_twin(subject)
            return None
        ready = time.monotonic()
        self.subject.started += ready - asked  # the twin's making is not the student's time
        subject.started = self.subject.started
        return twin

    # -- weights ----------------------------------------------------------------------------------------------------
    @property
    def mapping(self) -> Mapping:
        """Proved once, on the base configuration: how forward is called and which layout reproduces the module's
        own output (see harness.engine.mapping); where no reading proves how to call a forward that takes a mask,
        the call is chosen by leakage evidence (harness.engine.unproven_call)."""
        if self._mapping is None:
            self._mapping, self.call_evidence = unproven_call.settle(self, mapping_proof.prove(self))
        return self._mapping

    @property
    def rope(self):
        """The rotary embedding (reference.rotary.Rope) under which the mapping proof reproduced the module, or None
        (the lesson's layer): every reference a check computes uses it."""
        return self.mapping.rope

    def weights_for(self, inst: Instance, tag: str = "w") -> numpy_ref.Weights:
        """Random weights for the roles this module has (a role it lacks, e.g. a Q/K/V bias, is zero); where it is
        read without an output projection, W_o is the identity (`completed`)."""
        layout = inst.layouts[inst.layout] if inst.layout is not None else None
        return self.completed(self._drawn(inst, tag), layout is not None and "wo" not in layout.roles)

    def lesson_weights_for(self, inst: Instance, tag: str) -> numpy_ref.Weights:
        """`weights_for`, but with the lesson's random W_o and b_o kept where the module is read without an output
        projection: the module never receives them (transplanting writes only the roles it has), so the reference
        with them is the lesson's whole layer and the missing projection shows as no-output-projection's numbers,
        beside any other mistake's (the diagnosis names both, harness.engine.pairs).  The checks of the math use
        `weights_for`: they judge the rest of the layer, under W_o = I."""
        return self._drawn(inst, tag)

    def _drawn(self, inst: Instance, tag: str) -> numpy_ref.Weights:
        layout = inst.layouts[inst.layout] if inst.layout is not None else None
        roles = set(layout.roles) if layout is not None else set()
        cfg = inst.cfg
        w = numpy_ref.random_weights(self.rng(tag, cfg), cfg.d_in, cfg.d_out, qkv_bias=True,
                                     d_kv=layout.kv_width if layout is not None else None)
        kept = {"bo"} if layout is not None and "wo" not in roles else set()  # the lesson's b_o, beside its W_o
        for r in numpy_ref.ROLES:
            if r in numpy_ref.ROLES[4:] and r not in roles | kept:
                setattr(w, r, None)
            elif getattr(w, r) is not None:
                setattr(w, r, _made_of(cfg, getattr(w, r)))
        return self.completed(w) if not self.form.out_proj else w

    def completed(self, w: numpy_ref.Weights, without_out_proj: bool = False) -> numpy_ref.Weights:
        """`w` as the reference computes this form or reading: without an output projection (the single-head form,
        or a multi-head layer read without one, `without_out_proj`), W_o is the identity and b_o none, so that
        `numpy_ref` and `reference.variants` compute the layer unchanged."""
        if not self.form.out_proj or without_out_proj:
            w.wo, w.bo = np.eye(w.d_out), None
        return w

    @property
    def without_out_proj(self) -> bool:
        """The multi-head layer is proven under a reading without an output projection: W_o = I reproduced it (with
        the lesson's math or a known mistake's), so the checks of the math judge the rest of the layer and the
        missing projection is the mistake param-count names (harness.engine.mapping)."""
        try:
            proof = self.mapping
        except (TargetFailure, CannotDrive, HarnessFailure):  # no proof: no such reading (the checks that need one
            return False  # say why)
        return self.form.out_proj and proof.certain and "wo" not in proof.description

    def transplant(self, inst: Instance, w: numpy_ref.Weights) -> None:
        """Write `w` into the module before its next request."""
        inst.write_weights(self.transplanted(inst, w))

    @staticmethod
    def transplanted(inst: Instance, w: numpy_ref.Weights) -> dict[str, np.ndarray]:
        """`w` as the module's roles: a role the module has but `w` lacks (a bias) is written as zeros."""
        if inst.layout is None:  # no reading of the parameters fits this configuration: ours to say, not a crash
            raise CannotDrive(f"mha-check found no reading of your parameters as W_q, W_k, W_v and W_o for "
                              f"{inst.cfg.describe()} ({inst.info.layout_problem or 'no layout'})")
        roles = inst.layouts[inst.layout].roles
        return {r: getattr(w, r) if getattr(w, r) is not None else w.bias(r) for r in roles}


def _variant(mid: str, x: np.ndarray, heads: int, rope, y: np.ndarray):
    """Weights -> the output of the known mistake `mid`'s variant on `x` (its free value read off `y`, as the proof
    reads it: harness.engine.fitting)."""
    knobs, free = with_rope(mutants.variants()[mid], rope), mutants.fitted().get(mid, ())
    return lambda w: fitting.output(x, heads, w, knobs, free, y)


def _made_of(cfg: Config, a: np.ndarray) -> np.ndarray:
    """`a` as the child will hold it for `cfg`: a float32 configuration's inputs and weights rounded to float32 (and
    kept in float64 here), so that the float64 reference computes on exactly the numbers the module was given and
    only the module's own float32 arithmetic is left between the two."""
    return a.astype(np.float32).astype(np.float64) if cfg.dtype == FLOAT32 else a


def _close_twin(subject: Subject) -> None:
    """Close a twin's child; a meta zygote killed meanwhile (ZygoteError) only means there is nothing left to wait
    for (the child is killed and its scratch removed all the same)."""
    try:
        subject.close()
    except ZygoteError:
        pass
