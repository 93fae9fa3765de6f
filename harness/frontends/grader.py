"""One grader process of `mha-check grade`: its warm zygote, and the grading of one submission into plain data.

A grader is forked by the pool (harness.frontends.grade_pool) and keeps one `Grader`: the zygote it forks each
submission's child from, the zygote of the meta template (made when a submission first needs one), and whether a
submission is being graded, which decides what SIGTERM does.  The pool's initializer can leave that object only in
this module's one global, `_GRADER`, which each task the pool sends reads.
"""
from __future__ import annotations

import os
import signal
import time
from dataclasses import replace

import mutants
from checks import Status, needs_by_id
from harness.engine import diagnosis, instructor
from harness.engine.records import ProcessEvent
from harness.engine.report import Report
from harness.engine.runner import Options, not_run, run_checks
from harness.frontends.pick import Pick
from harness.render import formats
from harness.render import rubric as rubrics
from harness.sandbox import isolation, scratch
from harness.sandbox import limits as sandbox
from harness.sandbox import syscalls as linux
from harness.sandbox.pool import Fork, Zygote, ZygoteError
from harness.sandbox.subject import Subject
from harness.wire.control import META_ZYGOTE
from harness.wire.errors import ChildEnd
from harness.wire.target import Target


class _Stopped(BaseException):
    """SIGTERM in a grader: the main process was interrupted (Ctrl-C) or has died."""


