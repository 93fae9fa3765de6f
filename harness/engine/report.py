"""The verdict as data: a `Report` of `CheckResult`s.  Renderers (harness.render) turn it into text, JSON, HTML,
Gradescope or JUnit; the report never renders itself.

Statuses: `pass`; `fail` (evidence of a bug in the student's code); `cannot_tell` (mha-check could not drive or map
the module, or hit one of its own limits: says what would help); `skip` (a prerequisite did not pass).  Checks are
of two kinds: `correctness` (the math: leakage, reference, gradients, shapes, ...) and `rule` (the lesson's rules:
refuse a width not divisible by the heads, an output projection with a bias).  Rules count toward `passed` unless
the run was asked to leave them out (`rules=False`).  A third kind, `instructor`, is one of the instructor's own
pytest tests (--tests: harness.engine.instructor); they always count.

JSON (stable; documented in docs/usage.md): {"tool", "version", "target", "passed", "math_correct", "rules_counted",
"seed", "summary": {"pass", "fail", "cannot_tell", "skip", "not_applicable"}, "adapter", "isolation", "checks":
[{"id", "kind", "status", "claim", "message", "config", "observed", "expected", "fix", "help", "explanation",
"details", "not_applicable"}], "diagnosis", "leakage", "student_output", "not_selected"}, and "command_options"
(the run's --arg/--map, typed again) only where there are some.  A check that does not apply to the layer
(no KV cache to check, no heads to split in a single-head layer) keeps "status": "pass" and its points, and says
"not_applicable": true; the summary counts it under "not_applicable", not under "pass" (the counts add up to the
checks).  "seed" is null where it was drawn for a grade (harness.frontends.seeds: kept where staff look, never in
what students see).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from harness.engine.records import Adapter, Diagnosis, Isolation, Leakage
from harness.wire.status import STATUSES, Status  # the one vocabulary of a check's outcomes

VERSION = "0.2.0"


@dataclass
class CheckResult:
    id: str
    status: Status
    claim: str
    message: str
    kind: str = "correctness"
    fix: str = ""
    help: str = ""  # cannot_tell: what would let mha-check tell
    explanation: str = ""
    config: dict | None = None
    observed: str | None = None
    expected: str | None = None
    details: dict = field(default_factory=dict)
    not_applicable: bool | None = None  # a pass with nothing to judge (None: read from details and message)

    def __post_init__(self):
        if self.not_applicable is None:
            self.not_applicable = does_not_apply(self.status, self.message, self.details)

    @classmethod
    def of(cls, check, outcome) -> "CheckResult":
        """A check's declaration joined with what it found."""
        return cls(id=check.id, status=outcome.status, claim=getattr(outcome, "claim", "") or check.claim,
                   message=outcome.message, kind=check.kind, fix=outcome.fix or check.fix, help=outcome.help,
                   explanation=check.explanation,
                   config=outcome.config, observed=outcome.observed, expected=outcome.expected,
                   details=dict(outcome.details))


NOT_APPLICABLE_WORDS = "does not apply:"  # how a check's pass message begins when its claim had nothing to judge


def does_not_apply(status, message: str, details: dict | None) -> bool:
    """Whether a check passed only because its claim does not concern this layer (no KV cache to check; no heads to
    split in a single-head layer): the engine's and the checks' `not_applicable` flag, or, in a report saved before
    the flag, the words its message begins with.  Still a pass (its status and its points are a pass's: what the
    layer need not do is never the student's loss), but not a verified one, so every format counts it apart.  A
    pass that checked something in place of its claim ("does not apply to the mask: ...; checked instead: ...")
    verified that, and is a pass."""
    return status == Status.PASS and bool((details or {}).get("not_applicable") or
                                          (message or "").startswith(NOT_APPLICABLE_WORDS))


