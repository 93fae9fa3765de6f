"""Finding a course's submissions: the two layouts, the student id taken from platform file names, what is left out."""
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from harness.engine.runner import Options, not_run
from harness.frontends.batch_files import write_summary
from harness.frontends.pick import spec_for
from harness.frontends.submissions import DEFAULT_PATTERN, PatternError, compile_pattern, find

DEFAULT = compile_pattern(DEFAULT_PATTERN)


@pytest.mark.parametrize("name, student", [
    ("alice_attention.py", "alice"),
    ("bob_12345_attempt_2024-05-01-10-00-00_attention.py", "bob"),  # Blackboard-like
    ("doejane_LATE_123456_7890123_attention-1.py", "doejane"),  # Canvas
    ("Jane Doe_4242_assignsubmission_file_attention.py", "Jane Doe"),  # Moodle, flat
    ("carol.py", "carol"),
    ("dave_lab.ipynb", "dave"),  # notebooks too
    ("erin.ipynb", "erin"),
    ("Gina.IPYNB", "Gina"),  # extensions in any case
    ("hal.Py", "hal"),
])
def test_default_pattern_takes_the_name_up_to_the_first_underscore(name, student):
    assert DEFAULT.match(name).group("student") == student


def test_flat_files_are_grouped_by_student_and_staged_apart(tmp_path):
    for name in ("alice_attention.py", "alice_helpers.py", "bob_lab.ipynb", "_stray.py", "notes.txt"):
        (tmp_path / name).write_text(f"# {name}\n")
    found = find(tmp_path, DEFAULT)
    assert found.layout == "files"
    assert [(s.name, [f.name for f in s.files]) for s in found.submissions] == [
        ("alice", ["alice_attention.py", "alice_helpers.py"]), ("bob", ["bob_lab.ipynb"])]
    assert "found 2 submissions" in found.describe() and "_stray.py" in found.describe()
    assert "files that are not .py or .ipynb (1 .txt)" in found.describe()
    staged = found.submissions[1].stage(tmp_path / "scratch").folder
    assert sorted(p.name for p in staged.iterdir()) == ["bob_lab.ipynb"]  # no classmate's file beside it


def test_loose_files_beside_folders_are_graded_too_and_hidden_ones_are_ignored(tmp_path):
    """A mixed export (issue 29: 6 of 8 students had no row when only the folders were graded)."""
    for name in ("ana", "ben", ".git", "__MACOSX"):
        (tmp_path / name).mkdir()
    (tmp_path / "solution.py").write_text("")
    found = find(tmp_path)
    assert found.layout == "mixed" and [s.name for s in found.submissions] == ["ana", "ben", "solution"]
    assert found.submissions[0].stage(tmp_path / "scratch").folder == tmp_path / "scratch" / "ana"  # a copy
    assert "folders per student and files named by student" in found.describe()


