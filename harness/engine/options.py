"""What one run of the checks is asked to do, as one record every front end fills in.

Kept apart from the runner so that the command line can build it (`harness.frontends.options.from_args`) before
anything heavy is imported: this module needs only the limits.  Keyword-only: a run is never built by the position of
its values, which silently changed meaning when a field was added (`Options(only, skip, seed, examples, ...)`).
"""
from __future__ import annotations

import ast
import shlex
from dataclasses import dataclass, field

from harness.sandbox.limits import Limits


@dataclass(kw_only=True)
class Options:
    only: list[str] = field(default_factory=list)
    skip: list[str] = field(default_factory=list)
    seed: int = 0
    seed_private: str = ""  # "" the seed may be shown; "staff": drawn for this grade, shown only in fields students
    # never see (Gradescope's extra_data, PrairieLearn's own field); "folder": drawn for `grade`'s output folder and
    # recorded there, shown in no report (harness.frontends.seeds)
    examples: int = 6
    overrides: dict = field(default_factory=dict)  # --arg
    weight_map: dict = field(default_factory=dict)  # --map
    limits: Limits = field(default_factory=Limits)
    rules: bool = True  # the lesson's rules count toward `passed`
    single_head: bool = True  # a single-head layer passes the checks about heads as not applying; False (a rubric's
    # single_head = false, for a multi-head assignment): it fails them
    kv_cache: bool = False  # a layer that shows no KV cache passes kv-cache as not applying; True (a rubric's
    # kv_cache = true, for an assignment that is the layer with a cache): it fails it
    grouped: bool = True  # a grouped-query (or multi-query) layer passes out-proj-bias and head-invariance as not
    # applying; False (a rubric's grouped = false, for an assignment that is the lesson's multi-head layer): it fails
    # them
    diagnose: bool = True
    leakage_map: bool = False  # also measure the influence maps for a picture
    debug: bool = False
    last: frozenset = frozenset()  # checks run after every other (a rubric's hidden ones): what a shown check
    # finds never follows from what a hidden one found or asked the child (red team 13)


def command_words(overrides: dict | None = None, weight_map: dict | None = None) -> str:
    """The run's --arg and --map as they are typed again, shell-quoted, with a space before each ("" for none): a
    follow-up command a report prints (`mha-check trace FILE:Class`) needs them as much as the run did (a student's
    trial: `see also: mha-check trace f08_deutsch.py:KausaleAufmerksamkeit`, copied, failed for want of its three
    --arg)."""
    words = [f"--arg {shlex.quote(f'{name}={_typed(value)}')}" for name, value in (overrides or {}).items()]
    words += [f"--map {shlex.quote(f'{role}={name}')}" for role, name in (weight_map or {}).items()]
    return "".join(" " + w for w in words)


def _typed(value) -> str:
    """An --arg's value as typed: `@d_out` and a plain word as they were, anything else as a Python literal."""
    if isinstance(value, str):
        try:
            ast.literal_eval(value)
        except (ValueError, SyntaxError, RecursionError, MemoryError):
            return value  # (constructor_args read it as a string: it is no literal)
        return repr(value)
    return repr(value)