@dataclass
class Report:
    target: str
    checks: list[CheckResult]
    seed: int = 0
    adapter: Adapter = field(default_factory=Adapter)
    student_output: str = ""
    diagnosis: Diagnosis | None = None  # the identified mistake (harness.engine.diagnosis), None when nothing failed
    rules_counted: bool = True  # do the lesson's rules count toward `passed`?
    isolation: Isolation | None = None  # what confined the child while it ran (None: no child ran the code)
    leakage: Leakage | None = None  # influence maps for the picture, when asked for
    not_selected: list[str] = field(default_factory=list)  # checks left out by --only/--skip: not a whole verdict
    seed_private: str = ""  # a seed drawn for a grade (Options.seed_private): "seed" is then null in to_dict
    command_options: str = ""  # the run's --arg and --map, typed again (options.command_words): what a follow-up
    # command the report prints needs (`mha-check trace FILE:Class --arg ...`); in JSON only when there are some

    def counted(self) -> list[CheckResult]:
        return [c for c in self.checks if c.kind != "rule" or self.rules_counted]

    @property
    def passed(self) -> bool:
        """True only when every counted check ran and passed: a skipped or undecided check is not a verified one."""
        counted = self.counted()
        return bool(counted) and all(c.status == Status.PASS for c in counted)

    @property
    def math_correct(self) -> bool:
        math = [c for c in self.checks if c.kind == "correctness"]
        return bool(math) and all(c.status == Status.PASS for c in math)

    @property
    def needs_review(self) -> bool:
        """Something mha-check could not decide (cannot tell, a limit, a crash, which file to check): a person
        should look."""
        return any(c.status == Status.CANNOT_TELL for c in self.checks) or bool(self.adapter.process) or \
            bool(self.adapter.review)

    def __getitem__(self, check_id: str) -> CheckResult:
        for c in self.checks:
            if c.id == check_id:
                return c
        raise KeyError(check_id)

    def summary(self) -> dict[str, int]:
        """How many checks ended each way: "pass" the verified passes, "not_applicable" the passes with nothing to
        judge (counted apart, never in "pass"): the counts add up to the number of checks."""
        verified = {s: sum(c.status == s and not (s == Status.PASS and c.not_applicable) for c in self.checks)
                    for s in STATUSES}
        return {**verified, "not_applicable": sum(c.status == Status.PASS and bool(c.not_applicable)
                                                  for c in self.checks)}

    def to_dict(self) -> dict:
        return {"tool": "mha-check", "version": VERSION, "target": self.target, "passed": self.passed,
                "math_correct": self.math_correct, "rules_counted": self.rules_counted,
                "needs_review": self.needs_review, "seed": None if self.seed_private else self.seed,
                "summary": self.summary(),
                "adapter": self.adapter.to_dict(), "isolation": self.isolation.to_dict() if self.isolation else {},
                "checks": [asdict(c) for c in self.checks],
                "diagnosis": self.diagnosis.to_dict() if self.diagnosis else None,
                "leakage": self.leakage.to_dict() if self.leakage else None, "student_output": self.student_output,
                "not_selected": self.not_selected,
                **({"command_options": self.command_options} if self.command_options else {})}

    @classmethod
    def from_dict(cls, data: dict) -> "Report":
        """The report `to_dict` wrote (a saved --format json report), for renderers that run later."""
        fields = set(CheckResult.__dataclass_fields__)
        return cls(target=data["target"], checks=[CheckResult(**{**{k: v for k, v in c.items() if k in fields},
                                                              "status": Status(c["status"])})
                                                  for c in data["checks"]],
                   seed=data.get("seed") or 0, seed_private="hidden" if data.get("seed", 0) is None else "",
                   adapter=Adapter.from_dict(data.get("adapter")),
                   student_output=data.get("student_output") or "",
                   diagnosis=Diagnosis.from_dict(data.get("diagnosis")), rules_counted=data.get("rules_counted", True),
                   isolation=Isolation.from_dict(data.get("isolation")), leakage=Leakage.from_dict(data.get("leakage")),
                   not_selected=list(data.get("not_selected") or []),
                   command_options=str(data.get("command_options") or ""))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)
