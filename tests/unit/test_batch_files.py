"""grade's output files (harness.frontends.batch_files): every student's report can be written, whatever the name."""
import json
import unicodedata

from harness.frontends import class_view
from harness.frontends.batch_files import BatchFiles, colliding, report_file_name


def test_a_name_too_long_for_the_file_system_still_gets_its_report_and_its_link(tmp_path):
    """A red team's folders named with 255 bytes (a Gradescope group's names joined with " & ", or 127 letters of a
    two-byte script) had no report ("File name too long"), and one such student cost the whole class its class view
    and made grade exit 3.  The report's file name is shortened, told apart from its neighbours by a digest."""
    out = tmp_path / "out"
    out.mkdir()
    files = BatchFiles(out, out / "summary.csv", "results.json")
    names = ["L" * 255, "L" * 254, "é" * 127, "alice"]
    for name in names:
        files.report(name, json.dumps({"who": name}))
    assert files.unwritten == {}
    written = {report_file_name(n, "results.json") for n in names}
    assert len(written) == len(names)  # two long names sharing a beginning are two files
    assert all(len(w.encode()) <= 200 for w in written)
    assert report_file_name("alice", "json") == "alice.json"  # a name that fits keeps it
    for name in names:
        assert json.loads(files.report_path(name).read_text()) == {"who": name}
    links = class_view._links(out, [{"submission": n} for n in names], "results.json")
    assert links == {n: report_file_name(n, "results.json") for n in names}


def test_only_regrades_a_student_whose_name_the_summary_quotes(tmp_path):
    """A name beginning with = + - @ is quoted in summary.csv ('=alice: never run as a formula).  `--only =alice`
    compared the quoted cell with the name, kept the old row and added the new one: the summary then held two rows for
    one student, the stale score first (found by a red team).  The quoted cell is read back as the name it quotes."""
    from harness.frontends.batch_files import write_summary
    from harness.frontends.submissions import kept_rows
    summary = tmp_path / "summary.csv"
    write_summary([{"submission": "=alice", "score": 19.0}, {"submission": "-bob", "score": 3.0},
                   {"submission": "carol", "score": 1.0}], summary)
    assert [r["submission"] for r in kept_rows(summary, {"=alice"})] == ["-bob", "carol"]


def test_only_regrades_a_student_whose_name_the_summary_escapes(tmp_path):
    """A name holding a character the summary shows as an escape (a right-to-left mark typed into a Moodle full name,
    U+200F; an undecodable byte of a folder name, \\udcff) is written as its escaped text.  `--only` compared that
    cell, read back, with the raw name, kept the old row and added the new one: two rows for one student, the stale
    score first (red team 13, in a container: `grade --only` on such a folder).  The cell is compared as written."""
    from harness.frontends.batch_files import write_summary
    from harness.frontends.submissions import kept_rows
    summary = tmp_path / "summary.csv"
    names = ["dana\u200f cohen", "bad\udcff", "carol"]
    write_summary([{"submission": n, "score": 1.0} for n in names], summary)
    assert [r["submission"] for r in kept_rows(summary, {"dana\u200f cohen"})] == ["bad\\udcff", "carol"]
    assert [r["submission"] for r in kept_rows(summary, {"bad\udcff"})] == ["carol", "dana\\u200f cohen"]
    write_summary([{"submission": "'=alice", "score": 1.0}, {"submission": "bob", "score": 2.0}], summary)
    assert [r["submission"] for r in kept_rows(summary, {"'=alice"})] == ["bob"]  # read back as =alice


def test_names_one_case_or_unicode_form_apart_are_written_to_files_no_folder_can_confuse(tmp_path):
    """Red team 17: "Alice Smith" and "alice smith" (or an accent composed and not) would share one report and one
    feedback file on an output folder that ignores case or Unicode form (macOS, Docker Desktop's bind mounts, vfat,
    SMB), the later written what both read.  Each such name is written apart, with a digest of its own, whatever
    the order the batch meets them in; every other name keeps NAME.json."""
    names = ["Alice Smith", "alice smith", "Ren\u00e9", "Rene\u0301", "bob"]
    apart = colliding(names)
    assert apart == {"Alice Smith", "alice smith", "Ren\u00e9", "Rene\u0301"}
    files = BatchFiles(tmp_path, tmp_path / "summary.csv", "json")
    files.apart = apart
    paths = [files.report_path(n).name for n in names] + [files.feedback_path(n).name for n in names]
    folded = [unicodedata.normalize("NFC", p).casefold() for p in paths]
    assert len(set(folded)) == len(folded), paths  # no two the same on a folder that ignores case and form
    assert files.report_path("bob").name == "bob.json"
    assert report_file_name("Alice Smith", "json", apart=True).startswith("Alice Smith~")
    assert colliding(["ada", "bob"]) == frozenset()


def test_the_class_view_links_each_colliding_name_to_its_own_report(tmp_path):
    rows = [{"submission": "Alice Smith", "passed": "True"}, {"submission": "alice smith", "passed": "False"}]
    for name in ("Alice Smith", "alice smith"):
        (tmp_path / report_file_name(name, "json", apart=True)).write_text("{}")
    links = class_view._links(tmp_path, rows, "json")
    assert links == {n: report_file_name(n, "json", apart=True) for n in ("Alice Smith", "alice smith")}


def test_a_name_typed_as_a_classmates_shortened_report_name_gets_a_report_of_its_own():
    """Red team 18: a Gradescope group of six, whose names joined take more than a file name's room, had its report
    written as START~DIGEST.json; a student who typed exactly that START~DIGEST as their name (sha256 of the group's
    names, which classmates know) had the same file, and the group's 19 of 19 report was replaced by the typist's
    failing one (the class view linked both rows to it).  Such a name is written in the digest form of its own."""
    group = " & ".join(["Alexandra Konstantinopoulou-Smith", "Bartholomew Featherstonehaugh",
                        "Christopher Wolfeschlegelstein", "Dominique Vanderbilt-Rothschild",
                        "Evangelina Montgomery-Fitzgerald", "Frederick Ashworth-Cunningham"])
    for extension in ("json", "txt", "results.json", "xml"):
        for apart in (False, True):
            taken = report_file_name(group, extension, apart)
            typed = taken[:-len(extension) - 1]
            assert report_file_name(typed, extension) != taken
            assert report_file_name(typed, extension, apart=True) != taken
    assert report_file_name("Alice Smith", "json") == "Alice Smith.json"  # an ordinary name keeps its own
