"""`mha-check grade SUBMISSIONS_DIR`: grade a whole course, one folder per student or flat files named by student
(it says which layout it found, and how many submissions; harness.frontends.submissions reads the layouts).

Each grader process keeps one warm zygote (torch imported once) and forks a fresh sandboxed child per submission;
`--jobs` graders run side by side.  One report per submission and a summary table (CSV) are written to `--out`.
`--shard I/N` grades the submissions whose name hashes to shard I, so that array jobs, CI matrices or a fleet of
machines can share a course; `mha-check grade --merge A.csv B.csv ...` joins their summaries.  Nothing a submission
does (hang, crash, exit, print, patch) stops the batch: its row says what happened.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import io
import multiprocessing
import os
import re
import signal
import stat
import sys
import tempfile
import time
import tokenize
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

from checks import all_checks
from harness.engine.report import Report
from harness.engine.runner import Options, not_run, run_checks
from harness.frontends import submissions
from harness.frontends.batch_files import WRITE_FAILED, BatchFiles, write_summary  # noqa: F401 - write_summary: the
# summary's writer, named here as before
from harness.render.view import clean
from harness.render import formats
from harness.frontends import options as option_rules
from harness.render import rubric as rubrics
from harness.sandbox import isolation, scratch, trusted
from harness.sandbox import syscalls as linux
from harness.sandbox import limits as sandbox
from harness.sandbox.pool import ForkedSubject, Zygote, ZygoteError
from harness.sandbox.template import META_ZYGOTE, Template

EXTENSIONS = {"json": "json", "gradescope": "results.json", "junit": "xml", "text": "txt"}
MAX_JOBS = 256
MAX_POOL_BREAKS = 3  # pools broken by a grader's death (killed from outside) before the batch gives up on the rest
_ZYGOTE = None  # in a grader process: its zygote
_META_ZYGOTE = None  # in a grader process: its zygote of the meta template, made when a submission first needs one
_NO_META = False  # in a grader process: the meta template could not give one (the meta runs stay in each child)
_TEMPLATE = None  # in a grader process: the batch's template socket (None: none could be started)
_BUSY = False  # in a grader process: a submission is being graded (SIGTERM must unwind it, not just exit)
_STOPPING = False  # in a grader process: SIGTERM came, the submission is being unwound


def in_shard(name: str, shard: tuple[int, int] | None) -> bool:
    """Stable under additions: a submission's shard depends on its own name only."""
    if shard is None:
        return True
    index, count = shard
    return int(hashlib.sha256(name.encode()).hexdigest(), 16) % count == index - 1


MAX_SOURCE = 256 << 10  # a larger .py file is not an attention layer: never read
MAX_NOTEBOOK = 32 << 20  # a notebook carries its outputs (pictures): larger ones are not read to look for a class
_STATEMENT_START = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING)


# a class line inside a notebook's JSON: the start of a source string, or of a line inside one ("\n" escaped)
_NOTEBOOK_CLASS = re.compile(rb'(?:"|\\n)[ \t]*class[ \t]+\w+[ \t]*\([^)"\\]*Module')


def _source_of(path: Path) -> bytes | None:
    """A regular file only (not a FIFO, a symlink or a device), bounded: read in the trusted process."""
    return scratch.read_regular(str(path), _bound(path))