def test_a_students_folder_is_graded_from_the_batchs_own_copy_made_once(tmp_path):
    """What the batch grades and digests is a copy of the folder made at its start, where only the grader writes:
    a student who edits their folder afterwards (a shared hand-in folder, a synced drive) changes neither what
    their children copy nor the digest a --resume stamp names (red team 5).  The copy takes what a child's copy
    takes (no caches, no compiled code) and lists what it left out; the digest covers that list too, since a
    report names what was left out."""
    from harness.frontends import stamps

    sub = tmp_path / "subs" / "ana"
    (sub / "hw3" / "__pycache__").mkdir(parents=True)
    (sub / "hw3" / "attention.py").write_text("from helpers import f\n")
    (sub / "hw3" / "helpers.py").write_text("def f(): return 1\n")
    (sub / "hw3" / "__pycache__" / "helpers.cpython-311.pyc").write_bytes(b"\0")
    found = find(tmp_path / "subs")
    staged = found.submissions[0].stage(tmp_path / "staging")
    copy = staged.folder
    assert copy.parent == tmp_path / "staging" and oct(copy.stat().st_mode & 0o777) == "0o700"
    assert sorted(str(p.relative_to(copy)) for p in copy.rglob("*")) == ["hw3", "hw3/attention.py",
                                                                        "hw3/helpers.py"]
    digest = stamps.staged_digest(staged, "folder")
    (sub / "hw3" / "helpers.py").write_text("def f(): return 2\n")  # after staging: not what is graded
    assert (copy / "hw3" / "helpers.py").read_text() == "def f(): return 1\n"
    assert stamps.staged_digest(staged, "folder") == digest
    again = found.submissions[0].stage(tmp_path / "staging")  # the next batch's copy sees the edit
    assert again.folder != copy and stamps.staged_digest(again, "folder") != digest
    (sub / "hw3" / "helpers.py").write_text("def f(): return 1\n")
    os.mkfifo(sub / "hw3" / "pipe.py")  # left out, but named in the report: another digest
    with_fifo = found.submissions[0].stage(tmp_path / "staging")
    assert with_fifo.left_out == ("hw3/pipe.py (not a regular file)",)
    assert stamps.staged_digest(with_fifo, "folder") != digest
    (sub / "hw3" / "pipe.py").unlink()
    assert stamps.staged_digest(found.submissions[0].stage(tmp_path / "staging"), "folder") == digest
    (sub / "hw3" / "helpers.pyc").write_bytes(b"\0")  # compiled: never copied, named in the report
    with_pyc = found.submissions[0].stage(tmp_path / "staging")
    assert with_pyc.left_out == ("hw3/helpers.pyc (compiled code, no source to read: never copied, never run)",)
    assert not (with_pyc.folder / "hw3" / "helpers.pyc").exists()
    assert stamps.staged_digest(with_pyc, "folder") != digest


def test_custom_pattern(tmp_path):
    for name in ("hw3-ana.py", "hw3-ben.py", "hw2-ana.py"):
        (tmp_path / name).write_text("")
    found = find(tmp_path, compile_pattern(r"hw3-(?P<student>\w+)\.py"))
    assert [s.name for s in found.submissions] == ["ana", "ben"] and "hw2-ana.py" in found.describe()


@pytest.mark.parametrize("text, words", [("(?P<name>.+)_", "named group"), ("(unclosed", "not a regular expression")])
def test_bad_patterns_are_refused(text, words):
    with pytest.raises(PatternError, match=re.escape(words)):
        compile_pattern(text)


def test_staging_copies_regular_files_only_and_any_case_of_extension_counts(tmp_path):
    """The trusted process copies flat files: a symlink to a host file or a FIFO is never read (no leak, no hang)."""
    (tmp_path / "gina_Lab.IPYNB").write_text("{}")
    (tmp_path / "secret.txt").write_text("the host's secret")
    os.symlink(tmp_path / "secret.txt", tmp_path / "gina_attention.py")
    os.mkfifo(tmp_path / "gina_fifo.py")
    found = find(tmp_path, DEFAULT)
    assert [s.name for s in found.submissions] == ["gina"]
    staged = found.submissions[0].stage(tmp_path / "scratch").folder
    assert sorted(p.name for p in staged.iterdir()) == ["gina_Lab.IPYNB"]


class _Listing(list):
    """A folder's entries as os.scandir gives them, read already (usable with `with` and iterated as scandir's)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_staging_never_follows_a_folder_that_the_student_swaps_for_a_link_during_the_copy(tmp_path, monkeypatch):
    """Red team 18: a student who can write their folder while the batch runs (a shared hand-in folder, the case
    staging is for) swapped a sub-folder for a link to a folder only root may read, over and over (renameat2
    RENAME_EXCHANGE); the root grader listed the sub-folder as a folder, then listed and read it again by its path,
    following the link, and copied the instructor's 0600 file into the student's scratch, where the student's code
    printed it into its report (3 of 8 such pairs won in one batch).  Here the swap lands, deterministically, just
    after the student's folder is listed."""
    secret = tmp_path / "instructor"
    secret.mkdir()
    (secret / "solution.txt").write_text("the instructor's hidden test")
    student = tmp_path / "export" / "mallory"
    (student / "sub").mkdir(parents=True)
    (student / "attention.py").write_text("x = 1\n")
    (student / "sub" / "helper.py").write_text("y = 2\n")
    listed, real_scandir = [], os.scandir

    def scandir(path="."):
        if listed:
            return real_scandir(path)
        with real_scandir(path) as entries:
            listed.extend(entries)  # the folder as it was listed: sub/ a folder
        os.rename(student / "sub", student / "moved")  # ... and now a link to the instructor's folder
        os.symlink(secret, student / "sub")
        return _Listing(listed)

    monkeypatch.setattr(os, "scandir", scandir)
    staged = find(tmp_path / "export", None).submissions[0].stage(tmp_path / "staging")
    monkeypatch.setattr(os, "scandir", real_scandir)
    copied = [p.relative_to(staged.folder).as_posix() for p in staged.folder.rglob("*") if p.is_file()]
    assert listed and "sub/solution.txt" not in copied and copied == ["attention.py"], copied
    assert any(entry.startswith("sub/") for entry in staged.left_out), staged.left_out


