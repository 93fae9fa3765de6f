"""The engine: run the selected checks against one target and return the `Report`, nothing else.

Three outcomes, never confused: a check passes, fails on evidence of a bug in the student's code, or cannot tell
(mha-check could not drive or map the module, its own code failed, or one of its limits was reached).  A check
whose prerequisite did not pass is skipped with the reason, never run into a cascade: one exception in the
student's forward is reported once.  A child that dies is replaced by a fresh one so that the remaining checks run.
"""
from __future__ import annotations

import difflib
import traceback

import checks
from checks import Check, Outcome, cannot_tell, failed, passed, skipped
from harness.engine import diagnosis, leakage
from harness.engine.context import Context
from harness.engine.mapping import map_help
from harness.engine.options import Options, command_words
from harness.engine.records import Adapter, Form, Isolation, ProcessEvent
from harness.engine.report import CheckResult, Report
from harness.sandbox.pool import ZygoteError, single_run
from harness.sandbox.subject import Subject
from harness.wire.errors import (HISTORY_FIX, HISTORY_MARK, CannotDrive, ChildEnd, HarnessFailure, TargetFailure,
                                 WorkerDied, limit_help)
from harness.wire.status import Status

MAX_RESTARTS = 3
DISK_FULL_HELP = ("nothing in your code, unless it fills the disk itself: run it again once the disk has room (in a "
                  "batch, another submission may have filled it; the grader sees this row marked for review)")
LIMIT_HELP = {  # what would help, by the limit reached: the code may be right, only slow, large or loud
    ChildEnd.TIME: "make forward faster (no endless loop, no sleep, no work beyond the lesson's layer); where you "
                   "run mha-check yourself, --time-limit gives it longer",
    ChildEnd.MEMORY: "keep memory to what the lesson's layer needs; where you run mha-check yourself, --memory-mb "
                     "gives it more",
    ChildEnd.OUTPUT: "print less, and nothing in forward: what your code writes is kept up to a limit (16 MB)",
    ChildEnd.DISK: "write no files, or only small ones: the folder your code runs in holds the copy of your "
                   "submission and 64 MB more",
    ChildEnd.STARTUP: "nothing in your code: mha-check's own worker could not start (importing torch) on this "
                      "machine; run it again when the machine is less busy, or tell whoever runs mha-check",
    ChildEnd.INTERRUPTED: "nothing in your code: mha-check itself was stopped while your code ran; run it again",
}
IMPORT_HANG_HELP = ("look for a loop, a sleep, input() or a long computation at module level: code outside functions "
                    "and classes runs on import (keep training and demos under `if __name__ == \"__main__\":`); where "
                    "you run mha-check yourself, --time-limit gives it longer")



class UsageError(Exception):
    """The command line asked for something that does not exist (exit status 2)."""


def select(only=None, skip=None) -> list[Check]:
    found = checks.all_checks()
    known = {c.id for c in found}
    for name in list(only or []) + list(skip or []):
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            raise UsageError(f"unknown check id {name!r}" + (f"; did you mean {close[0]!r}?" if close else "")
                             + " (mha-check --list-checks shows them)")
    wanted = set(only) if only else set(known)
    wanted -= set(skip or [])
    for c in found:  # prerequisites run too
        if c.id in wanted:
            wanted |= {n.id for n in _closure(c)}
    return [c for c in found if c.id in wanted]


def _not_selected(selected) -> list[str]:
    ids = {c if isinstance(c, str) else c.id for c in selected}
    return [c.id for c in checks.all_checks() if c.id not in ids]


def _closure(c: Check) -> list[Check]:
    return [n for need in c.needs for n in [need, *_closure(need)]]


