"""The instructor's own pytest tests, scored beside mha-check's checks: found here, run in the confined child.

`--tests PATH` (a test file, or a folder of them with their conftest.py and helpers) names them.  Which tests
there are is read here, in the trusted process, from the files' syntax alone (`find`: module-level `test*`
functions and the `test*` methods of `Test*` classes): each is one rubric item, "file.py::test_name", whatever the
child says, and a parametrized test is one item that passes when every case passes.  The files are run by pytest in
a child confined as the checks' child is (harness.child.instructor), with the student's class as the
`student_class` fixture; each outcome comes back as a typed frame.

What the trusted side can believe.  The tests import the student's code, which then runs in the same process as
pytest and could change what pytest reports (patch `TestReport`, replace the test functions, write frames of its
own on the channel).  mha-check's own checks are out of its reach (the child only computes, the parent compares);
these tests are not: a pass is what a process the student's code ran in says.  What the parent verifies:

- the canary: every child also runs, last, a test of mha-check's own that must fail (the student's class is not
  None), in a file with a random name, failing with a random word.  A child that reports it passed, skipped, or
  failed without that word, or that reports a test twice or one it never collected, changed how tests are reported:
  none of its passes count, the tests it reported passed are failed "not counted", and the report asks for a person
  to look.  This catches a patch of pytest or of the test functions that makes every test pass.  A canary that ended
  as an error (its set-up failed) never ran: the passes before it are not verified (cannot tell, for review).
- a child that dies or hangs: the test it was running fails (or is "cannot tell" when one of mha-check's own limits
  ended it); the passes it reported before are not verified (its canary never ran), so those tests run again in a
  fresh child, with the tests not run yet.  Every round settles at least the test in progress, so it ends.

What it cannot verify: code written against this very defence (that tells the canary from the instructor's tests
and passes only the latter) gets the points its own process reports.  docs/threat-model.md says so; put the
weight of a grade on mha-check's checks, or read the tests' code of a submission that passes them all and fails
the checks.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import secrets
from dataclasses import dataclass, field, replace

from harness.engine.report import CheckResult
from harness.sandbox import trusted
from harness.sandbox.subject import child_seed
from harness.wire import messages as m
from harness.wire.errors import ChildEnd, WorkerDied
from harness.wire.status import Status

KIND = "instructor"  # the CheckResult kind of an instructor's test (beside "correctness" and "rule")
SLACK_SECONDS = 10.0  # the parent's wait per test beyond the child's own time limit for it: the child stops a slow
# test itself (SIGALRM) and says so; the parent's deadline ends a child that cannot


MAX_BYTES = 512 * 1024  # the files cross the wire in one request's header (harness.wire.protocol.MAX_HEADER: 1 MB)


class TestsError(ValueError):
    """--tests names nothing usable (no such path, no test in it, a file that is not Python): a usage error."""


@dataclass
class Suite:
    """The instructor's tests: the files to send (relative path -> source) and the test ids, in file order."""

    files: dict[str, str] = field(default_factory=dict)
    ids: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.ids)


def is_test_file(name: str) -> bool:
    base = os.path.basename(name)
    return base.endswith(".py") and (base.startswith("test_") or base.endswith("_test.py"))