def _defines_module(path: Path) -> bool:
    """Does the file (or the notebook's code) define a class with "Module" in its bases?  Runs in the trusted
    process on files a student wrote, so: read by _source_of, tokenized as a stream, never parsed (a deeply nested
    expression cannot exhaust the parser's recursion)."""
    data = _source_of(path)
    if not data:
        return False
    if path.suffix.lower() == ".ipynb":  # searched, never parsed: 32 MB of JSON once took the grader 900 MB
        return _NOTEBOOK_CLASS.search(data) is not None
    expect, depth, previous = "class", 0, tokenize.ENCODING  # then: name, "(", bases
    try:
        for tok in tokenize.tokenize(io.BytesIO(data).readline):
            if tok.type in (tokenize.COMMENT, tokenize.NL):
                continue
            if expect == "class":
                expect = "name" if tok.string == "class" and previous in _STATEMENT_START else "class"
            elif expect == "name":
                expect = "(" if tok.type == tokenize.NAME else "class"
            elif expect == "(":
                expect, depth = ("bases", 1) if tok.string == "(" else ("class", 0)
            elif tok.type == tokenize.NAME and "Module" in tok.string:
                return True
            elif tok.type == tokenize.OP and tok.string in "()":
                depth += 1 if tok.string == "(" else -1
                expect = "bases" if depth else "class"
            previous = tok.type
    except Exception:  # noqa: BLE001 - `# coding: rot13` raises LookupError: any file, no batch stops on it
        pass
    return False


def _bound(path: Path) -> int:
    return MAX_NOTEBOOK if path.suffix.lower() == ".ipynb" else MAX_SOURCE


def _readable(path: Path) -> bool:
    """A regular file (not a symlink, FIFO or device) small enough to be an attention layer: the only kind the
    grader names as a submission's target (its child reads it, confined)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size <= _bound(path)


def _code_files(folder: Path) -> list[Path]:
    """The submission's code files: those at its top, else those in its sub-folders (a folder zipped with it)."""
    top = sorted(p for p in folder.iterdir() if submissions.is_code(p) and _readable(p))
    return top or submissions.nested_code(folder, _readable)


def _rel(path: Path, folder: Path) -> str:
    return str(path.relative_to(folder))


def find_target(folder: Path) -> str | None:
    """With no --target: the one file of the submission that defines an nn.Module class."""
    files = [p for p in _code_files(folder) if not p.name.startswith("test")]
    found = [p for p in files if _defines_module(p)]
    return _rel(found[0], folder) if len(found) == 1 else None


class _Stopped(BaseException):
    """SIGTERM in a grader: the main process was interrupted (Ctrl-C) or has died."""


def _init_grader(limits_dict: dict, template, scratch_parent: str) -> None:
    """In each grader process: its zygote, forked from the batch's template (or started on its own without one).
    Ctrl-C is the main process's to handle: it stops the graders with SIGTERM, as the kernel does when the main
    process dies, and a grader then unwinds the submission in progress (its child killed, its scratch removed).
    Its scratch folders are made in the batch's `scratch_parent`, which the main process removes at the end."""
    global _ZYGOTE, _TEMPLATE

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    linux.die_with_parent(signal.SIGTERM)
    scratch.place_in(scratch_parent)
    _TEMPLATE = template
    _ZYGOTE = Zygote(sandbox.Limits(**limits_dict), _TEMPLATE)


def _on_sigterm(signum, frame) -> None:
    global _STOPPING

    if _STOPPING:
        return  # the clean-up the first SIGTERM started must not be interrupted
    if not _BUSY:
        os._exit(0)  # between submissions: nothing to clean up
    _STOPPING = True
    raise _Stopped()


@dataclass(frozen=True)
class Pick:
    """What to check in one submission's folder.  `spec` None: `problem` says why there is nothing to check, and
    `review` whether a person should look (mha-check could not choose between files: our limit, not a zero to
    trust).  `note`: how a file was chosen among several, so that a wrong choice is visible in the report."""
    spec: str | None
    problem: str = ""
    note: str = ""
    review: bool = False