def run_checks(spec: str, options: Options | None = None, *, subject: Subject | None = None,
               make_subject=None, make_meta_subject=None) -> Report:
    """Run the checks on `spec`; `subject` may be a child already started (it imports torch while we import the
    checks), `make_subject()` starts a replacement after a crash (the batch pool forks one from its zygote), and
    `make_meta_subject()` a child whose meta device is warm, or None (see Context.meta_forward)."""
    options = options or Options()
    selected = select(options.only, options.skip)
    make_subject = make_subject or (lambda: single_run(spec, overrides=options.overrides, seed=options.seed,
                                                       weight_map=options.weight_map, limits=options.limits))
    subject = subject or make_subject()
    ctx = None
    try:  # from the moment the child exists: whatever happens (Ctrl-C included), it is closed
        ctx = Context(subject, options.seed, options.examples, meta_subject=make_meta_subject)
        results: dict[str, CheckResult] = {}
        deaths: list[WorkerDied] = []
        # the rubric's hidden checks last (none that a shown one needs: a check needing a hidden one is hidden too):
        # the child answers every shown check before any hidden one asks it anything, so no shown check's message can
        # tell what a hidden one found (red team 13: a probe's float32 forward said how many forwards it had had)
        for c in [c for c in selected if c.id not in options.last] + [c for c in selected if c.id in options.last]:
            if deaths and (deaths[-1].kind.ends_run or len(deaths) >= MAX_RESTARTS):
                outcome = skipped(f"not run: the process running your code ended ({deaths[-1].kind}) earlier")
            else:
                try:
                    outcome = _blocked(c, results, ctx) or _not_applicable(c, ctx, options.single_head) or \
                        _course_asks(c, _guarded(c, ctx, options.debug), options)
                except WorkerDied as died:
                    outcome = _after_death(died, c, results, ctx, deaths, make_subject, options.debug)
            results[c.id] = CheckResult.of(c, outcome)
        results = {c.id: results[c.id] for c in selected}  # the report in the checks' own order
        built = results.get("construct") is not None and results["construct"].status == Status.PASS
        report = Report(spec, list(results.values()), options.seed, _adapter(ctx, deaths, built),
                        rules_counted=options.rules, not_selected=_not_selected(selected),
                        seed_private=options.seed_private,
                        command_options=command_words(options.overrides, options.weight_map))
        report.isolation = Isolation.from_dict(ctx.subject.isolation)
        if not deaths or not deaths[-1].kind.ends_run:
            if options.diagnose:
                report.diagnosis = diagnosis.diagnose(report, ctx)
            if options.leakage_map:
                report.leakage = leakage.maps_or_error(ctx)
        report.student_output = ctx.subject.stderr_tail(8000)
    finally:
        (ctx.subject if ctx is not None else subject).close()
    return report


def not_run(spec: str, message: str, options: Options | None = None, fix: str = "", ours: bool = False) -> Report:
    """The report of a submission mha-check could not even start on (no file to check, a grading process that broke
    on it): every selected check is in it, `construct` failing with `message` (and `fix` when the generic one would
    mislead) and the others skipped as in any run, so that its total is the rubric's like every other report's and
    the student reads what is broken and what to do.  `ours`: the limit is mha-check's (it could not even hand the
    code to its child), so `construct` cannot tell instead of failing, and `fix` is what would help."""
    options = options or Options()
    results: dict[str, CheckResult] = {}
    for c in select(options.only, options.skip):
        if c.id == "construct" and ours:
            result = CheckResult.of(c, cannot_tell(message, help=fix))
        elif c.id == "construct":
            result = CheckResult.of(c, failed(message, finding="load:not-run"))
            result.fix = fix or result.fix
        else:
            need = next((n for n in c.needs if results[n.id].status != Status.PASS), None)
            why = need and ("could not be decided" if results[need.id].status == Status.CANNOT_TELL else "did not pass")
            result = CheckResult.of(c, skipped(f"skipped: needs {need.id}, which {why}" if need else
                                               "skipped: there is no module to check"))
        results[c.id] = result
    return Report(spec, list(results.values()), options.seed, rules_counted=options.rules,
                  not_selected=_not_selected(list(results)), seed_private=options.seed_private)


def _bound_notes(ctx: Context) -> tuple[str, ...]:
    """What mha-check gave the constructor that checks another layer than the one its defaults build: a rotary
    embedding on every feature of each head (harness.wire.config.ROTARY_FRACTION)."""
    try:
        derived = ctx.signature.derived
    except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied):
        return ()
    return tuple(f"{p} was given 1.0 (every feature of each head turned by the rotary embedding): mha-check has no "
                 f"reference for a rotation of only part of each head, so the rest of the layer is checked and the "
                 f"share {p} sets is not" for p, key in derived.items() if key == "rope_fraction")


def _adapter(ctx: Context, deaths: list[WorkerDied], built: bool) -> Adapter:
    """How mha-check drove the module: construction, weight mapping, call, protections, process events."""
    construction = None
    if built:  # a constructor that raised was called, but nothing was built: say nothing of "built as"
        try:
            construction = ctx.construction(ctx.base)
        except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied):
            pass
    left_out = ctx.compiled_left_out  # never run: a person should look at what was handed in instead of source
    said = (left_out,) if left_out else ()
    return Adapter(protections=tuple(ctx.subject.protections()),
                   # which class (or factory) was checked: the target may name only a file
                   class_name=ctx.subject.loaded.name if ctx.subject.loaded is not None else None,
                   construction=construction,
                   notes=tuple(ctx.subject.notes) + said + (_bound_notes(ctx) if built else ()),  # what loading
                   # left out, also when loading or building then failed; what we gave that changes the layer
                   # which member of the lesson's family it was checked as, and why
                   form=_form(ctx) if built else None,
                   mapping=ctx._mapping.to_dict() if ctx._mapping is not None else None,
                   process=tuple(ProcessEvent.of(d) for d in deaths), review=said)