def find(paths: list[str], need_pytest: bool = True) -> Suite:
    """The tests in these files and folders (a folder: every .py file under it is sent, helpers and conftest.py
    too; its test_*.py and *_test.py files hold the tests).  Raises TestsError for what cannot be used, and, with
    `need_pytest` (they will run here), when this Python has no pytest (found, never imported: the trusted side
    does not run it)."""
    if need_pytest and importlib.util.find_spec("pytest") is None:
        raise TestsError("--tests needs pytest in the Python that runs mha-check (pip install 'pytest>=7.4')")
    suite = Suite()
    for path in paths:
        if os.path.isdir(path):
            found = sorted(os.path.relpath(os.path.join(d, f), path) for d, dirs, files in os.walk(path)
                           for f in files if f.endswith(".py") and not _hidden(os.path.relpath(d, path)))
            pairs = [(os.path.join(path, rel), rel) for rel in found]
        elif os.path.isfile(path):
            if not path.endswith(".py"):
                raise TestsError(f"--tests {path}: not a .py file")
            pairs = [(path, os.path.basename(path))]
        else:
            raise TestsError(f"--tests {path}: no such file or folder")
        before = len(suite.ids)
        for full, rel in pairs:
            rel = rel.replace(os.sep, "/")
            if rel in suite.files:
                raise TestsError(f"--tests: two test files would both be {rel}")
            try:
                with open(full, encoding="utf-8") as f:
                    source = f.read()
            except (OSError, UnicodeDecodeError) as e:
                raise TestsError(f"--tests: cannot read {full}: {e}") from None
            suite.files[rel] = source
            if is_test_file(rel):
                suite.ids += [f"{rel}::{name}" for name in test_names(source, full)]
        if sum(len(v.encode()) for v in suite.files.values()) > MAX_BYTES:
            raise TestsError(f"--tests: more than {MAX_BYTES // 1024} KB of Python in {path} (they travel to each "
                             "child in one message): name the test files, or a folder of only them")
        if len(suite.ids) == before:
            raise TestsError(f"--tests {path}: no test found (functions named test* in files named test_*.py or "
                             "*_test.py, or test* methods of Test* classes)")
    return suite


def _hidden(rel_dir: str) -> bool:
    return any(part.startswith(".") or part == "__pycache__" for part in rel_dir.split(os.sep) if part != ".")


def test_names(source: str, where: str) -> list[str]:
    """pytest's default collection, read from the syntax: module-level test* functions, test* methods of Test*
    classes without an __init__ ("TestX::test_y")."""
    try:
        tree = ast.parse(source, where)
    except SyntaxError as e:
        raise TestsError(f"--tests: {where} is not valid Python (line {e.lineno}: {e.msg})") from None
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            names.append(node.name)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            methods = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            if not any(n.name == "__init__" for n in methods):
                names += [f"{node.name}::{n.name}" for n in methods if n.name.startswith("test")]
    return list(dict.fromkeys(names))


def canary(files: dict[str, str]) -> tuple[str, str, str]:
    """(file, source, word): a test file of a name the suite does not use, whose one test must fail with `word`."""
    while True:
        name = f"test_{secrets.token_hex(6)}"
        if f"{name}.py" not in files:
            break
    word = secrets.token_hex(16)
    return f"{name}.py", f"def {name}(student_class):\n    assert student_class is None, {word!r}\n", word


def base_id(nodeid: str) -> str:
    return nodeid.split("[", 1)[0]


@dataclass
class _Round:
    """What one child reported."""

    order: list[str] = field(default_factory=list)  # node ids collected, in run order (the canary's last)
    errors: list[str] = field(default_factory=list)
    outcomes: dict[str, m.TestOutcome] = field(default_factory=dict)  # node id -> outcome
    forged: str = ""  # why this child's reports cannot be believed


def run(suite: Suite, make_subject, test_seconds: float) -> tuple[list[CheckResult], list[str]]:
    """Run the suite in fresh confined children (`make_subject()`: a Subject not yet loaded) until every test is
    settled.  Returns one CheckResult per test id (kind "instructor") and the notes for a person to read (a child
    whose reports cannot be believed)."""
    settled: dict[str, CheckResult] = {}
    review: list[str] = []
    pending = list(suite.ids)
    while pending:
        subject = make_subject()
        try:
            done = _one_round(suite, pending, subject, test_seconds, settled, review)
        finally:
            subject.close()
        pending = [t for t in pending if t not in settled]
        if not done:
            break
    for test in pending:  # nothing settled them in a round: say so, never a pass
        settled[test] = _result(test, Status.CANNOT_TELL,
                                "mha-check could not run this test to an end it can vouch for")
    return [settled[t] for t in suite.ids], review