def test_staging_never_follows_a_students_folder_swapped_for_a_link_after_the_export_was_read(tmp_path):
    """Red team 18: in a hand-in folder students write (sticky, as /tmp), a student's folder found as a folder and
    then swapped for a link to a classmate's (or the instructor's) was staged through the link: the classmate's
    code graded as the student's."""
    export = tmp_path / "export"
    for who in ("alice", "mallory"):
        (export / who).mkdir(parents=True)
        (export / who / "attention.py").write_text(f"# {who}'s\n")
    found = find(export, None)
    os.rename(export / "mallory", tmp_path / "moved")
    os.symlink(export / "alice", export / "mallory")
    staged = next(s for s in found.submissions if s.name == "mallory").stage(tmp_path / "staging")
    assert not list(staged.folder.iterdir()) and staged.left_out, staged.left_out


def test_a_file_chosen_among_several_is_said_and_no_choice_asks_for_a_person(tmp_path):
    module = "import torch.nn as nn\nclass Attn(nn.Module):\n    pass\n"
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "attention.py").write_text(module)
    (tmp_path / "one" / "helpers.py").write_text("SCALE = 2\n")
    pick = spec_for(tmp_path / "one", None, flat=False)
    assert pick.spec == "attention.py" and "helpers.py" in pick.note and not pick.review
    (tmp_path / "two").mkdir()
    for name in ("a.py", "b.py"):
        (tmp_path / "two" / name).write_text(module)
    pick = spec_for(tmp_path / "two", None, flat=False)
    assert pick.spec is None and pick.review and "--target" in pick.problem
    report = not_run("two/?", pick.problem)
    assert not report.needs_review
    report.adapter = replace(report.adapter, review=(pick.problem,))
    assert report.needs_review
    (tmp_path / "none").mkdir()
    pick = spec_for(tmp_path / "none", None, flat=False)
    assert pick.spec is None and not pick.review and "empty" in pick.problem  # the student's to fix, not ours


def test_finding_the_class_reads_hostile_files_without_stopping_or_swelling(tmp_path):
    """Runs in the trusted grader: an encoding tokenize cannot decode, and a 30 MB notebook of JSON, are searched in
    a process whose data segment is capped at 400 MB (json.loads took 900 MB on it)."""
    (tmp_path / "rot13.py").write_text("# coding: rot13\nclass A(nn.Module): pass\n")
    (tmp_path / "big.ipynb").write_bytes(b"[" + b"{}," * (10 << 20) + b"{}]")
    (tmp_path / "lab.ipynb").write_text((Path(__file__).parents[1] / "notebooks" / "lab.ipynb").read_text())
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_DATA, (400 << 20, 400 << 20)); "
            "from pathlib import Path; from harness.frontends.pick import defines_module as d; "
            "print([d(Path(sys.argv[1]) / n) for n in ('rot13.py', 'big.ipynb', 'lab.ipynb')])")
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert run.stdout.strip() == "[False, False, True]", run.stderr[-2000:]


