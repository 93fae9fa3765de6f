"""What `mha-check grade --resume` trusts: the stamp mha-check puts at the end of every report `grade` writes.

A stamp says for whom the report was written (the submission's name), what was graded (a SHA-256 of every file of
the staged submission, helper modules included: the batch's own copy, which each of its children copies, never the
student's folder, which may change while the batch runs), how (the mha-check version and a digest of its own code, the
rubric file's digest, the options that change a verdict: target, seed (a keyed digest: `seed_tag`), limits,
format), the summary row the report gave, and a digest of the report's own text.  It is sealed with an HMAC whose
key only the instructor's account reads (KEY_ENV, else KEY_FILE under the XDG state folder, mode 0600), so that:

- a report that has no stamp (an older mha-check's) or whose seal does not verify (written by someone else, by
  hand, or with another account's key) is graded again, never trusted;
- a stamp is used only for the submission it names, with the same files, rubric, options and mha-check: a student
  who changes a helper file, an instructor who edits the rubric or upgrades mha-check gets a regrade;
- the resumed row is the one in the sealed stamp, never the summary.csv in the folder (anyone who can write the
  folder can edit that), and a report whose text was edited since is graded again;
- the row is enciphered in the stamp (HMAC-SHA256 of the key as a keystream, a fresh nonce per stamp): a report is
  handed to its student, and the row names every check's status and the diagnosed mistake, hidden checks'
  included.  Everything else a stamp holds is digests and what the report says already.

What a hostile submission can and cannot do: its code runs confined in a child that can neither read the key (it
lives in the instructor's home, outside the child's view; the graders that hold it never run student code) nor
write the output folder; whatever it prints lands inside the report's body, which the trusted process seals after
it (the stamp is the report's last part, so a stamp-shaped text printed by the code is not the one read).  Handing
in another student's files gives a report under its own name (the name is sealed).  What it cannot be protected
against: someone who has the instructor's account (or the key file) can seal anything; someone who can write the
output folder can delete reports (they are then graded again) or put back an older sealed report of the same
submission (the same verdict, grading being seeded and deterministic).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import stat
from pathlib import Path

from harness import PACKAGES_ROOT
from harness.engine.report import VERSION
from harness.sandbox import scratch
from harness.wire.errors import ChildEnd
from harness.wire.names import OURS

KEY_ENV = "MHA_CHECK_STAMP_KEY"  # a key file of one's own: shards graded on several machines resume with one key
KEY_FILE = os.path.join("mha-check", "stamp.key")  # under $XDG_STATE_HOME, else ~/.local/state
JSON_FIELD = "mha_check_stamp"  # the stamp's key in a JSON report (json, gradescope)
MARK = "-- mha-check stamp (mha-check grade --resume reads it) --"
XML_MARK = "mha-check stamp (read by grade's resume option)"  # in an XML comment, which may not hold "--"
MAX_REPORT = 64 << 20  # a report read back to check its stamp: larger is not one grade wrote
MAX_FILES = 5000  # a submission with more files is not resumed (always graded again)
MAX_BYTES = 1 << 30  # nor one with more bytes than this
SKIPPED = {".git", "__pycache__"}  # never graded (a repository's history, Python's caches)
# A row whose process ended so says more of the moment it was graded in than of the files (a neighbour spinning on
# every core, a loaded machine, an operator's kill): never resumed, or a classmate's time-out would stay a zero at every
# --resume (red team 14); alike an instructor's test left undecided (its time limit is kept in the test's child, so
# no process says it).  A CPU-time, memory or output limit is the code's own and stays.
MOMENTARY = {ChildEnd.TIME.value, ChildEnd.STARTUP.value, ChildEnd.KILLED_OUTSIDE.value,
             ChildEnd.INTERRUPTED.value, ChildEnd.GRADER_ERROR.value}


def _canonical(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def key_path() -> str:
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.environ.get(KEY_ENV) or os.path.join(state, KEY_FILE)


def load_key(path: str | None = None) -> bytes | None:
    """The account's stamp key, made (32 random bytes, 0600) the first time; None where there can be none (a home
    that cannot be written) or where the file is not one only this account can read (then nothing is trusted)."""
    path = path or key_path()
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "wb") as f:
                f.write(os.urandom(32))
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
                return None
            key = f.read(4096)
    except OSError:
        return None
    return key if len(key) >= 16 else None


def folder_digest(folder: Path) -> str | None:
    """SHA-256 of what a submission's child can import: every file under `folder` by its path (a link by its
    target, never followed), .git and caches left out; None for a folder too large to be worth it."""
    digest, count, size = hashlib.sha256(), 0, 0
    todo = [Path(folder)]
    while todo:
        here = todo.pop()
        try:
            entries = sorted(here.iterdir())
        except OSError:
            return None
        for p in entries:
            count += 1
            if count > MAX_FILES:
                return None
            rel = p.relative_to(folder).as_posix()
            try:
                st = os.lstat(p)
            except OSError:
                return None
            if stat.S_ISLNK(st.st_mode):
                digest.update(_canonical(["link", rel, os.readlink(p)]))
            elif stat.S_ISDIR(st.st_mode):
                if p.name not in SKIPPED:
                    digest.update(_canonical(["folder", rel]))
                    todo.append(p)
            elif stat.S_ISREG(st.st_mode):
                size += st.st_size
                if size > MAX_BYTES:
                    return None
                data = scratch.read_regular(str(p), st.st_size)
                if data is None:
                    return None
                digest.update(_canonical(["file", rel, len(data)]) + data)
            else:
                digest.update(_canonical(["other", rel]))
    return digest.hexdigest()


def staged_digest(staged, kind: str) -> str | None:
    """The digest a stamp names for a submission the batch staged (harness.frontends.submissions.Staged): its copy,
    every file of which is what its children get, and what the copy left out (by path and reason: a report says
    which compiled files were not run); `kind`: how it was handed in ("folder", "files").  None: too large."""
    files = folder_digest(staged.folder)
    if files is None:
        return None
    if not staged.left_out:
        return f"{kind}:{files}"
    return f"{kind}:" + hashlib.sha256(_canonical([files, sorted(staged.left_out)])).hexdigest()


def code_digest() -> str:
    """SHA-256 of mha-check's own Python files: a development checkout whose version has not changed still
    regrades once its checks have."""
    digest = hashlib.sha256()
    for package in OURS:
        for path in sorted(Path(PACKAGES_ROOT, package).rglob("*.py")):
            digest.update(path.relative_to(PACKAGES_ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def seed_tag(key: bytes | None, seed: int) -> str:
    """The seed as a stamp names it: a digest keyed with the stamp key, so that a report, handed to its student,
    never shows a seed drawn for its folder (harness.frontends.seeds)."""
    return hmac.new(key or b"", b"mha-check seed %d" % seed, hashlib.sha256).hexdigest()[:32]


def file_digest(path: str | None) -> str:
    if not path:
        return ""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class Stamps:
    """The stamps of one batch: `batch` is what every report of it shares (version, code, rubric, options)."""

    def __init__(self, fmt: str, batch: dict, key: bytes | None) -> None:
        self.fmt, self.batch, self.key = fmt, {"version": VERSION, **batch}, key

    def _mac(self, fields: dict) -> str:
        return hmac.new(self.key or b"", _canonical(fields), hashlib.sha256).hexdigest() if self.key else ""

    def _keystream(self, nonce: bytes, size: int) -> bytes:
        cipher_key = hmac.new(self.key or b"", b"mha-check stamp row", hashlib.sha256).digest()
        blocks = (hmac.new(cipher_key, nonce + i.to_bytes(8, "big"), hashlib.sha256).digest()
                  for i in range((size + 31) // 32))
        return b"".join(blocks)[:size]

    def _hide(self, row: dict) -> dict | None:
        """The row enciphered (None without a key: such a stamp is never resumed anyway)."""
        if not self.key:
            return None
        nonce, data = os.urandom(16), _canonical(list(row.items()))  # pairs: the summary's column order kept
        hidden = bytes(a ^ b for a, b in zip(data, self._keystream(nonce, len(data))))
        return {"nonce": nonce.hex(), "data": base64.b64encode(hidden).decode()}

    def _reveal(self, hidden) -> dict | None:
        try:
            nonce, data = bytes.fromhex(hidden["nonce"]), base64.b64decode(hidden["data"], validate=True)
            row = dict(json.loads(bytes(a ^ b for a, b in zip(data, self._keystream(nonce, len(data))))))
        except (TypeError, KeyError, ValueError):
            return None
        return row

    def seal(self, name: str, submission: str | None, row: dict, text: str) -> str:
        """`text` with its stamp at the end."""
        fields = {"name": name, "submission": submission or "", "row": self._hide(row),
                  "report": self._body_digest(text), **self.batch}
        stamp = {**fields, "mac": self._mac(fields)}
        if self.fmt in ("json", "gradescope"):
            body = text.rstrip()
            assert body.endswith("}"), "a JSON report is an object"
            return f'{body[:-1].rstrip()},\n  "{JSON_FIELD}": {json.dumps(stamp, sort_keys=True)}\n}}\n'
        sealed = base64.b64encode(_canonical(stamp)).decode()
        lines = "\n".join(sealed[i:i + 76] for i in range(0, len(sealed), 76))
        if self.fmt == "junit":
            return f"{text.rstrip()}\n<!-- {XML_MARK}\n{lines}\n-->\n"
        return f"{text.rstrip()}\n\n{MARK}\n{lines}\n"

    def _body_digest(self, text: str) -> str:
        if self.fmt in ("json", "gradescope"):
            data = json.loads(text)
            data.pop(JSON_FIELD, None)
            return hashlib.sha256(_canonical(data)).hexdigest()
        return hashlib.sha256(text.rstrip().encode()).hexdigest()

    def _read(self, text: str) -> tuple[dict | None, str]:
        """The stamp at the end of `text` and the body it seals ("" when there is none)."""
        if self.fmt in ("json", "gradescope"):
            data = json.loads(text)
            stamp = data.pop(JSON_FIELD, None) if isinstance(data, dict) else None
            return (stamp if isinstance(stamp, dict) else None), hashlib.sha256(_canonical(data)).hexdigest()
        mark = f"\n<!-- {XML_MARK}\n" if self.fmt == "junit" else f"\n\n{MARK}\n"
        body, found, tail = text.rpartition(mark)
        if not found:
            return None, ""
        stamp = json.loads(base64.b64decode("".join(tail.replace("-->", "").split()), validate=True))
        return (stamp if isinstance(stamp, dict) else None), hashlib.sha256(body.rstrip().encode()).hexdigest()

    def check(self, name: str, submission: str | None, path: Path) -> tuple[dict | None, str]:
        """The summary row of the report at `path` if its stamp is sound and names this very grading of this
        submission, else None and why it is graded again (a few words)."""
        data = scratch.read_regular(str(path), MAX_REPORT)
        if data is None:
            return None, "no report" if not os.path.lexists(path) else "its report is not a regular file"
        try:
            stamp, body = self._read(data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            stamp, body = None, ""
        if stamp is None:
            return None, "its report has no stamp (an older mha-check's, or not mha-check's)"
        if not self.key:
            return None, "no stamp key to check stamps with"
        fields = {k: v for k, v in stamp.items() if k != "mac"}
        if not isinstance(stamp.get("mac"), str) or not hmac.compare_digest(stamp["mac"], self._mac(fields)):
            return None, "its report's stamp was not made by mha-check with this account's key"
        if fields.get("name") != name:
            return None, "its report is another submission's"
        if fields.get("report") != body:
            return None, "its report was edited since"
        if not submission or fields.get("submission") != submission:
            return None, "its files changed since"
        for what, why in (("version", "another mha-check version"), ("code", "another mha-check version"),
                          ("rubric", "another rubric"), ("options", "other options (target, seed, limits, format)")):
            if fields.get(what) != self.batch[what]:
                return None, f"graded with {why}"
        row = self._reveal(fields.get("row"))
        if not isinstance(row, dict) or row.get("submission") != name:
            return None, "no row in its stamp"
        if MOMENTARY & set(str(row.get("process", "")).split("; ")) or any(
                "::" in str(k) and v == "cannot_tell" for k, v in row.items()):
            return None, ("a wall-clock limit, a kill from outside or an instructor's test left undecided ended it "
                          "(the machine's moment, not the code's)")
        return row, ""
