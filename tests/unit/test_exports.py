"""Reading learning platforms' exports: one submission per student, named as the platform names them, never cut at
an underscore the platform put inside a name; the latest attempt graded and the others named; the student's helper
modules staged under their own names; whatever is not graded listed with its reason.

The fixture exports (tests/fixtures/exports/, written by its make.py) follow each platform's naming as documented in
harness/frontends/exports.py, whose docstring gives the sources: Canvas `NAME_[LATE_]USERID_ATTACHMENTID_FILE`
with `-N` for a file handed in again; Moodle `Full Name_ID_assignsubmission_file_/`; Blackboard
`ASSIGNMENT_USER_attempt_DATE_FILE` with a `.txt` receipt per attempt; Gradescope `submission_ID/` folders named by
`submission_metadata.yml`; GitHub Classroom `ASSIGNMENT-USER/` repositories."""
import os
from pathlib import Path

import pytest

from harness.frontends import exports
from harness.frontends.pick import spec_for
from harness.frontends.submissions import find, kept_rows, summary_rows, unknown_names

EXPORTS = Path(__file__).parents[1] / "fixtures" / "exports"


def _defines(path: Path) -> bool:
    return "(nn.Module)" in path.read_text()


def layout(root: Path, target: str | None = "attention.py:MultiHeadAttention"):
    found = find(root, None, target, _defines)
    return found, {s.name: s for s in found.submissions}


def staged(sub, tmp_path) -> dict[str, str]:
    folder = sub.stage(tmp_path / "staging").folder
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


CORRECT, BUGGY = (EXPORTS.parents[2] / "examples" / n for n in ("correct_attention.py", "buggy_attention.py"))


@pytest.mark.parametrize("name, student, original, platform", [
    ("smith_alice_1001_5001_attention.py", "smith_alice", "attention.py", "Canvas"),
    ("doejane_LATE_123456_7890123_attention-1.py", "doejane", "attention.py", "Canvas"),
    ("Jane Doe_4242_assignsubmission_file_attention.py", "Jane Doe", "attention.py", "Moodle"),
    ("Jane Doe_4242_assignsubmission_onlinetext_onlinetext.html", "Jane Doe", "onlinetext.html", "Moodle onlinetext"),
])
def test_each_platform_names_the_student_from_the_parts_around_the_name(name, student, original, platform):
    named = exports.moodle(name) or exports.canvas(name)
    assert (named.student, named.original, named.platform) == (student, original, platform)


def test_canvas_late_and_resubmitted_files_keep_the_latest_of_each_name():
    first, again = exports.canvas("kay_LATE_1_50_attention.py"), exports.canvas("kay_LATE_1_49_attention-2.py")
    assert again.label == "late, resubmission 2" and first.label == "late"
    keep, older = exports.latest([("a", first), ("b", again), ("c", exports.canvas("kay_1_51_helpers.py"))])
    assert [k for k, _ in keep] == ["b", "c"] and [o for o, _ in older] == ["a"]


def test_canvas_export(tmp_path):
    found, subs = layout(EXPORTS / "canvas")
    assert sorted(subs) == ["grace", "joneskay", "smith_alice", "smith_bob"]  # two Smiths, never one "smith"
    assert found.layout == "files" and not found.not_graded and "Canvas (4)" in found.describe()
    assert staged(subs["joneskay"], tmp_path) == {"attention.py": CORRECT.read_text()}  # the resubmission, renamed
    assert subs["joneskay"].others == ["joneskay_LATE_1003_5010_attention-1.py (late, graded)",  # said in the row
                                       "joneskay_LATE_1003_5003_attention.py (late, not graded)"]
    assert sorted(staged(subs["grace"], tmp_path)) == ["attention.py", "helpers.py"]  # `import helpers` works