def test_summary_cells_never_obey_escapes_or_run_as_formulas(tmp_path):
    rows = [{"submission": "=HYPERLINK(\"http://x\")", "target": "a\x1b]0;owned\x07.py", "passed": False,
             "score": -1.0}]
    write_summary(rows, tmp_path / "summary.csv")
    text = (tmp_path / "summary.csv").read_text()
    assert "\x1b" not in text and "\x07" not in text and "\\x1b]0;owned\\x07.py" in text
    assert "'=HYPERLINK" in text and ",-1.0" in text  # numbers stay numbers


def test_a_student_who_handed_in_no_code_file_still_gets_a_row(tmp_path):
    for name in ("alice_attention.py", "victor_16_attention.txt", "wendy_17_attention.zip", "README.txt"):
        (tmp_path / name).write_text("x")
    found = find(tmp_path, DEFAULT)
    assert [s.name for s in found.submissions] == ["alice", "victor", "wendy"]
    assert "README.txt" not in found.describe() or "1 .txt" in found.describe()  # the instructor's file: left out
    pick = spec_for(found.submissions[1].stage(tmp_path / "staged").folder, "attention.py:MyAttn", flat=True)
    assert pick.spec is None and "no .py or .ipynb file (it has victor_16_attention.txt)" in pick.problem


def test_submissions_a_broken_pool_leaves_are_graded_again_and_at_last_cannot_be_told(tmp_path):
    """A grader killed from outside breaks the pool: the submissions it leaves are returned to be graded again, and
    on the last try each gets a row saying mha-check could not grade it: construct *cannot tell* (never a failure
    the student would read as theirs), needs_review, the process column "grader error".  The summary is rewritten
    after every report."""
    from concurrent.futures import Future
    from concurrent.futures.process import BrokenProcessPool
    from types import SimpleNamespace

    from harness.frontends import grade_pool
    from harness.frontends.batch_files import BatchFiles

    class BrokenPool:
        def submit(self, *args):
            future = Future()
            future.set_exception(BrokenProcessPool("a process in the process pool was terminated abruptly"))
            return future

    options = {"run": Options(), "format": "json", "rubric": None}
    folders = {"ann": tmp_path / "ann", "bo": tmp_path / "bo"}
    for folder in folders.values():
        folder.mkdir()
        (folder / "attention.py").write_text("x = 1\n")
    out, summary, rows = tmp_path / "out", tmp_path / "out" / "summary.csv", []
    out.mkdir()
    args, files = SimpleNamespace(format="json"), BatchFiles(out, summary, "json")
    lost = grade_pool.collect(BrokenPool(), folders, None, set(), options, args, rows, 2, files, last_try=False)
    assert sorted(lost) == ["ann", "bo"] and rows == [] and not summary.exists()
    lost = grade_pool.collect(BrokenPool(), folders, None, set(), options, args, rows, 2, files, last_try=True)
    assert lost == [] and sorted(r["submission"] for r in rows) == ["ann", "bo"]
    assert all(r["construct"] == "cannot_tell" and r["needs_review"] and r["process"] == "grader error"
               and r["fail"] == 0 for r in rows)
    assert summary.read_text().count("grader error") == 2 and not list(out.glob(".*partial"))


@pytest.mark.parametrize("target", [None, "attention.py:MyAttn"])
def test_an_archive_is_never_opened_nor_graded_as_a_failure_of_the_code(tmp_path, target):
    """A student who handed in hw3.zip (a Canvas attachment, or a zip inside their folder): a person unpacks it;
    until then the row asks for review and says so, instead of "no such file" and a silent 0."""
    (tmp_path / "kim_lee").mkdir()
    (tmp_path / "kim_lee" / "hw3.zip").write_bytes(b"PK\x05\x06" + bytes(18))
    pick = spec_for(tmp_path / "kim_lee", target, flat=False)
    assert pick.spec is None and pick.review and "archive (hw3.zip)" in pick.problem and "unpack" in pick.problem


MODULE = "import torch.nn as nn\nclass Attn(nn.Module):\n    pass\n"