def _one_round(suite: Suite, pending: list[str], subject, test_seconds: float, settled: dict, review: list) -> bool:
    """One child: run `pending`; settle what it reports and the test it died in.  False when it settled nothing."""
    file, source, word = canary(suite.files)
    request = m.RunTests(spec=subject.child_spec, search_dir=subject.room.path, files={**suite.files, file: source},
                         submission=subject.submission_code, run=list(pending), canary=file,
                         test_seconds=test_seconds, seed=child_seed(subject.seed))
    trusted.preload()  # every trusted module imported before the child gets any code of the student's
    got, died, failed = _listen(subject, request, test_seconds)
    before = len(settled)
    canary_id = next((n for n in got.order if n.split("::")[0] == file), None)
    running = next((n for n in got.order if n not in got.outcomes), None) if died is not None else None
    unverified = _trust(got, canary_id, word, running, died, failed)
    if got.forged:
        review.append(f"the instructor's tests: a child's reports were not believed ({got.forged}): the student's "
                      "code changed how the tests run or are reported; none of that child's passes counted")
    elif unverified:
        review.append(f"the instructor's tests: {unverified}; none of that child's passes counted")
    by_test: dict[str, list[str]] = {}
    for nodeid in got.order:
        if nodeid != canary_id:
            by_test.setdefault(base_id(nodeid), []).append(nodeid)
    for test in pending:
        nodes = by_test.get(test, [])
        outcomes = [got.outcomes[n] for n in nodes if n in got.outcomes]
        complete = bool(nodes) and len(outcomes) == len(nodes)
        passed = complete and all(o.outcome == "passed" for o in outcomes)
        if running is not None and running in nodes:
            settled[test] = _died(test, died)
        elif passed and got.forged:
            settled[test] = _result(test, Status.FAIL, "not counted: the process that ran this test reported what "
                                                       f"cannot be believed ({got.forged}): your code changed how the "
                                                       "tests run or are reported")
        elif passed and unverified:
            settled[test] = _result(test, Status.CANNOT_TELL, f"reported passed, but not counted: {unverified}")
        elif complete and not passed:
            settled[test] = _from_outcome(test, next(o for o in outcomes if o.outcome != "passed"), test_seconds)
        elif passed and canary_id in got.outcomes:  # a pass is believed only once the canary, run after it, failed
            settled[test] = _result(test, Status.PASS, "")
        elif failed:
            settled[test] = _result(test, Status.CANNOT_TELL, f"mha-check's runner of the tests failed: {failed}")
        elif not nodes and died is None and (got.order or got.errors):
            error = next((e for e in got.errors if e.split(":", 1)[0] == test.split("::")[0]), "")
            settled[test] = _result(test, Status.CANNOT_TELL, "pytest could not collect this test" + (
                f": {error}" if error else " (its file was collected; a decorator or a name pytest reads otherwise?)"))
        elif died is not None and not got.order:  # it died before or while collecting: every test ends with it
            settled[test] = _died(test, died)
    return len(settled) > before


def _trust(got: _Round, canary_id: str | None, word: str, running: str | None, died: WorkerDied | None,
           failed: str) -> str:
    """Sets `got.forged` when the canary says the reports were changed (evidence: its passes are failed "not
    counted"); returns why they cannot be verified otherwise ("" when they can): the child ended in the canary, or
    its run ended without reaching it (never evidence: pytest may have stopped on its own; no points, a person
    looks)."""
    outcome = got.outcomes.get(canary_id)
    if outcome is not None and not got.forged and (outcome.outcome in ("passed", "skipped") or (
            outcome.outcome == "failed" and word not in outcome.message)):
        got.forged = f"a test that cannot pass was reported {outcome.outcome}" + (
            " with other words than its own" if outcome.outcome == "failed" else "")
    if outcome is not None and not got.forged and outcome.outcome != "failed" and any(
            o.outcome == "passed" for n, o in got.outcomes.items() if n != canary_id):
        # an error in its set-up is no failure of its own: it did not run, so it vouches for nothing (red team 14: the
        # code passed the test it was loaded in and broke every later set-up, the canary's included)
        return f"the test that checks that its results can be believed did not run ({outcome.outcome})"
    if running is not None and running == canary_id:
        return f"the process ended while mha-check checked that its results can be believed ({died.message})"
    if outcome is None and died is None and not failed and got.order:
        return "the run ended before mha-check could check that its results can be believed"
    return ""