def test_moodle_folders(tmp_path):
    found, subs = layout(EXPORTS / "moodle")
    assert sorted(subs) == ["Alice Smith", "Bob Jones"] and found.layout == "folders"
    assert subs["Alice Smith"].folder.name == "Alice Smith_2001_assignsubmission_file_"
    assert subs["Alice Smith"].others == ["Alice Smith_2001_assignsubmission_onlinetext_/ (Moodle onlinetext, "
                                          "not graded)"]


def test_blackboard_attempts_by_date_and_username_from_the_receipt(tmp_path):
    found, subs = layout(EXPORTS / "blackboard")
    assert sorted(subs) == ["alice_smith", "bob"] and not found.not_graded  # receipts are the platform's, not left out
    assert staged(subs["alice_smith"], tmp_path) == {"attention.py": CORRECT.read_text()}  # 3 November, not the 1st
    assert subs["alice_smith"].others == ["HW3_alice_smith_attempt_2026-11-01-09-00-00_attention.py (attempt "
                                          "2026-11-01 09:00:00, not graded)"]


def test_blackboard_without_receipts_takes_the_assignment_prefix_all_names_share():
    names = ["Lab_3_al_b_attempt_2026-01-01-00-00-00_a.py", "Lab_3_cy_attempt_2026-01-01-00-00-00_a.py"]
    assert sorted(n.student for n in exports.blackboard(names, {}).values()) == ["al_b", "cy"]


def test_gradescope_export_is_named_by_its_metadata_and_finds_a_zipped_folder(tmp_path):
    found, subs = layout(EXPORTS / "gradescope")
    assert sorted(subs) == ["Alice Smith", "Bob Jones & Carol Wu"] and not found.not_graded
    assert subs["Bob Jones & Carol Wu"].folder.name == "submission_300002"
    assert "submission_metadata.yml" not in found.describe()


def test_gradescope_metadata_tells_apart_two_students_of_one_name():
    text = "submission_1:\n  :submitters:\n  - :name: Ann Lee\n    :sid: '7'\nsubmission_2:\n  :submitters:\n" \
           "  - :name: Ann Lee\n    :sid: '8'\n  :created_at: 2026-01-01\nsubmission_3:\n  :submitters:\n" \
           "  - :name: ../../etc\n"
    assert exports.gradescope(text) == {"submission_1": ("Ann Lee (7)", ""), "submission_2": ("Ann Lee (8)",
                                                                                              "2026-01-01"),
                                        "submission_3": ("_.._etc", "")}


def test_github_classroom_repositories_lose_the_assignment_prefix(tmp_path):
    found, subs = layout(EXPORTS / "hw3-submissions")
    assert sorted(subs) == ["alice", "bob"] and "GitHub Classroom (2)" in found.describe()
    for name in ("hw3-x", "hw3-y"):  # cloned elsewhere: the git repositories say it
        (tmp_path / "clones" / name / ".git").mkdir(parents=True)
    assert sorted(layout(tmp_path / "clones")[1]) == ["x", "y"]
    for name in ("ana-b", "ana-c"):  # plain folders sharing a start keep their names
        (tmp_path / "plain" / name).mkdir(parents=True)
    assert sorted(layout(tmp_path / "plain")[1]) == ["ana-b", "ana-c"]


def test_mixed_export_grades_files_and_folders_and_lists_the_rest(tmp_path):
    found, subs = layout(EXPORTS / "mixed")
    assert sorted(subs) == ["alice_jones", "alice_smith", "dan", "erin", "grace", "hal"] and found.layout == "mixed"
    assert subs["hal"].files == [EXPORTS / "mixed" / "hal_attention_v2.py"]
    assert subs["hal"].others == ["hal_attention.py (unnumbered, not graded)"]
    assert sorted(staged(subs["grace"], tmp_path)) == ["attention.py", "helpers.py"]
    assert {(n.item, n.missing) for n in found.not_graded} == {("frank.zip", True), ("notes.txt", False)}
    assert "unzip an export first" in found.describe()