def test_a_link_out_of_a_submission_is_one_line_for_a_person_and_never_followed(tmp_path):
    """A submission's code file (or folder) that is a symbolic link: within the submission it is checked where it
    leads (its copy holds both ends); out of it (a classmate's file, a host file, a folder elsewhere) it is never
    read, and the row says so in one line and asks for a person, never a bare 'not read' failure."""
    subs = tmp_path / "subs"
    for name in ("bob", "carl", "eve", "gus", "hal/src"):
        (subs / name).mkdir(parents=True)
    (subs / "bob" / "attention.py").write_text(MODULE)
    (subs / "hal" / "src" / "attention.py").write_text(MODULE)
    os.symlink("../bob/attention.py", subs / "carl" / "attention.py")  # a classmate's file
    os.symlink("/etc/passwd", subs / "eve" / "attention.py")  # the machine's
    os.symlink(tmp_path, subs / "gus" / "hw")  # a folder out of the export
    os.symlink("src/attention.py", subs / "hal" / "attention.py")  # its own file: followed
    os.symlink(subs / "hal" / "src" / "attention.py", subs / "hal" / "again.py")  # the same, by its absolute path
    for name, leads in (("carl", "../bob/attention.py"), ("eve", "/etc/passwd"), ("gus", str(tmp_path))):
        for target in (None, "attention.py:Attn"):
            pick = spec_for(subs / name, target, flat=False)
            shown = "hw" if name == "gus" and target is None else "attention.py"
            if name == "gus" and target:
                continue  # --target names a file that is not there: the child says so
            assert pick.spec is None and pick.review, (name, target, pick)
            assert pick.problem.startswith(f"{shown} is a symbolic link to {leads}, outside this submission")
            assert "\n" not in pick.problem and "hand in the file itself" in pick.problem
    pick = spec_for(subs / "hal", None, flat=False)
    assert pick.spec == "src/attention.py" and not pick.review
    pick = spec_for(subs / "hal", "attention.py:Attn", flat=False)
    assert pick.spec == "src/attention.py:Attn" and "is a link to it" in pick.note


def test_a_link_out_beside_the_file_checked_is_said_and_a_second_hop_out_is_named_as_one(tmp_path):
    """A user trial: a folder link to a classmate's folder beside the student's own attention.py was dropped in
    silence (the student's `import clas` read only ModuleNotFoundError, no review); and a link to a file of the
    submission that is itself a link out was told "a link to inner.py, outside this submission", though inner.py
    is inside: the second hop leads out."""
    subs = tmp_path / "subs"
    for name in ("alice", "lee", "max"):
        (subs / name).mkdir(parents=True)
    (subs / "alice" / "attention.py").write_text(MODULE)
    (subs / "lee" / "attention.py").write_text(MODULE)
    os.symlink("../alice", subs / "lee" / "clas")
    os.symlink("inner.py", subs / "max" / "attention.py")
    os.symlink("../alice/attention.py", subs / "max" / "inner.py")
    pick = spec_for(subs / "lee", "attention.py:Attn", flat=False)
    assert pick.spec == "attention.py:Attn" and pick.review
    assert pick.note.startswith("clas is a symbolic link to ../alice, outside this submission"), pick.note
    assert not spec_for(subs / "alice", "attention.py:Attn", flat=False).review
    pick = spec_for(subs / "max", "attention.py:Attn", flat=False)
    assert pick.spec is None and pick.review
    assert pick.problem.startswith("attention.py is a symbolic link to inner.py, which is itself a link: they lead "
                                   "outside this submission"), pick.problem


