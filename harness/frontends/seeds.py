"""The seed of a grade (issue 27): drawn where a grade is made, recorded only where staff look.

mha-check is public, and the weights and inputs it sends a student's code are derived from the seed alone.  At a
seed everyone knows (0, the default of a student checking their own code), a student can run mha-check at home on a
correct layer, record every request its child receives with the answer, and hand in a wrong layer that answers
from that table: full marks (tests/hostile/recorded/replay_recorded.py).  So every path that produces a grade
(`grade`, a single run with --format gradescope, prairielearn or junit or with --grading, hence the Gradescope
autograder and the Classroom workflow) draws its seed from the OS's randomness (`secrets`) unless --seed is given,
and a student checking their own code keeps seed 0 (same input, same verdict).

A drawn seed lies in [2**32, 2**63): 63 bits, so that nobody finds it by trying every seed against the weights a
submission saw (it sees them; it may print them into its report), and never one a person would type.  The child
never gets the seed itself (harness.sandbox.subject.child_seed).  Where it is kept, so that staff can repeat a
grade with --seed N and get the same verdict:

- a single run: Gradescope's extra_data and PrairieLearn's `mha_check_seed` field (neither shown to students); a
  JSON or JUnit report has no such field, so the seed is said on stderr (a log: GitHub Classroom shows its log to
  the student, whose next run draws a new seed anyway);
- `grade`: the output folder's record, RECORD (mode 0600, written by the grader, which no child can write), and the
  class view's notes; a batch into that folder without --seed (--resume, --only) uses it again, so that re-grading
  stays incremental (the stamps name the seed), and --overwrite draws a new one.  No report shows it (a report is
  handed to its student; its stamp holds a keyed digest of the seed, harness.frontends.stamps).
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

SEED_LIMIT = 2 ** 63  # --seed takes 0 .. SEED_LIMIT - 1
DRAWN_FROM = 2 ** 32  # a drawn seed is at least this: never 0, never one of the seeds people type
RECORD = "mha-check-seed"  # in grade's --out: no report's name (a report's always has an extension)
STAFF = "staff"  # Options.seed_private: shown only in fields students never see
FOLDER = "folder"  # Options.seed_private: recorded in grade's output folder only


class RecordError(ValueError):
    """The output folder holds a RECORD mha-check did not write (the message says what to do)."""


def draw() -> int:
    """A seed nobody can know before the grade, from the OS's randomness."""
    import secrets  # noqa: PLC0415 - start-up: the command line imports this module, only a grade draws

    return DRAWN_FROM + secrets.randbelow(SEED_LIMIT - DRAWN_FROM)


def read_record(out: Path) -> int | None:
    """The seed recorded in `out` (None: there is none); RecordError for a file that is not one mha-check wrote."""
    from harness.sandbox.scratch import read_regular  # noqa: PLC0415 - start-up: only grade reads a record

    path = out / RECORD
    if not os.path.lexists(path):
        return None
    data = read_regular(str(path), 4096)
    words = data.split() if data else []
    try:
        seed = int(words[0]) if words else -1
    except ValueError:
        seed = -1
    if not 0 <= seed < SEED_LIMIT:
        raise RecordError(f"{path} is not a seed record mha-check wrote: remove it (the batch then draws a new seed) "
                          "or give --seed")
    return seed


def write_record(out: Path, seed: int, replace: bool = False) -> int:
    """Record `seed` for `out`'s batches (mode 0600) and return the seed recorded there: `seed`, or, unless
    `replace`, the one another batch (a shard grading into the same folder) recorded first."""
    from datetime import datetime, timezone  # noqa: PLC0415 - start-up: only grade writes a record

    text = (f"{seed}\n# the seed mha-check grade drew at random on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC for "
            "the reports in this folder: staff only (no report shows it).  A grade into this folder without --seed "
            f"uses it again (--resume, --only); --overwrite draws a new one; repeat a grade with --seed {seed}.\n")
    path = out / RECORD
    fd, partial = tempfile.mkstemp(prefix=f".{RECORD}.", suffix=".partial", dir=out)  # mode 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(partial, path)
        else:
            try:
                os.link(partial, path)  # whole, and never over another batch's
            except FileExistsError:
                recorded = read_record(out)
                return seed if recorded is None else recorded
    finally:
        with contextlib.suppress(OSError):
            os.unlink(partial)
    return seed
