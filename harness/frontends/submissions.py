"""Where a course's submissions are: the layouts `mha-check grade` reads, found without running any of them.

Submissions arrive in one of two shapes, and grading must not need a script to reshape them first:

- one folder per student (Gradescope's export, Moodle's "download in folders", GitHub Classroom clones): every
  visible sub-folder is one submission named by the folder, even one without a code file (it gets a failing row,
  never silence);
- flat files named by student (what Canvas, Blackboard and Moodle export by default: `alice_attention.py`,
  `bob_12345_attempt_2024-05-01-10-00-00_attention.py`): `--pattern`, a regular expression with a named group
  `student` matched at the start of each code file's name (.py or .ipynb), gives the student; a student's files are
  graded together, copied into a folder of their own (so that no submission imports a classmate's file).

A folder that has sub-folders is read as one folder per student (loose code files beside them are usually the
instructor's: they are named as left out); otherwise its code files are the flat layout.  Finding nothing is an
error that says what the folder holds instead, because "graded 0 submissions" with exit status 0 hides a wrong path.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from harness.sandbox import scratch as files

DEFAULT_PATTERN = r"(?P<student>[^_]+?)(?:_|\.(?i:py|ipynb)$)"  # the name up to its first "_" (alice_lab.ipynb: alice)
CODE = (".py", ".ipynb")  # what a student hands in: a Python file or a notebook (any case: Lab.IPYNB too)
MAX_STAGED = 32 << 20  # a flat file larger than this is no attention layer (a notebook with pictures fits)


def is_code(path: Path) -> bool:
    return path.suffix.lower() in CODE
LAYOUT_WORDS = {"folders": "one folder per student", "files": "files named by student"}


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
    name: str  # the student: the folder's name, or the id the pattern took from the file names
    folder: Path | None = None  # one folder per student
    files: list[Path] = field(default_factory=list)  # flat layout: this student's files

    def stage(self, staging: Path) -> Path:
        """The folder to grade in: the student's own, or (flat files) a fresh one holding only their files.  Copied
        by the trusted process, so only regular files of bounded size (never a FIFO, a device or a symlink, which
        could hang the batch or hand a host file to the submission); anything else is left out."""
        if self.folder is not None:
            return self.folder
        folder = staging / self.name
        folder.mkdir(parents=True)
        for f in self.files:
            data = files.read_regular(str(f), MAX_STAGED)
            if data is not None:
                (folder / f.name).write_bytes(data)
        return folder


@dataclass
class Found:
    root: Path
    layout: str  # "folders", "files" or "none"
    submissions: list[Submission]
    left_out: list[str]  # what was seen and not graded, and why
    pattern: str = DEFAULT_PATTERN

    def describe(self) -> str:
        """One line for the person who started the batch: how many, in which layout, what was left out."""
        n = len(self.submissions)
        if self.layout == "none":
            return f"found no submissions in {self.root}/: " + "; ".join(self.left_out)
        how = LAYOUT_WORDS[self.layout] + (f", student id from --pattern {self.pattern}" if self.layout == "files"
                                           else "")
        text = f"found {n} submission{'s' if n != 1 else ''} in {self.root}/ ({how})"
        return text + ("; left out: " + "; ".join(self.left_out) if self.left_out else "")


def _visible(p: Path) -> bool:
    return not p.name.startswith((".", "__"))


def _kinds(paths: list[Path]) -> str:
    counts = Counter(p.suffix.lower() or "(no extension)" for p in paths)
    return ", ".join(f"{n} {kind}" for kind, n in counts.most_common())


def find(root: Path, pattern: re.Pattern) -> Found:
    """The submissions under `root`, in the layout its contents show."""
    entries = sorted(p for p in root.iterdir() if _visible(p))
    folders = [p for p in entries if p.is_dir()]
    python = [p for p in entries if p.is_file() and is_code(p)]
    others = [p for p in entries if p.is_file() and not is_code(p)]
    if folders:
        left = [f"{len(python)} code file(s) beside the student folders ({', '.join(p.name for p in python[:3])}"
                f"{', ...' if len(python) > 3 else ''})"] if python else []
        return Found(root, "folders", [Submission(d.name, folder=d) for d in folders], left, pattern.pattern)
    students: dict[str, list[Path]] = {}
    unmatched = []
    for p in python:
        m = pattern.match(p.name)
        student = m.group("student").strip() if m and m.group("student") else ""
        if student:
            students.setdefault(student, []).append(p)
        else:
            unmatched.append(p.name)
    left = [f"{len(unmatched)} code file(s) whose name --pattern does not match ({', '.join(unmatched[:3])}"
            f"{', ...' if len(unmatched) > 3 else ''})"] if unmatched else []
    if students:  # a student who handed in only victor_attention.txt gets a row saying so, never silence
        without_code: dict[str, list[Path]] = {}
        for p in others:
            m = pattern.match(p.name)
            student = m.group("student").strip() if m and m.group("student") else ""
            if student and student not in students:
                without_code.setdefault(student, []).append(p)
        others = [p for p in others if p not in {f for fs in without_code.values() for f in fs}]
        students.update(without_code)
    if others:
        left.append(f"files that are not .py or .ipynb ({_kinds(others)})" + ("; unzip an export first" if any(
            p.suffix.lower() == ".zip" for p in others) else ""))
    if not students:
        return Found(root, "none", [], left or ["the folder is empty"], pattern.pattern)
    return Found(root, "files", [Submission(s, files=fs) for s, fs in sorted(students.items())], left,
                 pattern.pattern)
