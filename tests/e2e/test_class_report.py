"""The class view of a graded folder, end to end: `grade` writes class-report.html and class-mistakes.csv beside the
reports, and a real browser (Debian's chromium, headless) opens the page: it renders with no error, shows the most
common mistake, and every link on it resolves to a file of the output folder.  A screenshot is kept in the test's
tmp folder (class-report.png) for a person to look at.

The browser is not a dependency of mha-check: where chromium is not installed the browser tests skip, saying so
(.ci/run installs it where it can, as it does bubblewrap)."""
import csv
import html.parser
import json
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest

from conftest import ROOT, ZOO

# a student's folder name as hostile as a file system allows: markup, a bidi override, an escape sequence
HOSTILE = "mal<img src=x onerror=alert(1)>\u202egnp.exe\x1b[2J"


def chromium() -> str | None:
    return next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)


needs_browser = pytest.mark.skipif(chromium() is None, reason="no headless browser here (apt-get install chromium): "
                                                              "the page is checked without one")


def browse(page: Path, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    """Chromium headless on a file (no sandbox: the suite runs as root; its own profile in the page's folder's
    parent, so that nothing of the user's is read or left)."""
    profile = page.parent.parent / "chromium-profile"
    return subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--user-data-dir={profile}", "--virtual-time-budget=2000", *args, page.as_uri()],
                          capture_output=True, text=True, timeout=timeout)


class Links(html.parser.HTMLParser):
    """Every href and src of a page, and every tag, as the page (or the browser's DOM) has them."""

    def __init__(self):
        super().__init__()
        self.hrefs, self.tags, self.srcs = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            if name == "href":
                self.hrefs.append(value)
            if name == "src":
                self.srcs.append(value)


def parsed(text: str) -> Links:
    links = Links()
    links.feed(text)
    return links


def resolve(folder: Path, href: str) -> Path:
    """A relative link as a browser follows it from the page in `folder`: joined to the page's file:// URL, then
    that URL's path."""
    parts = urlsplit(href)
    assert not parts.scheme and not parts.netloc and not parts.query and not parts.fragment, href
    url = urlsplit(urljoin((folder / "class-report.html").as_uri(), href))
    assert url.scheme == "file", url
    return Path(unquote(url.path, errors="surrogateescape"))


def assert_links_resolve(folder: Path, hrefs: list[str]) -> None:
    assert hrefs
    for href in hrefs:
        target = resolve(folder, href)
        assert target.is_file(), href
        assert folder.resolve() in target.resolve().parents, href  # inside the output folder


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """One small class, graded once for the module: two students with the same mistake, one with another, one who
    passes, one whose folder holds no code, and one whose folder name is hostile."""
    tmp = tmp_path_factory.mktemp("class")
    subs = tmp / "subs"
    for name, source in [("ada", ZOO / "correct" / "book_style.py"), ("bob", ROOT / "examples" / "buggy_attention.py"),
                         ("cyd", ROOT / "examples" / "buggy_attention.py"),
                         ("dee", ZOO / "buggy" / "scale_no_sqrt.py"), (HOSTILE, ZOO / "correct" / "lesson.py")]:
        (subs / name).mkdir(parents=True)
        shutil.copy(source, subs / name / "attention.py")
    (subs / "eve").mkdir()
    (subs / "eve" / "notes.txt").write_text("no code here")
    out = tmp / "out"
    run = subprocess.run([sys.executable, "-m", "harness.frontends.cli", "grade", str(subs), "--out", str(out),
                          "--jobs", "2"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    return tmp, out, run


def test_grade_writes_the_class_view_beside_the_reports(graded):
    tmp, out, run = graded
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"class view: {out / 'class-report.html'}" in run.stdout
    assert run.stdout.strip().splitlines()[-1].startswith("graded 6 submissions")  # the closing line stays last
    rows = {r["submission"]: r for r in csv.DictReader(open(out / "summary.csv", newline=""))}
    assert rows["bob"]["diagnosis"] == rows["cyd"]["diagnosis"] == "split-view-order"
    assert rows["dee"]["diagnosis"] == "scale-by-dh"
    mistakes = list(csv.DictReader(open(out / "class-mistakes.csv", newline="")))
    assert [(m["rank"], m["mistake"], m["students"]) for m in mistakes] == [("1", "split-view-order", "2"),
                                                                            ("2", "scale-by-dh", "1")]
    assert mistakes[0]["who"] == "bob; cyd" and mistakes[0]["topic"] == "splitting into heads"
    exercise = out / mistakes[0]["exercise"]
    assert exercise.is_file() and (out / mistakes[0]["solution"]).is_file()
    assert "split-view-order" not in exercise.read_text()  # the exercise names no mistake: it is for students
    page = (out / "class-report.html").read_text()
    assert "Heads split with view" in page and page.index("split-view-order") < page.index("scale-by-dh")
    links = parsed(page)
    assert_links_resolve(out, links.hrefs)
    reports = {unquote(h, errors="surrogateescape").removeprefix("./") for h in links.hrefs if h.endswith(".json")}
    assert reports == {f"{name}.json" for name in ("ada", "bob", "cyd", "dee", "eve", HOSTILE)}  # a link to each
    # student's report (the summary shows the hostile name escaped, the file and the link have it as it is)
    assert json.loads((out / f"{HOSTILE}.json").read_text())["passed"] is True
    assert "script" not in links.tags and "img" not in links.tags and links.srcs == []
    assert "\u202e" not in page and "\x1b" not in page and "\\u202egnp.exe\\x1b[2J" in page


@needs_browser
def test_the_class_view_opens_in_a_headless_browser(graded):
    """The page as a browser builds it (its DOM after loading): the sections, the most common mistake, no element
    made of a student's name, and links that resolve; then a screenshot, kept for a person to look at."""
    tmp, out, run = graded
    assert run.returncode == 0, run.stderr[-3000:]
    page = out / "class-report.html"
    dom = browse(page, "--dump-dom", "--enable-logging=stderr", "--v=0")
    assert dom.returncode == 0, dom.stderr[-2000:]
    # the console: what a script would log, and each fetch or script the page's policy blocked ("violates the
    # following Content Security Policy directive"); nothing for this page
    assert [ln for ln in dom.stderr.splitlines() if ":CONSOLE" in ln] == []
    assert "The mistakes, by how many students made each" in dom.stdout and "Heads split with view" in dom.stdout
    links = parsed(dom.stdout)
    assert "img" not in links.tags and "script" not in links.tags and links.srcs == []
    assert links.tags.count("svg") >= 4  # verdicts, scores, checks, and a bar per mistake
    assert_links_resolve(out, links.hrefs)
    shot = tmp / "class-report.png"
    taken = browse(page, f"--screenshot={shot}", "--window-size=1200,1800")
    assert taken.returncode == 0 and shot.stat().st_size > 20_000, taken.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    print(f"screenshot of the class view: {shot}")  # shown with -s, or -rP