def spec_for(folder: Path, target: str | None, flat: bool) -> Pick:
    """One folder per student: --target as given, else the single file that defines an nn.Module class, else the
    folder's only code file, .py or .ipynb (so that its syntax error, say, is what the report shows).  Flat files:
    the platform named the file, so --target's class is applied to the student's file (the one ending with
    --target's file name, else found as above)."""
    file_part, _, cls = (target or "").partition(":")
    suffix = f":{cls}" if cls else ""
    if target and not flat:
        inside = [] if os.path.lexists(folder / file_part) else [
            p for p in submissions.nested_code(folder, _readable) if p.name == Path(file_part).name]
        if len(inside) == 1:  # hw3/attention.py: the student zipped the folder that holds it
            found = _rel(inside[0], folder)
            return Pick(found + suffix, note=f"{found} was checked: --target's {file_part} is in a sub-folder")
        return Pick(target)
    code = _code_files(folder)
    named = [p for p in code if file_part and p.name.endswith(file_part)]
    if len(named) == 1:
        return Pick(_rel(named[0], folder) + suffix)
    found = find_target(folder) or (_rel(code[0], folder) if len(code) == 1 else None)
    if found:
        others = [p for p in code if _rel(p, folder) != found]
        note = (f"{found} was checked: of the {len(code)} code files "
                f"({', '.join(_rel(p, folder) for p in code)}) it is the "
                f"only one that defines an nn.Module class" +
                (f" ({len(named)} end with --target's {file_part})" if file_part else "")
                ) if others else ""
        return Pick(found + suffix, note=note)
    if code:
        return Pick(None, f"could not tell which file holds the attention class: {len(code)} code files "
                          f"({', '.join(_rel(p, folder) for p in code)}) and not exactly one defines an nn.Module "
                          f"class; grade with --target FILE:Class to choose", review=True)
    others = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    unread = [name for name in others if submissions.is_code(Path(name))]
    if unread:
        return Pick(None, f"could not tell which file holds the attention class: {', '.join(unread[:5])} not read "
                          f"(a code file must be a regular file, not a link or a device, of at most "
                          f"{MAX_SOURCE >> 10} KiB for .py and {MAX_NOTEBOOK >> 20} MiB for .ipynb)")
    return Pick(None, "could not tell which file holds the attention class: this submission has no .py or .ipynb "
                      "file" + (f" (it has {', '.join(others[:5])}{', ...' if len(others) > 5 else ''})" if others
                                else " (it is empty)"))


def _grade_one(folder: str, pick: Pick, options: dict) -> dict:
    """Runs in a grader process; returns only plain data.  Stopped (SIGTERM), it ends once run_checks has closed
    the submission's child and scratch: the batch is over."""
    global _BUSY

    try:
        _BUSY = True
        return _grade_submission(folder, pick, options)
    except _Stopped:
        scratch.remove_live()  # the stop may have come before the submission's child was in run_checks' hands
        os._exit(0)
    finally:
        _BUSY = False


def _grade_submission(folder: str, pick: Pick, options: dict) -> dict:
    global _ZYGOTE

    name = os.path.basename(folder)
    limits = sandbox.Limits(**options["limits"])
    started = time.monotonic()
    spec = pick.spec
    if spec is None:
        report = not_run(f"{name}/?", pick.problem, Options(seed=options["seed"]),
                         fix=options.get("missing_fix", ""))
        if pick.review:
            report.adapter["review"] = [pick.problem]
    else:
        for _attempt in (1, 2):  # a dead zygote is replaced, a child killed before its confinement started again:
            # graded once more; twice, the row says mha-check could not grade it (never the student's failure)
            try:
                make = lambda: ForkedSubject(_ZYGOTE,  # noqa: B023 - the zygote of the moment, replaced or not
                                             spec, submission=folder, seed=options["seed"], limits=limits,
                                             allow_unconfined=options["allow_unconfined"], grading=True)  # a copy
                report = run_checks(spec, Options(seed=options["seed"], limits=limits), subject=make(),
                                    make_subject=make, make_meta_subject=lambda: _meta_subject(spec, folder, options,
                                                                                                limits))
                break
            except ZygoteError as e:
                _ZYGOTE.close()
                _ZYGOTE = Zygote(limits, _TEMPLATE)
                _drop_meta_zygote()
                report = not_run(spec, f"grading this submission broke mha-check's grading process twice ({e})",
                                 Options(seed=options["seed"]), fix="grade this submission again", ours=True)
                report.adapter["process"] = [{"kind": "grader error", "message": str(e), "ours": True}]
            except isolation.IsolationFailed as e:  # a child killed from outside before it was confined: once more
                report = not_run(spec, f"mha-check could not start a confined process for this submission twice "
                                       f"({e})", Options(seed=options["seed"]), fix="grade this submission again",
                                 ours=True)
                report.adapter["process"] = [{"kind": "grader error", "message": str(e), "ours": True}]
    if pick.note:
        report.adapter["notes"] = [pick.note, *report.adapter.get("notes", [])]
    return graded(name, spec, report, options, time.monotonic() - started)


