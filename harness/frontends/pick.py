"""Which file of a submission to check: read and tokenized in the trusted process, never imported or parsed.

A submission's folder may hold several code files, a zipped sub-folder, links, devices or huge notebooks; `spec_for`
names the one file (and class) to check, or says why there is none, so that a wrong pick shows in the report.
A link is followed only to a file of the same submission; one that leads out of it (a classmate's file, the
machine's) is never read, and the row says so in one line, for a person to look at.
"""
from __future__ import annotations

import io
import os
import re
import stat
import tokenize
from dataclasses import dataclass, replace
from pathlib import Path

from harness.frontends import submissions
from harness.sandbox import scratch
from harness.wire.target import Target

MAX_SOURCE = 256 << 10  # a larger .py file is not an attention layer: never read
MAX_NOTEBOOK = 32 << 20  # a notebook carries its outputs (pictures): larger ones are not read to look for a class
_STATEMENT_START = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING)


# a class line inside a notebook's JSON: the start of a source string, or of a line inside one ("\n" escaped)
_NOTEBOOK_CLASS = re.compile(rb'(?:"|\\n)[ \t]*class[ \t]+\w+[ \t]*\([^)"\\]*Module')


def _source_of(path: Path) -> bytes | None:
    """A regular file only (not a FIFO, a symlink or a device), bounded: read in the trusted process."""
    return scratch.read_regular(str(path), _bound(path))


def defines_module(path: Path) -> bool:
    """Does the file (or the notebook's code) define a class with "Module" in its bases?  Runs in the trusted
    process on files a student wrote, so: read by _source_of, tokenized as a stream, never parsed (a deeply nested
    expression cannot exhaust the parser's recursion)."""
    data = _source_of(path)
    if not data:
        return False
    if path.suffix.lower() == ".ipynb":  # searched, never parsed: 32 MB of JSON once took the grader 900 MB
        return _NOTEBOOK_CLASS.search(data) is not None
    expect, depth, previous = "class", 0, tokenize.ENCODING  # then: name, "(", bases
    try:
        for tok in tokenize.tokenize(io.BytesIO(data).readline):
            if tok.type in (tokenize.COMMENT, tokenize.NL):
                continue
            if expect == "class":
                expect = "name" if tok.string == "class" and previous in _STATEMENT_START else "class"
            elif expect == "name":
                expect = "(" if tok.type == tokenize.NAME else "class"
            elif expect == "(":
                expect, depth = ("bases", 1) if tok.string == "(" else ("class", 0)
            elif tok.type == tokenize.NAME and "Module" in tok.string:
                return True
            elif tok.type == tokenize.OP and tok.string in "()":
                depth += 1 if tok.string == "(" else -1
                expect = "bases" if depth else "class"
            previous = tok.type
    except Exception:  # noqa: BLE001 - `# coding: rot13` raises LookupError: any file, no batch stops on it
        pass
    return False


def _bound(path: Path) -> int:
    return MAX_NOTEBOOK if path.suffix.lower() == ".ipynb" else MAX_SOURCE


def _readable(path: Path) -> bool:
    """A regular file (not a symlink, FIFO or device) small enough to be an attention layer: the only kind the
    grader names as a submission's target (its child reads it, confined)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size <= _bound(path)


def _code_files(folder: Path) -> list[Path]:
    """The submission's code files: those at its top (a link at its top as the file it leads to, when that is a
    file of this same submission), else those in its sub-folders (a folder zipped with it)."""
    top = {p for p in folder.iterdir() if submissions.is_code(p) and _readable(p)}
    top |= {inside for p in folder.iterdir() if submissions.is_code(p) and p.is_symlink()
            if (inside := _link_inside(p, folder)) is not None}
    return sorted(top) or submissions.nested_code(folder, _readable)


def _link_inside(path: Path, folder: Path) -> Path | None:
    """The file the link `path` leads to (as a path in `folder`), when it is a regular code file of this same
    submission; None when it leads out of it (a classmate's file, the machine's), nowhere, or to anything else.
    A link is followed here only within the submission: its copy in the child's scratch holds both ends."""
    real = os.path.realpath(path)
    if not _within(real, folder) or not submissions.is_code(Path(real)) or not _readable(Path(real)):
        return None
    return folder / os.path.relpath(real, os.path.realpath(folder))


