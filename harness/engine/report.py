"""The verdict as data (`Report`) and its two renderings: text for people, JSON for machines.

JSON schema (stable; documented in the README): {"tool", "version", "target", "passed", "seed", "summary":
{"pass", "fail", "error", "skip"}, "adapter": {...}, "checks": [{"id", "status", "claim", "message", "config",
"observed", "expected", "fix", "details"}], "student_output"}.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from harness.wire.config import Config

VERSION = "0.1.0"
STATUSES = ("pass", "fail", "error", "skip")


@dataclass
class CheckResult:
    id: str
    status: str
    claim: str
    message: str
    fix: str = ""
    explanation: str = ""
    config: dict | None = None
    observed: str | None = None
    expected: str | None = None
    details: dict = field(default_factory=dict)


@dataclass
class Report:
    target: str
    checks: list[CheckResult]
    seed: int = 0
    adapter: dict = field(default_factory=dict)
    student_output: str = ""
    diagnosis: dict | None = None  # the closest known mistake (harness.engine.diagnosis), None when nothing failed

    @property
    def passed(self) -> bool:
        """True only when every check ran and passed: a skipped check is not a verified one."""
        return bool(self.checks) and all(c.status == "pass" for c in self.checks)

    def __getitem__(self, check_id: str) -> CheckResult:
        for c in self.checks:
            if c.id == check_id:
                return c
        raise KeyError(check_id)

    def summary(self) -> dict[str, int]:
        return {s: sum(c.status == s for c in self.checks) for s in STATUSES}

    def to_dict(self) -> dict:
        return {"tool": "mha-check", "version": VERSION, "target": self.target, "passed": self.passed,
                "seed": self.seed, "summary": self.summary(), "adapter": self.adapter,
                "checks": [asdict(c) for c in self.checks], "diagnosis": self.diagnosis,
                "student_output": self.student_output}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)

    def to_text(self, verbose: bool = False) -> str:
        lines = [f"mha-check {self.target}"]
        built = self.adapter.get("construction")
        if built:
            lines.append(f"  called as {built}")
        mapping = self.adapter.get("mapping")
        if mapping and mapping.get("layout"):
            roles = "; ".join(f"{r}←{p}" for r, p in mapping["layout"].items())
            proof = ("proven: it reproduces your module's own output" if mapping["proven"] else
                     f"not proven ({mapping['problem']}): either your module has a bug (see below) or the "
                     "mapping is wrong (then pass --map)")
            lines.append(f"  weights mapped {mapping['how']}: {roles} ({proof})")
        elif mapping:
            lines.append(f"  weights could not be mapped: {mapping.get('problem')}")
        lines.append("")
        width = max((len(c.id) for c in self.checks), default=10)
        for c in self.checks:
            mark = {"pass": "PASS ", "fail": "FAIL ", "error": "ERROR", "skip": "SKIP "}[c.status]
            lines.append(f"{mark} {c.id:<{width}}  {c.message if c.status != 'pass' or verbose else c.claim}")
            if c.status in ("fail", "error"):
                if c.config:
                    lines.append(f"{'':6}{'':{width}}  smallest failing configuration: {Config(**c.config).describe()}")
                if c.observed or c.expected:
                    lines.append(f"{'':6}{'':{width}}  observed: {c.observed}; expected: {c.expected}")
                lines.append(f"{'':6}{'':{width}}  why it matters: {c.explanation}")
                lines.append(f"{'':6}{'':{width}}  fix: {c.fix}")
        s = self.summary()
        lines.append("")
        if self.diagnosis and self.diagnosis.get("mutant"):
            d = self.diagnosis
            lead = {"exact": "Diagnosis", "symptoms": "Diagnosis", "closest": "Closest known mistake"}[d["match"]]
            lines.append(f"{lead}: {d['title']} [{d['mutant']}]")
            lines.append(f"  evidence: {d['evidence']}")
            lines.append(f"  what happens: {d['symptom']}")
            lines.append(f"  fix: {d['fix']}")
            lines.append(f"  (mha-check explain {d['mutant']} shows a worked example)")
            lines.append("")
        tail = ", ".join(f"{s[k]} {name if s[k] != 1 else name.rstrip('s')}"
                         for k, name in (("error", "errors"), ("skip", "skipped")) if s[k])
        lines.append(f"{s['pass']} passed, {s['fail']} failed" + (f", {tail}" if tail else "")
                     + (" — all checks pass" if self.passed else ""))
        if self.student_output.strip():
            lines.append(f"(your code printed {len(self.student_output)} characters; see --format json "
                         "'student_output' or run with --show-output)")
        return "\n".join(lines)
