"""The stamps `grade --resume` trusts (harness.frontends.stamps): a report's row is resumed only from a report
mha-check sealed for this very submission, files, rubric, options and version; anything else is graded again."""
import json
import os

import pytest

from harness.engine.runner import Options, not_run
from harness.frontends import stamps
from harness.frontends.stamps import Stamps
from harness.render import formats

BATCH = {"code": "c0de", "rubric": "", "options": {"target": "attention.py:MHA", "seed": 0}}
ROW = {"submission": "ann", "passed": True, "needs_review": False, "score": 17.0, "max_score": 17.0, "pass": 17,
       "fail": 0}
FORMATS = ("json", "gradescope", "junit", "text")


def report_text(fmt: str, message: str = "nothing to check") -> str:
    return formats.render(not_run("ann/?", message, Options(seed=0)), fmt)


@pytest.fixture
def key(tmp_path, monkeypatch):
    monkeypatch.setenv(stamps.KEY_ENV, str(tmp_path / "keys" / "stamp.key"))
    return stamps.load_key()


def sealed(tmp_path, fmt, key, text=None, name="ann", digest="folder:abc", row=ROW, batch=BATCH):
    path = tmp_path / f"{name}.{fmt}"
    path.write_text(Stamps(fmt, batch, key).seal(name, digest, row, text or report_text(fmt)))
    return path


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_sealed_report_gives_its_row_back_and_stays_a_report_of_its_format(tmp_path, key, fmt):
    path = sealed(tmp_path, fmt, key)
    row, why = Stamps(fmt, BATCH, key).check("ann", "folder:abc", path)
    assert row == ROW and list(row) == list(ROW) and why == ""  # in the summary's column order
    text = path.read_text()
    if fmt in ("json", "gradescope"):
        assert json.loads(text)[stamps.JSON_FIELD]["name"] == "ann"
    if fmt == "junit":
        import xml.etree.ElementTree as ET

        ET.fromstring(text)  # still well-formed XML: the stamp is a comment after the root
    if fmt == "text":
        assert all(len(line) <= 80 for line in text.splitlines()[-5:])  # wrapped as the report is


@pytest.mark.parametrize("fmt", FORMATS)
def test_what_is_graded_again_and_why(tmp_path, key, fmt):
    check = Stamps(fmt, BATCH, key).check
    assert check("ann", "folder:abc", tmp_path / "nobody.json")[1] == "no report"
    (tmp_path / "old.x").write_text(report_text(fmt))  # written by an older mha-check: no stamp
    assert "no stamp" in check("ann", "folder:abc", tmp_path / "old.x")[1]
    path = sealed(tmp_path, fmt, key)
    assert check("ann", "folder:changed", path) == (None, "its files changed since")
    assert check("ann", None, path)[0] is None  # a submission too large to digest is always graded again
    assert check("bob", "folder:abc", path) == (None, "its report is another submission's")
    for field, value, why in [("code", "n3w", "another mha-check version"), ("rubric", "r2", "another rubric"),
                              ("options", {"target": "attention.py:MHA", "seed": 1}, "other options")]:
        row, reason = Stamps(fmt, {**BATCH, field: value}, key).check("ann", "folder:abc", path)
        assert row is None and why in reason, (field, reason)
    other = Stamps(fmt, BATCH, os.urandom(32)).check("ann", "folder:abc", path)
    assert other == (None, "its report's stamp was not made by mha-check with this account's key")
    assert Stamps(fmt, BATCH, None).check("ann", "folder:abc", path)[0] is None  # no key: nothing trusted
    link = tmp_path / f"link.{fmt}"
    link.symlink_to(path)
    assert check("ann", "folder:abc", link) == (None, "its report is not a regular file")