def _meta_subject(spec: str, folder: str, options: dict, limits: sandbox.Limits) -> ForkedSubject | None:
    """A second child for this submission, forked from the meta template, for the one run on the meta device
    (harness.engine.context.Context.meta_forward); None where there is none to be had (no template, or it could
    not give one): the run then stays in the submission's own child, as in a single run."""
    global _META_ZYGOTE, _NO_META

    if _NO_META or _TEMPLATE is None:
        return None
    try:
        if _META_ZYGOTE is None:
            _META_ZYGOTE = Zygote(limits, _TEMPLATE, fallback=False, kind=META_ZYGOTE)
        return ForkedSubject(_META_ZYGOTE, spec, submission=folder, seed=options["seed"], limits=limits,
                             allow_unconfined=options["allow_unconfined"], grading=True)
    except (ZygoteError, isolation.IsolationFailed):
        _drop_meta_zygote()
        _NO_META = True
        return None


def _drop_meta_zygote() -> None:
    global _META_ZYGOTE

    if _META_ZYGOTE is not None:
        _META_ZYGOTE.close()
        _META_ZYGOTE = None


def graded(name: str, spec: str | None, report: Report, options: dict, seconds: float) -> dict:
    """A graded submission as plain data: its report in the batch's format and its summary row.  score and
    max_score follow the one scoring rule (harness.render.rubric.score); needs_review is Report.needs_review."""
    rubric = rubrics.load_rubric(options.get("rubric"), {c.id for c in report.checks}) \
        if options.get("rubric") else rubrics.Rubric()
    got, total = rubrics.score(report, rubric)
    return {"name": name, "text": formats.render(report, options["format"], rubric),
            "row": {"submission": name, "target": _checked(spec, report), "passed": report.passed,
                    "needs_review": report.needs_review, "score": got, "max_score": total, **report.summary(),
                    "diagnosis": (report.diagnosis or {}).get("mutant") or "",
                    "process": "; ".join(p["kind"] for p in report.adapter.get("process", [])),
                    "isolation": "; ".join(report.isolation.get("short_of_policy", ())) or (
                        "full" if report.isolation else ""),  # what of the confinement policy was missing
                    "seconds": round(seconds, 2),
                    **{c.id: c.status for c in report.checks}}}


def _checked(spec: str | None, report: Report) -> str:
    """The summary's target: the file, and the class that was checked in it (a spec without a class is completed
    with the class mha-check found there, so that a wrong pick shows in the summary)."""
    found = report.adapter.get("class")
    if not spec or not found or ":" in spec:
        return spec or ""
    return f"{spec}:{found}"


