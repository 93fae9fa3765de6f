"""Grading formats: a rubric (TOML) turns check results into points; Gradescope's results.json and JUnit XML.

Rubric file (every key optional; without a rubric every check is worth one point and visible):

    target = "attention.py:MultiHeadAttention"   # for `mha-check grade`
    default_points = 1
    default_visibility = "visible"               # Gradescope: hidden, after_due_date, after_published, visible
    [checks.causal-leakage]
    points = 3
    [checks.gradient-match]
    points = 2
    visibility = "after_due_date"
    [checks.eval-determinism]
    hidden = true                                # the same as visibility = "hidden"
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from xml.sax.saxutils import escape, quoteattr

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")


class RubricError(ValueError):
    """The rubric file is not usable: the message says where and why."""


@dataclass
class Rubric:
    points: dict[str, float] = field(default_factory=dict)
    visibility: dict[str, str] = field(default_factory=dict)
    default_points: float = 1.0
    default_visibility: str = "visible"
    target: str | None = None

    def points_for(self, check_id: str) -> float:
        return self.points.get(check_id, self.default_points)

    def visibility_for(self, check_id: str) -> str:
        return self.visibility.get(check_id, self.default_visibility)


def load_rubric(path: str | None, known_checks) -> Rubric:
    """Read and validate a rubric; unknown keys and check ids are errors, not silently ignored."""
    if path is None:
        return Rubric()
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise RubricError(f"cannot read rubric {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise RubricError(f"rubric {path} is not valid TOML: {e}") from None
    unknown = set(data) - {"target", "default_points", "default_visibility", "checks"}
    if unknown:
        raise RubricError(f"rubric {path}: unknown keys {sorted(unknown)}")
    rubric = Rubric(target=data.get("target"))
    rubric.default_points = _points(data.get("default_points", 1), path, "default_points")
    rubric.default_visibility = _visibility(data.get("default_visibility", "visible"), path, "default_visibility")
    for check_id, entry in data.get("checks", {}).items():
        if check_id not in known_checks:
            raise RubricError(f"rubric {path}: no check called {check_id!r} (mha-check --list-checks)")
        if not isinstance(entry, dict) or set(entry) - {"points", "visibility", "hidden"}:
            raise RubricError(f"rubric {path}: [checks.{check_id}] takes points, visibility and hidden")
        if "points" in entry:
            rubric.points[check_id] = _points(entry["points"], path, f"checks.{check_id}.points")
        if entry.get("hidden"):
            rubric.visibility[check_id] = "hidden"
        elif "visibility" in entry:
            rubric.visibility[check_id] = _visibility(entry["visibility"], path, f"checks.{check_id}.visibility")
    return rubric


def _points(value, path, where) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise RubricError(f"rubric {path}: {where} must be a number >= 0, not {value!r}")
    return float(value)


def _visibility(value, path, where) -> str:
    if value not in VISIBILITIES:
        raise RubricError(f"rubric {path}: {where} must be one of {', '.join(VISIBILITIES)}, not {value!r}")
    return value


def _output(c) -> str:
    parts = [c.message if c.status != "pass" else c.claim]
    if c.status in ("fail", "error"):
        if c.config:
            from harness.wire.config import Config

            parts.append("Smallest failing configuration: " + Config(**c.config).describe())
        parts.append("Fix: " + c.fix)
    return "\n".join(parts)


def score(report, rubric: Rubric) -> tuple[float, float]:
    got = sum(rubric.points_for(c.id) for c in report.checks if c.status == "pass")
    return got, sum(rubric.points_for(c.id) for c in report.checks)


def gradescope(report, rubric: Rubric | None = None) -> dict:
    """Gradescope's results.json: top-level score and one test per check."""
    rubric = rubric or Rubric()
    got, _ = score(report, rubric)
    tests = [{"name": c.id, "number": str(i), "score": rubric.points_for(c.id) if c.status == "pass" else 0.0,
              "max_score": rubric.points_for(c.id), "status": "passed" if c.status == "pass" else "failed",
              "output": _output(c), "visibility": rubric.visibility_for(c.id)}
             for i, c in enumerate(report.checks, 1)]
    summary = [f"mha-check {report.target}: {'all checks pass' if report.passed else 'some checks do not pass'}"]
    if report.diagnosis and report.diagnosis.get("mutant"):
        d = report.diagnosis
        summary.append(f"Most likely mistake: {d['title']}. Fix: {d['fix']}")
    return {"score": got, "output": "\n".join(summary), "visibility": "visible", "stdout_visibility": "hidden",
            "tests": tests}


def junit(report, rubric: Rubric | None = None) -> str:
    """JUnit XML: one testcase per check; fail -> <failure>, error -> <error>, skip -> <skipped>."""
    s = report.summary()
    name = quoteattr(f"mha-check {report.target}")
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             f'<testsuite name={name} tests="{len(report.checks)}" failures="{s["fail"]}" errors="{s["error"]}" '
             f'skipped="{s["skip"]}">']
    for c in report.checks:
        lines.append(f'  <testcase classname="mha-check" name={quoteattr(c.id)}>')
        tag = {"fail": "failure", "error": "error", "skip": "skipped"}.get(c.status)
        if tag:
            lines.append(f"    <{tag} message={quoteattr(c.message[:500])}>{escape(_output(c))}</{tag}>")
        lines.append("  </testcase>")
    if report.student_output:
        lines.append(f"  <system-out>{escape(report.student_output)}</system-out>")
    lines.append("</testsuite>")
    return "\n".join(lines) + "\n"


def render(report, fmt: str, rubric: Rubric | None = None, verbose: bool = False) -> str:
    if fmt == "json":
        data = report.to_dict()
        if rubric is not None:
            got, total = score(report, rubric)
            data["score"], data["max_score"] = got, total
        return json.dumps(data, indent=2, default=str) + "\n"
    if fmt == "gradescope":
        return json.dumps(gradescope(report, rubric), indent=2) + "\n"
    if fmt == "junit":
        return junit(report, rubric)
    return report.to_text(verbose) + "\n"