def test_underscored_names_without_a_platform_are_cut_at_the_ending_they_share(tmp_path):
    for name in ("alice_smith_attempt.py", "alice_jones_attempt.py", "carol.py", "alice_smith_helpers.py"):
        (tmp_path / name).write_text("x = 1\n")
    found, subs = layout(tmp_path, None)
    assert sorted(subs) == ["alice_jones", "alice_smith", "carol"]
    assert sorted(subs["alice_smith"].staged_as.values()) == ["attempt.py", "helpers.py"]


def test_one_students_folder_is_one_submission_named_by_the_folder(tmp_path):
    stu = tmp_path / "stu07"
    stu.mkdir()
    (stu / "attention.py").write_text(CORRECT.read_text())
    (stu / "helpers.py").write_text("X = 1\n")
    found, subs = layout(stu)
    assert found.layout == "one" and list(subs) == ["stu07"] and subs["stu07"].folder == stu
    found, subs = layout(stu, None)  # no --target: the one file that defines the class says it
    assert list(subs) == ["stu07"]


def test_a_flat_file_beside_its_students_folder_is_listed_not_dropped(tmp_path):
    (tmp_path / "dan").mkdir()
    (tmp_path / "dan" / "attention.py").write_text("x = 1\n")
    (tmp_path / "dan_attention.py").write_text("x = 1\n")
    os.mkfifo(tmp_path / "pipe")
    found, subs = layout(tmp_path)
    assert list(subs) == ["dan"]
    assert [(n.item, n.missing) for n in found.not_graded] == [("pipe", False), ("dan_attention.py", True)]


def test_only_keeps_the_other_rows_of_the_summary_and_names_unknown_students(tmp_path):
    (tmp_path / "summary.csv").write_text("submission,score,passed,not_graded\nann,-1.0,True,\nbo,3.0,False,\n"
                                          "x.zip,,,no student\n")
    assert kept_rows(tmp_path / "summary.csv", {"bo"}) == [{"submission": "ann", "score": -1.0, "passed": "True",
                                                            "not_graded": ""}]
    assert kept_rows(tmp_path / "absent.csv", set()) == []
    found, _ = layout(EXPORTS / "canvas")
    assert "(did you mean 'smith_alice'" in unknown_names(["grace", "smith_alce"], found)
    assert unknown_names(["grace"], found) == ""


def test_two_students_of_one_name_stay_two_and_a_linked_folder_is_not_followed(tmp_path):
    flat, folders = tmp_path / "flat", tmp_path / "folders"
    flat.mkdir()
    for name in ("smithjohn_11_1_attention.py", "smithjohn_12_2_attention.py", "smithjohn_12_3_attention-1.py"):
        (flat / name).write_text("x = 1\n")
    found, subs = layout(flat)
    assert sorted(subs) == ["smithjohn (11)", "smithjohn (12)"] and len(subs["smithjohn (12)"].others) == 1
    for name in ("John Smith_21_assignsubmission_file_", "John Smith_22_assignsubmission_file_", "ann"):
        (folders / name).mkdir(parents=True)
    (folders / "elsewhere").symlink_to(tmp_path / "flat")
    found, subs = layout(folders)
    assert sorted(subs) == ["John Smith (21)", "John Smith (22)", "ann"]
    assert [(n.item, n.missing) for n in found.not_graded] == [("elsewhere", True)]


def test_a_blackboard_attempt_with_only_its_receipt_gets_a_row_saying_so(tmp_path):
    (tmp_path / "HW3_cy_attempt_2026-11-02-12-00-00.txt").write_text("Name: Cy Young (cy)\n")
    (tmp_path / "HW3_bob_attempt_2026-11-02-12-00-00.txt").write_text("Name: Bob Jones (bob)\n")
    (tmp_path / "HW3_bob_attempt_2026-11-02-12-00-00_attention.py").write_text("x = 1\n")
    found, subs = layout(tmp_path)
    assert sorted(subs) == ["bob", "cy"] and not found.not_graded
    assert list(staged(subs["cy"], tmp_path)) == ["HW3_cy_attempt_2026-11-02-12-00-00.txt"]
    assert list(staged(subs["bob"], tmp_path)) == ["attention.py"]  # the receipt is the platform's, not staged


