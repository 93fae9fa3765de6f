"""The reusable checks: one module per check, each a short function with a stable id, a claim and a fix.

A check runs in the trusted process.  It drives the student's module through the engine's `Context` (builds,
inputs, weight transplants, all executed in the child) and compares what comes back with `reference.numpy_ref`.
It returns an `Outcome`:

- `passed(...)`: the claim holds on every configuration tried;
- `failed(...)`: evidence of a bug in the student's code (a wrong number, an exception the code raised);
- `cannot_tell(...)`: mha-check could not drive or map the module, so it says nothing about the code, and says what
  would help (`--arg`, `--map`, a factory).

The engine adds `skip` for a check whose prerequisite did not pass.  A check is either about the math
(`kind="correctness"`: the layer computes the wrong function, leaks, breaks on a device...) or one of the lesson's
rules (`kind="rule"`: refuse a width not divisible by the heads; an output projection with a bias).

To add a check: write `checks/my_check.py` with a function decorated by `@check(...)` (its prerequisites passed as
the check objects themselves: `needs=(output_shape,)`), and a mutant in `mutants/` that it kills.  Modules are
discovered, not listed; the order is that of the prerequisites, then correctness before rules, then the id.
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from dataclasses import dataclass, field
from typing import Callable

from harness.wire.status import STATUSES, Status  # noqa: F401 - STATUSES: the outcomes in order, for readers of checks

KINDS = ("correctness", "rule")
_ID = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


@dataclass
class Outcome:
    status: Status
    message: str
    config: dict | None = None  # the smallest configuration that shows a failure
    observed: str | None = None
    expected: str | None = None
    details: dict = field(default_factory=dict)  # "finding": what the failure looks like (for the diagnosis)
    help: str = ""  # for cannot_tell: the one option that would let mha-check tell
    fix: str = ""  # for a finding the check's general fix would mislead on: what to do instead
    claim: str = ""  # for a pass that verified less than the check's claim says (a layer without dropout): what it
    # verified, shown in place of the claim; "" for the claim itself


def passed(message: str, claim: str = "", **details) -> Outcome:
    return Outcome(Status.PASS, message, details=details, claim=claim)


def does_not_apply(message: str, **details) -> Outcome:
    """A pass with nothing to judge: the check's claim does not concern this layer (no KV cache to check).  Its
    message begins "does not apply: " and says why; the report counts it apart from the verified passes and it
    keeps a pass's points (harness.engine.report.does_not_apply)."""
    return passed(message, not_applicable=True, **details)


def failed(message: str, config=None, observed=None, expected=None, fix: str = "", **details) -> Outcome:
    cfg = config.to_dict() if hasattr(config, "to_dict") else config
    return Outcome(Status.FAIL, message, cfg, observed, expected, details, fix=fix)


def cannot_tell(message: str, help: str = "", **details) -> Outcome:
    return Outcome(Status.CANNOT_TELL, message, details=details, help=help)


def skipped(reason: str) -> Outcome:
    return Outcome(Status.SKIP, reason)


@dataclass(frozen=True, eq=False)
class Check:
    id: str
    claim: str
    explanation: str
    fix: str
    run: Callable
    needs: tuple["Check", ...] = ()
    weights: bool = False  # needs the Q/K/V/out weights mapped with certainty (transplant)
    example: str = ""  # a tiny worked example with shapes and numbers; line breaks kept
    kind: str = "correctness"

    def __call__(self, ctx) -> Outcome:
        return self.run(ctx)


_REGISTRY: dict[str, Check] = {}


class RegistryError(ValueError):
    """A check declaration that cannot be registered: the message names the bad value."""


def _keep_lines(text: str) -> str:
    """A triple-quoted block as a docstring is read (inspect.cleandoc: its first line may follow the quotes, the
    common indentation of the others goes), line breaks kept and trailing spaces dropped."""
    return "\n".join(line.rstrip() for line in inspect.cleandoc(text).splitlines()).strip("\n")


def check(id: str, claim: str, explanation: str, fix: str, needs=(), weights: bool = False, example: str = "",
          kind: str = "correctness"):
    """Register a check function under a stable id; returns the `Check`, so other checks can name it in `needs`."""
    if not _ID.fullmatch(id):
        raise RegistryError(f"check id {id!r} is not kebab-case")
    if kind not in KINDS:
        raise RegistryError(f"check {id}: kind must be one of {KINDS}, not {kind!r}")
    for need in needs:
        if not isinstance(need, Check) or _REGISTRY.get(need.id) is not need:
            raise RegistryError(f"check {id}: needs {need!r}, which is not a registered check")
    if not claim.strip() or not fix.strip() or not explanation.strip():
        raise RegistryError(f"check {id}: claim, explanation and fix must all be given")

    def register(fn) -> Check:
        if id in _REGISTRY and _REGISTRY[id].run.__module__ != fn.__module__:
            raise RegistryError(f"check id {id!r} is already registered by {_REGISTRY[id].run.__module__}")
        made = Check(id, claim, " ".join(explanation.split()), " ".join(fix.split()), fn, tuple(needs), weights,
                     _keep_lines(example), kind)
        _REGISTRY[id] = made
        return made

    return register


def _discover() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


def all_checks() -> list[Check]:
    """Every check, discovered from this package: prerequisites first, correctness before rules, then by id."""
    _discover()
    done: list[Check] = []
    remaining = sorted(_REGISTRY.values(), key=lambda c: (KINDS.index(c.kind), c.id))
    while remaining:
        ready = next(c for c in remaining if all(n in done for n in c.needs))
        done.append(ready)
        remaining.remove(ready)
    return done


def needs_by_id() -> dict[str, tuple[str, ...]]:
    """Each check's prerequisites by id (a check they fail skips it): a rubric shows a check no earlier than them
    (harness.render.rubric.Rubric.visibility_for)."""
    return {c.id: tuple(n.id for n in c.needs) for c in all_checks()}