def test_a_forged_row_or_an_edited_report_is_graded_again(tmp_path, key):
    """Someone who can write the output folder but has no key: editing the row in the stamp breaks the seal;
    editing the report's text (a failing verdict made passing) breaks its digest."""
    check = Stamps("json", BATCH, key).check
    path = sealed(tmp_path, "json", key, row={**ROW, "passed": False, "score": 3.0})
    data = json.loads(path.read_text())
    data[stamps.JSON_FIELD]["row"] = Stamps("json", BATCH, key).seal("ann", "folder:abc", ROW, report_text("json"))
    path.write_text(json.dumps(data))
    assert check("ann", "folder:abc", path)[1].startswith("its report's stamp was not made by mha-check")
    path = sealed(tmp_path, "json", key)
    data = json.loads(path.read_text())
    data["passed"] = not data["passed"]
    path.write_text(json.dumps(data, indent=4))  # reformatted alone would not matter: the digest is of the data
    assert check("ann", "folder:abc", path) == (None, "its report was edited since")
    path = sealed(tmp_path, "text", key)
    path.write_text(path.read_text().replace("nothing to check", "all checks passed"))
    assert Stamps("text", BATCH, key).check("ann", "folder:abc", path) == (None, "its report was edited since")


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_stamp_tells_a_student_nothing_their_report_does_not(tmp_path, key, fmt):
    """A report is the student's: the row in its stamp (every check's status, the diagnosed mistake, a hidden
    check's included) is enciphered."""
    secret = {**ROW, "a-hidden-check": "fail", "diagnosis": "fill-minus-hundred"}
    text = sealed(tmp_path, fmt, key, row=secret).read_text()
    stamp, _ = Stamps(fmt, BATCH, key)._read(text)
    assert stamp["name"] == "ann"  # read back: the stamp as a student decoding it would see it
    seen = text + json.dumps(stamp)
    assert "fill-minus-hundred" not in seen and "a-hidden-check" not in seen
    assert Stamps(fmt, BATCH, key).check("ann", "folder:abc", tmp_path / f"ann.{fmt}") == (secret, "")


@pytest.mark.parametrize("fmt", ["text", "junit", "json"])
def test_a_stamp_printed_by_the_students_code_is_not_the_one_read(tmp_path, key, fmt):
    """A hostile submission's output lands in the report's body: a stamp-shaped text there (even one sealed with
    a key of its own) is body, and the report's own stamp, sealed after it, is the one read."""
    fake = Stamps(fmt, BATCH, os.urandom(32)).seal("ann", "folder:abc", {**ROW, "score": 99.0}, report_text(fmt))
    text = report_text(fmt, "your code printed: " + fake)
    path = sealed(tmp_path, fmt, key, text=text, row={**ROW, "passed": False, "score": 0.0})
    assert Stamps(fmt, BATCH, key).check("ann", "folder:abc", path) == ({**ROW, "passed": False, "score": 0.0}, "")


def test_the_key_is_the_accounts_own(tmp_path, monkeypatch):
    path = tmp_path / "state" / "mha-check" / "stamp.key"
    monkeypatch.setenv(stamps.KEY_ENV, str(path))
    key = stamps.load_key()
    assert key and len(key) == 32 and stamps.load_key() == key  # made once, then read
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    path.chmod(0o644)  # readable by others: a key others may have read vouches for nothing
    assert stamps.load_key() is None
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv(stamps.KEY_ENV, str(tmp_path / "a-file" / "stamp.key"))  # nowhere to make one
    assert stamps.load_key() is None


def test_the_submissions_digest_covers_its_helpers_not_its_caches(tmp_path):
    sub = tmp_path / "ann"
    (sub / "hw3" / "__pycache__").mkdir(parents=True)
    (sub / "hw3" / "attention.py").write_text("from helpers import f\n")
    (sub / "hw3" / "helpers.py").write_text("def f(): return 1\n")
    first = stamps.folder_digest(sub)
    (sub / "hw3" / "__pycache__" / "helpers.cpython-311.pyc").write_bytes(b"\0")
    (sub / ".git").mkdir()
    (sub / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    assert stamps.folder_digest(sub) == first
    (sub / "hw3" / "helpers.py").write_text("def f(): return 2\n")
    assert stamps.folder_digest(sub) != first
    (sub / "hw3" / "helpers.py").write_text("def f(): return 1\n")
    assert stamps.folder_digest(sub) == first
    (sub / "hw3" / "link.py").symlink_to("/etc/passwd")  # named by its target, never followed
    assert stamps.folder_digest(sub) != first


@pytest.mark.parametrize("row, kept", [
    ({**ROW, "process": "time"}, False),  # a wall-clock limit: the moment's as much as the code's (red team 14)
    ({**ROW, "process": "crash; startup"}, False),
    ({**ROW, "process": "killed-outside"}, False),
    ({**ROW, "test_a.py::test_b": "cannot_tell"}, False),  # an instructor's test undecided: its 30 s, under load
    ({**ROW, "process": "memory"}, True),  # the code's own size: graded again, it is the same
    ({**ROW, "process": "cpu", "test_a.py::test_b": "fail"}, True),
])
def test_a_verdict_the_moment_may_have_made_is_graded_again(tmp_path, key, row, kept):
    got, why = Stamps("json", BATCH, key).check("ann", "folder:abc", sealed(tmp_path, "json", key, row=row))
    assert (got == row) if kept else (got is None and "the machine's moment" in why)
