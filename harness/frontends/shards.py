"""Shards of a course graded apart (`mha-check grade --shard I/N`) and their summaries joined again (`--merge`).

A submission's shard depends on its own name only, so that array jobs, CI matrices or a fleet of machines can share
a course and a submission added later moves no other; `merge` refuses a set of summaries with a shard missing, of
different splits, or with a submission graded twice.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import io
import os
import re
import sys


def in_shard(name: str, shard: tuple[int, int] | None) -> bool:
    """Stable under additions: a submission's shard depends on its own name only."""
    if shard is None:
        return True
    index, count = shard
    return int(hashlib.sha256(name.encode()).hexdigest(), 16) % count == index - 1



def parse_shard(text: str) -> tuple[int, int]:
    try:
        i, n = (int(v) for v in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError("expected I/N, e.g. 2/8") from None
    if not 1 <= i <= n:
        raise argparse.ArgumentTypeError("I must be between 1 and N")
    return i, n



class MergeError(ValueError):
    """The summaries given to --merge are not one whole set of shard summaries (the message says why)."""


def read_shards(paths: list[str]) -> tuple[list[dict], list[str]]:
    """The rows of the shards' summaries, sorted by submission, and every column of any of them in the order the
    summaries first name it.  MergeError for a file that is not such a summary or a set that is not whole."""
    rows = []
    for p in paths:
        try:
            with open(p, newline="", encoding="utf-8") as f:
                reader = csv.DictReader(f)
                found, columns = list(reader), reader.fieldnames or []
        except OSError as e:
            raise MergeError(f"cannot read {p}: {e.strerror or e}") from None
        except (csv.Error, UnicodeDecodeError) as e:
            raise MergeError(f"{p} is not a CSV file ({e})") from None
        if "submission" not in columns or any(None in r or not r["submission"] for r in found):
            raise MergeError(f"{p} is not a summary written by mha-check grade (a 'submission' column, one value per "
                             "column in every row)")
        rows += found
    missing = missing_shards(paths)
    if missing:
        raise MergeError(missing)
    names = [r["submission"] for r in rows]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise MergeError(f"submissions graded twice: {', '.join(duplicates)}")
    fields = []
    for row in rows:
        fields += [k for k in row if k not in fields]
    return sorted(rows, key=lambda r: r["submission"]), fields


def merged_text(rows: list[dict], fields: list[str]) -> str:
    """The merged summary as CSV.  The cells are written as the shards wrote them (already made safe for
    spreadsheets by batch_files.csv_cell), so that nothing is quoted twice."""
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=fields)
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def merge(paths: list[str], out) -> int:
    """`--merge` without --out: the shards' summaries as one CSV on `out`, sorted by submission, every column of
    any of them; 2 (with the reason on stderr) for a file that is not such a summary or a set that is not whole."""
    try:
        rows, fields = read_shards(paths)
    except MergeError as e:
        return merge_error(str(e))
    out.write(merged_text(rows, fields))
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


def merge_error(message: str) -> int:
    print(f"mha-check grade --merge: error: {message}", file=sys.stderr)
    return 2