def test_links_among_the_submissions_get_no_row_and_say_where_they_lead(tmp_path):
    """A student's folder that is a link (to a classmate's folder, out of the export, nowhere) is never graded: the
    link would hand a classmate's code in under another name.  One line each, for a person, and one in the summary."""
    subs = tmp_path / "subs"
    (subs / "bob").mkdir(parents=True)
    (subs / "bob" / "attention.py").write_text(MODULE)
    (tmp_path / "elsewhere").mkdir()
    os.symlink("bob", subs / "alice")
    os.symlink(tmp_path / "elsewhere", subs / "fay")
    os.symlink("nowhere", subs / "ivy")
    os.symlink("bob/attention.py", subs / "jo_attention.py")
    found = find(subs, DEFAULT)
    assert [s.name for s in found.submissions] == ["bob"]
    reasons = {n.item: n.reason for n in found.not_graded}
    assert set(reasons) == {"alice", "fay", "ivy", "jo_attention.py"} and all(n.missing for n in found.not_graded)
    assert reasons["alice"].startswith("a symbolic link to bob, which leads to bob's submission: mha-check never")
    assert "leads to a place outside the export" in reasons["fay"] and "nothing (a broken link)" in reasons["ivy"]
    assert "leads to bob's submission" in reasons["jo_attention.py"]
    assert "4 symbolic links, not followed (alice, fay, ivy, ...)" in found.describe()


def test_only_finds_an_accented_name_whichever_unicode_form_the_export_and_the_shell_spell_it_in(tmp_path):
    """Instructor trial 9: a Canvas export unpacked where file names are decomposed (NFD: macOS's older file
    systems, some unzip tools) names díazlucía with a combining accent; `--only díazlucía` typed on a keyboard
    (NFC) was "no submission named 'díazlucía' (did you mean 'díazlucía'?)": the same name, refused."""
    import unicodedata
    from harness.frontends.submissions import only_names, unknown_names
    (tmp_path / unicodedata.normalize("NFD", "díazlucía_1004_5004_attention.py")).write_text("# a\n")
    (tmp_path / "brownbob_1002_5002_attention.py").write_text("# b\n")
    found = find(tmp_path, None)
    typed = [unicodedata.normalize("NFC", "díazlucía"), "brownbob"]
    assert unknown_names(typed, found) == ""
    assert only_names(typed, found) == [unicodedata.normalize("NFD", "díazlucía"), "brownbob"]  # as the rows spell it
    assert "no submission named 'obrien'" in unknown_names(["obrien"], found)


def test_the_line_that_says_what_was_found_shows_a_names_escape_sequences_never_sends_them(tmp_path):
    """Red team 18: an entry of the export named with an OSC sequence (a FIFO named ESC ] 0 ; ... BEL) was printed
    raw in grade's first line, "left out: ... (ESC]0;pwned BEL pipe)", and retitled the grader's terminal; names
    are the student's text, shown as escapes as the reports show them."""
    (tmp_path / "alice").mkdir()
    (tmp_path / "alice" / "attention.py").write_text("x = 1\n")
    os.mkfifo(tmp_path / "\x1b]0;pwned\x07pipe")
    line = find(tmp_path, None).describe()
    assert "pwned" in line and "\x1b" not in line and "\x07" not in line, line


@pytest.mark.parametrize("claim", ["gradescope", "moodle"])
def test_a_folder_named_as_a_classmate_by_a_platforms_naming_is_nobodys(tmp_path, claim):
    """Red team 18: in a hand-in folder every student may write (a 1733 drop box, each student's folder named by
    their login), a student's own submission_metadata.yml naming their submission_1 folder "bob", or a folder
    named as Moodle names Bob's ("bob_99_assignsubmission_file_"), had their code graded as Bob's, Bob's own folder
    listed as "an earlier submission, not graded".  A name two namings give is nobody's, for a person to look."""
    for who in ("alice", "bob"):
        (tmp_path / who).mkdir()
        (tmp_path / who / "attention.py").write_text(f"# {who}'s\n")
    forged = tmp_path / ("submission_1" if claim == "gradescope" else "bob_99_assignsubmission_file_")
    forged.mkdir()
    (forged / "attention.py").write_text("# mallory's\n")
    if claim == "gradescope":
        (tmp_path / "submission_metadata.yml").write_text(
            "submission_1:\n  :submitters:\n  - :name: bob\n    :sid: '1'\n  :created_at: 2026-12-01\n")
    found = find(tmp_path, None)
    assert [(s.name, s.folder.name) for s in found.submissions] == [("alice", "alice")]
    contested = {n.item for n in found.not_graded if n.missing}
    assert contested == {"bob/", f"{forged.name}/"} and "two ways of naming" in found.describe()