def test_students_named_by_plain_files_are_not_taken_for_one_students_folder(tmp_path):
    (tmp_path / "carol.py").write_text(CORRECT.read_text())
    (tmp_path / "dave.py").write_text("import torch.nn as nn\nclass A(nn.Module:\n")  # broken, yet a class line
    found, subs = layout(tmp_path)  # --target attention.py: no file has that name, so these are students
    assert found.layout == "files" and sorted(subs) == ["carol", "dave"]


def test_numbered_attempts_without_a_platform_grade_the_highest(tmp_path):
    """Issue 29: two attempts by one student gave 0 (two candidate files); the highest number is the latest."""
    for name in ("alice_attention.py", "alice_attention_v2.py", "bob_attention.py", "bob_attention (1).py",
                 "bob_utils1.py", "bob_utils2.py"):
        (tmp_path / name).write_text("x = 1\n")
    found, subs = layout(tmp_path)
    assert sorted(subs) == ["alice", "bob"]
    assert subs["alice"].files == [tmp_path / "alice_attention_v2.py"]
    assert subs["alice"].others == ["alice_attention.py (unnumbered, not graded)"]
    assert sorted(staged(subs["bob"], tmp_path)) == ["attention.py", "utils1.py", "utils2.py"]
    assert "bob_attention (1).py" in [p.name for p in subs["bob"].files]


def test_the_target_is_found_in_the_folder_the_student_zipped(tmp_path):
    """Issue 29: a Gradescope submission zipped with its top folder (hw3/attention.py) got 0 with "that folder has
    no .py file"; with --target and without, the one file there is checked, and the report's note says where."""
    sub = EXPORTS / "gradescope" / "submission_300002"
    pick = spec_for(sub, TARGET := "attention.py:MultiHeadAttention", flat=False)
    assert pick.spec == "hw3/attention.py:MultiHeadAttention" and "sub-folder" in pick.note
    pick = spec_for(sub, None, flat=False)
    assert pick.spec == "hw3/attention.py" and "hw3/helpers.py" in pick.note
    pick = spec_for(EXPORTS / "moodle" / "Bob Jones_2002_assignsubmission_file_", TARGET, flat=False)
    assert pick.spec == TARGET and not pick.note  # at the top: as given
    (tmp_path / "a" / "x").mkdir(parents=True)
    (tmp_path / "a" / "y").mkdir(parents=True)
    (tmp_path / "a" / "x" / "attention.py").write_text("")
    (tmp_path / "a" / "y" / "attention.py").write_text("")
    assert spec_for(tmp_path / "a", TARGET, flat=False).spec == TARGET  # two: not guessed (the report says so)


def test_a_submission_without_the_targets_file_is_checked_in_its_own_file_and_marked_for_a_person(tmp_path):
    """An instructor's trial: a notebook handed in where --target named attention.py got 0 points and no review
    flag; its one candidate file is now checked, and a person is asked to look; several candidates: none guessed."""
    one = tmp_path / "one"
    one.mkdir()
    (one / "my attention.py").write_text("import torch.nn as nn\n\nclass MultiHeadAttention(nn.Module):\n    pass\n")
    pick = spec_for(one, "attention.py:MultiHeadAttention", flat=False)
    assert pick.spec == "my attention.py:MultiHeadAttention" and pick.review and "is not in this submission" in \
        pick.note
    two = tmp_path / "two"
    two.mkdir()
    (two / "a.py").write_text("x = 1\n")
    (two / "b.py").write_text("y = 2\n")
    pick = spec_for(two, "attention.py:MultiHeadAttention", flat=False)
    assert pick.spec is None and pick.review and "a.py, b.py" in pick.problem


