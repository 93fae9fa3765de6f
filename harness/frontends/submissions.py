"""Where a course's submissions are: the layouts `mha-check grade` reads, found without running any of them.

Submissions arrive as the platform exported them, and grading must not need a script to reshape them first
(harness.frontends.exports reads each platform's names):

- one folder per student (Gradescope's export, named by its submission_metadata.yml; Moodle's "download in
  folders"; GitHub Classroom's repositories; any folder named by student): every visible sub-folder is one
  submission, even one without a code file (it gets a failing row, never silence), its target found in a sub-folder
  when the student zipped a folder (`hw3/attention.py`);
- flat files named by student (Canvas, Blackboard, Moodle): a student's files are copied into a folder of their
  own under the names they handed them in with (so that `import helpers` finds their `helpers.py`, and no
  submission imports a classmate's file); of several attempts the latest is graded and the others are named;
- both side by side (a mixed export), and one student's own folder (`grade folder/stu07`: a row named stu07).

`--pattern`, a regular expression with a named group `student` matched at the start of each code file's name,
replaces the platforms' naming for flat files.  Whatever is not graded is listed with the reason; a student's file
or folder among them (`missing`) makes `grade` end with a non-zero status.  Finding nothing is an error that says
what the folder holds instead, because "graded 0 submissions" with exit status 0 hides a wrong path.
"""
from __future__ import annotations

import csv
import difflib
import errno
import os
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from harness.frontends import exports
from harness.frontends.batch_files import csv_cell, csv_uncell
from harness.render.view import clean
from harness.sandbox import scratch as files
from harness.wire.target import Target