def _progress(done: int, total: int, name: str) -> None:
    if sys.stderr.isatty():
        width = 30
        filled = width * done // max(1, total)
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {clean(name)[:30]:<30}")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def merge(paths: list[str], out) -> int:
    rows = []
    for p in paths:
        try:
            with open(p, newline="", encoding="utf-8") as f:
                reader = csv.DictReader(f)
                found, columns = list(reader), reader.fieldnames or []
        except OSError as e:
            return _merge_error(f"cannot read {p}: {e.strerror or e}")
        except (csv.Error, UnicodeDecodeError) as e:
            return _merge_error(f"{p} is not a CSV file ({e})")
        if "submission" not in columns or any(None in r or not r["submission"] for r in found):
            return _merge_error(f"{p} is not a summary written by mha-check grade (a 'submission' column, one "
                                "value per column in every row)")
        rows += found
    missing = missing_shards(paths)
    if missing:
        return _merge_error(missing)
    names = [r["submission"] for r in rows]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        return _merge_error(f"submissions graded twice: {', '.join(duplicates)}")
    fields = []
    for row in rows:
        fields += [k for k in row if k not in fields]
    writer = csv.DictWriter(out, fieldnames=fields)
    writer.writeheader()
    writer.writerows(sorted(rows, key=lambda r: r["submission"]))
    return 0


def missing_shards(paths: list[str]) -> str:
    """What is wrong with the set of shard summaries (summary-I-of-N.csv) given, or "" when it is complete."""
    shards = [re.fullmatch(r"summary-(\d+)-of-(\d+)\.csv", os.path.basename(p)) for p in paths]
    found = {(int(m[1]), int(m[2])) for m in shards if m}
    if not found:
        return ""
    counts = {n for _, n in found}
    if len(counts) > 1:
        return f"shards of different splits: {', '.join(f'of {n}' for n in sorted(counts))}"
    (count,) = counts
    absent = sorted(set(range(1, count + 1)) - {i for i, _ in found})
    return f"missing shards: {', '.join(f'{i}/{count}' for i in absent)}" if absent else ""


def _merge_error(message: str) -> int:
    print(f"mha-check grade --merge: error: {message}", file=sys.stderr)
    return 2


def _shard(text: str) -> tuple[int, int]:
    try:
        i, n = (int(v) for v in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError("expected I/N, e.g. 2/8") from None
    if not 1 <= i <= n:
        raise argparse.ArgumentTypeError("I must be between 1 and N")
    return i, n


def _missing_fix(target: str | None) -> str:
    """The fix for a submission with nothing to check: what to hand in (the construct check's own fix is about a
    file that does not load)."""
    cls = (target or "").partition(":")[2]
    return (f"Hand in one .py file or notebook that defines {cls or 'your attention class (a torch.nn.Module)'}. "
            "If a submission has several candidate files, the instructor names the one to check with --target "
            "FILE.py:ClassName.")


def main(argv: list[str], template: Template | None = None) -> int:
    """`template`: the batch's warm template when the caller started it already (harness.frontends.cli starts it
    before importing this module, so that torch imports while the engine does); closed here in every case."""
    try:
        return _main(argv, template)
    finally:
        if template is not None:
            template.close()


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
    p.add_argument("--shard", type=_shard, help="grade only shard I of N (by a hash of the submission's name)")
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
    # SIGTERM (a scheduler's stop, Slurm's time limit) is already Ctrl-C here: harness.frontends.cli.main says so
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
    found = submissions.find(Path(args.submissions), pattern, target, _defines_module)
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
               "missing_fix": _missing_fix(target), "allow_unconfined": args.allow_unconfined}
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
            rows, interrupted = _grade_all(folders, target, flat, options, args, template, scratch_parent, files)
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


