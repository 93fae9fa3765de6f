"""`grade`'s class view: `class-report.html` (harness.render.class_report draws it), `class-mistakes.csv` (its table
of mistakes, for the gradebook) and `class-exercises/` (an exercise for each mistake the class made, exported from
its mutant as `mha-check mutants export --as-exercise` does, with its solution), all in the output folder.

Made at the end of a batch from the summary's rows, in the trusted process: the catalogue says what each mistake is
and which passage of the lesson to revisit; the links are relative paths to the files beside the page (each
student's report, the exercises), so that the folder can be moved, zipped or served as it is.  Every file is
written whole or not at all (writing.write_atomic).
"""
from __future__ import annotations

import csv
import io
import shutil
from datetime import datetime, timezone
from pathlib import Path

import mutants
from checks import all_checks
from harness.engine.report import VERSION
from harness.frontends import exercises
from harness.frontends.batch_files import colliding, csv_cell, report_file_name
from harness.frontends.writing import write_atomic
from harness.render import class_report

PAGE, MISTAKES, EXERCISES = "class-report.html", "class-mistakes.csv", "class-exercises"
REPORT_EXTENSIONS = ("json", "results.json", "xml", "txt")  # grade's formats: a kept row's report may be in another


def names(shard: tuple[int, int] | None = None) -> tuple[str, str]:
    """The page's and the CSV's file names; a shard's carry its number, as its summary does."""
    if not shard:
        return PAGE, MISTAKES
    tag = f"-{shard[0]}-of-{shard[1]}"
    return f"class-report{tag}.html", f"class-mistakes{tag}.csv"


def write(out: Path, rows: list[dict], extension: str, shard: tuple[int, int] | None = None,
          notes: list[str] = (), banner: str = "") -> list[Path]:
    """Write the class view of `rows` (the summary's) into `out`; returns the page and the CSV.  OSError: what
    could not be written (each file is whole or absent; an exercise folder made here is removed again, as it is
    when Ctrl-C stops the writing).  Some 20 ms per mistake the class made (its exercise is made from the mutant's
    source), and a few ms for the page."""
    catalogue = mutants.catalogue_or_empty()  # without it the page still counts and ranks the mistakes, by id
    diagnosed = sorted({m for r in rows for k in ("diagnosis", "second_mistake", "rule_mistakes")
                        for m in str(r.get(k) or "").split() if m in catalogue})  # the second of two mistakes
    # named together gets its exercise too, and a lesson's rule broken beside them
    made_folder = not (out / EXERCISES).exists()
    try:
        files = _exercises(out, diagnosed)
        tests = list(dict.fromkeys(k for r in rows for k in r if "::" in k))  # the instructor's (--tests)
        view = class_report.build(rows, [(c.id, c.claim) for c in all_checks()] +
                                  [(t, f"the instructor's test {t} passes") for t in tests], catalogue,
                                  _links(out, rows, extension),
                                  files, [*notes, f"written {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC by "
                                                  f"mha-check {VERSION}"])
        page_name, csv_name = names(shard)
        write_atomic(out / csv_name, _csv(view))
        write_atomic(out / page_name, class_report.page(view, banner=banner))
    except BaseException:  # OSError, or Ctrl-C while writing: no exercise folder made for nothing
        if made_folder:
            shutil.rmtree(out / EXERCISES, ignore_errors=True)
        raise
    return [out / page_name, out / csv_name]


def _links(out: Path, rows: list[dict], extension: str) -> dict[str, str]:
    """submission -> its report's file name, for the reports that are there (a row kept by --only may have one in
    another format)."""
    links = {}
    apart = colliding(str(row.get("submission", "")) for row in rows)  # as the batch wrote them (BatchFiles.apart)
    for row in rows:
        name = str(row.get("submission", ""))
        if row.get("not_graded") or not name or "/" in name or name in (".", ".."):
            continue
        for ext in dict.fromkeys((extension, *REPORT_EXTENSIONS)):
            try:
                if (out / report_file_name(name, ext, name in apart)).is_file():
                    links[name] = report_file_name(name, ext, name in apart)
                    break
            except (OSError, ValueError):  # a name the file system cannot hold: no report, no link
                break
    return links


def _exercises(out: Path, mistakes: list[str]) -> dict[str, tuple[str, str]]:
    """Each mistake as an exercise and its solution, numbered as in `mha-check mutants export --all` (the number
    names no mistake: the file is for the students).  A mutant whose source is not installed gets no exercise."""
    if not mistakes:
        return {}
    numbers = {mid: n for n, mid in enumerate(exercises.ordered(), 1)}
    made = {}
    for mid in mistakes:
        name = f"exercise-{numbers.get(mid, 0):02d}.py"
        try:
            files = exercises.export(mid, name)
        except (KeyError, OSError, SyntaxError, ValueError):
            continue
        (out / EXERCISES / "solutions").mkdir(parents=True, exist_ok=True)
        write_atomic(out / EXERCISES / name, files.exercise, durable=False)
        write_atomic(out / EXERCISES / "solutions" / name, files.solution, durable=False)
        made[mid] = (f"{EXERCISES}/{name}", f"{EXERCISES}/solutions/{name}")
    return made


def _csv(view: class_report.ClassView) -> str:
    rows = class_report.mistakes_table(view)
    fields = ["rank", "mistake", "title", "students", "share", "topic", "lesson", "exercise", "solution", "explain",
              "who"]
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=fields)
    writer.writeheader()
    writer.writerows({k: csv_cell(v) for k, v in row.items()} for row in rows)
    return buffer.getvalue()