class Grader:
    """What a grader process keeps between submissions.  `template`: the batch's template socket (None: none could
    be started, each zygote then starts on its own); `zygote`: the one each submission's child is forked from,
    replaced when it dies."""

    def __init__(self, zygote: Zygote | None, template) -> None:
        self.zygote = zygote
        self.template = template
        self.meta_zygote: Zygote | None = None  # made when a submission first needs one
        self.no_meta = False  # the meta template could not give one: the meta runs stay in each child
        self.busy = False  # a submission is being graded: SIGTERM must unwind it, not just exit
        self.stopping = False  # SIGTERM came: the submission is being unwound

    def on_sigterm(self, signum, frame) -> None:
        if self.stopping:
            return  # the clean-up the first SIGTERM started must not be interrupted
        if not self.busy:
            os._exit(0)  # between submissions: nothing to clean up
        self.stopping = True
        raise _Stopped()

    def unless_stopping(self) -> None:
        """A zygote lost while SIGTERM unwinds the submission is the batch's end, not a submission to grade again with
        a new zygote: `grade` was killed, and the kernel killed its template and, with it, the zygotes."""
        if self.stopping:
            raise _Stopped()

    def grade(self, folder: str, pick: Pick, options: dict) -> dict:
        """Returns only plain data.  Stopped (SIGTERM), it ends once run_checks has closed the submission's child
        and scratch: the batch is over."""
        try:
            self.busy = True
            return self.grade_submission(folder, pick, options)
        except _Stopped:
            scratch.remove_live()  # the stop may have come before the submission's child was in run_checks' hands
            os._exit(0)
        finally:
            self.busy = False

    def grade_submission(self, folder: str, pick: Pick, options: dict) -> dict:
        """`options`: the batch's, made once by grade: "run" is every submission's `Options` (from_args)."""
        name = os.path.basename(folder)
        run: Options = options["run"]
        limits = run.limits
        started = time.monotonic()
        spec = pick.spec
        if spec is None:
            compiled = scratch.compiled_left_out(pick.left_out)  # a submission of bytecode alone, say: said plainly
            said = (scratch.compiled_note(compiled),) if compiled else ()
            report = not_run(f"{name}/?", "; ".join((pick.problem, *said)), run, fix=options.get("missing_fix", ""))
            report.adapter = replace(report.adapter, notes=said, review=((pick.problem,) if pick.review else ()) + said)
        else:
            for _attempt in (1, 2):  # a dead zygote is replaced, a child killed before its confinement started
                # again: graded once more; twice, the row says mha-check could not grade it (never the student's)
                try:
                    # the zygote of the moment, replaced or not
                    make = lambda: self.forked(self.zygote, spec, folder, options, pick.left_out)
                    report = run_checks(spec, run, subject=make(), make_subject=make,
                                        make_meta_subject=lambda: self.meta_subject(spec, folder, options, limits,
                                                                                    pick.left_out))
                    break
                except ZygoteError as e:
                    self.unless_stopping()
                    self.fresh_zygote(limits)
                    report = not_run(spec, f"grading this submission broke mha-check's grading process twice ({e})",
                                     run, fix="grade this submission again", ours=True)
                    report.adapter = replace(report.adapter, process=(ProcessEvent.grader_error(str(e)),))
                except isolation.IsolationFailed as e:  # a child killed from outside before it was confined
                    self.unless_stopping()
                    report = not_run(spec, f"mha-check could not start a confined process for this submission "
                                           f"twice ({e})", run,
                                     fix="grade this submission again", ours=True)
                    report.adapter = replace(report.adapter, process=(ProcessEvent.grader_error(str(e)),))
        if spec is not None and _class_not_found(report):
            report.adapter = replace(report.adapter, review=(*report.adapter.review, CLASS_NOT_FOUND))
        suite = options.get("tests")
        if suite:
            self.instructor_tests(report, suite, spec, folder, options, limits, pick)
        if pick.note:
            report.adapter = replace(report.adapter, notes=(pick.note, *report.adapter.notes))
        if spec is not None and pick.review:  # a file chosen for --target's missing one: checked, and for a person
            report.adapter = replace(report.adapter, review=(*report.adapter.review, pick.note))
        return graded(name, spec, report, options, time.monotonic() - started)

    def instructor_tests(self, report: Report, suite, spec: str | None, folder: str, options: dict,
                         limits: sandbox.Limits, pick: Pick) -> None:
        """The instructor's tests (--tests) for this submission, each child forked from this grader's zygote and
        confined as the checks' child was (harness.engine.instructor); in the report whatever happens.  Run once
        more, as the checks are, when the zygote dies under a test's child (the child dies with it: a fresh zygote
        is taken) or a child is killed before it is confined; twice, each test says mha-check could not run it."""
        if spec is None:
            instructor.not_run(report, suite, pick.problem, ours=False)
            return
        if any(p.kind is ChildEnd.GRADER_ERROR for p in report.adapter.process):
            instructor.not_run(report, suite, "mha-check's grading process broke on this submission", ours=True)
            return
        make = lambda: self.forked(self.zygote, spec, folder, options, pick.left_out)  # the zygote of the moment
        for _attempt in (1, 2):
            try:
                instructor.add_to(report, suite, make, instructor.test_seconds(limits))
                return
            except ZygoteError as e:
                self.unless_stopping()
                self.fresh_zygote(limits)
                why = f"mha-check's grading process broke ({e})"
            except isolation.IsolationFailed as e:
                self.unless_stopping()
                why = f"mha-check could not start a confined process ({e})"
            report.checks = [c for c in report.checks if c.kind != instructor.KIND]
        instructor.not_run(report, suite, why, ours=True)

    def fresh_zygote(self, limits: sandbox.Limits) -> None:
        """A zygote that broke replaced (from the template, or started on its own once the template is gone), and
        the meta zygote dropped (made again when a submission needs one)."""
        self.zygote.close()
        self.zygote = Zygote(limits, self.template)
        self.drop_meta_zygote()

    def forked(self, zygote: Zygote, spec: str, folder: str, options: dict, left_out: tuple[str, ...] = ()
               ) -> Subject:
        """A child for this submission forked from `zygote`, to grade from: fit to grade or refused
        (`allow_unconfined` aside), with the batch's seed, limits, --arg and --map; `left_out`: what the batch's
        copy `folder` left out (Pick.left_out), in its report."""
        run: Options = options["run"]
        return Subject(spec, start=Fork(zygote), submission=folder, seed=run.seed, limits=run.limits,
                       allow_unconfined=options["allow_unconfined"], grading=True, left_out=left_out,
                       **_binding(run))

    def meta_subject(self, spec: str, folder: str, options: dict, limits: sandbox.Limits,
                     left_out: tuple[str, ...] = ()) -> Subject | None:
        """A second child for this submission, forked from the meta template, for the one run on the meta device
        (harness.engine.context.Context.meta_forward); None where there is none to be had (no template, or it
        could not give one): the run then stays in the submission's own child, as in a single run."""
        if self.no_meta or self.template is None:
            return None
        try:
            if self.meta_zygote is None:
                self.meta_zygote = Zygote(limits, self.template, fallback=False, kind=META_ZYGOTE)
            return self.forked(self.meta_zygote, spec, folder, options, left_out)
        except (ZygoteError, isolation.IsolationFailed):
            self.drop_meta_zygote()
            self.no_meta = True
            return None

    def drop_meta_zygote(self) -> None:
        if self.meta_zygote is not None:
            self.meta_zygote.close()
            self.meta_zygote = None


_GRADER: Grader | None = None  # this grader process's Grader, left by start() (the pool's initializer)


def start(limits: sandbox.Limits, template, scratch_parent: str, main: int | None = None) -> None:
    """In each grader process: its zygote, forked from the batch's template (or started on its own without one).
    Ctrl-C is the main process's to handle: it stops the graders with SIGTERM, as the kernel does when the main
    process dies, and a grader then unwinds the submission in progress (its child killed, its scratch removed).
    Its scratch folders are made in the batch's `scratch_parent`, which the main process removes at the end."""
    global _GRADER

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _GRADER = Grader(None, template)
    signal.signal(signal.SIGTERM, _GRADER.on_sigterm)
    linux.die_with_parent(signal.SIGTERM, main)  # `main`: grade's pid, handed over before the fork: a grade killed
    # before this line left a grader that waited on its pool's queue for good
    scratch.place_in(scratch_parent)
    _GRADER.zygote = Zygote(limits, template)


