"""The rubric (TOML): points and visibility per check, which checks count, and the scoring rule.

Rubric file (every key optional; without a rubric every check is worth one point and visible):

    target = "attention.py:MultiHeadAttention"   # for `mha-check grade`
    default_points = 1
    default_visibility = "visible"               # Gradescope: hidden, after_due_date, after_published, visible
    rules = true                                 # the lesson's rules (divisibility, mask-fill, out-proj-bias) count
    score_visibility = "after_published"         # when students see the total (Gradescope's results visibility)
    single_head = false                          # a single-head layer fails the checks about heads (default: true,
                                                 # they pass as not applying to one head)
    kv_cache = true                              # the assignment is the layer with a KV cache: a layer that shows
                                                 # none fails kv-cache (default: false, it does not apply)
    grouped = false                              # the grouped-query family's exemptions (no output bias, a shared
                                                 # key/value head) fail instead (default: true, they do not apply)
    [checks.causal-leakage]
    points = 3
    [checks.gradient-match]
    points = 2
    visibility = "after_due_date"
    [checks.eval-determinism]
    hidden = true                                # the same as visibility = "hidden"
    [tests."test_attention.py::test_shapes"]     # an instructor's test (--tests): "FILE::NAME" as the report names it
    points = 2                                   # (points, visibility and hidden, as for a check)

The total tells what the checks a student does not see earned (the total less the visible tests' points), so by
default it is shown no earlier than the most hidden check: at once when every check is visible, after the due date
when the latest is after_due_date, and else when the grades are published (after_published).  `score_visibility`
sets it (hidden, after_due_date, after_published or visible; an earlier one than the checks' lets the total tell).
A check is shown no earlier than the checks it needs (mask-fill needs causal-leakage): one that a hidden check's
failure skips would show that failure ("skipped: needs a check not shown yet", no points) where a passing one's
shows a pass.

Scoring rule, the same in every format: a check earns its points only when it passed; failed, skipped and
cannot-tell checks earn nothing.  With `rules = false` the rule checks are left out of the score and the total.
A single-head layer (the previous lesson's CausalAttention: a constructor that takes no number of heads) is one of
the lesson's family, checked as such, and the checks about heads (view-order, head-invariance, divisibility,
out-proj-bias) pass it as not applying; where the assignment is the multi-head layer, `single_head = false` makes
them fail it, saying so (red team 15: the single-head layer handed in for the multi-head one got every point).
Likewise a layer that shows no KV cache passes kv-cache as not applying; where the assignment is the layer with a
cache, `kv_cache = true` makes it fail (red team 17: a cache whose mask rows are not offset, driven by a keyword and
a method of other names than mha-check knows, got every point).  And a grouped-query (or multi-query) layer passes
out-proj-bias (the Llama family has no biases by design) and head-invariance (one shared key/value head) as not
applying; `grouped = false` makes them fail it (red team 17: the lesson's layer without its output bias, given an
optional `kv_heads` that defaults to one per head, as Llama's does, got every point).
The instructor's own tests (--tests) are scored by the same rule, each one item.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from harness.wire.status import Status

VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
_SHOWN_FROM = ("visible", "after_due_date", "after_published", "hidden")  # earliest shown first


class RubricError(ValueError):
    """The rubric file is not usable: the message says where and why."""


@dataclass
class Rubric:
    points: dict[str, float] = field(default_factory=dict)
    visibility: dict[str, str] = field(default_factory=dict)
    default_points: float = 1.0
    default_visibility: str = "visible"
    target: str | None = None
    rules: bool = True  # the lesson's rules count toward the score
    score_visibility: str | None = None  # when the total is shown; None: no earlier than the most hidden check
    needs: dict[str, tuple[str, ...]] = field(default_factory=dict)  # check -> the checks it needs (checks.needs_by_id)
    single_head: bool = True  # a single-head layer passes the checks about heads as not applying; False: fails them
    kv_cache: bool = False  # a layer without a KV cache passes kv-cache as not applying; True: fails it
    grouped: bool = True  # a grouped-query layer passes out-proj-bias and head-invariance as not applying; False: fails

    def hidden(self, check_ids) -> frozenset:
        """Checks a student must not see yet: anything not plainly visible."""
        return frozenset(c for c in check_ids if self.visibility_for(c) != "visible")

    def total_visibility(self, check_ids) -> str:
        """When students may see the total (and the summary that goes with it on Gradescope): as the rubric says,
        or else no earlier than the most hidden check, and at publication at the latest (when grades are out)."""
        if self.score_visibility is not None:
            return self.score_visibility
        shown = {self.visibility_for(c) for c in check_ids}
        return "after_published" if shown & {"hidden", "after_published"} else \
            "after_due_date" if "after_due_date" in shown else "visible"

    def points_for(self, check_id: str) -> float:
        return self.points.get(check_id, self.default_points)

    def visibility_for(self, check_id: str) -> str:
        """As the rubric says, or later: no earlier than any check it needs, whose failure its skip would show."""
        own = self.visibility.get(check_id, self.default_visibility)
        return max([own, *(self.visibility_for(n) for n in self.needs.get(check_id, ()))], key=_SHOWN_FROM.index)


def load_rubric(path: str | None, known_checks, known_tests=(), needs=None) -> Rubric:
    """Read and validate a rubric; unknown keys, check ids and test ids (`known_tests`: the instructor's tests of
    this run, harness.engine.instructor) are errors, not silently ignored.  `needs`: each check's prerequisites
    (checks.needs_by_id), which a check is shown no earlier than."""
    if path is None:
        return Rubric()
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise RubricError(f"cannot read rubric {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise RubricError(f"rubric {path} is not valid TOML: {e}") from None
    unknown = set(data) - {"target", "default_points", "default_visibility", "checks", "rules", "score_visibility",
                           "tests", "single_head", "kv_cache", "grouped"}
    if unknown:
        raise RubricError(f"rubric {path}: unknown keys {sorted(unknown)}")
    rubric = Rubric(target=data.get("target"), needs=dict(needs or {}))
    for key, default in (("rules", True), ("single_head", True), ("kv_cache", False), ("grouped", True)):
        if not isinstance(data.get(key, default), bool):
            raise RubricError(f"rubric {path}: {key} must be true or false, not {data[key]!r}")
        setattr(rubric, key, data.get(key, default))
    rubric.default_points = _points(data.get("default_points", 1), path, "default_points")
    rubric.default_visibility = _visibility(data.get("default_visibility", "visible"), path, "default_visibility")
    if "score_visibility" in data:
        rubric.score_visibility = _visibility(data["score_visibility"], path, "score_visibility")
    tests = data.get("tests", {})
    if not isinstance(tests, dict) or not isinstance(data.get("checks", {}), dict):
        raise RubricError(f"rubric {path}: [checks.ID] and [tests.\"FILE::NAME\"] are tables")
    for test_id in tests:
        if test_id not in known_tests:
            near = [t for t in known_tests if t.rsplit("::", 1)[-1] == test_id.rsplit("::", 1)[-1]]
            raise RubricError(f"rubric {path}: no instructor's test called {test_id!r} in --tests" + (
                f" (did you mean {near[0]!r}?)" if near else "" if known_tests else " (no --tests given)"))
    for check_id, entry in [*data.get("checks", {}).items(), *tests.items()]:
        if check_id not in known_checks and check_id not in tests:
            raise RubricError(f"rubric {path}: no check called {check_id!r} (mha-check --list-checks)")
        if not isinstance(entry, dict) or set(entry) - {"points", "visibility", "hidden"}:
            raise RubricError(f"rubric {path}: [checks.{check_id}] takes points, visibility and hidden")
        if "points" in entry:
            rubric.points[check_id] = _points(entry["points"], path, f"checks.{check_id}.points")
        if "hidden" in entry and not isinstance(entry["hidden"], bool):
            raise RubricError(f"rubric {path}: checks.{check_id}.hidden must be true or false, not {entry['hidden']!r}")
        if entry.get("hidden") and entry.get("visibility", "hidden") != "hidden":
            raise RubricError(f"rubric {path}: [checks.{check_id}] says hidden = true and visibility = "
                              f"{entry['visibility']!r}: keep one of them")
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


def score(report, rubric: Rubric) -> tuple[float, float]:
    """(points earned, points possible): points only for passed checks, every counted check in the total."""
    counted = [c for c in report.checks if c.kind != "rule" or rubric.rules]
    return (float(sum(rubric.points_for(c.id) for c in counted if c.status == Status.PASS)),
            float(sum(rubric.points_for(c.id) for c in counted)))