def _shown(text: str, limit: int = 80) -> str:
    """A link's text as the student wrote it, printable and short (it is shown in every output format)."""
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def link_problem(path: Path, folder: Path) -> str:
    """One line for a link of a submission that mha-check does not follow."""
    try:
        leads = _shown(os.readlink(path))
    except OSError:
        leads = "?"
    out = not _within(os.path.realpath(path), folder)
    hop = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), os.readlink(path))) \
        if leads != "?" else ""
    through = ", which is itself a link: they lead" if out and hop and _within(hop, folder) else ""
    where = (f"{through or ','} outside this submission (mha-check never follows a link out of a submission: it "
             "could lead into a classmate's files)") if out else ", which is no code file of this submission"
    return f"{_rel(path, folder)} is a symbolic link to {leads}{where}; hand in the file itself, not a link"


def _within(path: str, folder: Path) -> bool:
    """Whether `path` (resolved) lies inside the submission's folder."""
    return path.startswith(os.path.realpath(folder).rstrip("/") + "/")


def _links(folder: Path) -> list[Path]:
    """The links at the top of the submission that no file was found through."""
    try:
        return sorted(p for p in folder.iterdir() if p.is_symlink() and not p.name.startswith(".") and
                      _link_inside(p, folder) is None)
    except OSError:
        return []


def _rel(path: Path, folder: Path) -> str:
    return str(path.relative_to(folder))


NAMED = 10  # code files a message names; the rest are counted (100000 names once made a 32 MB report)


def _named(paths: list[Path], folder: Path) -> str:
    """The first NAMED of `paths`, and how many more."""
    names = ", ".join(_rel(p, folder) for p in paths[:NAMED])
    return names + (f" and {len(paths) - NAMED} more" if len(paths) > NAMED else "")


def find_target(folder: Path) -> str | None:
    """With no --target: the one file of the submission that defines an nn.Module class."""
    files = [p for p in _code_files(folder) if not p.name.startswith("test")]
    found = [p for p in files if defines_module(p)]
    return _rel(found[0], folder) if len(found) == 1 else None


@dataclass(frozen=True)
class Pick:
    """What to check in one submission's folder.  `spec` None: `problem` says why there is nothing to check, and
    `review` whether a person should look (mha-check could not choose between files: our limit, not a zero to
    trust).  `note`: how a file was chosen among several, so that a wrong choice is visible in the report."""
    spec: str | None
    problem: str = ""
    note: str = ""
    review: bool = False
    left_out: tuple[str, ...] = ()  # what the batch's copy of the submission left out, and why (submissions.Staged)


def _instead_of_target(folder: Path, file_part: str, suffix: str) -> Pick | None:
    """--target's file is not in this submission, but other code is: its one candidate file checked, or none, and
    either way a person asked to look.  An instructor's trial: a notebook handed in where --target named
    attention.py got 0 points and no review flag, though the message said the folder held the notebook."""
    code = _code_files(folder)
    found = find_target(folder) or (_rel(code[0], folder) if len(code) == 1 else None)
    if found:
        return Pick(found + suffix, review=True, note=f"{found} was checked: {file_part}, the file the target names "
                                                      "(--target or the rubric's), is not in this submission")
    if code:
        return Pick(None, f"{file_part}, the file the target names (--target or the rubric's), is not in this "
                          f"submission, which has "
                          f"{_named(code, folder)}: grade it with --target FILE:Class naming one "
                          "of them", review=True)
    return None


def spec_for(folder: Path, target: str | None, flat: bool, left_out: tuple[str, ...] = ()) -> Pick:
    """One folder per student: --target as given, else the single file that defines an nn.Module class, else the
    folder's only code file, .py or .ipynb (so that its syntax error, say, is what the report shows).  Flat files:
    the platform named the file, so --target's class is applied to the student's file (the one ending with
    --target's file name, else found as above).  `left_out`: what the batch's copy `folder` left out of the
    student's (submissions.Staged), carried in the Pick to the grader; a file of it is named where the message
    says what the submission holds.  A link out of the submission beside the file checked (a folder of a
    classmate's, say) is said in the note and asks for a person: the child never sees what it leads to, and a
    student whose import of it fails reads only ModuleNotFoundError (a user trial)."""
    pick = _spec_for(folder, target, flat, left_out)
    out = _links(folder) if pick.spec is not None and not flat else []
    if out:
        said = link_problem(out[0], folder) + (f" ({len(out) - 1} more such links)" if len(out) > 1 else "")
        pick = replace(pick, note="; ".join(filter(None, (pick.note, said))), review=True)
    return replace(pick, left_out=left_out)


