"""`mha-check grade SUBMISSIONS_DIR`: grade a whole course, one folder per student.

Each grader process keeps one warm zygote (torch imported once) and forks a fresh sandboxed child per submission;
`--jobs` graders run side by side.  One report per submission and a summary table (CSV) are written to `--out`.
`--shard I/N` grades the submissions whose name hashes to shard I, so that array jobs, CI matrices or a fleet of
machines can share a course; `mha-check grade --merge A.csv B.csv ...` joins their summaries.  Nothing a submission
does (hang, crash, exit, print, patch) stops the batch: its row says what happened.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import io
import os
import re
import sys
import time
import tokenize
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

from checks import all_checks
from harness.engine.report import CheckResult, Report
from harness.engine.runner import Options, run_checks
from harness.render import formats
from harness.frontends import options as option_rules
from harness.render import rubric as rubrics
from harness.sandbox import isolation, scratch
from harness.sandbox import limits as sandbox
from harness.sandbox.pool import ForkedSubject, Zygote, ZygoteError

EXTENSIONS = {"json": "json", "gradescope": "results.json", "junit": "xml", "text": "txt"}
MAX_JOBS = 256
_ZYGOTE = None


def in_shard(name: str, shard: tuple[int, int] | None) -> bool:
    """Stable under additions: a submission's shard depends on its own name only."""
    if shard is None:
        return True
    index, count = shard
    return int(hashlib.sha256(name.encode()).hexdigest(), 16) % count == index - 1


MAX_SOURCE = 256 << 10  # a larger .py file is not an attention layer: never read
_STATEMENT_START = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING)


def _defines_module(path: Path) -> bool:
    """Does the file define a class with "Module" in its bases?  Runs in the trusted process on files a student
    wrote, so: a regular file only (not a FIFO, a symlink or a device), at most MAX_SOURCE bytes, tokenized as a
    stream, never parsed (a deeply nested expression cannot exhaust the parser's recursion)."""
    data = scratch.read_regular(str(path), MAX_SOURCE)
    if data is None:
        return False
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
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError):
        pass
    return False


def find_target(folder: Path) -> str | None:
    """With no --target: the one file of the submission that defines an nn.Module class."""
    files = [p for p in sorted(folder.glob("*.py")) if not p.name.startswith("test")]
    found = [p for p in files if _defines_module(p)]
    return found[0].name if len(found) == 1 else None


def _init_grader(limits_dict: dict) -> None:
    global _ZYGOTE

    _ZYGOTE = Zygote(sandbox.Limits(**limits_dict))


def _grade_one(folder: str, spec: str | None, options: dict) -> dict:
    """Runs in a grader process; returns only plain data."""
    global _ZYGOTE

    name = os.path.basename(folder)
    limits = sandbox.Limits(**options["limits"])
    started = time.monotonic()

    def failing(message: str) -> Report:
        return Report(f"{name}/{spec or '?'}", [CheckResult(
            "construct", "fail", "the target imports and builds a torch.nn.Module for valid configurations",
            message)], options["seed"])

    if spec is None:
        report = failing("could not tell which file holds the attention class: no single .py file defining an "
                         "nn.Module class (pass --target FILE.py:ClassName)")
    else:
        for attempt in (1, 2):  # a template that died is replaced; dying twice on this submission is its doing
            try:
                make = lambda: ForkedSubject(_ZYGOTE, spec, submission=folder, seed=options["seed"], limits=limits,
                                             allow_unconfined=options["allow_unconfined"])  # a copy, in its slot
                report = run_checks(spec, Options(seed=options["seed"], limits=limits), subject=make(),
                                    make_subject=make)
                break
            except ZygoteError as e:
                _ZYGOTE.close()
                _ZYGOTE = Zygote(limits)
                report = failing(f"grading this submission broke mha-check's grading process twice ({e})")
    rubric = rubrics.load_rubric(options.get("rubric"), {c.id for c in report.checks}) \
        if options.get("rubric") else rubrics.Rubric()
    got, total = rubrics.score(report, rubric)
    return {"name": name, "text": formats.render(report, options["format"], rubric),
            "row": {"submission": name, "target": spec or "", "passed": report.passed, "score": got,
                    "max_score": total, **report.summary(),
                    "diagnosis": (report.diagnosis or {}).get("mutant") or "",
                    "process": "; ".join(p["kind"] for p in report.adapter.get("process", [])),
                    "seconds": round(time.monotonic() - started, 2),
                    **{c.id: c.status for c in report.checks}}}


def _progress(done: int, total: int, name: str) -> None:
    if sys.stderr.isatty():
        width = 30
        filled = width * done // max(1, total)
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {name[:30]:<30}")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def write_summary(rows: list[dict], path: Path) -> None:
    fields = []
    for row in rows:
        fields += [k for k in row if k not in fields]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(sorted(rows, key=lambda r: r["submission"]))


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