def test_gradescope_names_equal_once_made_file_names_are_still_two_students():
    """A student's own Gradescope name is theirs to type: a red team named itself ".Bob Smith" (file names lose the
    leading dot), was taken for Bob Smith, and its later submission was graded as his while his own was listed as
    "an earlier submission, not graded".  Names alike once made safe are told apart by their sids, as equal ones."""
    text = "submission_1:\n  :submitters:\n  - :name: Bob Smith\n    :sid: '7'\n  :created_at: 2026-01-01\n" \
           "submission_2:\n  :submitters:\n  - :name: \".Bob Smith\"\n    :sid: '8'\n  :created_at: 2026-01-02\n" \
           "submission_3:\n  :submitters:\n  - :name: Ann/Lee\n    :sid: '9'\n" \
           "submission_4:\n  :submitters:\n  - :name: Ann_Lee\n    :sid: '10'\n"
    named = exports.gradescope(text)
    assert len({name for name, _ in named.values()}) == 4, named
    assert named["submission_1"][0] == "Bob Smith (7)" and named["submission_2"][0] == "Bob Smith (8)"


def test_a_moodle_name_that_reads_as_a_classmates_is_nobodys(tmp_path):
    """Moodle's full name is the student's to type, and so is the file name after the ids: red team 8 named itself
    `Bob Smith_42_assignsubmission_file_`, so that its folder `Bob Smith_42_assignsubmission_file__44_assignsubmission
    _file_` read as Bob's (id 42): its wrong layer was graded as Bob's, and Bob's own folder was listed as "an earlier
    submission, not graded".  A name in which Moodle's `_ID_assignsubmission_PLUGIN_` occurs twice is nobody's: a row
    of its own, not graded, for a person to look; Bob's folder is his."""
    root = tmp_path / "moodle"
    for folder, source in (("Bob Smith_42_assignsubmission_file_", CORRECT),
                           ("Bob Smith_42_assignsubmission_file__44_assignsubmission_file_", BUGGY),
                           ("Carol Wu_43_assignsubmission_file_", CORRECT)):
        (root / folder).mkdir(parents=True)
        (root / folder / "attention.py").write_text(source.read_text())
    (root / "Dan Li_45_assignsubmission_file_x_46_assignsubmission_file_attention.py").write_text(BUGGY.read_text())
    found, subs = layout(root)
    assert sorted(subs) == ["Bob Smith", "Carol Wu"]
    assert subs["Bob Smith"].folder.name == "Bob Smith_42_assignsubmission_file_" and not subs["Bob Smith"].others
    assert sorted((n.item, n.missing) for n in found.not_graded) == [
        ("Bob Smith_42_assignsubmission_file__44_assignsubmission_file_", True),
        ("Dan Li_45_assignsubmission_file_x_46_assignsubmission_file_attention.py", True)]
    assert all("more than one student's" in n.reason for n in found.not_graded)


def test_a_name_told_apart_by_an_id_is_never_a_name_a_classmate_typed():
    """Two Bob Smiths are told apart by their ids, "Bob Smith (1)" and "Bob Smith (2)"; a third student who named
    themself "Bob Smith (2)" had the second Bob's row (red team 8: his later submission graded as Bob's, Bob's own
    "an earlier submission, not graded").  No row's name is left to two students, on Gradescope (sids) and on Moodle
    or Canvas (platform ids); one student's several folders stay one student's."""
    text = "".join(f"submission_{f}:\n  :submitters:\n  - :name: {name}\n    :sid: '{sid}'\n"
                   for f, name, sid in ((1, "Bob Smith", 1), (2, "Bob Smith", 2), (3, "Bob Smith (2)", 3),
                                        (4, "Ann Lee (9)", 9), (5, "Ann Lee (9)", 9)))
    named = {f: n for f, (n, _) in exports.gradescope(text).items()}
    assert len({named[f"submission_{f}"] for f in (1, 2, 3)}) == 3, named
    assert named["submission_1"] == "Bob Smith (1)" and named["submission_4"] == named["submission_5"], named
    told = exports.told_apart([("Bob Smith", "42"), ("Bob Smith", "43"), ("Bob Smith (43)", "44"), ("Ann", "7")])
    assert len(set(told.values())) == 4 and told["Ann", "7"] == "Ann", told
    assert told["Bob Smith", "42"] == "Bob Smith (42)", told