def _spec_for(folder: Path, target: str | None, flat: bool, left_out: tuple[str, ...]) -> Pick:
    asked = Target.parse(target)
    file_part, suffix = (asked.where if target else ""), asked.suffix
    if target and not flat:
        given = folder / file_part
        if given.is_symlink():  # attention.py -> src/attention.py is checked there; a link out of it is not
            inside = _link_inside(given, folder)
            if inside is None:
                return Pick(None, link_problem(given, folder), review=True)
            found = _rel(inside, folder)
            return Pick(found + suffix, note=f"{found} was checked: --target's {file_part} is a link to it")
        inside = [] if os.path.lexists(folder / file_part) else [
            p for p in submissions.nested_code(folder, _readable) if p.name == Path(file_part).name]
        if len(inside) == 1:  # hw3/attention.py: the student zipped the folder that holds it
            found = _rel(inside[0], folder)
            return Pick(found + suffix, note=f"{found} was checked: --target's {file_part} is in a sub-folder")
        if not inside and not os.path.lexists(folder / file_part) and _archives(folder):
            return _archive_pick(folder)
        if not inside and not os.path.lexists(folder / file_part):
            return _instead_of_target(folder, file_part, suffix) or Pick(target)
        return Pick(target)
    code = _code_files(folder)
    named = [p for p in code if file_part and p.name.endswith(file_part)]
    if len(named) == 1:
        return Pick(_rel(named[0], folder) + suffix)
    found = find_target(folder) or (_rel(code[0], folder) if len(code) == 1 else None)
    if found:
        others = [p for p in code if _rel(p, folder) != found]
        note = (f"{found} was checked: of the {len(code)} code files "
                f"({_named(code, folder)}) it is the "
                f"only one that defines an nn.Module class" +
                (f" ({len(named)} end with --target's {file_part})" if file_part else "")
                ) if others else ""
        return Pick(found + suffix, note=note)
    if code:
        return Pick(None, f"could not tell which file holds the attention class: {len(code)} code files "
                          f"({_named(code, folder)}) and not exactly one defines an nn.Module "
                          f"class; grade with --target FILE:Class to choose", review=True)
    if _archives(folder):
        return _archive_pick(folder)
    links = _links(folder)
    if links:  # a link out of the submission (a classmate's file, a folder elsewhere): one line, for a person
        return Pick(None, link_problem(links[0], folder) + (f" ({len(links) - 1} more such links)"
                                                             if len(links) > 1 else ""), review=True)
    others = sorted([p.name for p in folder.iterdir() if not p.name.startswith(".")] +
                    [p for p in scratch.compiled_left_out(left_out) if "/" not in p])  # handed in, not copied
    unread = [name for name in others if submissions.is_code(Path(name))]
    if unread:
        return Pick(None, f"could not tell which file holds the attention class: {', '.join(unread[:5])} not read "
                          f"(a code file must be a regular file, not a link or a device, of at most "
                          f"{MAX_SOURCE >> 10} KiB for .py and {MAX_NOTEBOOK >> 20} MiB for .ipynb)")
    return Pick(None, "could not tell which file holds the attention class: this submission has no .py or .ipynb "
                      "file" + (f" (it has {', '.join(others[:5])}{', ...' if len(others) > 5 else ''})" if others
                                else " (it is empty)"))


ARCHIVES = (".zip", ".tar", ".tgz", ".tar.gz", ".tar.bz2", ".tar.xz", ".gz", ".7z", ".rar")


def _archives(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.lower().endswith(ARCHIVES) and not p.name.startswith("."))


def _archive_pick(folder: Path) -> Pick:
    """A submission that is an archive: never opened here (a zip bomb, a path out of the folder, a link), never
    graded as a failure either: a person unpacks it and grades that student again (`--only NAME`)."""
    names = _archives(folder)
    return Pick(None, f"this submission is an archive ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}), "
                      f"which mha-check does not open: unpack it into the student's folder and grade again "
                      f"(grade ... --only NAME)", review=True)


def missing_fix(target: str | None) -> str:
    """The fix for a submission with nothing to check: what to hand in (the construct check's own fix is about a
    file that does not load)."""
    cls = Target.parse(target).name if target else None
    return (f"Hand in one .py file or notebook that defines {cls or 'your attention class (a torch.nn.Module)'}. "
            "If a submission has several candidate files, the instructor names the one to check with --target "
            "FILE.py:ClassName.")