def main(argv: list[str]) -> int:

    p = argparse.ArgumentParser(prog="mha-check grade", description=__doc__.split("\n\n")[0])
    p.add_argument("submissions", nargs="?", help="a folder with one sub-folder per submission")
    p.add_argument("--target", help="FILE.py:ClassName inside each submission (default: the rubric's target, or "
                                    "the single file that defines an nn.Module class)")
    p.add_argument("--rubric", help="TOML file: points and visibility per check, and the target")
    p.add_argument("--out", default="mha-check-results", help="folder for the reports and summary.csv")
    p.add_argument("--format", choices=tuple(EXTENSIONS), default="json", help="per-submission report format")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="graders side by side (default: cores)")
    p.add_argument("--shard", type=_shard, help="grade only shard I of N (by a hash of the folder name)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds per submission (default 60)")
    p.add_argument("--memory-mb", type=int, default=3072, help="address space per submission (default 3072)")
    p.add_argument("--merge", nargs="+", metavar="CSV", help="join shard summaries into one CSV on stdout")
    p.add_argument("--allow-unconfined", action="store_true",
                   help="as root, grade even where submissions cannot be dropped to an unprivileged uid")
    args = p.parse_args(argv[1:])
    if args.merge:
        return merge(args.merge, sys.stdout)
    if not args.submissions or not os.path.isdir(args.submissions):
        p.error(f"{args.submissions!r} is not a folder of submissions")
    option_rules.limits(args.time_limit, args.memory_mb, None, args.seed, p)
    if not 1 <= args.jobs <= MAX_JOBS:
        p.error(f"--jobs must be between 1 and {MAX_JOBS}, not {args.jobs}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        p.error(f"--out {args.out}: that is a file; give a folder for the reports")
    if out.resolve() == Path(args.submissions).resolve() or Path(args.submissions).resolve() in out.resolve().parents:
        p.error(f"--out {args.out}: inside the submissions folder, it would be graded as a submission")
    if os.geteuid() == 0 and not args.allow_unconfined:
        reasons = isolation.refusal()
        if reasons:
            p.error("running as root, but the submissions could not be confined: " + "; ".join(reasons) +
                    ". Grade in a container that allows it (CAP_SETUID and CAP_SETGID; CAP_SYS_ADMIN for namespaces),"
                    " as an ordinary user, or pass --allow-unconfined (every report then says how it ran)")
    try:
        rubric = rubrics.load_rubric(args.rubric, {c.id for c in all_checks()}) if args.rubric else None
    except rubrics.RubricError as e:
        p.error(str(e))
    target = args.target or (rubric.target if rubric else None)
    folders = sorted(d for d in Path(args.submissions).iterdir() if d.is_dir() and not d.name.startswith("."))
    folders = [d for d in folders if in_shard(d.name, args.shard)]
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        p.error(f"--out {args.out}: {e.strerror or e}")
    limits = sandbox.Limits(call_seconds=min(30.0, args.time_limit), total_seconds=args.time_limit,
                            memory_mb=args.memory_mb)
    options = {"seed": args.seed, "format": args.format, "rubric": args.rubric, "limits": limits.to_dict(),
               "allow_unconfined": args.allow_unconfined}
    rows, started = [], time.monotonic()
    jobs = max(1, min(args.jobs, len(folders)))
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn"), initializer=_init_grader,
                             initargs=(limits.to_dict(),)) as pool:
        futures = {pool.submit(_grade_one, str(d), target or find_target(d), options): d for d in folders}
        for done, future in enumerate(_as_completed(futures), 1):
            folder = futures[future]
            try:
                result = future.result()
            except Exception as e:  # noqa: BLE001 - a grader failure costs one row, never the batch
                result = {"name": folder.name, "text": f"mha-check could not grade this submission: {e}\n",
                          "row": {"submission": folder.name, "passed": False, "process": f"grader error: {e}"}}
            (out / f"{result['name']}.{EXTENSIONS[args.format]}").write_text(result["text"])
            rows.append(result["row"])
            _progress(done, len(folders), folder.name)
    summary = out / (f"summary-{args.shard[0]}-of-{args.shard[1]}.csv" if args.shard else "summary.csv")
    write_summary(rows, summary)
    passed = sum(1 for r in rows if r.get("passed") is True)
    print(f"graded {len(rows)} submissions in {time.monotonic() - started:.1f} s: {passed} pass every check; "
          f"reports in {out}/, summary in {summary}")
    return 0


def _as_completed(futures):
    return as_completed(futures)