def _form(ctx: Context) -> Form | None:
    """The form the module was checked as, or None where it cannot be read any more: a child that died after
    `construct` passed is replaced by a fresh one, which has loaded nothing and may die loading (a red team's child
    stopped itself in every process: reading its form here raised out of run_checks)."""
    try:
        form = ctx.form
    except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied):
        return None
    return Form(form.name, form.evidence) if form.evidence else None


def _blocked(c: Check, results: dict, ctx: Context) -> Outcome | None:
    for need in c.needs:
        got = results.get(need.id)
        if got is None or (got.status != Status.PASS and not got.details.get("usable")  # usable: failed, measurable
                           and c.id not in (got.details.get("usable_for") or ())):  # or measurable by this check
            return skipped("skipped: needs " + _chain(need, results))
    if c.weights:
        proof = ctx.mapping
        if not proof.certain:
            return cannot_tell("mha-check could not tell with certainty which of your parameters are W_q, W_k, "
                               f"W_v and W_o ({proof.problem}), so it does not judge this on a guess",
                               help=map_help(ctx, proof.problem), tried=proof.tried)
    return None


def _not_applicable(c: Check, ctx: Context, single_head: bool = True) -> Outcome | None:
    """A check whose claim the target's form does not define (harness.wire.form: no heads to split in a single-head
    layer) passes with the reason in its text: neither a failure nor a "cannot tell" for what the layer need not
    do; unless the course asks for heads (`single_head` False, the rubric's single_head = false): then a layer of one
    head fails it, for want of what the assignment asks.  Asked only once the prerequisites passed, so the
    constructor was read."""
    try:
        form = ctx.form
    except (TargetFailure, CannotDrive, HarnessFailure):
        return None
    why = form.not_applicable.get(c.id)
    if why and form.single and not single_head:
        return failed(f"your layer has a single head (its constructor takes no number of heads), and this "
                      f"assignment asks for multi-head attention (the course's rubric says single_head = false): "
                      f"there are no heads for {c.id} to check",
                      fix="Write the lesson's multi-head layer: take the number of heads in the constructor, split "
                          "the projections into (B, H, n, dh) heads, merge them back and apply the output "
                          "projection (lesson LM3-T5, CausalMHA).", form=form.name, finding="form:single-head")
    return passed(why, form=form.name, not_applicable=True) if why else None


GROUPED_EXEMPT = ("out-proj-bias", "head-invariance")  # the checks whose claim a grouped-query (or multi-query)
# layer is exempt from, as the Llama family: no biases, a count that changes with a shared key/value head


def _course_asks(c: Check, outcome: Outcome, options: Options) -> Outcome:
    """A check's "does not apply" as a failure where the course's rubric asks for what the layer does not have (red
    team 17, each with every point): the KV cache (kv_cache = true; a cache whose mask rows are not offset, switched
    on by a keyword of another name and emptied by a method of another, showed none) and the lesson's multi-head
    layer rather than the grouped-query family (grouped = false; the lesson's layer without its output bias, given
    an optional kv_heads that defaults to one per head as Llama's does, was exempt from out-proj-bias)."""
    if outcome.status != Status.PASS or not outcome.details.get("not_applicable"):
        return outcome
    why = outcome.message.removeprefix("does not apply: ")
    if c.id == "kv-cache" and options.kv_cache:
        return failed(f"{why}, and this assignment asks for the layer with a KV cache (the course's rubric says "
                      f"kv_cache = true): there is no cache for kv-cache to check",
                      fix="Give forward a `use_cache` argument (forward(x, use_cache=True) appends the new keys and "
                          "values to the cache) and the module a reset_cache() that empties it, as in the lesson's "
                          "layer with a KV cache; or check a factory whose module does.", finding="form:no-kv-cache")
    if c.id in GROUPED_EXEMPT and not options.grouped:
        return failed(f"{why}; but this assignment asks for the lesson's multi-head layer, not the grouped-query "
                      f"family (the course's rubric says grouped = false), so the lesson's rule holds",
                      fix=c.fix, finding="form:grouped")
    return outcome