DEFAULT_PATTERN = r"(?P<student>[^_]+?)(?:_|\.(?i:py|ipynb)$)"  # an example for --pattern: the name up to its first "_"
CODE = exports.CODE  # what a student hands in: a Python file or a notebook (any case: Lab.IPYNB too)
MAX_STAGED = 32 << 20  # a flat file larger than this is no attention layer (a notebook with pictures fits)
MAX_METADATA = 16 << 20  # submission_metadata.yml of a large course; a Blackboard receipt is far smaller
ARCHIVES = (".zip", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar")
LAYOUT_WORDS = {"folders": "one folder per student", "files": "files named by student",
                "mixed": "folders per student and files named by student", "one": "one student's folder"}


def is_code(path: Path) -> bool:
    return path.suffix.lower() in CODE


class PatternError(ValueError):
    """--pattern is not a regular expression with a named group `student`."""


def compile_pattern(text: str) -> re.Pattern:
    try:
        pattern = re.compile(text)
    except re.error as e:
        raise PatternError(f"--pattern {text!r} is not a regular expression: {e}") from None
    if "student" not in pattern.groupindex:
        raise PatternError(f"--pattern {text!r} needs a named group (?P<student>...) for the student's id")
    return pattern


@dataclass
class Submission:
    name: str  # the student, as the platform names them (a folder's name when nothing says more)
    folder: Path | None = None  # one folder per student (graded from a copy: stage)
    files: list[Path] = field(default_factory=list)  # flat layout: this student's files (their latest attempt)
    staged_as: dict[str, str] = field(default_factory=dict)  # flat file's name -> the name the student gave it
    others: list[str] = field(default_factory=list)  # other attempts and hand-ins not graded, said in the row
    platform: str = ""
    uid: str = ""  # the platform's id for the student (Moodle's participant id, Canvas's user id), for the gradebook

    def stage(self, staging: Path) -> Staged:
        """The folder to grade: a copy, in `staging` (a folder only the grader can write), of the student's folder,
        or (flat files) of only their files under the names they handed them in with.  Whatever a student writes
        in their own folder after this (a shared hand-in folder, a synced drive) is not seen by this batch: the
        copy is what is digested for --resume (harness.frontends.stamps), what the target is chosen in, and what
        each child of the submission copies.  Copied by the trusted process, so only regular files of bounded size
        (never a FIFO, a device or a symlink's target, which could hang the batch or hand a host file to the
        submission), as a child's own copy takes them (harness.sandbox.scratch.copy_submission: no compiled code,
        caches or hidden files); what was left out is listed with the reason.  Raises scratch NoRoom when the
        grading machine's disk has no room for it."""
        folder, n = staging / exports.safe_name(self.name), 1
        while folder.exists():  # "a/b" and "a_b" are two students with one safe name
            folder, n = staging / f"{exports.safe_name(self.name)}-{n}", n + 1
        if self.folder is not None:
            folder.mkdir(parents=True, mode=0o700)
            _, left_out = files.copy_submission(str(self.folder), str(folder), None, files.MAX_BYTES, follow=False)
            return Staged(folder, tuple(left_out))
        folder.mkdir(parents=True)
        used: set[str] = set()
        for f in self.files:
            data = files.read_regular(str(f), MAX_STAGED)
            if data is None:
                continue
            name = exports.safe_name(self.staged_as.get(f.name) or f.name)
            if name.lower() in used:
                name = f.name  # two files the platform would give one name: both kept, under theirs
            used.add(name.lower())
            try:
                (folder / name).write_bytes(data)
            except OSError as e:
                if e.errno in (errno.ENOSPC, errno.EDQUOT):
                    raise files.NoRoom(f"no room left on the grading machine's disk for the batch's copy of the "
                                       f"submissions ({e.strerror})") from None
                raise
        return Staged(folder, ())


@dataclass(frozen=True)
class Staged:
    """A submission as the batch grades it: `folder`, the grader's own copy, and what the copy left out of what
    the student handed in (each "path (why)", harness.sandbox.scratch.copy_submission's words)."""
    folder: Path
    left_out: tuple[str, ...] = ()


@dataclass(frozen=True)
class NotGraded:
    """A file or folder of the export that got no row of its own, and why.  `missing`: it is a student's hand-in
    (a code file, a folder, an archive), so the batch is incomplete until a person looks."""
    item: str
    reason: str
    missing: bool


@dataclass
class Found:
    root: Path
    layout: str  # "folders", "files", "mixed", "one" or "none"
    submissions: list[Submission]
    left_out: list[str]  # what was seen and not graded, and why (one line each, for the person who started it)
    pattern: str = ""
    not_graded: list[NotGraded] = field(default_factory=list)

    def describe(self) -> str:
        """One line for the person who started the batch: how many, in which layout, what was left out; the
        names in it shown, never obeyed (an escape sequence in a file's name, the student's text: red team 18)."""
        return clean(self._describe())

    def _describe(self) -> str:
        n = len(self.submissions)
        if self.layout == "none":
            return f"found no submissions in {self.root}/: " + "; ".join(self.left_out)
        platforms = Counter(s.platform for s in self.submissions if s.platform)
        how = LAYOUT_WORDS[self.layout] + (f", student id from --pattern {self.pattern}" if self.pattern else "") + (
            " as " + ", ".join(f"{p} ({k})" for p, k in sorted(platforms.items())) + " names them"
            if platforms else "")
        text = f"found {n} submission{'s' if n != 1 else ''} in {self.root}/ ({how})"
        return text + ("; left out: " + "; ".join(self.left_out) if self.left_out else "")


NESTED_DEPTH = 3  # hw3/src/attention.py: a student's zipped folder, a repository's src/
NESTED_FILES = 2000  # entries looked at in a submission's sub-folders, at most


def nested_code(folder: Path, readable: Callable[[Path], bool]) -> list[Path]:
    """The code files in `folder`'s sub-folders (not the folder itself), at most NESTED_DEPTH deep, for a submission
    whose code is not at its top (a Gradescope upload zipped with its folder, a repository's src/).  Symlinked and
    hidden folders, caches and virtual environments are not entered; `readable` says which files may be named."""
    found, todo, seen = [], [(folder, 0)], 0
    while todo:
        here, depth = todo.pop()
        try:
            entries = sorted(here.iterdir())
        except OSError:
            continue
        for p in entries:
            seen += 1
            if seen > NESTED_FILES:
                return sorted(found)
            if not _visible(p) or p.name in files.SKIPPED_DIRS:
                continue
            if p.is_dir() and not p.is_symlink():
                if depth < NESTED_DEPTH and not (p / "pyvenv.cfg").exists():
                    todo.append((p, depth + 1))
            elif depth > 0 and is_code(p) and readable(p):
                found.append(p)
    return sorted(found)


def _visible(p: Path) -> bool:
    return not p.name.startswith((".", "__"))


def _kinds(paths: list[str]) -> str:
    counts = Counter(Path(p).suffix.lower() or "(no extension)" for p in paths)
    return ", ".join(f"{n} {kind}" for kind, n in counts.most_common())


def _some(names: list[str]) -> str:
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")


def _text(path: Path) -> str:
    data = files.read_regular(str(path), MAX_METADATA)
    return data.decode("utf-8", "replace") if data else ""


def find(root: Path, pattern: re.Pattern | None = None, target: str | None = None,
         defines: Callable[[Path], bool] | None = None) -> Found:
    """The submissions under `root`, in the layout its contents show.  `target`: --target's FILE[:Class] (its file
    name helps read flat names); `defines`: whether a file defines an nn.Module class (tells one student's folder
    from a flat export)."""
    entries = sorted(p for p in root.iterdir() if _visible(p))
    links = [p for p in entries if p.is_symlink()]  # never followed: out of the export, or into a classmate's
    folders = [p for p in entries if p.is_dir() and p not in links]
    flat = [p for p in entries if p.is_file() and p not in links]
    odd = [p.name for p in entries if not p.is_dir() and not p.is_file() and p not in links]
    twofold = [p for p in folders if exports.moodle_ambiguous(p.name)] + [  # could be two students': nobody's
        p for p in flat if exports.ambiguous(p.name)]
    folders, flat = [p for p in folders if p not in twofold], [p for p in flat if p not in twofold]
    target_file = Path(Target.parse(target).where).name
    if not folders and pattern is None and _one_student(flat, target_file, defines):
        return Found(root, "one", [Submission(exports.safe_name(root.name), folder=Path(os.path.realpath(root)))], [])
    subs, contested = _folders(root, folders)
    taken = {s.name for s in subs}
    metadata = {"submission_metadata.yml"} if folders and (root / "submission_metadata.yml").is_file() else set()
    flat = [p for p in flat if p.name not in metadata]
    named, unnamed = _flat_names(flat, pattern, Path(target_file).stem)
    not_graded = [NotGraded(n, "neither a regular file nor a folder", False) for n in odd] + [
        NotGraded(p.name, link_reason(p, root), True) for p in links] + [
        NotGraded(p.name, f"its name reads as more than one student's ({exports.ambiguous(p.name)}'s ids twice)" + (
            f": {exports.canvas_ambiguity(p.name)}" if exports.ambiguous(p.name) == "Canvas" else ""), True)
        for p in twofold] + contested
    students: dict[str, list[tuple[Path, exports.Named]]] = {}
    names = exports.told_apart([(exports.safe_name(v.student), v.uid) for v in named.values()])
    for p in flat:
        if p.name in named:
            v = named[p.name]
            students.setdefault(names[exports.safe_name(v.student), v.uid], []).append((p, v))
    for name, items in sorted(students.items()):
        if name in taken:
            not_graded += [NotGraded(p.name, f"{name} also has a folder, which was graded", True) for p, _ in items]
            continue
        receipts = [i for i in items if i[1].platform == "Blackboard receipt"]
        items = [i for i in items if i not in receipts] or receipts  # a receipt alone: a row with nothing to check
        keep, older = exports.latest(items)
        subs.append(Submission(name, files=[p for p, _ in keep], staged_as={p.name: n.original for p, n in keep},
                               others=[f"{p.name} (late, graded)" for p, n in keep if "late" in n.label.split(", ")] +
                               [f"{p.name} ({n.label or 'an earlier attempt'}, not graded)" for p, n in older],
                               platform=next((n.platform for _, n in keep if n.platform), ""),
                               uid=next((n.uid for _, n in keep if n.uid), "")))
    code = [n for n in unnamed if exports.is_code(n)]
    rest = [n for n in unnamed if not exports.is_code(n)]
    not_graded += [NotGraded(n, "its name gives no student" + (" --pattern matches" if pattern else ""), True)
                   for n in code]
    not_graded += [NotGraded(n, "not a .py or .ipynb file, and its name gives no student",
                             Path(n).suffix.lower() in ARCHIVES) for n in rest]
    left = ([f"{len(code)} code file(s) whose name "
             f"{'--pattern does not match' if pattern else 'gives no student'} ({_some(code)})"] if code else [])
    if rest:
        left.append(f"files that are not .py or .ipynb ({_kinds(rest)})" + (
            "; unzip an export first" if any(n.lower().endswith(".zip") for n in rest) else ""))
    if links:
        left.append(f"{len(links)} symbolic link{'s' if len(links) > 1 else ''}, not followed "
                    f"({_some([p.name for p in links])})")
    if odd:
        left.append(f"{len(odd)} entries that are neither regular files nor folders ({_some(odd)})")
    if twofold:
        left.append(f"{len(twofold)} whose name reads as more than one student's ({_some([p.name for p in twofold])})")
    if contested:
        left.append(f"{len(contested)} folders given one student's name by two ways of naming "
                    f"({_some([n.item for n in contested])})")
    layout = "mixed" if folders and len(subs) > len(taken) else "folders" if folders else "files"
    if not subs:
        return Found(root, "none", [], left or ["the folder is empty"], pattern.pattern if pattern else "",
                     not_graded)
    return Found(root, layout, sorted(subs, key=lambda s: s.name), left, pattern.pattern if pattern else "",
                 not_graded)


def link_reason(path: Path, root: Path) -> str:
    """Why a link among the submissions got no row, in one line: where it leads (a classmate's submission, a place
    outside the export), and what to do."""
    try:
        text = "".join(c if c.isprintable() else "?" for c in os.readlink(path))[:80]
    except OSError:
        text = "?"
    real, top = os.path.realpath(path), os.path.realpath(root).rstrip("/") + "/"
    where = "nothing (a broken link)" if not os.path.exists(real) else \
        f"{Path(real).relative_to(top).parts[0]}'s submission" if real.startswith(top) else "a place outside the export"
    return (f"a symbolic link to {text}, which leads to {where}: mha-check never follows a link among the "
            f"submissions; put the student's own files in its place and grade again (--only {path.name})")


def _one_student(flat: list[Path], target_file: str, defines) -> bool:
    """A folder with no sub-folders is one student's (grade class/stu07) when no platform named its files, they
    share no `_ENDING` (alice_attention.py, bob_attention.py), and --target's file is there by its own name (without
    --target: exactly one of them defines an nn.Module class)."""
    code = [p for p in flat if is_code(p)]
    if not code or any(exports.moodle(p.name) or exports.canvas(p.name) or exports.BLACKBOARD.fullmatch(p.name)
                       for p in flat):
        return False
    if exports.shared_ending([p.stem for p in code], Path(target_file).stem):
        return False
    if target_file:  # --target's file by its own name: a student's folder (carol.py, dave.py: two students)
        return any(p.name == target_file for p in code)
    defining = (p for p in code if defines is not None and defines(p))
    return next(defining, None) is not None and next(defining, None) is None  # exactly one (stops at a second)


def _flat_names(flat: list[Path], pattern: re.Pattern | None, hint: str) -> tuple[dict, list[str]]:
    """Each flat file's student and original name: by --pattern, else by the platforms' naming."""
    names = [p.name for p in flat]
    if pattern is not None:
        named = {}
        for n in names:
            m = pattern.match(n)
            student = m.group("student").strip() if m and m.group("student") else ""
            if student:  # the files keep their names: the pattern says whose they are, not what they were called
                named[n] = exports.Named(student, n)
        return named, [n for n in names if n not in named]
    named = {n: v for n in names if (v := exports.moodle(n) or exports.canvas(n))}
    receipts = {p.name: _text(p) for p in flat if exports.BLACKBOARD.fullmatch(p.name) and p.name.endswith(".txt")
                and p.name not in named}
    named.update(exports.blackboard([n for n in names if n not in named], receipts))
    rest, unnamed = exports.generic([n for n in names if n not in named], hint)
    named.update(rest)
    return named, unnamed


def _folders(root: Path, folders: list[Path]) -> tuple[list[Submission], list[NotGraded]]:
    """One submission per student among the folders: Gradescope's named by its metadata (the latest when a student
    has several), Moodle's by the name before its ids (the file folder graded, online text named beside it),
    GitHub Classroom's without the assignment's prefix; any other by its own name."""
    meta = root / "submission_metadata.yml"
    gradescope = exports.gradescope(_text(meta)) if folders and meta.is_file() else {}
    sids = exports.gradescope_sids(_text(meta)) if gradescope else {}
    plain = [d.name for d in folders if d.name not in gradescope and not exports.moodle(d.name)]
    prefix = exports.classroom_prefix(root.name, plain, bool(plain) and all((root / d / ".git").exists()
                                                                               for d in plain))
    students: dict[str, list[tuple[tuple, Path, str]]] = {}
    uids: dict[Path, str] = {}  # Moodle's participant id of each folder, Gradescope's sids
    moodle = exports.told_apart([(exports.safe_name(m.student), m.uid) for d in folders
                                 if (m := exports.moodle(d.name))])
    for d in folders:
        if d.name in gradescope:
            name, created = gradescope[d.name]
            students.setdefault(name, []).append(((1, created), d, "Gradescope"))
            uids[d] = sids.get(d.name, "")
        elif m := exports.moodle(d.name):
            students.setdefault(moodle[exports.safe_name(m.student), m.uid], []).append(
                ((m.platform == "Moodle", ""), d, m.platform))
            uids[d] = m.uid
        else:
            name = d.name[len(prefix):] if prefix and d.name.startswith(prefix) else d.name
            students.setdefault(name, []).append(((0, ""), d, "GitHub Classroom" if prefix else ""))
    subs, contested = [], []
    for name, found in sorted(students.items()):
        families = {kind.split()[0] if kind else "" for _, _, kind in found}
        if len(families) > 1:  # one name from two namings: a folder named by a platform's file or pattern beside
            # one named by its own name (red team 18: in a hand-in folder students write, a student's own
            # submission_metadata.yml, or a Moodle-named folder, named their folder as a classmate's, whose own
            # folder was then "an earlier submission, not graded"): nobody's, for a person to say whose
            contested += [NotGraded(f"{d.name}/", f"named {name} as {kind or 'its own name'}, and "
                                    f"{', '.join(sorted(f'{e.name}/' for _, e, _ in found if e != d))} too: two "
                                    "ways of naming a student give one name, a person must say whose", True)
                          for _, d, kind in found]
            continue
        found.sort(key=lambda f: f[0])
        _, folder, platform = found[-1]
        others = [f"{d.name}/ ({kind if kind.startswith('Moodle ') else 'an earlier submission'}, not graded)"
                  for _, d, kind in found[:-1]]
        subs.append(Submission(name, folder=folder, others=others, platform=platform.replace("Moodle file", "Moodle"),
                               uid=uids.get(folder, "")))
    return subs, contested


def summary_rows(found: Found, rows: list[dict], shown: Callable[[NotGraded], bool]) -> list[dict]:
    """The summary's rows: each graded row with the platform's id for the student (`student_id`: Moodle's
    participant id, Canvas's user id, what its gradebook import matches rows by; two Wei Zhangs are two ids) and the
    student's other attempts and hand-ins (`other_attempts`), then
    a row per file or folder that was not graded (those `shown`: this shard's), its reason in `not_graded`, so that
    no student is missing from the summary without a word."""
    others = {s.name: "; ".join(s.others) for s in found.submissions}
    uids = {s.name: s.uid for s in found.submissions}
    for row in rows:
        row["student_id"] = uids.get(row["submission"], "")  # to match the row to the platform's gradebook
        row["other_attempts"] = others.get(row["submission"], "")
        row["not_graded"] = ""  # the same columns in every summary, whatever the export held
        row["review_reason"] = row.pop("review_reason", "")  # last: why a person should look, where no check says it
    return rows + [{"submission": n.item, "target": "", "passed": "", "needs_review": n.missing,
                    "not_graded": n.reason} for n in found.not_graded if shown(n)]


def _same_name(name: str) -> str:
    """A name as compared: its Unicode composed form (NFC).  An export unpacked where file names are decomposed
    (NFD) spells díazlucía with a combining accent, a keyboard with one letter é: the same student (instructor
    trial 9: "no submission named 'díazlucía' (did you mean 'díazlucía'?)")."""
    return unicodedata.normalize("NFC", name)


def only_names(names: list[str], found: Found) -> list[str]:
    """--only's names as the submissions spell them (the summary's rows and the reports use that spelling)."""
    have = {_same_name(s.name): s.name for s in found.submissions}
    return [have.get(_same_name(n), n) for n in dict.fromkeys(names)]


def unknown_names(names: list[str], found: Found) -> str:
    """What is wrong with --only's names: those no submission has, each with the closest the export has, or ""."""
    have = [s.name for s in found.submissions]
    known = {_same_name(s) for s in have}
    wrong = [n for n in dict.fromkeys(names) if _same_name(n) not in known]
    return "; ".join(f"no submission named {n!r} in {found.root}/" + (
        f" (did you mean {', '.join(repr(c) for c in close)}?)" if (close := difflib.get_close_matches(n, have))
        else "") for n in wrong)


NUMBER = re.compile(r"-?\d+(\.\d+)?")


def kept_rows(summary: Path, regraded: set[str]) -> list[dict]:
    """The rows of an earlier summary that --only leaves as they are: every student's but those graded again, and
    none of its not-graded rows (the export's listing is made again).  Numbers are read back as numbers, so that a
    negative one is not quoted as a formula when written again."""
    try:
        with open(summary, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except (OSError, csv.Error, UnicodeDecodeError):
        return []
    rows = [{k: csv_uncell(v) if isinstance(v, str) else v for k, v in r.items()} for r in rows]  # '=alice: =alice
    regraded = {*regraded, *(csv_uncell(csv_cell(n)) for n in regraded)}  # a name as its cell shows it: \u200f
    return [{k: float(v) if isinstance(v, str) and NUMBER.fullmatch(v) and "." in v else v for k, v in r.items()}
            for r in rows if r.get("submission") not in regraded and not r.get("not_graded")]
