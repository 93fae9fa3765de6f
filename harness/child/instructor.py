"""Child side of the instructor's own tests: their pytest files run beside the student's code, in the child.

The instructor's tests import the student's class (the `student_class` fixture), so they cannot run in the trusted
process.  Here pytest runs them in this confined child, in-process: the files arrive over the wire (RunTests) and
are written into a folder of the child's own before anything of the student's runs; pytest is set up so that
nothing of the submission configures it (its own ini file, no conftest above that folder, no plugins found by entry
point, no cache); the student's module is loaded only when a test first asks for the fixture.  Each test's outcome
goes back to the trusted side as its own typed frame (TestOutcome) as soon as the test ends; nothing is written for
the trusted side to read from disk.

What the trusted side can and cannot believe of these outcomes is harness.engine.instructor's business: the
student's code runs in this very process and could change what is reported, which is why a test that must fail
(the canary) runs last and is checked there.
"""
from __future__ import annotations

import os
import re
import signal
import sys
import tempfile
import types

import pytest

from harness.child.target import TargetError, describe_exception, load_target
from harness.wire import messages as m

PARAMS = re.compile(r"\[.*\]$", re.S)  # a parametrized case's "[1-2]": its function's id is the item
MESSAGE_LIMIT = 2000  # characters of one failure's words sent back


class TestTimeout(Exception):
    """The test did not finish within its time (RunTests.test_seconds)."""


class _Unavailable(Exception):
    """The student's class could not be given to a test: `ours` when mha-check cannot tell which class it is."""

    def __init__(self, message: str, ours: bool):
        super().__init__(message)
        self.ours = ours


def base_id(nodeid: str) -> str:
    """"test_a.py::test_b[3]" -> "test_a.py::test_b": a parametrized test is one item, passed when all its cases
    pass."""
    return PARAMS.sub("", nodeid)


class Plugin:
    """The pytest plugin of one RunTests request: the fixture, the selection and order, the time limit per test,
    and a frame per outcome (`send`)."""

    def __init__(self, request: m.RunTests, spec: str, search_dir: str, submission: bool, send):
        self.request, self.spec, self.search_dir, self.submission = request, spec, search_dir, submission
        self.send = send
        self.folder = ""  # the tests' folder: on sys.path while they are collected (their helper modules import)
        self.loaded = None  # the LoadedTarget, or the _Unavailable that loading raised
        self.errors: list[str] = []
        self.phases: dict[str, list] = {}

    # -- the fixture ---------------------------------------------------------------------------------------------
    def give_class(self):
        if self.loaded is None:
            try:
                self.loaded = load_target(self.spec, self.search_dir, self.submission)
            except TargetError as e:
                ours = e.kind == "ambiguous"
                self.loaded = _Unavailable((f"mha-check could not tell which class to give this test: {e}" if ours
                                            else f"your file could not be loaded, or your class not found: {e}"),
                                           ours=ours)
            except BaseException as e:  # noqa: BLE001 - the student's module raised on import
                self.loaded = _Unavailable("your file raised while it was imported: " +
                                           describe_exception(e)[:MESSAGE_LIMIT], ours=False)
        if isinstance(self.loaded, _Unavailable):
            raise self.loaded
        return self.loaded.obj

    # -- hooks -----------------------------------------------------------------------------------------------------
    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.errors.append(f"{report.nodeid or '?'}: {_words(report)}"[:MESSAGE_LIMIT])

    def pytest_collection_modifyitems(self, session, config, items) -> None:
        canary = [i for i in items if i.nodeid.split("::")[0] == self.request.canary]
        wanted = set(self.request.run)
        kept = [i for i in items if i not in canary and (not wanted or base_id(i.nodeid) in wanted)]
        left = [i for i in items if i not in kept and i not in canary]
        if left:
            config.hook.pytest_deselected(items=left)
        items[:] = kept + canary  # the canary last: after the student's code has been imported and has run

    def pytest_collection_finish(self, session) -> None:
        _forget(self.folder)
        self.send(m.TestsCollected([i.nodeid for i in session.items], self.errors))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item) -> None:
        """The test's time starts with its fixtures (the student's module is imported by the first that asks)."""
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, max(0.1, self.request.test_seconds))

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_teardown(self, item, nextitem) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)  # the clock stops where pytest's own work begins

    def pytest_runtest_logreport(self, report) -> None:
        self.phases.setdefault(report.nodeid, []).append(report)

    def pytest_runtest_logfinish(self, nodeid, location) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        self.send(self.outcome(nodeid, self.phases.pop(nodeid, [])))

    def outcome(self, nodeid: str, reports: list) -> m.TestOutcome:
        """One test's outcome from its setup, call and teardown reports (pytest's own summary of each)."""
        for report in reports:
            if report.failed:
                words = _words(report)
                if report.when != "call":
                    unavailable = isinstance(self.loaded, _Unavailable) and str(self.loaded) in words
                    if unavailable and self.loaded.ours:
                        return m.TestOutcome(nodeid, "ours", str(self.loaded)[:MESSAGE_LIMIT])
                    return m.TestOutcome(nodeid, "error", (str(self.loaded) if unavailable else
                                                           f"in the test's {report.when}: {words}")[:MESSAGE_LIMIT])
                return m.TestOutcome(nodeid, "failed", words[:MESSAGE_LIMIT])
        if any(r.skipped for r in reports):
            return m.TestOutcome(nodeid, "skipped", _words(next(r for r in reports if r.skipped))[:MESSAGE_LIMIT])
        if any(r.when == "call" and r.passed for r in reports):
            return m.TestOutcome(nodeid, "passed")
        return m.TestOutcome(nodeid, "error", "pytest did not run this test")


