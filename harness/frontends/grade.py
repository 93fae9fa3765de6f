"""`mha-check grade SUBMISSIONS_DIR`: grade a whole course, one folder per student or flat files named by student
(it says which layout it found, and how many submissions; harness.frontends.submissions reads the layouts).

Each grader process keeps one warm zygote (torch imported once) and forks a fresh sandboxed child per submission;
`--jobs` graders run side by side.  One report per submission and a summary table (CSV) are written to `--out`.
`--shard I/N` grades the submissions whose name hashes to shard I, so that array jobs, CI matrices or a fleet of
machines can share a course; `mha-check grade --merge A.csv B.csv ...` joins their summaries.  Nothing a submission
does (hang, crash, exit, print, patch) stops the batch: its row says what happened.

The command is split by job: harness.frontends.submissions finds the submissions, .pick chooses the file to check in
each, .grade_pool runs the graders (.grader, one submission each), .shards splits and merges; this module parses
the command line and writes the batch's closing lines.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from checks import all_checks
from harness.frontends import options as option_rules
from harness.frontends import stopping, submissions
from harness.frontends.batch_files import WRITE_FAILED, BatchFiles, write_summary  # noqa: F401 - write_summary: the
# summary's writer, named here as before
from harness.frontends.grade_pool import grade_all
from harness.frontends.pick import defines_module, missing_fix
from harness.frontends.shards import in_shard, merge, parse_shard
from harness.render import rubric as rubrics
from harness.sandbox import isolation, scratch
from harness.sandbox import limits as sandbox
from harness.sandbox.template import Template

EXTENSIONS = {"json": "json", "gradescope": "results.json", "junit": "xml", "text": "txt"}
MAX_JOBS = 256


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
        stop.exit_now_if_stuck(status)  # a pool's thread still running would hold the interpreter's exit
    return status


def _main(argv: list[str], early: Template | None) -> int:
    p = argparse.ArgumentParser(prog="mha-check grade", description=__doc__.split("\n\n")[0])
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
    p.add_argument("--rubric", help="TOML file: points and visibility per check, and the target")
    p.add_argument("--out", default="mha-check-results",
                   help="folder for the reports and summary.csv (default mha-check-results)")
    p.add_argument("--format", choices=tuple(EXTENSIONS), default="json", help="per-submission report format")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="graders side by side (default: cores)")
    p.add_argument("--shard", type=parse_shard, help="grade only shard I of N (by a hash of the submission's name)")
    p.add_argument("--seed", type=int, default=0, help="seed for weights and inputs (default 0)")
    p.add_argument("--time-limit", type=float, default=sandbox.Limits.total_seconds,
                   help=f"seconds per submission (default {sandbox.Limits.total_seconds:g}, as for one check)")
    p.add_argument("--memory-mb", type=int, default=sandbox.Limits.memory_mb,
                   help=f"memory per submission in MB (default {sandbox.Limits.memory_mb}; torch's libraries come "
                        "on top)")
    p.add_argument("--merge", nargs="+", metavar="CSV", help="join shard summaries into one CSV on stdout")
    p.add_argument("--allow-unconfined", action="store_true",
                   help="grade even where submissions would run as root or as your own uid with your files in "
                        "view (every report then says so)")
    args = p.parse_args(argv[1:])
    if args.merge:
        return merge(args.merge, sys.stdout)
    if not args.submissions or not os.path.isdir(args.submissions):
        zipped = bool(args.submissions) and args.submissions.endswith(".zip") and os.path.isfile(args.submissions)
        p.error(f"{args.submissions!r} is not a folder of submissions" + ("; unzip it first" if zipped else ""))
    option_rules.limits(args.time_limit, args.memory_mb, None, args.seed, p)
    if not 1 <= args.jobs <= MAX_JOBS:
        p.error(f"--jobs must be between 1 and {MAX_JOBS}, not {args.jobs}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        p.error(f"--out {args.out}: that is a file; give a folder for the reports")
    if out.resolve() == Path(args.submissions).resolve() or Path(args.submissions).resolve() in out.resolve().parents:
        p.error(f"--out {args.out}: inside the submissions folder, it would be graded as a submission")
    try:
        pattern = submissions.compile_pattern(args.pattern) if args.pattern else None
        rubric = rubrics.load_rubric(args.rubric, {c.id for c in all_checks()}) if args.rubric else None
    except (submissions.PatternError, rubrics.RubricError) as e:
        p.error(str(e))
    # SIGTERM (a scheduler's stop, Slurm's time limit) is Ctrl-C here: main installed stopping.StopBound
    # torch imports in the template while the walls are probed, the submissions found and staged, the graders forked
    template = early or _start_template()
    try:
        _refuse_without_walls(args, p)
        return _grade_batch(args, p, out, pattern, rubric, template)
    except KeyboardInterrupt:
        print("\nmha-check grade: interrupted before grading began; nothing was written", file=sys.stderr)
        return 130
    finally:
        if template is not None and template is not early:  # the early one is main's to close
            template.close()


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
        todo = [s for s in todo if s.name in args.only]
        print(f"--only: {len(todo)} of them graded again, into the summary in {args.out}/ (its other rows kept)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        p.error(f"--out {args.out}: {e.strerror or e}")
    limits = sandbox.Limits(call_seconds=min(30.0, args.time_limit), total_seconds=args.time_limit,
                            memory_mb=args.memory_mb)
    flat = {s.name for s in todo if s.folder is None}  # staged from flat files: --target's class in their file
    options = {"seed": args.seed, "format": args.format, "rubric": args.rubric, "limits": limits.to_dict(),
               "missing_fix": missing_fix(target), "allow_unconfined": args.allow_unconfined}
    rows, started, interrupted = [], time.monotonic(), False
    summary = out / (f"summary-{args.shard[0]}-of-{args.shard[1]}.csv" if args.shard else "summary.csv")
    running = summary.with_name(f"only-{summary.name}") if args.only else summary  # the old one kept whole till then
    files = BatchFiles(out, running, EXTENSIONS[args.format])
    # one folder for the batch (what a grade killed outright leaves): the staging copy of the submissions, closed to
    # every child, and the graders' scratch folders, which the slots' uids may pass through, never list
    batch = tempfile.mkdtemp(prefix="mha-check-grade-")
    try:
        os.chmod(batch, 0o711)
        staging, scratch_parent = os.path.join(batch, "staging"), os.path.join(batch, "scratch")
        os.mkdir(staging, 0o700)
        os.mkdir(scratch_parent, 0o711)
        folders = {s.name: s.stage(Path(staging)) for s in todo}
        if todo:
            rows, interrupted = grade_all(folders, target, flat, options, args, template, scratch_parent, files)
    finally:
        scratch.remove_tree(batch)  # with the scratch a grader killed from outside could not remove
    missing = [n for n in found.not_graded if n.missing and in_shard(n.item, args.shard)]
    if interrupted:
        listed = rows
    else:
        listed = submissions.summary_rows(found, rows, lambda n: in_shard(n.item, args.shard))
        if args.only:
            listed = submissions.kept_rows(summary, {s.name for s in todo}) + listed
        files.summary_path = summary
    unwritten = files.finish(listed)  # after the scratch is gone: it may be what filled the disk
    if unwritten:
        print(unwritten, file=sys.stderr)
    elif args.only and not interrupted:
        running.unlink(missing_ok=True)
    if interrupted:
        print(f"\nmha-check grade: interrupted: {len(rows)} of {len(todo)} submissions graded; their reports are in "
              f"{out}/ and {running} lists only them" + (f" ({summary} is as it was)" if args.only else ""),
              file=sys.stderr)
        return 130
    if unwritten:
        return WRITE_FAILED
    passed = sum(1 for r in rows if r.get("passed") is True)
    review = sum(1 for r in rows if r.get("needs_review") is True)
    lost = sum(1 for r in rows if "grader error" in r.get("process", ""))
    if lost:
        print(f"mha-check grade: warning: {lost} submission{'s' * (lost != 1)} could not be graded because "
              f"mha-check's own grading processes kept failing (see the process column of {summary}); grade "
              f"{'them' if lost != 1 else 'it'} again", file=sys.stderr)
    print(f"graded {len(rows)} submission{'s' * (len(rows) != 1)} in {time.monotonic() - started:.1f} s: {passed} "
          f"pass{'es' * (passed == 1)} every check, {review} need{'s' * (review == 1)} a person to look "
          "(needs_review); "
          f"reports in {out}/, summary in {summary}" + _short_of_policy(rows))
    if missing:
        print(f"mha-check grade: {'warning' if args.allow_missing else 'error'}: {len(missing)} of the students' files "
              f"or folders got no row of their own (listed in {summary} with the reason): " +
              "; ".join(f"{n.item} ({n.reason})" for n in missing[:10]) + ("; ..." if len(missing) > 10 else ""),
              file=sys.stderr)
    return 3 if missing and not args.allow_missing else 0


def _short_of_policy(rows: list[dict]) -> str:
    """The closing line's warning when any child ran with less than the full confinement policy."""
    short = [r["isolation"] for r in rows if r.get("isolation") not in ("", "full", None)]
    if not short:
        return ""
    worst = max(set(short), key=short.count)
    return (f"; WARNING: {len(short)} of {len(rows)} ran with less than the full confinement policy ({worst}; see "
            "the isolation column)")


