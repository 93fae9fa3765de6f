"""The report's blocks as records: how mha-check drove the module (`Adapter`), the identified mistake (`Diagnosis`),
what confined the child (`Isolation`) and the influence maps (`Leakage`).

Read by attribute everywhere; written to JSON and read back only here.  `to_dict` writes the keys of the JSON report
(docs/usage.md) in the order they always had, an absent part left out as before; `from_dict` reads what any version
wrote (a key added since, `fix_is_code` say, takes the value older reports meant), so that `mha-check result`, the
class view and `grade --resume` read old reports as new ones.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from harness.wire.errors import ChildEnd, WorkerDied


def _present(pairs) -> dict:
    """The pairs whose value is given (None and empty collections are left out, as the dicts of old left them)."""
    return {k: v for k, v in pairs if v is not None and v != () and v != []}


# -- the adapter: how mha-check drove the module -------------------------------------------------------------------
@dataclass(frozen=True)
class ProcessEvent:
    """A child that ended before its time, in the adapter's `process` list."""
    kind: ChildEnd
    message: str
    ours: bool  # one of mha-check's limits (cannot tell), not something the code did

    @classmethod
    def of(cls, died: WorkerDied) -> "ProcessEvent":
        return cls(died.kind, died.message, died.ours)

    @classmethod
    def grader_error(cls, message: str) -> "ProcessEvent":
        """A batch's grading process broke on the submission: never the student's doing."""
        return cls(ChildEnd.GRADER_ERROR, message, True)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "message": self.message, "ours": self.ours}

    @classmethod
    def from_dict(cls, data: dict) -> "ProcessEvent":
        kind = ChildEnd(data["kind"])
        return cls(kind, str(data.get("message", "")), bool(data.get("ours", kind.is_ours)))


@dataclass(frozen=True)
class Form:
    """Which member of the lesson's family the module was checked as, and why (harness.wire.form)."""
    name: str
    evidence: str

    def to_dict(self) -> dict:
        return {"name": self.name, "evidence": self.evidence}


@dataclass(frozen=True)
class Adapter:
    """How mha-check drove the module: its protections, which class it loaded and how it built it, what loading left
    out, the form, the parameters' mapping (harness.engine.mapping.Mapping.to_dict), the children that ended early
    and why a person should look (`review`)."""
    protections: tuple[str, ...] = ()
    class_name: str | None = None  # "class" in JSON: the class (or factory) checked; the target may name only a file
    construction: str | None = None  # "MyAttn(d_model=6, n_heads=2)": only when something was built
    notes: tuple[str, ...] = ()
    form: Form | None = None
    mapping: dict | None = None
    process: tuple[ProcessEvent, ...] = ()
    review: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return _present([("protections", list(self.protections)), ("class", self.class_name),
                         ("construction", self.construction), ("notes", list(self.notes)),
                         ("form", self.form.to_dict() if self.form else None), ("mapping", self.mapping),
                         ("process", [p.to_dict() for p in self.process]), ("review", list(self.review))])

    @classmethod
    def from_dict(cls, data: dict | None) -> "Adapter":
        data = data or {}
        form = data.get("form")
        return cls(tuple(data.get("protections") or ()), data.get("class"), data.get("construction"),
                   tuple(data.get("notes") or ()), Form(form["name"], form["evidence"]) if form else None,
                   data.get("mapping"), tuple(ProcessEvent.from_dict(p) for p in data.get("process") or ()),
                   tuple(data.get("review") or ()))


