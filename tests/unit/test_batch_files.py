"""grade's output files (harness.frontends.batch_files): every student's report can be written, whatever the name."""
import json

from harness.frontends import class_view
from harness.frontends.batch_files import BatchFiles, report_file_name


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
