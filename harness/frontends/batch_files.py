"""What `grade` writes: one report per submission and the summary table, each replaced whole (`write_atomic`).

A full disk or an I/O error on the output folder never loses a grade nor stops the batch with a traceback: a report
that cannot be written is kept in memory and tried again at the end, after the batch's scratch is gone (which may
be what filled the disk); the summary is rewritten after every report and, should it still fail at the end, printed
on stdout, so that every verdict reaches the person who ran the batch.  `BatchFiles.finish` then says, in one line,
what could not be written and why, and `grade` exits with a non-zero status.
"""
from __future__ import annotations

import csv
import hashlib
import io
import os
import re
import sys
import unicodedata
from pathlib import Path

from harness.frontends.writing import WRITE_FAILED, reason, write_atomic
from harness.render.view import clean

FEEDBACK = "feedback"  # the folder of --out that holds what students may be handed back (grade --feedback)
SUMMARY_LEAD = ("submission", "target", "passed", "needs_review", "score", "max_score")
__all__ = ["WRITE_FAILED", "BatchFiles", "colliding", "csv_cell", "report_file_name", "summary_text",
           "write_summary"]
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet may read as the start of a formula
DIGEST_FORM = re.compile(r"~[0-9a-f]{12}$")  # how report_file_name ends a shortened name, or one written apart
MAX_REPORT_NAME = 200  # bytes: a file name holds 255, and write_atomic's temporary adds 18 around it


def csv_cell(value):
    """A text cell as read by people (`cat`) and spreadsheets: terminal control characters shown, not obeyed, and a
    leading = + - @ quoted so that a file name is never run as a formula, and a leading tab or carriage return too
    (OWASP's list: a spreadsheet may drop them and read the formula after them); and a leading quote, so that
    `csv_uncell` reads every cell back as the text it quotes.  Names come from students' files."""
    if not isinstance(value, str):
        return value
    text = clean(value)
    return "'" + text if text[:1] in FORMULA_STARTS or text[:1] == "'" else text  # a leading quote quoted too:
    # '=x and =x were one cell, read back as =x (red team 18: grade --only =x took the other student's row)


def csv_uncell(value: str) -> str:
    """A cell of our summary read back as the text `csv_cell` quoted ('=alice is =alice), so that a row read again
    (--only keeps the others' rows) is found by its name and written once more as it was."""
    return value[1:] if value[:1] == "'" and (value[1:2] in FORMULA_STARTS or value[1:2] == "'") else value


def report_file_name(name: str, extension: str, apart: bool = False) -> str:
    """The file name of `name`'s report: `NAME.EXTENSION`, or where that is longer than a file name may be, the
    name's beginning and a digest of all of it (a Gradescope group's names joined with " & ", or 127 letters of a
    two-byte script, had no report, and cost the whole class its class view).  The summary keeps the whole name.
    `apart` (`colliding`): the digest form whatever the length, for a name another student's equals on a folder
    that ignores case or Unicode form.  A name that itself ends as that form does (`DIGEST_FORM`) is digested too,
    never another's shortened name."""
    whole = f"{name}.{extension}"
    if len(os.fsencode(whole)) <= MAX_REPORT_NAME and not apart and not DIGEST_FORM.search(name):
        return whole  # a name that ends as a digest form does is written in one of its own (red team 18: a student
        # who typed a long-named group's START~DIGEST as their name had the group's report file)
    digest = hashlib.sha256(os.fsencode(name)).hexdigest()[:12]
    room = MAX_REPORT_NAME - len(f"~{digest}.{extension}".encode())
    start = os.fsencode(name)[:room].decode("utf-8", "ignore")  # never half a character
    return f"{start}~{digest}.{extension}"


def colliding(names) -> frozenset[str]:
    """The names that another, different name equals once case and Unicode form are set aside ("Alice Smith" and
    "alice smith", an accent composed or not): on an output folder that ignores them (macOS, Docker Desktop's bind
    mounts, vfat, SMB) their reports and feedback would be one file, the later one what both read (red team 17).
    Each such name is written apart (`report_file_name`), whatever the order the batch meets them in, so that
    --resume and the class view find the same files."""
    by_form: dict[str, set[str]] = {}
    for name in names:
        by_form.setdefault(unicodedata.normalize("NFC", name).casefold(), set()).add(name)
    return frozenset(n for group in by_form.values() if len(group) > 1 for n in group)