def grade_one(folder: str, pick: Pick, options: dict) -> dict:
    """The task the pool sends: one submission, by this process's grader.  A failure of ours comes back as a plain
    RuntimeError that the pool can carry: mha-check's exceptions take more than one argument and cannot be
    unpickled, and one the main process cannot unpickle broke the whole pool (every classmate in flight graded again,
    and after four breaks given a row that says mha-check could not grade them), not one row."""
    try:
        return _GRADER.grade(folder, pick, options)
    except Exception as e:  # noqa: BLE001 - one row, said in the words of the exception
        raise RuntimeError(f"{type(e).__name__}: {e}") from None


CLASS_NOT_FOUND = ("the file has no class of the name the batch asks for (construct says which classes it holds): "
                   "a student who named the layer otherwise, for a person to look at before the 0 stands")


def _class_not_found(report: Report) -> bool:
    """The submission's file was found and imported, but what the batch's --target names is not in it (a class
    named otherwise: a correct `MHA` where `MultiHeadAttention` was asked for got 0 with nothing to say a person
    should look, in a user trial)."""
    built = next((c for c in report.checks if c.id == "construct"), None)
    return built is not None and built.status == Status.FAIL and built.details.get("finding") == "load:lookup"


def graded(name: str, spec: str | None, report: Report, options: dict, seconds: float) -> dict:
    """A graded submission as plain data: its report in the batch's format and its summary row.  score and
    max_score follow the one scoring rule (harness.render.rubric.score); needs_review is Report.needs_review."""
    rubric = rubrics.load_rubric(options.get("rubric"), {c.id for c in report.checks},
                                 {c.id for c in report.checks if c.kind == instructor.KIND}, needs_by_id()) \
        if options.get("rubric") else rubrics.Rubric()
    got, total = rubrics.score(report, rubric)
    return {"name": name, "text": formats.render(report, options["format"], rubric),
            **({"feedback": formats.feedback(report, rubric)} if options.get("feedback") else {}),
            "row": {"submission": name, "target": _checked(spec, report), "passed": report.passed,
                    "needs_review": report.needs_review, "score": got, "max_score": total, **report.summary(),
                    "diagnosis": (report.diagnosis.mutant or "") if report.diagnosis else "",
                    "second_mistake": _second(report),  # two mistakes named at once: the other one, else ""
                    "rule_mistakes": " ".join(_rule_mistakes(report)),  # a lesson's rule broken beside them
                    "process": "; ".join(p.kind for p in report.adapter.process),
                    "isolation": ("; ".join(report.isolation.short_of_policy) or "full") if report.isolation else "",
                    # what of the confinement policy was missing
                    "seconds": round(seconds, 2),
                    "review_reason": "; ".join(report.adapter.review),  # why a person should look beyond the
                    # checks' own cannot-tell (a class named otherwise, a file chosen among several), for the class view
                    "not_applicable_checks": " ".join(c.id for c in report.checks if c.status == Status.PASS and
                                                      c.not_applicable),  # passes with nothing to judge: the class
                    # view counts them apart (each check's own column keeps its status, "pass")
                    **{c.id: c.status for c in report.checks}}}


def _second(report: Report) -> str:
    """The second of two mistakes named together (`Diagnosis.also`), so that the summary says both as every report
    does; "" for one mistake or none."""
    also = report.diagnosis.also if report.diagnosis else None
    return (also.mutant or "") if also else ""


def _rule_mistakes(report: Report) -> list[str]:
    """The catalogued mistakes of the lesson's rules that a failing rule check shows beside the diagnosis (a layer
    with a mistake of the math and no divisibility guard): each where that check's findings hold the signature of
    exactly one mistake that fails that check alone, so that the class view counts every student who broke
    the rule, not only those for whom it was the root cause (a student's trial: 3 counted where 10 failed)."""
    named = {d.mutant for d in (report.diagnosis, report.diagnosis.also if report.diagnosis else None) if d}
    shown = set(diagnosis.findings(report))  # "check-id:finding", as the diagnosis matches signatures
    catalogue, found = mutants.catalogue_or_empty(), []
    for c in report.checks:
        if c.kind != "rule" or c.status != Status.FAIL:
            continue
        matching = [mid for mid, entry in catalogue.items() if entry.get("failing") == [c.id]
                    and entry.get("signature") and set(entry["signature"]) <= shown
                    and all(s.startswith(f"{c.id}:") for s in entry["signature"])]
        if len(matching) == 1 and matching[0] not in named:
            found.append(matching[0])
    return found


def _checked(spec: str | None, report: Report) -> str:
    """The summary's target: the file, and the class that was checked in it (a spec without a class is completed
    with the class mha-check found there, so that a wrong pick shows in the summary)."""
    found = report.adapter.class_name
    if not spec or not found or Target.parse(spec).name:
        return spec or ""
    return str(Target(Target.parse(spec).where, found))


def _binding(run: Options) -> dict:
    """grade's --arg and --map, for the Subject as for the run (each student's class is built and read as the single
    run of the same options would)."""
    return {"overrides": run.overrides, "weight_map": run.weight_map}