# -- the diagnosis: the identified mistake, or the symptoms without a name ---------------------------------------------
@dataclass(frozen=True)
class Diagnosis:
    """A named mistake (`mutant`, with how it was matched, its words and where it is in the student's file), or none
    (`mutant` None, `match` "none", `message` why), with the failing checks and their specific findings either way."""
    mutant: str | None
    match: str  # "numbers", "signature", "trace", or "none"
    failing: tuple[str, ...] = ()
    findings: tuple[str, ...] = ()
    message: str = ""  # no name: why ("" when only the lesson's rules fail: the verdict says it)
    marks: tuple[dict, ...] | None = None  # no name: the trace's marks, where it looked for them
    title: str = ""
    symptom: str = ""
    fix: str = ""
    fix_is_code: bool = True  # the student's line corrected (code), or a remedy in words
    lesson: str = ""
    evidence: str = ""
    at: str | None = None  # the student's file:line, where the trace marks it
    code: str | None = None  # that line as written
    follows: tuple[str, ...] = ()  # the failing checks it explains, the most specific first
    also: Diagnosis | None = None  # a second mistake made together with this one (harness.engine.pairs): its own
    # line, fix and the failing checks it alone explains; None for one mistake
    trace_options: str = ""  # what `mha-check trace` needs beyond the run's options to show the line marked: the
    # layer built with its Q/K/V biases (" --arg qkv_bias=True"), where only that build has the mistake
    rule_lines: dict = field(default_factory=dict)  # failing lesson rule -> {"at", "code"[, "missing"]}: the line
    # the trace marks for it (the guard's place at `def __init__`, the Linear built without its bias), shown beside
    # the rule's fix (a student's trial: neither rule's fix said where, while trace did)

    @property
    def named(self) -> bool:
        return self.mutant is not None

    def to_dict(self) -> dict:
        if self.named:
            return {"mutant": self.mutant, "match": self.match, "title": self.title, "symptom": self.symptom,
                    "fix": self.fix, "fix_is_code": self.fix_is_code, "lesson": self.lesson,
                    "evidence": self.evidence, "at": self.at, "code": self.code, "follows": list(self.follows),
                    "failing": list(self.failing), "findings": list(self.findings),
                    **({"also": self.also.to_dict()} if self.also else {}),  # absent for one mistake, as before
                    **({"trace_options": self.trace_options} if self.trace_options else {}),
                    **({"rule_lines": dict(self.rule_lines)} if self.rule_lines else {})}
        out = {"mutant": None, "match": self.match, "message": self.message, "failing": list(self.failing),
               "findings": list(self.findings)}
        if self.marks is not None:
            out["marks"] = [dict(m) for m in self.marks]
        if self.rule_lines:
            out["rule_lines"] = dict(self.rule_lines)
        return out

    @classmethod
    def from_dict(cls, data: dict | None) -> "Diagnosis | None":
        if not data:
            return None
        marks = data.get("marks")
        return cls(data.get("mutant"), data.get("match", "none"), tuple(data.get("failing") or ()),
                   tuple(data.get("findings") or ()), data.get("message") or "",
                   tuple(marks) if marks is not None else None, data.get("title") or "", data.get("symptom") or "",
                   data.get("fix") or "", bool(data.get("fix_is_code", True)), data.get("lesson") or "",
                   data.get("evidence") or "", data.get("at"), data.get("code"), tuple(data.get("follows") or ()),
                   cls.from_dict(data.get("also")), data.get("trace_options") or "",
                   dict(data.get("rule_lines") or {}))


# -- isolation: what confined the child ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Isolation:
    """What confined the child (harness.sandbox.isolation.describe): one line for people, the record measured inside
    the child (mechanism, uid, namespaces, ...: its keys as the child wrote them), what of the full policy was
    missing, why a grade may not come from it, who accepted that, and its scratch copy."""
    summary: str
    measured: dict
    full_policy: bool
    short_of_policy: tuple[str, ...] = ()
    unfit_to_grade: str = ""
    accepted: str = ""  # "graded although unfit, as --allow-unconfined asked"
    submission_copy: dict | None = None

    _OWN = ("summary", "full_policy", "short_of_policy", "unfit_to_grade", "accepted", "submission_copy")

    def to_dict(self) -> dict:
        out = {"summary": self.summary, **self.measured, "full_policy": self.full_policy,
               "short_of_policy": list(self.short_of_policy), "unfit_to_grade": self.unfit_to_grade}
        if self.accepted:
            out["accepted"] = self.accepted
        if self.submission_copy is not None:
            out["submission_copy"] = self.submission_copy
        return out

    @classmethod
    def from_dict(cls, data: dict | None) -> "Isolation | None":
        if not data:
            return None
        return cls(data.get("summary", ""), {k: v for k, v in data.items() if k not in cls._OWN},
                   data.get("full_policy") is True, tuple(data.get("short_of_policy") or ()),
                   data.get("unfit_to_grade") or "", data.get("accepted") or "", data.get("submission_copy"))


# -- leakage: the influence maps for the picture -------------------------------------------------------------------
@dataclass(frozen=True)
class Panel:
    """One influence map: |d y_t / d x_s| for every pair (G, None when there is no gradient), future cells that leak
    and allowed cells without influence, and its verdict in words."""
    label: str
    G: list | None
    leaks: int | None
    dead: int | None
    verdict: str

    def to_dict(self) -> dict:
        return {"label": self.label, "G": self.G, "leaks": self.leaks, "dead": self.dead, "verdict": self.verdict}


@dataclass(frozen=True)
class Leakage:
    """The maps for the module and, where the weights are mapped with certainty, each head; or why there are none
    (`error`)."""
    config: dict | None = None
    panels: tuple[Panel, ...] = ()
    notes: tuple[str, ...] = ()
    error: str = ""

    def to_dict(self) -> dict:
        if self.error:
            return {"error": self.error}
        return {"config": self.config, "panels": [p.to_dict() for p in self.panels], "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, data: dict | None) -> "Leakage | None":
        if not data:
            return None
        if "panels" not in data:
            return cls(error=str(data.get("error") or "the map could not be measured"))
        return cls(data.get("config"), tuple(Panel(**p) for p in data["panels"]), tuple(data.get("notes") or ()))