def _chain(need: Check, results: dict) -> str:
    """"output-shape, which needs contiguity, which did not pass": down to the check that really stopped it, so that a
    skip never points only at another skip."""
    got = results.get(need.id)
    if got is not None and got.status == Status.SKIP:
        below = next((n for n in need.needs if results.get(n.id) is not None and results[n.id].status != Status.PASS),
                     None)
        if below is not None:
            return f"{need.id}, which needs {_chain(below, results)}"
    why = "could not be decided" if got is not None and got.status == Status.CANNOT_TELL else "did not pass"
    return f"{need.id}, which {why}"


def _guarded(c: Check, ctx: Context, debug: bool) -> Outcome:
    """Run a check: the student's exceptions are failures, our own problems are cannot-tell."""
    try:
        return c.run(ctx)
    except (WorkerDied, ZygoteError):  # a zygote killed under the child took the child with it: no check can be
        raise  # run, nor failed, on it; the grader grades the submission again from a fresh zygote
    except TargetFailure as e:
        return failed(f"your code raised {e.message}", finding=f"raised at {e.stage}",
                      fix=HISTORY_FIX if e.message.startswith(HISTORY_MARK) else "")
    except CannotDrive as e:
        if limit_help(e) is not None:
            return cannot_tell(e.message, help=limit_help(e))
        return cannot_tell(f"mha-check could not drive your module: {e.message}",
                           help="--arg NAME=VALUE for a constructor argument, or a factory function as the target")
    except HarnessFailure as e:
        return cannot_tell(f"mha-check's own code failed in the process running yours ({e.message}); this is not "
                           "your fault, please report it", help="run with --debug and report the output")
    except Exception as e:  # noqa: BLE001 - a bug of ours must not hide the other checks, nor blame the student
        tb = traceback.format_exc() if debug else ""
        return cannot_tell(f"internal error in mha-check ({type(e).__name__}: {e}); this is not your fault, please "
                           f"report it. {tb}".strip(), help="run with --debug and report the output")


def _after_death(died: WorkerDied, c: Check, results: dict, ctx: Context, deaths: list[WorkerDied], make_subject,
                 debug: bool) -> Outcome:
    """The outcome of check `c`, whose child died (`died`), and a fresh child for the checks after it.  A child
    killed by a sent signal (see harness.wire.errors) runs the check once more in the fresh child: a kill from outside
    is not the code's doing, and one the code sends itself happens again."""
    deaths.append(died)
    if died.kind.ends_run or len(deaths) >= MAX_RESTARTS:
        return _death(died)
    _restart(ctx, make_subject)
    if died.kind is not ChildEnd.KILLED:
        return _death(died)
    try:
        outcome = _blocked(c, results, ctx) or _guarded(c, ctx, debug)
    except WorkerDied as again:
        if again.kind is ChildEnd.KILLED:
            again = WorkerDied(ChildEnd.KILLED, f"{again.message}, and again when the check was run once more in a "
                                                "fresh process: it happens every time, so your code causes it (it "
                                                "signals its own process, or uses more memory than the machine allows "
                                                "and the kernel's out-of-memory killer stops it)")
        deaths.append(again)
        if not again.kind.ends_run and len(deaths) < MAX_RESTARTS:
            _restart(ctx, make_subject)
        return _death(again)
    deaths[-1] = WorkerDied(ChildEnd.KILLED_OUTSIDE, f"{died.message}; not held against your code: run once more "
                                                     "in a fresh process, the check gave the result shown")
    return outcome


def _restart(ctx: Context, make_subject) -> None:
    used = ctx.subject.used  # the time budget covers the restarts too (the child's time, not the parent's)
    ctx.subject.close()
    ctx.subject = make_subject()
    ctx.subject.used = used


def _death(died: WorkerDied) -> Outcome:
    if died.ours:  # one of our limits: the code may be right, only slow or large
        if died.kind is ChildEnd.TIME and died.op == "load":  # a hang at import, never "make forward faster"
            return cannot_tell(died.message, help=IMPORT_HANG_HELP, process=died.kind, stage="import")
        if died.kind is ChildEnd.DISK and died.message.startswith("disk full"):  # the machine's, not the folder's
            return cannot_tell(died.message, help=DISK_FULL_HELP, process=died.kind)
        return cannot_tell(died.message, help=LIMIT_HELP.get(died.kind, LIMIT_HELP[ChildEnd.TIME]), process=died.kind)
    return failed(died.message, process=died.kind)
