"""`grade`'s progress line (harness.frontends.progress): elapsed time, an estimate from the medians of finished
submissions and the jobs, and the submission running the longest; a clock of our own, so no timing is real."""
import io

from harness.frontends.progress import Progress, clock


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_line_says_elapsed_time_estimate_and_the_longest_running_submission():
    now, screen = Clock(), Terminal()
    progress = Progress(total=6, jobs=2, stream=screen, now=now)
    assert progress.estimate() is None
    progress.started("ann")
    progress.started("bob")
    assert "0/6 graded, 0s elapsed, estimating time left; running longest: ann (0s)" in progress.line()
    now.t += 10
    progress.finished("ann")  # 10 s
    progress.started("cyd")
    now.t += 20
    progress.finished("bob")  # 30 s
    progress.started("dee")
    now.t += 5
    # median 20 s: 2 waiting (40 s) + cyd (20 - 25: done soon, 0) + dee (20 - 5 = 15), over 2 jobs
    assert progress.estimate() == (2 * 20 + 0 + 15) / 2
    line = progress.line()
    assert line.startswith("2/6 graded, 35s elapsed, about 28s left; running longest: cyd (25s)"), line
    assert "\r2/6 graded" in screen.getvalue()  # written as each submission came back


def test_a_submission_that_hit_its_time_limit_does_not_make_the_estimate_of_the_others_long():
    now = Clock()
    progress = Progress(total=5, jobs=1, stream=Terminal(), now=now)
    for name, seconds in [("a", 4), ("b", 600), ("c", 6)]:
        progress.started(name)
        now.t += seconds
        progress.finished(name)
    assert progress.estimate() == 2 * 6


def test_the_line_fits_the_terminal_and_shows_names_as_text():
    progress = Progress(total=300, jobs=2, stream=Terminal(), now=Clock())
    progress.started("\x1b[2Jx" * 40)
    line = progress.line(80)
    assert len(line) == 79 and "\x1b" not in line and line.endswith("... (0s)"), line  # the name cut, not the time
    assert "running longest" not in progress.line(60)  # no room for a name worth reading: none


def test_nothing_is_written_when_stderr_is_not_a_terminal():
    log = io.StringIO()
    progress = Progress(total=1, jobs=1, stream=log, now=Clock())
    progress.started("a")
    progress.finished("a")
    assert log.getvalue() == ""


def test_clock():
    assert [clock(s) for s in (0.4, 59, 61, 3599, 3725)] == ["0s", "59s", "1m01s", "59m59s", "1h02m"]
