"""The instructor's tests on the trusted side (harness.engine.instructor): which tests there are, read from the
files' syntax; the rubric's [tests] table; and what the parent believes of a child's reports, with a scripted child
in place of a real one (the e2e tests, tests/e2e/test_instructor_tests.py, run real children)."""
from types import SimpleNamespace

import pytest

from harness.engine import instructor
from harness.render import rubric as rubrics
from harness.wire import messages as m
from harness.wire.errors import WorkerDied

SOURCE = '''
import torch

def helper():
    pass

def test_a(student_class):
    pass

class TestGroup:
    def test_b(self, student_class):
        pass

    def not_a_test(self):
        pass

class TestWithInit:
    def __init__(self):
        pass

    def test_never_collected(self):
        pass
'''


def test_the_tests_are_read_from_the_syntax_as_pytest_collects_them():
    assert instructor.test_names(SOURCE, "test_x.py") == ["test_a", "TestGroup::test_b"]


def test_a_folder_sends_every_python_file_and_scores_only_its_test_files(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "test_one.py").write_text(SOURCE)
    (tmp_path / "conftest.py").write_text("import pytest\n")
    (tmp_path / "helpers.py").write_text("def test_like():\n    pass\n")
    (tmp_path / "sub" / "two_test.py").write_text("def test_c(student_class):\n    pass\n")
    suite = instructor.find([str(tmp_path)])
    assert set(suite.files) == {"test_one.py", "conftest.py", "helpers.py", "sub/two_test.py"}
    assert suite.ids == ["sub/two_test.py::test_c", "test_one.py::test_a", "test_one.py::TestGroup::test_b"]


@pytest.mark.parametrize("make, words", [
    (lambda p: p / "missing.py", "no such file"),
    (lambda p: (p / "notes.txt").write_text("x") and p / "notes.txt", "not a .py file"),
    (lambda p: (p / "test_none.py").write_text("def helper():\n    pass\n") and p / "test_none.py", "no test found"),
    (lambda p: (p / "test_bad.py").write_text("def test_(:\n") and p / "test_bad.py", "not valid Python"),
    (lambda p: (p / "test_big.py").write_text("def test_a():\n    pass\n" + "#" * 600_000) and p / "test_big.py",
     "more than 512 KB"),
])
def test_what_cannot_be_used_is_a_usage_error(tmp_path, make, words):
    with pytest.raises(instructor.TestsError, match=words):
        instructor.find([str(make(tmp_path))])


def test_two_files_of_one_name_are_refused(tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "test_x.py").write_text("def test_y(student_class):\n    pass\n")
    with pytest.raises(instructor.TestsError, match="both be test_x.py"):
        instructor.find([str(tmp_path / "a" / "test_x.py"), str(tmp_path / "b" / "test_x.py")])


def test_the_rubric_weighs_an_instructors_test_and_refuses_one_it_does_not_know(tmp_path):
    path = tmp_path / "rubric.toml"
    path.write_text('[tests."test_x.py::test_y"]\npoints = 4\nvisibility = "after_due_date"\n')
    rubric = rubrics.load_rubric(str(path), {"construct"}, ["test_x.py::test_y"])
    assert (rubric.points_for("test_x.py::test_y"), rubric.visibility_for("test_x.py::test_y")) == \
        (4.0, "after_due_date")
    with pytest.raises(rubrics.RubricError, match="did you mean 'test_z.py::test_y'"):
        rubrics.load_rubric(str(path), {"construct"}, ["test_z.py::test_y"])
    with pytest.raises(rubrics.RubricError, match="no --tests given"):
        rubrics.load_rubric(str(path), {"construct"})


# -- what the parent believes ------------------------------------------------------------------------------------------
SUITE = instructor.Suite({"test_x.py": "..."}, ["test_x.py::test_a", "test_x.py::test_b", "test_x.py::test_c"])


class Scripted:
    """A child that reports what `script(request, canary_id, word)` yields (replies, or a WorkerDied to raise)."""

    rounds: list = []

    def __init__(self, script):
        self.script, self.child_spec, self.submission_code, self.seed = script, "a.py:A", True, 0
        self.room = SimpleNamespace(path="/nowhere")

    def stream(self, request, more, seconds):
        Scripted.rounds.append(list(request.run))
        file = request.canary
        source = request.files[file]
        canary_id = f"{file}::{file[:-3]}"
        word = source.split("is None, ")[1].strip().strip("'")
        for reply in self.script(request, canary_id, word):
            if isinstance(reply, WorkerDied):
                raise reply
            yield reply

    def close(self):
        pass


def run(script):
    Scripted.rounds = []
    results, review = instructor.run(SUITE, lambda: Scripted(script), 5.0)
    return {r.id.split("::")[1]: r for r in results}, review


def honest(request, canary_id, word, fail=("test_x.py::test_b",)):
    ids = list(request.run) + [canary_id]
    yield m.TestsCollected(ids)
    for nodeid in request.run:
        yield m.TestOutcome(nodeid, "failed" if nodeid in fail else "passed", "assert 1 == 2" if nodeid in fail
                            else "")
    yield m.TestOutcome(canary_id, "failed", f"AssertionError: {word}")
    yield m.TestsDone()


def test_an_honest_child_is_believed():
    results, review = run(honest)
    assert {k: r.status for k, r in results.items()} == {"test_a": "pass", "test_b": "fail", "test_c": "pass"}
    assert results["test_b"].message == "assert 1 == 2" and not review and len(Scripted.rounds) == 1


