"""The reusable checks: one module per check, each a short function with a stable id, a claim and a fix.

A check runs in the trusted process.  It drives the student's module through a `Context` (builds, inputs, weight
transplants, all executed in the child) and compares what comes back with `reference.numpy_ref`.  It returns an
`Outcome`; raising `TargetFailure` (the student's code raised) makes it an `error`.

To add a check: write `checks/my_check.py` with a function decorated by `@check(...)`, add its module name to
`ORDER` below, and add a mutant in `mutants/` that it kills (the kill-matrix test insists on both).
"""
from __future__ import annotations

import importlib
import textwrap
from dataclasses import dataclass, field
from typing import Callable

ORDER = (
    "construct", "output_shape", "divisibility", "param_count", "head_invariance", "causal_leakage",
    "view_order", "contiguity", "reference_match", "gradient_match", "batch_independence",
    "eval_determinism", "input_untouched", "mask_buffer",
)


@dataclass
class Outcome:
    status: str  # pass, fail, error, skip
    message: str
    config: dict | None = None  # the smallest configuration that shows a failure
    observed: str | None = None
    expected: str | None = None
    details: dict = field(default_factory=dict)


def passed(message: str, **details) -> Outcome:
    return Outcome("pass", message, details=details)


def failed(message: str, config=None, observed=None, expected=None, **details) -> Outcome:
    cfg = config.to_dict() if hasattr(config, "to_dict") else config
    return Outcome("fail", message, cfg, observed, expected, details)


def skipped(reason: str) -> Outcome:
    return Outcome("skip", reason)


@dataclass(frozen=True)
class Check:
    id: str
    claim: str
    explanation: str
    fix: str
    run: Callable
    needs: tuple[str, ...] = ("construct",)
    weights: bool = False  # needs the Q/K/V/out weights mapped (transplant)
    example: str = ""  # a tiny worked example with shapes and numbers; line breaks kept


_REGISTRY: dict[str, Check] = {}


def _keep_lines(text: str) -> str:
    """Strip the common indentation of a triple-quoted block (its first line may follow the quotes), keep breaks."""
    first, _, rest = text.expandtabs().partition("\n")
    lines = [first.strip()] + textwrap.dedent(rest).splitlines()
    return "\n".join(line.rstrip() for line in lines).strip("\n")


def check(id: str, claim: str, explanation: str, fix: str, needs=("construct",), weights: bool = False,
          example: str = ""):
    """Register a check function under a stable id."""

    def register(fn):
        _REGISTRY[id] = Check(id, claim, " ".join(explanation.split()), " ".join(fix.split()), fn, tuple(needs),
                              weights, _keep_lines(example))
        return fn

    return register


def all_checks() -> list[Check]:
    if not _REGISTRY:
        for name in ORDER:
            importlib.import_module(f"checks.{name}")
    return list(_REGISTRY.values())


def by_id() -> dict[str, Check]:
    return {c.id: c for c in all_checks()}