def summary_text(rows: list[dict], lines: dict | None = None) -> str:
    """The summary table as CSV: the lead columns, then every other column in the order rows first name it.
    `lines` (BatchFiles'): each row's CSV line as last written, reused while the row and the columns are unchanged.
    The summary is rewritten after every report, and writing each row anew made a batch quadratic: 42 ms a rewrite
    for 500 rows (36 columns), 21 s of CPU over a 500-student batch, taken from the graders on the same cores."""
    fields = list(dict.fromkeys([*SUMMARY_LEAD, *(k for row in rows for k in row)]))  # first named, first
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=fields)
    writer.writeheader()
    lines = {} if lines is None else lines
    columns = tuple(fields)
    for row in sorted(rows, key=lambda r: r["submission"]):
        seen = lines.get(id(row))
        if seen is None or seen[0] is not row or seen[1] != columns or seen[2] != row:  # new, changed, new columns
            one = io.StringIO(newline="")
            csv.DictWriter(one, fieldnames=fields).writerow({k: csv_cell(v) for k, v in row.items()})
            seen = lines[id(row)] = (row, columns, dict(row), one.getvalue())  # the row kept: its id stays its own
        buffer.write(seen[3])
    return buffer.getvalue()


def write_summary(rows: list[dict], path: Path, durable: bool = True, lines: dict | None = None) -> None:
    """The summary, replaced whole (a reader, or a batch killed while writing it, never sees half a file)."""
    write_atomic(path, summary_text(rows, lines), durable=durable)


class BatchFiles:
    """The output folder of one batch: `report()` and `summary()` as the batch goes, `finish()` at its end."""

    def __init__(self, out: Path, summary: Path, extension: str):
        self.out, self.summary_path, self.extension = out, summary, extension
        self.unwritten: dict[str, str] = {}  # report path -> its text, kept for the retry at the end
        self.error: OSError | None = None  # the last write that failed
        self.kept: list[dict] = []  # rows not graded by this batch that its summary keeps (--resume's)
        self.lines: dict = {}  # each row's CSV line as last written (summary_text)
        self.summary_written = False  # by `finish`: the summary of the whole batch is on disk
        self.apart: frozenset[str] = frozenset()  # names written apart (`colliding`), from every submission found

    def report_path(self, name: str) -> Path:
        return self.out / report_file_name(name, self.extension, name in self.apart)

    def report(self, name: str, text: str) -> None:
        """Write one submission's report, or keep it for later."""
        path = str(self.report_path(name))
        try:
            write_atomic(path, text)
            self.unwritten.pop(path, None)
        except OSError as e:
            self.unwritten[path], self.error = text, e

    def feedback_path(self, name: str) -> Path:
        return self.out / FEEDBACK / report_file_name(name, "txt", name in self.apart)

    def feedback(self, name: str, text: str) -> None:
        """Write one student's feedback (grade --feedback: the student's view, harness.render.formats.feedback), or
        keep it for the retry at the end, as a report."""
        path = str(self.feedback_path(name))
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_atomic(path, text)
            self.unwritten.pop(path, None)
        except OSError as e:
            self.unwritten[path], self.error = text, e

    def summary(self, rows: list[dict], durable: bool = False) -> bool:
        """Rewrite the summary with every row so far; False (and remembered) when it cannot be written.  Durable
        (fsync) only at the end: each rewrite during the batch is replaced by the next."""
        try:
            write_summary(self.kept + rows, self.summary_path, durable, self.lines)
            return True
        except OSError as e:
            self.error = e
            return False

    def finish(self, rows: list[dict], stdout=None) -> str | None:
        """Try once more what could not be written, summary last (writing reports first frees nothing, but a report
        that still fails must not keep the summary from its own last try); None when everything is on disk, else the
        one line that says what is not, the summary then printed on `stdout` (CSV) so that no verdict is lost."""
        for path, text in list(self.unwritten.items()):
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)  # feedback/, which the disk may have refused
                write_atomic(path, text)
                del self.unwritten[path]
            except OSError as e:
                self.error = e
        summary_written = self.summary_written = self.summary(rows, durable=True)
        if summary_written and not self.unwritten:
            return None
        why = reason(self.error) if self.error is not None else "unknown error"
        lost = f"{len(self.unwritten)} of {len(rows)} reports could not be written to {self.out}/"
        if summary_written:
            return f"mha-check grade: error: {lost} ({why}); every verdict is in {self.summary_path}"
        (stdout or sys.stdout).write(summary_text(rows))
        return (f"mha-check grade: error: could not write {self.summary_path} ({why}): the summary is printed above "
                f"on stdout instead; {lost}")
