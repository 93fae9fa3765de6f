"""`mha-check grade SUBMISSIONS_DIR`: grade a whole course, one folder per student or flat files named by student
(it says which layout it found, and how many submissions; harness.frontends.submissions reads the layouts).

Each grader process keeps one warm zygote (torch imported once) and forks a fresh sandboxed child per submission;
`--jobs` graders run side by side.  One report per submission and a summary table (CSV) are written to `--out`,
and the class view of that summary (harness.frontends.class_view: class-report.html, class-mistakes.csv).
`--shard I/N` grades the submissions whose name hashes to shard I, so that array jobs, CI matrices or a fleet of
machines can share a course; `mha-check grade --merge A.csv B.csv ...` joins their summaries.  Nothing a submission
does (hang, crash, exit, print, patch) stops the batch: its row says what happened.

The command is split by job: harness.frontends.submissions finds the submissions, .pick chooses the file to check in
each, .grade_pool runs the graders (.grader, one submission each) and .progress draws its line, .stamps seals each
report and tells --resume which to trust, .stopping bounds the way out after Ctrl-C or SIGTERM, .shards splits and
merges; this module parses the command line, decides what may be replaced in --out, and writes the closing lines.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

from checks import all_checks, needs_by_id
from harness.engine import instructor
from harness.frontends import class_view
from harness.frontends import options as option_rules
from harness.frontends import seeds, stamps, stopping, submissions
from harness.frontends.batch_files import WRITE_FAILED, BatchFiles, colliding, csv_uncell, write_summary  # noqa: F401 - write_summary: the
# summary's writer, named here as before
from harness.frontends.grade_pool import grade_all
from harness.frontends.pick import defines_module, missing_fix
from harness.frontends.shards import MergeError, in_shard, merge, merge_error, merged_text, parse_shard, read_shards
from harness.frontends.writing import reason, write_atomic
from harness.render import rubric as rubrics
from harness.render.view import clean
from harness.sandbox import isolation, reaper, scratch, stale
from harness.sandbox.template import Template
from harness.wire.errors import ChildEnd

LIFE_CYCLE = ("Nothing in --out is replaced without saying so: grading into a folder that holds an earlier batch's "
              "summary or reports is refused (status 2) unless --resume, --only or --overwrite says what to do with "
              "them.  Ctrl-C or SIGTERM ends the batch with status 130 within 60 s whatever it interrupts, the "
              "reports graded so far kept: go on with --resume.  Without --seed, a fresh folder's seed is drawn at "
              "random and recorded in OUT/mha-check-seed (staff only: no report shows it); a later batch into the "
              "same folder without --seed uses it again, so that --resume and --only stay incremental, and "
              "--overwrite draws a new one.")
EXTENSIONS = {"json": "json", "gradescope": "results.json", "junit": "xml", "text": "txt"}
MAX_JOBS = 256
DEFAULT_OUT = "mha-check-results"


def main(argv: list[str], template: Template | None = None) -> int:
    """`template`: the batch's warm template when the caller started it already (harness.frontends.cli starts it
    before importing this module, so that torch imports while the engine does); closed here in every case."""
    stop = stopping.StopBound().install()  # SIGINT, SIGTERM: out within stopping.STOP_BOUND seconds, whatever
    try:
        status = _main(argv, template)
    except KeyboardInterrupt:  # landed outside the batch's own handling (staging, the closing lines)
        print("\nmha-check grade: interrupted", file=sys.stderr)
        status = 130
    finally:
        if template is not None:
            template.close()
        stop.restore()
    if stop.signalled is not None:
        if status == 0:  # the interrupt was absorbed on the way (a library's own handler) and the batch ran to its
            # end: still an interrupted command for whoever sent the signal (a scheduler reads the status)
            print("\nmha-check grade: interrupted; the batch had ended by then: every report and the summary are "
                  "written", file=sys.stderr)
            status = 130
        reaper.settle()  # (cli.main's own call comes too late when the next line ends the process)
        stop.exit_now_if_stuck(status)  # a pool's thread still running would hold the interpreter's exit
    return status


def _main(argv: list[str], early: Template | None) -> int:
    p = _parser()
    args = p.parse_args(argv[1:])
    if args.merge:
        return _merge(args) if args.out else merge(args.merge, sys.stdout)
    args.out = args.out or DEFAULT_OUT
    if not args.submissions or not os.path.isdir(args.submissions):
        zipped = bool(args.submissions) and args.submissions.endswith(".zip") and os.path.isfile(args.submissions)
        p.error(f"{args.submissions!r} is not a folder of submissions" + ("; unzip it first" if zipped else ""))
    args.run = option_rules.from_args(args, p, grading=seeds.FOLDER)  # as a single run takes them: one class, many
    # students, the same constructor and parameter names; without --seed, one drawn (or the folder's: _batch_seed)
    if args.resume and args.overwrite:
        p.error("--resume keeps the reports that are still valid, --overwrite replaces them all: choose one")
    if not 1 <= args.jobs <= MAX_JOBS:
        p.error(f"--jobs must be between 1 and {MAX_JOBS}, not {args.jobs}")
    args.out = args.out.rstrip("/") or "/"  # `--out results/`: said as results/, not results//
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        p.error(f"--out {args.out}: that is a file; give a folder for the reports")
    if out.resolve() == Path(args.submissions).resolve() or Path(args.submissions).resolve() in out.resolve().parents:
        p.error(f"--out {args.out}: inside the submissions folder, it would be graded as a submission")
    try:
        pattern = submissions.compile_pattern(args.pattern) if args.pattern else None
        args.suite = instructor.find(args.tests) if args.tests else None
        rubric = rubrics.load_rubric(args.rubric, {c.id for c in all_checks()},
                                     args.suite.ids if args.suite else (), needs_by_id()) if args.rubric else None
    except (submissions.PatternError, rubrics.RubricError, instructor.TestsError) as e:
        p.error(str(e))
    if rubric is not None:  # its hidden checks after every shown one (harness.engine.options.Options.last)
        args.run = replace(args.run, last=rubric.hidden([c.id for c in all_checks()]), single_head=rubric.single_head,
                           kv_cache=rubric.kv_cache, grouped=rubric.grouped)  # the course's family, as single runs
    # SIGTERM (a scheduler's stop, Slurm's time limit) is Ctrl-C here: main installed stopping.StopBound
    # torch imports in the template while the walls are probed, the submissions found and staged, the graders forked
    swept = scratch.sweep_stale()  # what graders killed outright (SIGKILL) left in the temp dir: never a live one's
    if swept:
        print(swept, file=sys.stderr)
    template = early or _start_template()
    try:
        _refuse_without_walls(args, p)
        return _grade_batch(args, p, out, pattern, rubric, template)
    except KeyboardInterrupt:
        print("\nmha-check grade: interrupted " + (
            f"while finishing the batch: the reports written are in {args.out}/, and the summary as it was last "
            "rewritten (after each report); grade again with --resume" if getattr(args, "began", False) else
            "before grading began; nothing was written"), file=sys.stderr)
        return 130
    finally:
        if template is not None and template is not early:  # the early one is main's to close
            template.close()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mha-check grade", description=__doc__.split("\n\n")[0], epilog=LIFE_CYCLE)
    p.add_argument("submissions", nargs="?", help="a folder with one sub-folder per student, or with the students' "
                                                  ".py or .ipynb files named by student (alice_attention.py)")
    p.add_argument("--target", help="FILE.py:ClassName or LAB.ipynb:ClassName inside each submission (default: "
                                    "the rubric's target, or the single file that defines an nn.Module class); "
                                    "with files named by student, the class in each student's file")
    p.add_argument("--pattern", help="files named by student: a regular expression, matched at the start of each "
                                     "file's name, whose group (?P<student>...) is the student's id, in place of the "
                                     "platforms' naming (Canvas, Moodle, Blackboard, or STUDENT_FILE.py for every "
                                     f"student), e.g. {submissions.DEFAULT_PATTERN!r}: the name up to its first '_'")
    p.add_argument("--allow-missing", action="store_true",
                   help="end with status 0 even when a student's file or folder got no row (it is listed in the "
                        "summary with the reason either way; without this option the status is 3)")
    p.add_argument("--only", nargs="+", metavar="NAME",
                   help="grade again only these students (as the summary's submission column names them) and put "
                        "their rows into the summary already in --out, whose other rows are kept")
    p.add_argument("--resume", action="store_true",
                   help="grade only what is new or changed since the reports already in --out: a submission whose "
                        "report mha-check wrote for the same files (helpers included), rubric, options and "
                        "mha-check version, sealed with this account's key, keeps it and its row; every other one "
                        "is graded again (an older mha-check's report too); the summary lists them all")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the summary and reports an earlier batch left in --out (without this, --resume "
                        "or --only, grade refuses to write over them)")
    p.add_argument("--rubric", help="TOML file: points and visibility per check, and the target")
    option_rules.add_shared(p, ("tests",))
    p.add_argument("--out", help="folder for the reports, summary.csv and the class view, class-report.html "
                                 f"(default {DEFAULT_OUT}); with --merge, where the merged summary.csv and its class "
                                 "view are written (the folder that holds the shards' reports, for its links)")
    p.add_argument("--format", choices=tuple(EXTENSIONS), default="json", help="per-submission report format")
    p.add_argument("--feedback", action="store_true",
                   help="also write, in --out/feedback/, each student's text report as the student may see it: "
                        "without the rubric's hidden checks, the score only where the rubric shows it at once (the "
                        "reports beside the summary are the staff's view)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="graders side by side (default: cores)")
    p.add_argument("--shard", type=parse_shard, help="grade only shard I of N (by a hash of the submission's name)")
    option_rules.add_shared(p, ("seed", "examples", "arg", "map", "time-limit", "memory-mb", "output-limit"),
                           per="each submission")
    p.add_argument("--merge", nargs="+", metavar="CSV",
                   help="join shard summaries into one CSV: on stdout, or with --out as summary.csv and the class "
                        "view of the whole course in that folder")
    p.add_argument("--allow-unconfined", action="store_true",
                   help="grade even where submissions would run as root or as your own uid with your files in "
                        "view (every report then says so)")
    return p


def _refuse_without_walls(args, p: argparse.ArgumentParser) -> None:
    """Refuse to start where no child would be fit to grade (isolation.unfit_to_grade: root, or the grader's own uid
    with the host's files in view), unless told otherwise.  The probe starts a confined interpreter (0.1 s): it
    runs while the template imports torch."""
    if not args.allow_unconfined:
        reasons = isolation.refusal()
        if reasons:  # one line, without the usage: nothing is wrong with the command
            print(f"mha-check grade: error: {isolation.refusal_line(reasons)}", file=sys.stderr)
            sys.exit(2)


def _start_template() -> Template | None:
    try:
        return Template()
    except OSError:
        return None  # each grader then starts its own zygote


def _grade_batch(args, p: argparse.ArgumentParser, out: Path, pattern, rubric, template: Template | None) -> int:
    """Find, stage and grade the submissions; write the reports and the summary (the options are valid)."""
    target = args.target or (rubric.target if rubric else None)
    found = submissions.find(Path(args.submissions), pattern, target, defines_module)
    print(found.describe())
    if not found.submissions:
        print("mha-check grade: error: nothing to grade (one folder per student, or .py or .ipynb files named by "
              "student as the platforms or --pattern name them)", file=sys.stderr)
        return 2
    todo = [s for s in found.submissions if in_shard(s.name, args.shard)]
    if args.shard:
        print(f"shard {args.shard[0]}/{args.shard[1]}: {len(todo)} of them")
    if args.only:
        unknown = submissions.unknown_names(args.only, found)
        if unknown:
            print(f"mha-check grade: error: --only: {unknown}", file=sys.stderr)
            return 2
        args.only = submissions.only_names(args.only, found)  # as the export spells them (an accent's Unicode form)
        todo = [s for s in todo if s.name in args.only]
        print(f"--only: {len(todo)} of them graded again, into the summary in {args.out}/ (only their reports "
              "replaced: the other students' rows and reports are kept)")
    summary = out / (f"summary-{args.shard[0]}-of-{args.shard[1]}.csv" if args.shard else "summary.csv")
    files = BatchFiles(out, summary, EXTENSIONS[args.format])
    files.apart = colliding(s.name for s in found.submissions)  # every student found, graded this time or not
    earlier = _earlier_results(files, todo)
    if earlier and not (args.resume or args.only or args.overwrite):
        print(f"mha-check grade: error: {args.out}/ already holds {earlier} of an earlier batch; add --resume to "
              "grade only what changed since, --only NAME... to grade some students again, or --overwrite to "
              "replace them", file=sys.stderr)
        return 2
    if earlier and args.overwrite:
        print(f"--overwrite: {earlier} in {args.out}/ replaced as this batch goes")
    if not _make_out(args, p, out):
        return 2
    run = args.run
    flat = {s.name for s in todo if s.folder is None}  # staged from flat files: --target's class in their file
    options = {"run": run, "format": args.format, "rubric": args.rubric, "missing_fix": missing_fix(target),
               "feedback": args.feedback,
               "allow_unconfined": args.allow_unconfined, "tests": args.suite}
    rows, started, interrupted = [], time.monotonic(), False
    running = summary.with_name(f"only-{summary.name}") if args.only else summary  # the old one kept whole till then
    files.summary_path = running
    stamper = _stamper(args, target)
    # one folder for the batch (what a grade killed outright leaves): the staging copy of the submissions, closed to
    # every child, and the graders' scratch folders, which the slots' uids may pass through, never list
    batch = tempfile.mkdtemp(prefix=f"{stale.PREFIX}grade-")
    try:
        stale.hold(batch)  # a grade killed outright leaves it: the next start sweeps it (scratch.sweep_stale)
        os.chmod(batch, 0o711)
        staging, scratch_parent = os.path.join(batch, "staging"), os.path.join(batch, "scratch")
        os.mkdir(staging, 0o700)
        os.mkdir(scratch_parent, 0o711)
        staged = _stage(todo, Path(staging))
        if staged is None:
            return WRITE_FAILED
        digests = {name: stamps.staged_digest(s, "files" if name in flat else "folder") for name, s in staged.items()}
        files.kept = _resume(files, stamper, digests, args.out) if args.resume else []
        kept = {r["submission"] for r in files.kept}
        folders = {name: s.folder for name, s in staged.items() if name not in kept}
        left_out = {name: s.left_out for name, s in staged.items()}

        def seal(name: str, result: dict) -> str:  # a report mha-check could not grade is not resumed: no stamp
            unsure = ChildEnd.GRADER_ERROR in result["row"].get("process", "")
            return result["text"] if unsure else stamper.seal(name, digests.get(name), result["row"], result["text"])

        args.began = True
        if folders:
            rows, interrupted = grade_all(folders, target, flat, options, args, template, scratch_parent, files,
                                          seal, left_out)
    finally:
        scratch.remove_tree(batch)  # with the scratch a grader killed from outside could not remove
        stale.let_go(batch)
    missing = [n for n in found.not_graded if n.missing and in_shard(n.item, args.shard)]
    resumed = files.kept
    if interrupted:
        listed = rows  # after the rows --resume kept (files.kept)
    else:
        listed = submissions.summary_rows(found, resumed + rows, lambda n: in_shard(n.item, args.shard))
        files.kept = []
        if args.only:
            listed = submissions.kept_rows(summary, {s.name for s in todo}) + listed
        files.summary_path = summary
    unwritten = files.finish(listed)  # after the scratch is gone: it may be what filled the disk
    if unwritten:
        print(unwritten, file=sys.stderr)
    elif args.only and not interrupted:
        running.unlink(missing_ok=True)
    view_failed = False
    if files.summary_written and not (interrupted and args.only):  # the class view of the summary just written
        # (--only's: the whole class; interrupted, only those graded, as its summary), linking the reports on disk: a
        # report that could not be written cost the whole class its view (red team 4, a 255-byte name)
        banner = f"interrupted: only the {len(rows)} of {len(todo)} submissions graded before the interruption"
        view_failed = not _class_view(out, listed, args, banner if interrupted else "")
    if interrupted:
        print(f"\nmha-check grade: interrupted: {len(rows)} of {len(todo) - len(resumed)} submissions graded; their "
              f"reports are in {out}/ and {running} lists only them" + (
                  f" and the {len(resumed)} kept by --resume" if resumed else "") + (
                  f" ({summary} is as it was)" if args.only else "") + (
                  "; grade again with --resume to go on" if not args.only else ""), file=sys.stderr)
        return 130
    if unwritten:
        return WRITE_FAILED
    everyone = resumed + rows
    passed = sum(1 for r in everyone if r.get("passed") is True)
    review = sum(1 for r in everyone if r.get("needs_review") is True)
    lost = sum(1 for r in rows if ChildEnd.GRADER_ERROR in r.get("process", ""))
    if lost:
        print(f"mha-check grade: warning: {lost} submission{'s' * (lost != 1)} could not be graded because "
              f"mha-check's own grading processes kept failing (see the process column of {summary}); grade "
              f"{'them' if lost != 1 else 'it'} again", file=sys.stderr)
    print(f"graded {len(rows)} submission{'s' * (len(rows) != 1)} in {time.monotonic() - started:.1f} s" + (
          f" and kept {len(resumed)} from their reports (--resume)" if resumed else "") + f": {passed} "
          f"pass{'es' * (passed == 1)} every check, {review} need{'s' * (review == 1)} a person to look "
          "(needs_review); "
          f"reports in {out}/, summary in {summary}" + _short_of_policy(everyone))
    if missing:
        print(f"mha-check grade: {'warning' if args.allow_missing else 'error'}: {len(missing)} of the students' files "
              f"or folders got no row of their own (listed in {summary} with the reason): " +
              clean("; ".join(f"{n.item} ({n.reason})" for n in missing[:10])) + ("; ..." if len(missing) > 10 else ""),
              file=sys.stderr)
    return 3 if (missing and not args.allow_missing) or view_failed else 0


def _make_out(args, p: argparse.ArgumentParser, out: Path) -> bool:
    """The output folder, made if need be, and the batch's seed in it (_batch_seed): False when it cannot be used."""
    try:
        out.mkdir(mode=0o700, parents=True, exist_ok=True)  # made here: closed to the children (red team 6: without
        # Landlock a child read its classmates' reports in a 0755 --out); one the course made keeps its own mode
    except OSError as e:
        p.error(f"--out {args.out}: {e.strerror or e}")
    return _batch_seed(args, out)


def _batch_seed(args, out: Path) -> bool:
    """The batch's seed (harness.frontends.seeds), said in one line: --seed as given; else the one recorded in `out`
    by an earlier batch (--resume and --only stay incremental: the stamps name the seed), or, in a fresh folder and
    with --overwrite, the one drawn, recorded there for staff (where the disk has no room for the record, said on
    stdout only: a full --out loses no verdict).  False (said) for a record mha-check did not write."""
    run = args.run
    if args.seed is not None:
        return True
    try:
        recorded = seeds.read_record(out)
        if recorded is not None and not (args.overwrite and not args.only):
            run.seed, how = recorded, f"recorded in {out}/{seeds.RECORD} by an earlier batch, used again"
        else:
            run.seed = seeds.write_record(out, run.seed, replace=recorded is not None)
            how = f"drawn at random for {out}/ and recorded in {out}/{seeds.RECORD}"
    except seeds.RecordError as e:
        print(f"mha-check grade: error: {e}", file=sys.stderr)
        return False
    except OSError as e:  # a full disk: the batch goes on, every verdict still reaches stdout (BatchFiles)
        print(f"mha-check grade: warning: could not record the batch's seed in {out}/ ({reason(e)}): it is said "
              "only on the next line, and a later batch into this folder draws another", file=sys.stderr)
        how = "drawn at random, not recorded"
    print(f"seed {run.seed}: {how} (staff only: no report shows it; repeat a grade with --seed {run.seed})")
    return True


def _stamper(args, target: str | None) -> stamps.Stamps:
    """The batch's stamps: what every report of it shares (mha-check's code, the rubric, the options that change a
    verdict), sealed with this account's key.  The seed is in them as a keyed digest: a report is handed to its
    student, who must not read a seed drawn for the folder there."""
    run, key = args.run, stamps.load_key()
    return stamps.Stamps(args.format, {"code": stamps.code_digest(), "rubric": stamps.file_digest(args.rubric),
                                       "options": {"target": target or "", "seed": stamps.seed_tag(key, run.seed),
                                                   "limits": run.limits.to_dict(), "format": args.format,
                                                   "allow_unconfined": args.allow_unconfined,
                                                   "tests": instructor.digest(args.suite),
                                                   **({"feedback": True} if args.feedback else {}),
                                                   **({"examples": run.examples} if run.examples != 6 else {}),
                                                   **({"arg": run.overrides} if run.overrides else {}),
                                                   **({"map": run.weight_map} if run.weight_map else {})}},
                         key)


def _stage(todo: list, staging: Path) -> dict | None:
    """Every submission copied once, now, into `staging`, which only the grader can write (submissions.Submission
    .stage): what is digested for --resume is what is graded, whatever a student writes in their own folder while
    the batch runs (red team 5: a folder digested at the start and copied when its turn came had another student's
    good verdict sealed for its new files).  None, said in one line, when the disk has no room for the copies."""
    try:
        return {s.name: s.stage(staging) for s in todo}
    except scratch.NoRoom as e:
        print(f"mha-check grade: error: {e} (the batch's copies go to {tempfile.gettempdir()}); nothing was graded: "
              "free some room there, or set TMPDIR to a folder on a disk with room", file=sys.stderr)
        return None


def _class_view(out: Path, rows: list[dict], args, banner: str, notes: list[str] | None = None) -> bool:
    """Write the class view (harness.frontends.class_view) and say where, or say in one line that it could not be
    written (False).  The verdicts are all in the reports and the summary either way."""
    if notes is None:
        seed = args.run.seed
        notes = [f"submissions: {os.path.abspath(args.submissions)}; seed {seed}" + (
                     f" (drawn at random, recorded in {seeds.RECORD}; no student's report shows it)"
                     if args.run.seed_private else "")
                 + (f"; rubric {args.rubric}" if args.rubric else "")
                 + (f"; shard {args.shard[0]}/{args.shard[1]}: only this shard's submissions" if args.shard else "")]
    try:
        page, table = class_view.write(out, rows, EXTENSIONS[args.format], args.shard, banner=banner, notes=notes)
    except OSError as e:
        print(f"mha-check grade: error: could not write the class view in {out}/ ({reason(e)})", file=sys.stderr)
        return False
    except KeyboardInterrupt:  # not "interrupted before grading began": every verdict is on disk already
        print(f"\nmha-check grade: interrupted while writing the class view: every report and the summary are in "
              f"{out}/, the class view is not up to date", file=sys.stderr)
        sys.exit(130)
    print(f"class view: {page} (its table of mistakes for the gradebook: {table})")
    return True


def _merge(args) -> int:
    """`--merge CSV... --out DIR`: the shards' summaries joined into DIR/summary.csv, and the class view of the whole
    course beside it (each shard's own view shows only its shard), linking the reports that are in DIR: where a
    job array's shards wrote them, or where a CI workflow gathered its matrix's artifacts.  An earlier summary.csv
    there is replaced only with --overwrite, as grade's own is."""
    try:
        rows, fields = read_shards(args.merge)
    except MergeError as e:
        return merge_error(str(e))
    out = Path(args.out.rstrip("/") or "/")
    summary = out / "summary.csv"
    if os.path.lexists(summary) and not args.overwrite:
        return merge_error(f"{summary} already exists; add --overwrite to replace it with the merged summary")
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_atomic(summary, merged_text(rows, fields))
    except OSError as e:
        return merge_error(f"could not write {summary} ({reason(e)})")
    graded = sum(1 for r in rows if not r.get("not_graded"))
    print(f"merged {len(args.merge)} summaries: {graded} submission{'s' * (graded != 1)} graded"
          + (f" and {len(rows) - graded} not graded" if len(rows) > graded else "") + f", summary in {summary}")
    shards = ", ".join(os.path.basename(p) for p in args.merge)
    named = [{k: csv_uncell(v) if isinstance(v, str) else v for k, v in row.items()} for row in rows]  # the cells
    # as the students' names and files are ('=alice is =alice, whose report is =alice.json); the view quotes anew
    return 0 if _class_view(out, named, args, "", notes=[f"merged from {shards}"]) else 3


def _earlier_results(files: BatchFiles, todo: list) -> str:
    """What an earlier batch left in the output folder that this one would replace, in words ("" for nothing):
    the summary, and the reports of this batch's submissions."""
    reports = sum(1 for s in todo if os.path.lexists(files.report_path(s.name)))
    parts = ([files.summary_path.name] if os.path.lexists(files.summary_path) else []) + (
        [f"{reports} report{'s' * (reports != 1)}"] if reports else [])
    return " and ".join(parts)


def _resume(files: BatchFiles, stamper, digests: dict[str, str | None], out_name: str) -> list[dict]:
    """--resume: the rows of the submissions whose report's stamp vouches for this very grading of them
    (harness.frontends.stamps), saying how many are kept and why the others are graded again."""
    kept, why = [], Counter()
    for name, digest in digests.items():
        row, reason = stamper.check(name, digest, files.report_path(name))
        if row is not None:
            kept.append(row)
        else:
            why[reason] += 1
    again = sum(why.values())
    print(f"--resume: {len(kept)} of {len(digests)} kept from their reports in {out_name}/ (the same files, rubric, "
          f"options and mha-check); {again} graded again" + (
              ": " + "; ".join(f"{reason} ({n})" for reason, n in why.most_common()) if again else ""))
    return kept


def _short_of_policy(rows: list[dict]) -> str:
    """The closing line's warning when any child ran with less than the full confinement policy."""
    short = [r["isolation"] for r in rows if r.get("isolation") not in ("", "full", None)]
    if not short:
        return ""
    worst = max(set(short), key=short.count)
    held = isolation.still_held(worst)
    return (f"; WARNING: {len(short)} of {len(rows)} ran with less than the full confinement policy ({worst}"
            + (f"; still held: {', '.join(held)}" if held else "") +
            "; see the isolation column, and docs/threat-model.md for what holds there and what gives the rest)")


