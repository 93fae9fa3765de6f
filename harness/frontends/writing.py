"""Every result file mha-check writes (a report, `grade`'s summary, Gradescope's results.json, PrairieLearn's
results) is written by `write_atomic`: a temporary file in the same folder, flushed to disk, then renamed over the
name.  A reader (the platform, a grader's script, a batch killed while writing) sees the old file or the whole new
one, never half of one; a full disk or an I/O error leaves the old file as it was and raises OSError for the caller
to say so, with nothing left behind but what was there.
"""
from __future__ import annotations

import contextlib
import os
import tempfile

WRITE_FAILED = 3  # the exit status of a run whose result file could not be written (its content is on stdout)


def write_atomic(path: str | os.PathLike, text: str, encoding: str = "utf-8", durable: bool = True) -> None:
    """Replace `path` with `text`, whole or not at all (OSError: the file is as it was, no temporary left).
    `durable=False` leaves out the fsyncs (20-25 ms each on a busy disk), for a file rewritten again soon (grade's
    summary after each report, written durably at the end): whole or not at all still holds, only a power cut may
    lose that version."""
    path = os.fspath(path)
    folder, name = os.path.split(os.path.abspath(path))
    fd, partial = tempfile.mkstemp(prefix=f".{name}.", suffix=".partial", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode(encoding))
            f.flush()
            if durable:
                os.fsync(f.fileno())  # the data on disk before the name points at it: a crash never leaves it empty
        os.chmod(partial, 0o644)  # mkstemp's 0600: a report is read by the platform's other users, as before
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise
    if durable:
        _sync_folder(folder)


def _sync_folder(folder: str) -> None:
    """The rename itself on disk (best effort: some filesystems cannot sync a folder)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def reason(error: OSError) -> str:
    """An OSError in a few words: "No space left on device", never a traceback."""
    return error.strerror or str(error) or type(error).__name__
