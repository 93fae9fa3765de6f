"""`MutantInfo`: what one mutant's bug is, which checks must catch it, and what to tell a student about it.

Kept apart from `mutants/__init__.py` so that importing one mutant module does not import all the others.
Its vocabularies are checked when a mutant is imported, so a misspelt name fails at once instead of never matching:
`variant=` against the knobs of `reference.variants`, `trace=` against the registry of trace detectors
(`harness.engine.trace.detectors`, pure code that neither reads the catalogue nor imports the mutants).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from harness.engine.trace.detectors import DETECTORS
from reference.variants import DEFAULTS

_KEBAB = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
TOPICS = ("the constructor and its widths", "the projections", "splitting into heads", "the scores",
          "scaling the scores", "the causal mask", "the softmax", "dropout", "merging the heads",
          "the output projection", "registering parameters and buffers", "gradients",
          "the KV cache", "sharing key/value heads")  # the lesson's order, then its variants (the KV cache,
# grouped-query attention)
REWRITES = ("", "split", "split-all", "split-pair", "merge", "mask", "softmax", "fill", "scale", "dropout", "slice",
            "contiguous", "invert", "keys", "additive", "multiply", "diagonal", "repeat", "undrop", "past",
            "key-projection", "buffer", "out-projection", "bias", "merge-width", "head-width", "divisible",
            "module-list", "detach", "advance", "cat-axis", "added", "rope-width", "residual",
            "after-softmax", "values")  # harness.engine.rewrite


@dataclass(frozen=True)
class MutantInfo:
    id: str  # stable kebab-case id; the module is mutants/<id with "-" replaced by "_">.py
    title: str  # one line: the mistake
    lesson: str  # the lesson passage / misconception it embodies
    killed_by: tuple[str, ...]  # check ids that MUST fail on this mutant (a lower bound: others may fail too)
    symptom: str  # student-facing: what goes wrong, in plain words
    fix: str  # student-facing: the line to change, as the mutant's (the reference's) code writes it (`explain`)
    variant: dict | None = None  # knobs of reference.variants.forward that compute what this mutant computes
    example: str = ""  # student-facing: a tiny worked example (B=2, n=3, d=8, H=2) with shapes, line by line
    trace: tuple[str, ...] = ()  # ids of the trace detectors (harness.engine.trace.detectors) marking this mistake
    task: str = ""  # the exercise made from this mutant: what a student can observe, never what the mistake is
    topic: str = ""  # what the exercise trains: one of TOPICS (exercise sets are ordered by it)
    rewrite: str = ""  # how the student's own traced line is corrected (harness.engine.rewrite.KINDS), if it can be
    remedy: str = ""  # student-facing: the fix in words, one sentence that fits any class (no names of the
    # reference's): what a report says when the student's own line cannot be rewritten (`fix` names self.dh...)
    fitted: tuple[str, ...] = ()  # knobs of `variant` whose value is read off the module's output (the mistake is
    # any value of them: a fill of -1e-12 is finite-fill as much as -10 is; the variant's value is this mutant's)
    named_by_trace: bool = False  # named from the numbers only where the recorded forward marks it (`trace`): a
    # divisor fitted to the output is also a learned temperature's value, the layer's design, which trace tells apart

    def __post_init__(self):
        if not _KEBAB.fullmatch(self.id):
            raise ValueError(f"mutant id {self.id!r} is not kebab-case")
        if not isinstance(self.killed_by, tuple) or not self.killed_by:
            raise ValueError(f"mutant {self.id}: killed_by must be a non-empty tuple of check ids")
        for check in self.killed_by:
            if not _KEBAB.fullmatch(check):
                raise ValueError(f"mutant {self.id}: check id {check!r} is not kebab-case")
        if self.variant is not None:
            unknown = set(self.variant) - set(DEFAULTS)
            if unknown:
                raise ValueError(f"mutant {self.id}: unknown variant knobs {sorted(unknown)}")
        if not isinstance(self.trace, tuple) or not all(isinstance(d, str) for d in self.trace):
            raise ValueError(f"mutant {self.id}: trace must be a tuple of detector ids")
        for d in self.trace:
            if d not in DETECTORS:
                close = difflib.get_close_matches(d, list(DETECTORS), n=3, cutoff=0.6)
                hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(DETECTORS))}"
                raise ValueError(f"mutant {self.id}: trace id {d!r} is not a detector of harness.engine.trace{hint}")
        if not self.task or not self.topic:
            raise ValueError(f"mutant {self.id}: an exercise needs a task and a topic")
        if self.topic not in TOPICS:
            raise ValueError(f"mutant {self.id}: topic {self.topic!r} is not one of {TOPICS}")
        if self.rewrite not in REWRITES:
            raise ValueError(f"mutant {self.id}: rewrite {self.rewrite!r} is not one of {REWRITES}")
        if not self.remedy:
            raise ValueError(f"mutant {self.id}: a remedy in words is required")
        if not isinstance(self.fitted, tuple) or not set(self.fitted) <= set(self.variant or {}):
            raise ValueError(f"mutant {self.id}: fitted must be a tuple of knobs its variant sets")
        if self.named_by_trace and not self.trace:
            raise ValueError(f"mutant {self.id}: named_by_trace needs the trace ids that name it")
        if len(set(self.killed_by)) != len(self.killed_by):
            raise ValueError(f"mutant {self.id}: duplicate check ids in killed_by")

    @property
    def module_name(self) -> str:
        return self.id.replace("-", "_")