def _listen(subject, request: m.RunTests, test_seconds: float) -> tuple[_Round, WorkerDied | None, str]:
    """What the child reports, frame by frame, until it answers, fails (our runner's message) or dies."""
    got, died, failed = _Round(), None, ""
    try:
        for reply in subject.stream(request, (m.TestsCollected, m.TestOutcome), test_seconds + SLACK_SECONDS):
            if isinstance(reply, m.TestsCollected):
                if got.order:
                    got.forged = "it announced its tests twice"
                got.order, got.errors = list(reply.ids), list(reply.errors)
            elif isinstance(reply, m.TestOutcome):
                if reply.id in got.outcomes or reply.id not in got.order:
                    got.forged = f"it reported {reply.id!r} " + ("twice" if reply.id in got.outcomes else
                                                                 "without having collected it")
                got.outcomes[reply.id] = reply
            elif isinstance(reply, m.Failed):
                failed = reply.message
    except WorkerDied as e:
        died = e
    return got, died, failed


def _died(test: str, died: WorkerDied) -> CheckResult:
    if died.ours:
        return _result(test, Status.CANNOT_TELL, f"mha-check could not finish this test: {died.message}",
                       TIME_HELP if died.kind is ChildEnd.TIME else "")
    return _result(test, Status.FAIL, died.message)


def _from_outcome(test: str, outcome: m.TestOutcome, test_seconds: float) -> CheckResult:
    words = outcome.message
    if "TestTimeout" in words:  # a limit of mha-check's, as for its own checks: cannot tell, never a failure
        return _result(test, Status.CANNOT_TELL, f"time limit: the test did not finish within {test_seconds:g} s (an "
                                            "endless loop, a sleep or far too much work)", TIME_HELP)
    if outcome.outcome == "skipped":
        return _result(test, Status.SKIP, f"skipped by the test itself: {words}")
    if outcome.outcome == "ours":
        return _result(test, Status.CANNOT_TELL, words)
    return _result(test, Status.FAIL, words or f"the test {outcome.outcome}")


def _result(test: str, status: Status, message: str, help_: str = "") -> CheckResult:
    return CheckResult(id=test, status=status, claim=f"the instructor's test {test} passes", message=message,
                       kind=KIND, help=help_ or ("look at the test and at what stopped it"
                                                 if status == Status.CANNOT_TELL else ""))


TIME_HELP = ("make the code faster (no endless loop, no sleep); a test that needs longer: a larger --time-limit (each "
             "test has a quarter of it, at most 30 s)")


def test_seconds(limits) -> float:
    """Each test's time: the time of one call of the checks (30 s by default), and at most a quarter of the
    submission's whole time, so that a test that hangs is stopped (and said) well before its child runs out."""
    return min(limits.call_seconds, limits.total_seconds / 4)


def add_to(report, suite: Suite, make_subject, test_seconds: float) -> None:
    """The suite's results appended to `report`'s checks (after mha-check's own); a child whose reports were not
    believed is said in the report's review notes, which ask for a person to look."""
    construct = next((c for c in report.checks if c.id == "construct"), None)
    if construct is not None and construct.status == Status.FAIL and not report.adapter.class_name:
        # the file did not load (a syntax error, a loop at import): every test would only wait for the same
        # failure and then be told to raise a time limit that is not the problem
        not_run(report, suite, f"your file did not load ({construct.message})", ours=False)
        return
    results, review = run(suite, make_subject, test_seconds)
    report.checks += results
    if review:
        report.adapter = replace(report.adapter, review=(*report.adapter.review, *review))


def not_run(report, suite: Suite, message: str, ours: bool) -> None:
    """A submission nothing ran for (no file to check, a grading process that broke): each test is in its report
    all the same, with mha-check's reason, so that its total is the rubric's like every other report's."""
    report.checks += [_result(t, Status.CANNOT_TELL if ours else Status.FAIL, f"not run: {message}") for t in suite.ids]


def digest(suite: Suite | None) -> str:
    """The suite's files in one hash ("" without tests): `grade --resume` keeps a report only for the same tests."""
    if not suite:
        return ""
    h = hashlib.sha256()
    for rel in sorted(suite.files):
        h.update(rel.encode() + b"\0" + suite.files[rel].encode() + b"\0")
    return h.hexdigest()
