"""What one run of the checks is asked to do, as one record every front end fills in.

Kept apart from the runner so that the command line can build it (`harness.frontends.options.from_args`) before
anything heavy is imported: this module needs only the limits.  Keyword-only: a run is never built by the position of
its values, which silently changed meaning when a field was added (`Options(only, skip, seed, examples, ...)`).
"""
from __future__ import annotations

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
    diagnose: bool = True
    leakage_map: bool = False  # also measure the influence maps for a picture
    debug: bool = False
    last: frozenset = frozenset()  # checks run after every other (a rubric's hidden ones): what a shown check
    # finds never follows from what a hidden one found or asked the child (red team 13)
