"""Result files are replaced whole or not at all, and a full disk never loses the summary of a batch
(harness.frontends.writing, harness.frontends.batch_files)."""
import errno
import io
import os

import pytest

from harness.frontends import batch_files, writing
from harness.frontends.batch_files import BatchFiles, summary_text


def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_file_is_replaced_whole_and_a_failed_write_leaves_the_old_one_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    writing.write_atomic(path, '{"score": 1}')
    assert path.read_text() == '{"score": 1}' and oct(path.stat().st_mode & 0o777) == "0o644"
    monkeypatch.setattr(os, "fsync", _no_space)
    with pytest.raises(OSError) as failed:
        writing.write_atomic(path, '{"score": 17}')
    assert failed.value.errno == errno.ENOSPC and writing.reason(failed.value) == "No space left on device"
    assert path.read_text() == '{"score": 1}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]  # no .partial left behind
    monkeypatch.setattr(os, "replace", _no_space)  # a rewrite without fsync fails the same way, at its rename
    with pytest.raises(OSError):
        writing.write_atomic(path, '{"score": 17}', durable=False)
    assert path.read_text() == '{"score": 1}' and sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


ROWS = [{"submission": "bob", "target": "a.py:A", "passed": False, "score": 3.0},
        {"submission": "ada", "target": "a.py:A", "passed": True, "score": 17.0}]


def test_reports_that_cannot_be_written_are_kept_and_written_at_the_end(tmp_path, monkeypatch):
    files = BatchFiles(tmp_path, tmp_path / "summary.csv", "json")
    honest = writing.write_atomic
    monkeypatch.setattr(batch_files, "write_atomic", _no_space)
    files.report("ada", "{ada}")
    assert files.summary(ROWS[1:]) is False and not (tmp_path / "summary.csv").exists()
    monkeypatch.setattr(batch_files, "write_atomic", honest)  # the batch's scratch removed: room again
    files.report("bob", "{bob}")
    assert files.finish(ROWS) is None
    assert (tmp_path / "ada.json").read_text() == "{ada}" and (tmp_path / "bob.json").read_text() == "{bob}"
    assert (tmp_path / "summary.csv").read_bytes().decode() == summary_text(ROWS)


def test_a_summary_that_cannot_be_written_is_printed_and_said_in_one_line(tmp_path, monkeypatch):
    files = BatchFiles(tmp_path, tmp_path / "summary.csv", "json")
    monkeypatch.setattr(batch_files, "write_atomic", _no_space)
    for row in ROWS:
        files.report(row["submission"], "{}")
        files.summary(ROWS)
    printed = io.StringIO()
    line = files.finish(ROWS, printed)
    assert printed.getvalue() == summary_text(ROWS) and "ada,a.py:A,True" in printed.getvalue()
    assert line.startswith("mha-check grade: error: could not write") and "\n" not in line
    assert "No space left on device" in line and "printed above on stdout" in line and "2 of 2 reports" in line
    assert list(tmp_path.iterdir()) == []


def test_the_summary_keeps_its_format(tmp_path):
    """The same bytes as before it was written through write_atomic: lead columns first, rows by name, CRLF."""
    batch_files.write_summary(ROWS, tmp_path / "summary.csv")
    data = (tmp_path / "summary.csv").read_bytes()
    assert data.startswith(b"submission,target,passed,needs_review,score,max_score\r\nada,")


def test_the_summary_rewritten_from_its_remembered_lines_is_the_summary_written_anew():
    """grade rewrites the summary after every report from each row's line as last written: a changed row, a row
    with a new column, a row whose cell must be quoted and a new row all give exactly the text written from scratch."""
    rows = [dict(r) for r in ROWS]
    lines: dict = {}
    assert summary_text(rows, lines) == summary_text(rows) and len(lines) == 2
    rows[0]["score"] = 4.0
    rows.append({"submission": "=cmd", "target": "a.py:A", "passed": True, "score": 1.0, "diagnosis": "no-mask"})
    assert summary_text(rows, lines) == summary_text(rows)
    assert "'=cmd" in summary_text(rows, lines) and "4.0" in summary_text(rows, lines)
    rows.pop(1)
    assert summary_text(rows, lines) == summary_text(rows) and "ada" not in summary_text(rows, lines)