def test_a_canvas_name_that_reads_as_a_classmates_is_nobodys(tmp_path):
    """A Canvas name may hold "_", and where students may edit their names, a classmate's name and user id: red team
    8's `bob_1002_99999_` made its file `bob_1002_99999_1003_6001_attention.py` read as Bob's (user 1002), and Bob,
    with two classes to choose from, got 0 and a row for review.  A file whose name after Canvas's first ids starts with
    another pair of ids is nobody's: its own row, not graded, for a person to look; Bob's file is his alone."""
    root = tmp_path / "canvas"
    root.mkdir()
    for name, source in (("bob_1002_5001_attention.py", CORRECT), ("carol_1004_5003_attention.py", CORRECT),
                         ("bob_1002_99999_1003_6001_attention.py", BUGGY)):
        (root / name).write_text(source.read_text())
    found, subs = layout(root, None)
    assert sorted(subs) == ["bob", "carol"] and [p.name for p in subs["bob"].files] == ["bob_1002_5001_attention.py"]
    assert [(n.item, n.missing) for n in found.not_graded] == [("bob_1002_99999_1003_6001_attention.py", True)]
    assert "more than one student's (Canvas's ids twice)" in found.not_graded[0].reason


def test_a_canvas_name_whose_ids_overlap_a_classmates_is_nobodys(tmp_path):
    """Red team 8 again, one id shorter (instructor trial 10): a student whose Canvas name is `bob_1002` (Bob's name
    and user id) and whose own user id is 1003 hands in `attention.py`; Canvas names it
    `bob_1002_1003_6001_attention.py`, which reads as Bob's (user 1002, attachment 1003, file `6001_attention.py`).
    Its ids after the first do not start the file name, so it went to Bob: he had two files, no class chosen, 0 and a
    row for review, and the other student no row.  Every reading of Canvas's ids counts, overlapping ones too; a late
    file's `LATE_` is one reading with its ids, not two."""
    root = tmp_path / "canvas"
    root.mkdir()
    for name, source in (("bob_1002_5001_attention.py", CORRECT), ("carol_LATE_1004_5003_attention.py", CORRECT),
                         ("bob_1002_1003_6001_attention.py", BUGGY)):
        (root / name).write_text(source.read_text())
    found, subs = layout(root, None)
    assert sorted(subs) == ["bob", "carol"] and [p.name for p in subs["bob"].files] == ["bob_1002_5001_attention.py"]
    assert [(n.item, n.missing) for n in found.not_graded] == [("bob_1002_1003_6001_attention.py", True)]
    assert exports.canvas_ambiguous("bob_1002_1003_6001_attention.py")
    assert not exports.canvas_ambiguous("carol_LATE_1004_5003_attention.py")
    assert not exports.canvas_ambiguous("smith_alice_1001_5001_attention-2.py")


def test_a_canvas_file_named_with_digits_says_how_it_reads_and_what_to_do(tmp_path):
    """The known false positive (instructor trial 10): a real upload `2024_01_attn.py` becomes
    `smithalice_2003_90004_2024_01_attn.py`, which also reads as smithalice_2003's (user 90004): nobody's, for a
    person to look, as an attack of that shape would be.  Its row says both readings (not `01`'s, which no Canvas id
    is) and the way on; a file whose only other reading has an id Canvas never writes (`01_attn.py`) is graded."""
    root = tmp_path / "canvas"
    root.mkdir()
    for name in ("smithalice_2003_90004_2024_01_attn.py", "leebora_2005_90006_01_attn.py"):
        (root / name).write_text(CORRECT.read_text())
    found, subs = layout(root, None)
    assert sorted(subs) == ["leebora"] and [p.name for p in subs["leebora"].files] == ["leebora_2005_90006_01_attn.py"]
    (reason,) = [n.reason for n in found.not_graded]
    assert "smithalice's (Canvas user 2003, attachment 90004), handed in as 2024_01_attn.py" in reason, reason
    assert "smithalice_2003's (Canvas user 90004, attachment 2024), handed in as 01_attn.py" in reason, reason
    assert "user 2024" not in reason and "--only NAME" in reason, reason
    assert exports.canvas_ambiguous("bob_1002_099_1003_6001_attention.py")  # a first reading Canvas never wrote


