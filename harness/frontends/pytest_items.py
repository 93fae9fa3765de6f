"""The pytest plugin's items and its cached runs: what needs mha-check itself (numpy, the checks).

harness.frontends.pytest_plugin, loaded in every pytest session, imports only pytest and this module at the first
hook that needs it.  Each target is checked once per session and options; `only`/`skip` select from that run.
"""
from __future__ import annotations

import pytest

from harness.engine.runner import select
from harness.frontends.api import NotebookReport, check
from harness.frontends.options import ids
from harness.render import text, view
from harness.wire.status import Status

_REPORTS = pytest.StashKey[dict]()  # the session's reports, by target and options


class MhaCheckFailure(Exception):
    """A check did not pass; the text is what pytest shows."""


def run(config, target: str, only=None, skip=None, **options):
    """The report for `target`: mha-check runs every check once per (target, options) and session; `only`/`skip`
    select from that run (with their prerequisites, as on the command line)."""
    key = (target if isinstance(target, str) else id(target),
           tuple(sorted((k, repr(v)) for k, v in options.items())))
    cache = config.stash.setdefault(_REPORTS, {})
    if key not in cache:
        cache[key] = (target, check(target, **options))  # the target is kept alive: its id stays unique
    full = cache[key][1]
    if only is None and skip is None:
        return full
    wanted = {c.id for c in select(ids(only), ids(skip))}
    sub_key = key + (tuple(sorted(wanted)),)
    if sub_key not in cache:
        part = NotebookReport.from_report(full, full.notes, full.source)
        part.checks = [c for c in full.checks if c.id in wanted]
        part.not_selected = [c.id for c in full.checks if c.id not in wanted]
        cache[sub_key] = (target, part)
    return cache[sub_key][1]


class MhaTarget(pytest.Collector):
    """All the checks of one target."""

    def __init__(self, *, target: str, **kwargs):
        super().__init__(**kwargs)
        self.target = target

    def collect(self):
        for c in select():
            yield MhaCheckItem.from_parent(self, name=c.id, check_id=c.id, claim=c.claim)


class MhaCheckItem(pytest.Item):
    def __init__(self, *, check_id: str, claim: str, **kwargs):
        super().__init__(**kwargs)
        self.check_id, self.claim = check_id, claim
        self.add_marker("mha_check")

    def runtest(self):
        config = self.config
        options = {"seed": config.getoption("mha_seed")}
        if config.getoption("mha_examples") is not None:
            options["examples"] = config.getoption("mha_examples")
        report = run(config, self.parent.target, **options)
        self.user_properties.append(("mha_check_target", report.target))
        result = report[self.check_id]
        if result.status == Status.PASS:
            if result.not_applicable:  # passes (never the student's loss), said apart for --junitxml's readers
                self.user_properties.append(("mha_check_not_applicable", True))
            return
        raise MhaCheckFailure(_failure_text(report, result))  # skipped or undecided is not verified: not a pass

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, MhaCheckFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, f"mha-check {self.parent.target} [{self.check_id}]"


def _failure_text(report, result) -> str:
    """The same words as the text report: the root cause first (when identified), then this check."""
    shown = view.build(report)
    line = next(ln for ln in shown.lines if ln.id == result.id)
    out = []
    for r in (shown.root, shown.root.also if shown.root else None):  # and a second mistake made with it
        if not r:
            continue
        out += text.wrap(r.title, "  ", "root cause: ")
        if r.at:
            out += text.wrap(r.at, "    ", "  where: ")
        if r.code:
            out += text.wrap(r.code, "    ", "  you wrote: ")
        out += text.wrap(r.fix, "    ", "  fix: ")
    if shown.root:
        if line.follows_root:
            out.append("this check fails because of it:")
    line.follows_root = False  # here the check's own detail is wanted
    out += text.check_lines(line, len(line.id), verbose=True, colour=False)
    if line.status != Status.FAIL:
        out.append("  (not verified, so not a pass: " + ("mha-check could not decide it" if
                                                         line.status == Status.CANNOT_TELL else "it was skipped") + ")")
    return "\n".join(out)
