"""Trusted side: run the selected checks against one target and assemble the Report.

Dependencies are honoured (a check whose prerequisite did not pass is skipped with the reason, never run into a
cascade of errors); the student's exceptions become `error` results; a child that dies is replaced by a fresh one
so that the remaining checks still run.
"""
from __future__ import annotations

import traceback

from checks import Outcome, all_checks
from harness.engine.context import Context
from harness.engine.report import CheckResult, Report
from harness.sandbox.subject import Subject, TargetFailure, WorkerDied


FATAL = ("time", "cpu", "memory", "channel")  # no restart after these: the next check would hit the same wall
MAX_RESTARTS = 3


class UsageError(Exception):
    """The command line asked for something that does not exist (exit status 2)."""


def select(only=None, skip=None):
    checks = all_checks()
    known = {c.id for c in checks}
    for name in list(only or []) + list(skip or []):
        if name not in known:
            import difflib

            close = difflib.get_close_matches(name, known, n=1)
            raise UsageError(f"unknown check id {name!r}" + (f"; did you mean {close[0]!r}?" if close else "")
                             + " (mha-check --list-checks shows them)")
    wanted = set(only) if only else known
    wanted -= set(skip or [])
    by_id = {c.id: c for c in checks}
    for c in list(wanted):  # prerequisites run too
        wanted |= set(by_id[c].needs)
    return [c for c in checks if c.id in wanted]


def _construction(ctx: Context) -> str:
    try:
        loaded = ctx.subject.load()
    except (TargetFailure, WorkerDied):
        return ""
    sig, cfg = loaded["signature"], ctx.base
    values = {"width": cfg.d_out, "d_in": cfg.d_in, "d_out": cfg.d_out, "heads": cfg.heads,
              "context_length": cfg.context_length, "dropout": cfg.dropout, "qkv_bias": cfg.qkv_bias,
              "all_bias": True}
    args = [f"{p}={values[k]}" for k, p in sig["accepts"].items()]
    if sig["config_param"]:
        args.append(f"{sig['config_param']}=<config object>")
    return f"{loaded['name']}({', '.join(args)})"


def run_checks(spec: str, only=None, skip=None, seed: int = 0, examples: int = 6, overrides=None,
               debug: bool = False, subject: Subject | None = None, weight_map=None,
               diagnose: bool = True, limits=None, make_subject=None, plot: str | None = None) -> Report:
    """Run the checks; `subject` may be a child already started (it imports torch while we import the checks),
    `make_subject()` starts a replacement after a crash (the batch pool forks one from its zygote)."""
    checks = select(only, skip)
    make_subject = make_subject or (lambda: Subject(spec, overrides, seed, weight_map=weight_map, limits=limits))
    subject = subject or make_subject()
    ctx = Context(subject, seed, examples)
    results: dict[str, CheckResult] = {}
    deaths: list[WorkerDied] = []
    try:
        for c in checks:
            if deaths and (deaths[-1].kind in FATAL or len(deaths) >= MAX_RESTARTS):
                outcome = Outcome("error", f"not run: {deaths[-1].message}")
            else:
                try:
                    outcome = _guarded(_blocked, c, results, ctx, debug=debug) or _run_one(c, ctx, debug)
                except WorkerDied as died:
                    deaths.append(died)
                    outcome = Outcome("error", died.message)
                    if died.kind not in FATAL and len(deaths) < MAX_RESTARTS:
                        started = ctx.subject.started  # the time budget covers the restarts too
                        ctx.subject.close()
                        ctx.subject = make_subject()
                        ctx.subject.started = started
            results[c.id] = CheckResult(c.id, outcome.status, c.claim, outcome.message, c.fix, c.explanation,
                                        outcome.config, outcome.observed, outcome.expected, outcome.details)
        adapter = {"construction": _construction(ctx), "protections": ctx.subject.protections()}
        if deaths:
            adapter["process"] = [{"kind": d.kind, "message": d.message} for d in deaths]
        if ctx._mapping is not None:
            adapter["mapping"] = ctx.mapping.to_dict()
        report = Report(spec, list(results.values()), seed, adapter)
        if diagnose:
            from harness.engine.diagnosis import diagnose as find_mistake

            report.diagnosis = find_mistake(report, ctx)
        if plot:
            from harness.render.plot import write_leakage_plot

            try:
                report.adapter["plot"] = write_leakage_plot(ctx, plot, title=spec)
            except (RuntimeError, TargetFailure, WorkerDied) as e:
                report.adapter["plot"] = {"path": None, "error": str(e)}
        report.student_output = ctx.subject.stderr_tail(8000)
    finally:
        ctx.subject.close()
    return report


def _blocked(c, results, ctx) -> Outcome | None:
    for need in c.needs:
        if results.get(need) is None or results[need].status != "pass":
            return Outcome("skip", f"skipped: needs {need}, which did not pass")
    if c.weights:
        try:
            mapping = ctx.mapping
        except TargetFailure as e:
            return Outcome("error", f"your code raised while mha-check read its weights: {e.message}")
        if mapping.index is None:
            return Outcome("skip", "skipped: could not tell which of your parameters are Q, K, V and the output "
                                   f"projection ({mapping.problem}). Name them q/k/v/out (or query/key/value/"
                                   "out_proj, W_query..., c_attn/c_proj), or say it with --map q=NAME --map k=NAME "
                                   "--map v=NAME --map o=NAME (a module or parameter name; NAME.T for a matrix used "
                                   "as x @ W; --map qkv=NAME for a fused projection)")
    return None


def _run_one(c, ctx, debug: bool):
    return _guarded(c.run, ctx, debug=debug)


def _guarded(fn, *args, debug: bool = False):
    """Run a check (or its preconditions): the student's exceptions become `error`, and so does a bug of ours,
    without hiding the other checks."""
    try:
        return fn(*args)
    except WorkerDied:
        raise
    except TargetFailure as e:
        return Outcome("error", f"your code raised {e.message}")
    except Exception as e:  # noqa: BLE001 - a bug of ours must not hide the other checks
        tb = traceback.format_exc() if debug else ""
        return Outcome("error", f"internal error in mha-check ({type(e).__name__}: {e}); please report it. {tb}")