def _forget(folder: str) -> None:
    """After collection: the tests' folder off sys.path and its modules out of sys.modules (the test modules and
    their helpers keep the objects they imported), so that a module of the student's that shares a name with an
    instructor's helper (`helpers.py`) is the student's when their code imports it (red team 14)."""
    if not folder:
        return
    real = os.path.realpath(folder)
    while real in sys.path:
        sys.path.remove(real)
    places = (real + os.sep, os.path.abspath(folder) + os.sep)  # a helper's path, a test module's (as pytest has it)
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None)
        if isinstance(where, str) and where.startswith(places) and os.path.realpath(where).startswith(places[0]):
            del sys.modules[name]


def _alarm(signum, frame):
    raise TestTimeout("the test did not finish in time")


def _first_words(message: str) -> str:
    """An assertion's own message without pytest's explanation after it ("assert False / + where False =
    <built-in method allclose ...>(tensor([[...": the instructor's words drown in tensor printouts and addresses);
    an assert without a message keeps that explanation, the only words it has."""
    head, _, rest = message.partition("\n")
    if head.startswith("AssertionError: ") and rest.lstrip().startswith("assert "):
        return head
    return message


def _words(report) -> str:
    """What pytest says of a failed or skipped phase: the exception's line and the assertion's explanation
    (`reprcrash`), and where in the test file it happened."""
    longrepr = report.longrepr
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None:
        where = f" ({os.path.basename(str(crash.path))}:{crash.lineno})" if crash.lineno else ""
        return f"{_first_words(crash.message)}{where}"
    if getattr(longrepr, "errorstring", None):  # a fixture the test asks for does not exist
        return str(longrepr.errorstring).strip().splitlines()[0]
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # a skip: (path, line, reason)
        return str(longrepr[2])
    return str(longrepr)[-MESSAGE_LIMIT:]


def run(request: m.RunTests, spec: str, search_dir: str, submission: bool, send) -> m.Reply:
    """Write the files, run pytest on them with the plugin, and answer TestsDone (the outcomes went by `send`)."""
    folder = tempfile.mkdtemp(prefix="mha-check-tests-", dir=search_dir)
    for rel, source in request.files.items():
        path = os.path.realpath(os.path.join(folder, rel))
        if not path.startswith(folder + os.sep):
            return m.Failed("harness", f"test file {rel!r} is outside the tests' folder")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(source)
    ini = os.path.join(folder, "pytest.ini")
    with open(ini, "w") as f:
        f.write("[pytest]\n")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # no plugin found by entry point (mha-check's own included)
    for name in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):  # nor options or plugins from the grader's environment
        os.environ.pop(name, None)
    plugin = Plugin(request, spec, search_dir, submission, send)
    plugin.folder = folder
    sys.path.insert(0, os.path.realpath(folder))  # the instructor's helper modules import while the tests are collected

    @pytest.fixture(name="student_class")
    def student_class():
        return plugin.give_class()

    @pytest.fixture(name="mha_check_seed")
    def mha_check_seed():
        """The run's seed as the child has it (a grade's drawn seed digested): inputs made from it differ at every
        grade, so a published test file cannot be answered from a table recorded at home."""
        return request.seed

    fixtures = types.ModuleType("mha_check_fixtures")  # pytest reads a plugin's fixtures from a module's attributes
    fixtures.student_class = student_class
    fixtures.mha_check_seed = mha_check_seed
    args = [folder, "-c", ini, "--rootdir", folder, "--confcutdir", folder, "--import-mode=importlib",
            "-p", "no:cacheprovider", "-p", "no:stepwise", "-p", "no:faulthandler", "--capture=no", "-q",
            "--no-header", "-o", "python_files=test_*.py *_test.py", "-W", "ignore::pytest.PytestWarning"]
    pytest.main(args, plugins=[plugin, fixtures])
    return m.TestsDone()