def _grade_all(folders: dict[str, Path], target: str | None, flat: set[str], options: dict, args,
               template: Template | None, scratch_parent: str, files: BatchFiles) -> tuple[list, bool]:
    """Every submission through the pool of graders; a grader's failure costs one row, never the batch.  A grader
    that ends without finishing (killed from outside, or by the OOM killer) breaks the whole pool: every submission
    not graded yet is then graded again by a fresh pool, up to MAX_POOL_BREAKS times.  Returns the rows and whether
    Ctrl-C stopped it (the graders are then stopped, each submission in progress with its child and scratch, and
    the rows are those graded).  The summary is rewritten after every report (`files`), so that a batch killed
    outright keeps the summary of what it had graded."""
    rows: list = []
    trusted.preload()  # every trusted module, once here while the template imports torch, not in each grader
    left, breaks = dict(folders), 0
    while left:
        # Graders are forked from this process: it has imported the engine, and runs no thread of its own (with
        # "fork" the pool starts every grader before its own manager thread; a broken pool's threads have ended),
        # and no submission has run here.  Spawned, each grader imported the engine again, 0.4 s of CPU each while
        # the template imports torch on the same cores (grade of 50 submissions, medians of alternating rounds:
        # 8.95 -> 8.52 s, and 10.5 -> 9.2 s in a slower hour).
        pool = ProcessPoolExecutor(max(1, min(args.jobs, len(left))), mp_context=get_context("fork"),
                                   initializer=_init_grader,
                                   initargs=(options["limits"], template.socket if template else None, scratch_parent))
        try:
            lost = _collect(pool, left, target, flat, options, args, rows, len(folders), files,
                            last_try=breaks >= MAX_POOL_BREAKS)
        except KeyboardInterrupt:
            _stop_graders(pool)
            return rows, True
        except BaseException:  # our own failure: no grader outlives it either
            _stop_graders(pool)
            raise
        pool.shutdown()
        if lost:
            breaks += 1
            print(f"mha-check grade: a grading process ended before its submission was graded (killed from "
                  f"outside?); the {len(lost)} submission{'s' * (len(lost) != 1)} not graded yet "
                  f"{'are' if len(lost) != 1 else 'is'} graded again from the start", file=sys.stderr)
        left = {name: folders[name] for name in lost}
    return rows, False


def _stop_graders(pool: ProcessPoolExecutor) -> None:
    """Ctrl-C: nothing more is started, and each grader unwinds its submission (SIGTERM) and ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not leave the graders behind
    graders = multiprocessing.active_children()
    pool.shutdown(wait=False, cancel_futures=True)
    for grader in graders:
        with contextlib.suppress(ProcessLookupError):
            os.kill(grader.pid, signal.SIGTERM)
    for grader in graders:
        grader.join(10)
        if grader.is_alive():
            grader.kill()
            grader.join()


def _collect(pool, folders: dict[str, Path], target, flat: set[str], options: dict, args, rows: list,
             total: int, files: BatchFiles, last_try: bool) -> list[str]:
    """Submit every submission and write each report as it comes back (rows gets each summary row, and the
    summary is rewritten; what cannot be written is kept for `files.finish`).  Returns the submissions a broken
    pool left ungraded, to be graded again; on the last try, or for any other failure of ours, each gets a row that
    says mha-check could not grade it (construct cannot tell: never the student's failure)."""
    futures, lost = {}, []
    for name, folder in folders.items():
        futures[pool.submit(_grade_one, str(folder), spec_for(folder, target, name in flat), options)] = name
    for future in _as_completed(futures):
        name = futures[future]
        try:
            result = future.result()
        except Exception as e:  # noqa: BLE001 - a grader failure costs one row, never the batch
            if isinstance(e, BrokenProcessPool) and not last_try:
                lost.append(name)
                continue
            why = f"its grading process ended {MAX_POOL_BREAKS + 1} times (killed from outside?)" if isinstance(
                e, BrokenProcessPool) else str(e)
            report = not_run(f"{name}/?", f"mha-check could not grade this submission: {why}",
                             Options(seed=options["seed"]), fix="grade this submission again", ours=True)
            report.adapter["process"] = [{"kind": "grader error", "message": why, "ours": True}]
            result = graded(name, None, report, options, 0.0)
        result["name"] = result["row"]["submission"] = name  # the student, not the folder's name (Moodle's, ...)
        files.report(result["name"], result["text"])
        rows.append(result["row"])
        files.summary(rows)
        _progress(len(rows), total, name)
    return lost


def _as_completed(futures):
    return as_completed(futures)