@pytest.mark.parametrize("canary", ["passed", "skipped", "failed without the word"])
def test_a_canary_that_did_not_fail_as_it_must_costs_every_pass(canary):
    def script(request, canary_id, word):
        for reply in honest(request, canary_id, word):
            if isinstance(reply, m.TestOutcome) and reply.id == canary_id:
                reply = m.TestOutcome(canary_id, canary.split()[0], "AssertionError: something else")
            yield reply
    results, review = run(script)
    assert {k: r.status for k, r in results.items()} == {"test_a": "fail", "test_b": "fail", "test_c": "fail"}
    assert results["test_a"].message.startswith("not counted") and review


def test_a_test_reported_twice_is_a_forgery():
    def script(request, canary_id, word):
        yield m.TestsCollected(list(request.run) + [canary_id])
        yield m.TestOutcome("test_x.py::test_b", "passed")
        yield from list(honest(request, canary_id, word))[1:]
    results, review = run(script)
    assert results["test_a"].status == "fail" and "twice" in results["test_a"].message and review


def test_a_child_that_dies_fails_the_test_it_ran_and_the_passes_before_it_are_run_again():
    def script(request, canary_id, word):
        if len(Scripted.rounds) == 1:
            yield m.TestsCollected(list(request.run) + [canary_id])
            yield m.TestOutcome("test_x.py::test_a", "passed")  # not believed yet: the canary never ran
            yield WorkerDied("crash", "the process running your code crashed with signal SIGSEGV during tests")
        else:
            yield from honest(request, canary_id, word, fail=())
    results, review = run(script)
    assert Scripted.rounds == [list(SUITE.ids), ["test_x.py::test_a", "test_x.py::test_c"]]
    assert {k: r.status for k, r in results.items()} == {"test_a": "pass", "test_b": "fail", "test_c": "pass"}
    assert "SIGSEGV" in results["test_b"].message and not review


def test_a_child_that_dies_in_the_canary_has_its_passes_not_counted_and_no_second_round():
    """Not evidence of a forgery (a thread of the student's may have crashed then): no points, a person looks."""
    def script(request, canary_id, word):
        yield m.TestsCollected(list(request.run) + [canary_id])
        for nodeid in request.run:
            yield m.TestOutcome(nodeid, "passed")
        yield WorkerDied("exit", "the process running your code exited (status 0) during tests without answering")
    results, review = run(script)
    assert all(r.status == "cannot_tell" and "not counted" in r.message for r in results.values())
    assert review and len(Scripted.rounds) == 1


def test_a_test_pytest_could_not_collect_cannot_be_told():
    def script(request, canary_id, word):
        yield m.TestsCollected([canary_id], ["test_x.py: ImportError: no module named attention"])
        yield m.TestOutcome(canary_id, "failed", word)
        yield m.TestsDone()
    results, _ = run(script)
    assert all(r.status == "cannot_tell" and "ImportError" in r.message for r in results.values())


def test_a_time_limit_is_mha_checks_and_cannot_be_told():
    def script(request, canary_id, word):
        yield m.TestsCollected(list(request.run) + [canary_id])
        yield WorkerDied("time", "time limit: your code did not let the test finish within 15 s", "tests")
        yield from ()
    results, _ = run(script)
    assert results["test_a"].status == "cannot_tell" and "--time-limit" in results["test_a"].help


def test_a_run_that_ends_without_the_canary_counts_no_pass():
    def script(request, canary_id, word):
        yield m.TestsCollected(list(request.run) + [canary_id])
        for nodeid in request.run:
            yield m.TestOutcome(nodeid, "passed")
        yield m.TestsDone()
    results, review = run(script)
    assert all(r.status == "cannot_tell" and "not counted" in r.message for r in results.values()) and review


def test_an_assertions_own_message_is_kept_without_pytests_explanation():
    """`assert torch.allclose(a, b), "the layer looks ahead"`: the student reads the instructor's words, not pytest's
    "+ where False = <built-in method allclose ...>(tensor([[..." after them; a bare assert keeps the explanation."""
    from harness.child.instructor import _first_words

    rewritten = ("AssertionError: the layer looks ahead\nassert False\n + where False = <built-in method allclose of "
                 "type object at 0x7fd815ecea40>(tensor([[[ 2.8872e-01]]]))")
    assert _first_words(rewritten) == "AssertionError: the layer looks ahead"
    bare = "assert 3 == 4\n + where 3 = len([1, 2, 3])"
    assert _first_words(bare) == bare
    assert _first_words("ValueError: bad shape\nmore") == "ValueError: bad shape\nmore"


def test_a_file_that_did_not_load_runs_no_test_and_fails_each_with_the_reason():
    """A syntax error or a loop at import: every test would only wait for the same failure and then be told to
    raise --time-limit; each fails at once, saying the file did not load (the student's to fix)."""
    from harness.engine.records import Adapter
    from harness.engine.report import CheckResult

    construct = CheckResult("construct", "fail", "the target imports", "your file did not finish importing within 30 s")
    report = SimpleNamespace(checks=[construct], adapter=Adapter())
    suite = SimpleNamespace(ids=["test_x.py::test_a", "test_x.py::test_b"])

    def never(*_):
        raise AssertionError("no child may be started for a file that did not load")

    instructor.add_to(report, suite, never, 7.5)
    assert [(c.id, c.status) for c in report.checks[1:]] == [("test_x.py::test_a", "fail"),
                                                             ("test_x.py::test_b", "fail")]
    assert "did not load (your file did not finish importing within 30 s)" in report.checks[1].message