def test_the_summary_carries_the_platforms_id_for_each_student(tmp_path):
    """Instructor trial 10: summary.csv had no column to match a row to the LMS's gradebook (Moodle's grading
    worksheet matches "Participant 111", Canvas's gradebook its user id), and two Wei Zhangs were "Wei Zhang (111)" and
    "Wei Zhang (112)" only because they clashed: a join by name needed hand work.  Each graded row says the
    platform's id for its student (`student_id`), from the export's own names: the latest attempt's, in folders and
    in flat files alike."""
    moodle, canvas = tmp_path / "moodle", tmp_path / "canvas"
    for root, names in ((moodle, ("Wei Zhang_111_assignsubmission_file_/attention.py",
                                  "Wei Zhang_112_assignsubmission_file_/attention.py",
                                  "Ann Lee_113_assignsubmission_onlinetext_/onlinetext.html",
                                  "Ann Lee_113_assignsubmission_file_/attention.py")),
                        (canvas, ("vargasluis_2001_90001_attention.py", "vargasluis_2001_90011_attention-1.py",
                                  "whitejoe_LATE_2002_90003_attention.py"))):
        for name in names:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(CORRECT.read_text())
        found, subs = layout(root, "attention.py:MultiHeadAttention")
        rows = summary_rows(found, [{"submission": s} for s in subs], lambda n: True)
        ids = {r["submission"]: r["student_id"] for r in rows}
        assert ids == ({"Wei Zhang (111)": "111", "Wei Zhang (112)": "112", "Ann Lee": "113"} if root == moodle else
                       {"vargasluis": "2001", "whitejoe": "2002"}), ids
        assert list(rows[0])[-4:] == ["student_id", "other_attempts", "not_graded", "review_reason"], list(rows[0])


def test_a_gradescope_row_carries_its_sid_so_a_name_that_quotes_a_classmates_is_no_classmate(tmp_path):
    """Red team 13: a Gradescope name is the student's to type.  Beside Alice Smith (sid 1004), a student with sid 1005
    named "Alice Smith (1004)" had the row "Alice Smith (1004)", read as Alice's by whoever matches rows to the
    gradebook, and every Gradescope row's student_id was empty, so nothing told the two apart.  A Gradescope row
    carries its submitters' sids (a group's joined with " & ", as its names), which the gradebook matches by."""
    root = tmp_path / "gradescope"
    people = ((1, "Alice Smith", "'1004'"), (2, "Alice Smith (1004)", "'1005'"), (3, "Bob Jones", "''"))
    text = "".join(f"submission_{f}:\n  :submitters:\n  - :name: {name}\n    :sid: {sid}\n" for f, name, sid in people)
    text += "submission_4:\n  :submitters:\n  - :name: Carol Wu\n    :sid: '7'\n  - :name: Dan Li\n    :sid: '8'\n"
    for f in range(1, 5):
        (root / f"submission_{f}").mkdir(parents=True)
        (root / f"submission_{f}" / "attention.py").write_text(CORRECT.read_text())
    (root / "submission_metadata.yml").write_text(text)
    found, subs = layout(root)
    rows = summary_rows(found, [{"submission": s} for s in subs], lambda n: True)
    assert {r["submission"]: r["student_id"] for r in rows} == {
        "Alice Smith": "1004", "Alice Smith (1004)": "1005", "Bob Jones": "", "Carol Wu & Dan Li": "7 & 8"}
