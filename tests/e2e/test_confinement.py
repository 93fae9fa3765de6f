"""Grading where courses run it: no grade from a child that could write the grader's files, in every environment.

Environments, played on this machine (root with namespaces) by `tests/fixtures/nons.py`, which installs the seccomp
filter of Docker's default profile (no new namespaces) and may drop CAP_SYS_ADMIN, then by `setpriv` for an
ordinary user:
  root in a container        no namespaces; the slot's uid, no_new_privs, seccomp, hard limits are the walls.  With
                             this machine's Python (below /root, 0700) the slot's uid cannot read the interpreter:
                             a grade is refused in one line, never run as root
  ordinary user, no userns   the child could only be the grader's own uid with the host's files in view: refused
  ordinary user, userns      its own user, mount and PID namespaces: graded
A "readable" Python is a venv of /usr/bin/python3 that reaches this checkout's site-packages (torch) by a .pth file:
what an installation in /usr, /opt or /usr/local gives a course's container.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import ROOT, processes_left, unreadable_checkout
from leftovers import SUITE_VARIABLE

NONS = ROOT / "tests" / "fixtures" / "nons.py"
SYSTEM_PYTHON = "/usr/bin/python3"
USER = 62100  # an ordinary user's uid, outside the slots' range (61000..61998)
CORRECT = ROOT / "tests" / "zoo" / "correct" / "book_style.py"
CONTAINER = ["python3", str(NONS), "--drop-sysadmin", "--"]  # root, no CAP_SYS_ADMIN, no namespaces
AS_USER = ["setpriv", f"--reuid={USER}", f"--regid={USER}", "--clear-groups", "--"]

pytestmark = [pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                 reason="plays the environments from root (seccomp filter, setpriv)"),
              pytest.mark.skipif(bool(unreadable_checkout()), reason=str(unreadable_checkout()))]


def _same_python(python: str) -> bool:
    if not os.access(python, os.X_OK):
        return False
    done = subprocess.run([python, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True)
    return done.stdout.strip() == str(sys.version_info[:2])


@pytest.fixture(scope="module")
def world():
    """A folder every uid may enter (below /tmp, not pytest's 0700 one) holding a readable Python and the user's
    own home; removed at the end."""
    base = Path(tempfile.mkdtemp(prefix="mha-check-confinement-"))
    base.chmod(0o755)
    venv = base / "venv"
    if _same_python(SYSTEM_PYTHON):
        subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True)
        purelib = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig."
                                       "get_paths()['purelib'])"], capture_output=True, text=True).stdout.strip())
        ours = sysconfig.get_paths()["purelib"]
        (purelib / "zz_mha_check.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    home = base / "home"
    home.mkdir()
    os.chown(home, USER, USER)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def readable_python(world: Path) -> str:
    python = world / "venv" / "bin" / "python"
    if not python.exists():
        pytest.skip(f"{SYSTEM_PYTHON} is not the Python {sys.version_info[:2]} the tests run")
    return str(python)


def _session_token() -> dict:
    """The test session's token alone (tests/leftovers.py): a clean environment still marks what it starts as this
    session's, so that a process it leaves behind is counted as the suite's, not another run's."""
    return {SUITE_VARIABLE: os.environ[SUITE_VARIABLE]} if SUITE_VARIABLE in os.environ else {}


def mha(prefix: list[str], python: str, *args, cwd: Path = ROOT, home: Path | None = None, timeout: float = 300):
    """mha-check run with `python` behind `prefix`: a clean environment (no warm template of the test session: its
    children would be confined outside the environment played)."""
    env = {**_session_token(), "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home or cwd),
           "TMPDIR": str(home or "/tmp")}
    return subprocess.run([*prefix, python, "-m", "harness.frontends.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=timeout)


def one_line_refusal(run, *words: str) -> str:
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-3000:]
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("mha-check") and all(w in lines[0] for w in words), lines[0]
    return lines[0]


def full_marks(gradescope: dict) -> bool:
    """A correct layer gets every point its tests offer (however many checks there are by now)."""
    offered = sum(test["max_score"] for test in gradescope["tests"])
    return offered > 0 and gradescope["score"] == offered


def submissions(folder: Path, owner: int | None = None) -> Path:
    subs = folder / "subs"
    (subs / "alice").mkdir(parents=True)
    (subs / "alice" / "attention.py").write_text(CORRECT.read_text())
    if owner is not None:
        for p in (folder, subs, subs / "alice", subs / "alice" / "attention.py"):
            os.chown(p, owner, owner)
    return subs


def test_root_in_a_container_never_grades_as_root(world, tmp_path):
    """This machine's Python lives below a 0700 /root: without a mount namespace the slot's uid cannot read it.
    A grade (a Gradescope run) is refused in one line that says why and what to do, and nothing is written; the
    student's own JSON run goes on (as root without capabilities) and says so first."""
    tmp_path.chmod(0o755)
    out = tmp_path / "results.json"
    refused = mha(CONTAINER, sys.executable, str(CORRECT), "--format", "gradescope", "-o", str(out))
    line = one_line_refusal(refused, "cannot read", "--allow-unconfined")
    assert "/root" in line and not out.exists()
    allowed = mha(CONTAINER, sys.executable, str(CORRECT), "--format", "gradescope", "--allow-unconfined")
    assert allowed.returncode == 0 and allowed.stderr.startswith("mha-check: warning: graded although the child "
                                                                 "would run as root"), allowed.stderr[-2000:]
    staff = json.loads(allowed.stdout)["extra_data"]["isolation"]  # the output says it was accepted knowingly
    assert staff["uid"] == 0 and "--allow-unconfined" in staff["accepted"] and "root" in staff["unfit_to_grade"]
    own = mha(CONTAINER, sys.executable, str(CORRECT), "--format", "json")
    assert own.returncode == 0, own.stderr[-2000:]
    assert own.stderr.startswith("mha-check: note: the child would run as root"), own.stderr
    assert json.loads(own.stdout)["isolation"]["uid"] == 0


def test_root_in_a_container_grades_as_the_slot_uid(world, tmp_path):
    """With a Python every uid can read, the container's root grades: the child is a slot's uid, without
    namespaces (the seccomp filter refuses them), with no_new_privs, seccomp and hard limits."""
    python = readable_python(world)
    run = mha(CONTAINER, python, str(CORRECT), "--format", "gradescope")
    assert run.returncode == 0, run.stderr[-2000:]
    data = json.loads(run.stdout)
    assert full_marks(data)
    staff = data["extra_data"]["isolation"]  # what graders see of it; students never see extra_data
    assert 61000 <= staff["uid"] <= 61998 and staff["mechanism"] == "none" and staff["namespaces"] == []
    assert staff["full_policy"] is False and staff["unfit_to_grade"] == ""
    assert "no ipc/mount/net/pid/uts namespaces" in staff["short_of_policy"]
    assert staff["landlock"]["in_force"] and "Landlock" in staff["summary"]  # the files it may read: the policy's
    assert "isolation" not in data["output"] and "namespaces" not in json.dumps(data["tests"])
    own = json.loads(mha(CONTAINER, python, str(CORRECT), "--format", "json").stdout)
    assert own["student_output"] == "", own["student_output"]  # torch's complaint when Landlock hid /proc/cpuinfo


def test_grade_warns_when_a_child_had_less_than_the_full_policy(world):
    """`grade` in the container: graded (the slot's uid), and its closing line warns that the children had no
    namespaces and says what still held (a user trial could not tell from the warning whether the run was safe);
    the summary says so per submission."""
    python, home = readable_python(world), world / "home"
    subs = submissions(home / "warned")
    out = home / "warned" / "out"
    run = mha(CONTAINER, python, "grade", str(subs), "--out", str(out), "--jobs", "1", "--format", "gradescope",
              cwd=home)
    assert run.returncode == 0, run.stderr[-2000:]
    closing = run.stdout.strip().splitlines()[-1]
    assert closing.startswith("graded 1 submission") and "WARNING: 1 of 1 ran with less than the full" in closing
    assert "no ipc/mount/net/pid/uts namespaces" in closing
    assert "still held: a uid of its own, Landlock, no capabilities, no_new_privs, seccomp, hard limits" in closing
    assert "no ipc/mount/net/pid/uts namespaces" in (out / "summary.csv").read_text()
    staff = json.loads((out / "alice.results.json").read_text())["extra_data"]["isolation"]
    assert staff["full_policy"] is False and staff["uid"] >= 61000


def test_root_with_namespaces_says_the_full_policy_held_to_staff_only(tmp_path):
    """This machine as it is (root, namespaces): the staff fields of Gradescope's and PrairieLearn's results say
    the full policy held, and `grade`'s closing line has no warning."""
    gradescope = mha([], sys.executable, str(CORRECT), "--format", "gradescope")
    staff = json.loads(gradescope.stdout)["extra_data"]["isolation"]
    assert staff["full_policy"] is True and staff["short_of_policy"] == [] and staff["uid"] >= 61000
    assert {"mount", "pid", "net"} <= set(staff["namespaces"])
    pl = json.loads(mha([], sys.executable, str(CORRECT), "--format", "prairielearn").stdout)
    assert pl["mha_check_isolation"]["full_policy"] is True
    shown = json.dumps({k: pl[k] for k in ("message", "output", "tests")})
    assert "isolation" not in shown and "namespace" not in shown
    subs = submissions(tmp_path)
    run = mha([], sys.executable, "grade", str(subs), "--out", str(tmp_path / "out"), "--jobs", "1", cwd=tmp_path)
    assert run.returncode == 0 and "WARNING" not in run.stdout, run.stdout + run.stderr[-2000:]


@pytest.mark.parametrize("ours", ["reference/causal_mha.py", "tests/zoo/correct/book_style.py"])
@pytest.mark.parametrize("where", ["namespaces", "container"])
def test_a_link_to_our_own_correct_code_is_the_students_and_gets_no_marks(world, tmp_path, ours, where):
    """A red team's submission (issue 27, rt3): attention.py, a symbolic link to reference/causal_mha.py, was judged
    by where the link leads, mha-check's own code, given the unhidden view and full marks in Gradescope's format.  A
    link is the student's, wherever it leads: not followed out of the submission, and the student is told why."""
    folder = tmp_path / "student"
    folder.mkdir(parents=True)
    for p in (tmp_path, folder):
        p.chmod(0o755)
    (folder / "attention.py").symlink_to(ROOT / ours)
    prefix, python = ([], sys.executable) if where == "namespaces" else (CONTAINER, readable_python(world))
    target = f"{folder / 'attention.py'}:{'CausalMHA' if 'reference' in ours else 'MultiHeadAttention'}"
    run = mha(prefix, python, target, "--format", "gradescope")
    data = json.loads(run.stdout)
    assert data["score"] == 0 and not full_marks(data), run.stdout[-2000:]
    construct = next(t for t in data["tests"] if "construct" in t["name"])
    assert "is a symbolic link to" in construct["output"] and "hand in the file itself" in construct["output"]


def test_in_a_container_the_batch_grades_its_own_copy_and_never_runs_compiled_code(world):
    """`grade` as a container's root (no namespaces: the walls are the slot's uid and Landlock) grades the copy it
    made at the start, not what a student writes in their folder while the batch runs, and --resume keeps the
    verdict only for those files (issue 27, red team 5); a helper handed in as bytecode is not run there either,
    and the report names it (issue 27)."""
    import py_compile

    python, home = readable_python(world), world / "home"
    base = home / "copy"
    subs, out = base / "subs", base / "out"
    right, wrong = (ROOT / "examples" / "correct_attention.py").read_text(), (
        ROOT / "examples" / "buggy_attention.py").read_text()
    for name in ("aaa", "pyc_helper", "zed"):
        (subs / name).mkdir(parents=True)
    (subs / "aaa" / "attention.py").write_text("import time\ntime.sleep(6)\n" + right)  # graded first
    source = base / "helpers_source.py"
    source.write_text(right)
    py_compile.compile(str(source), cfile=str(subs / "pyc_helper" / "helpers.pyc"), dfile="helpers.py")
    (subs / "pyc_helper" / "attention.py").write_text("import helpers\n\n\nclass MultiHeadAttention("
                                                      "helpers.MultiHeadAttention):\n    pass\n")
    (subs / "zed" / "attention.py").write_text(wrong)
    env = {**_session_token(), "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(home)}
    command = [*CONTAINER, python, "-m", "harness.frontends.cli", "grade", str(subs), "--out", str(out), "--jobs",
               "1", "--target", "attention.py:MultiHeadAttention"]
    first = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(home.glob("*grade-*/scratch/*")) and time.monotonic() < deadline:
        time.sleep(0.05)  # every folder copied, and aaa's child begun
    (subs / "zed" / "attention.py").write_text(right)
    stdout, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr[-2000:]
    assert "WARNING" in stdout  # the container's children had no namespaces: it is that environment
    (subs / "zed" / "attention.py").write_text(wrong)
    zed = json.loads((out / "zed.json").read_text())
    assert zed["passed"] is False and zed["isolation"]["namespaces"] == [], zed["isolation"]
    pyc = json.loads((out / "pyc_helper.json").read_text())
    assert pyc["passed"] is False and pyc["needs_review"] is True
    assert "helpers.pyc" in pyc["checks"][0]["message"] and "compiled" in pyc["checks"][0]["message"]
    again = subprocess.run([*command, "--resume"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "--resume: 3 of 3 kept" in again.stdout, again.stdout + again.stderr[-2000:]
    assert json.loads((out / "zed.json").read_text())["passed"] is False

def test_an_ordinary_user_without_user_namespaces_is_refused_to_grade(world):
    """The child could only be the grader's own uid with the host's files in view: `grade` and a PrairieLearn run
    refuse in one line (nothing is written); --allow-unconfined grades and the report says it was accepted."""
    python, home = readable_python(world), world / "home"
    subs = submissions(home / "refused", owner=USER)
    out = home / "refused" / "out"
    as_user = [*CONTAINER, *AS_USER]
    refused = mha(as_user, python, "grade", str(subs), "--out", str(out), "--jobs", "1", cwd=home, home=home)
    one_line_refusal(refused, "grader's own uid", "--allow-unconfined")
    assert not out.exists()
    single = mha(as_user, python, str(CORRECT), "--format", "prairielearn", cwd=home, home=home)
    one_line_refusal(single, "grader's own uid")
    allowed = mha(as_user, python, "grade", str(subs), "--out", str(out), "--jobs", "1", "--allow-unconfined",
                  cwd=home, home=home)
    assert allowed.returncode == 0, allowed.stderr[-2000:]
    report = json.loads((out / "alice.json").read_text())
    assert report["passed"] and report["isolation"]["uid"] == USER and "allow-unconfined" in report["isolation"][
        "accepted"]
    assert "WARNING: 1 of 1" in allowed.stdout and "grader's own uid" in allowed.stdout.strip().splitlines()[-1]
    assert "a uid of its own" not in allowed.stdout.strip().splitlines()[-1]


def test_an_ordinary_user_with_user_namespaces_grades_with_the_full_policy(world):
    """Its own user, mount and PID namespaces: the child keeps the user's uid but sees only its scratch; graded,
    no warning, and the staff field says the full policy held."""
    python, home = readable_python(world), world / "home"
    subs = submissions(home / "userns", owner=USER)
    out = home / "userns" / "out"
    run = mha(AS_USER, python, "grade", str(subs), "--out", str(out), "--jobs", "1", "--format", "gradescope",
              cwd=home, home=home)
    assert run.returncode == 0 and "WARNING" not in run.stdout, run.stdout + run.stderr[-2000:]
    data = json.loads((out / "alice.results.json").read_text())
    staff = data["extra_data"]["isolation"]
    assert full_marks(data) and staff["uid"] == USER and "user" in staff["namespaces"]
    assert staff["full_policy"] is True and staff["unfit_to_grade"] == ""


def test_the_classroom_workflow_grades(tmp_path):
    """GitHub Classroom's run is a grade: it says so (--grading), as root where the runner allows."""
    run = subprocess.run([sys.executable, "-m", "harness.frontends.cli", "autograder", "--github-classroom",
                          "--target", "attention.py:MyAttn", "-o", str(tmp_path)], capture_output=True, text=True,
                         cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr
    text = (tmp_path / ".github" / "workflows" / "classroom.yml").read_text()
    line = next(ln for ln in text.splitlines() if "--format json" in ln)
    assert "--grading" in line and "$as_root" in line and "sudo -n" in text


LEFTOVER = '''
import os
if os.environ.get("MHA_LEFTOVER_STARTED") is None:  # once, at import
    os.environ["MHA_LEFTOVER_STARTED"] = "1"
    if os.fork() == 0:  # a double fork, out of the session (where allowed) and the process group: it rewrites
        try:
            try:
                os.setsid()
            except OSError:
                os.setpgid(0, 0)
            if os.fork() == 0:
                os.setpgid(0, 0)
                loop = ('true > "$1/started"; while :; do date +%s%N >> "$1/alive"; '
                        'echo \\'{"score": 17.0, "forged": true}\\' > "$2" 2>/dev/null; sleep 0.1; done')
                os.execvp("sh", ["sh", "-c", loop, MARKER, MARKS, RESULT])
        finally:
            os._exit(0)
'''  # `true`, not `:`: a special builtin whose redirection fails (Landlock) makes sh exit


def _leftover_submission(folder: Path, marks: Path, result: Path) -> Path:
    """The correct layer, with a process at import that outlives its parent and rewrites `result` (and says it
    is alive in `marks`) for ever."""
    marker = f"mha-leftover-{os.getpid()}-{folder.name}"
    code = f"MARKER, MARKS, RESULT = {marker!r}, {str(marks)!r}, {str(result)!r}\n" + LEFTOVER + CORRECT.read_text()
    folder.mkdir(parents=True)
    (folder / "attention.py").write_text(code)
    return folder / "attention.py"


def _alive(marker: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if marker.encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return found


def _watch(marker: str, seen: list[int], stop: threading.Event) -> None:
    """Note the leftover's processes while mha-check runs: the proof that it ran where Landlock keeps it from
    writing its marks outside its scratch."""
    while not stop.is_set():
        seen.extend(_alive(marker))
        stop.wait(0.05)


@pytest.mark.parametrize("case", ["root container, grading", "root container, grade", "root container, root's own run",
                                  "ordinary user without namespaces, own run"])
def test_nothing_outlives_its_check(world, case):
    """A submission's process that double-forks out of its session and process group, then rewrites the result
    and writes beside it for ever, is gone when mha-check returns: the report stays as written and nothing writes
    afterwards, whether the child was the slot's uid (killed by uid), root or the user's own (killed by the keeper,
    a subreaper, before it exits)."""
    python = readable_python(world) if case != "root container, root's own run" else sys.executable
    user = case.startswith("ordinary")
    base = Path(tempfile.mkdtemp(prefix="leftover-", dir=world))
    base.chmod(0o755)
    marks = base / "marks"
    marks.mkdir(mode=0o777)
    marks.chmod(0o777)
    out = base / "out"
    out.mkdir()
    if user:
        for p in (base, out):
            os.chown(p, USER, USER)
    batch = case.endswith("grade")  # the batch: its zygote is the subreaper, and the slot's uid is killed
    result = out / ("alice.results.json" if batch else "report.json")
    target = _leftover_submission(base / ("alice" if batch else "submission"), marks, result)
    grading = ("--format", "gradescope") if "grad" in case else ("--format", "json")
    prefix = [*CONTAINER, *AS_USER] if user else CONTAINER
    marker = f"mha-leftover-{os.getpid()}-{target.parent.name}"
    seen, stop = [], threading.Event()
    watcher = threading.Thread(target=_watch, args=(marker, seen, stop))
    watcher.start()
    try:
        if batch:
            (base / "subs").mkdir()
            target.parent.rename(base / "subs" / "alice")
            run = mha(prefix, python, "grade", str(base / "subs"), "--out", str(out), "--jobs", "1", *grading,
                      cwd=base)
        else:
            run = mha(prefix, python, f"{target}:MultiHeadAttention", *grading, "-o", str(result), cwd=base,
                      home=base if user else None)
        stop.set()
        watcher.join()
        assert run.returncode == 0, run.stderr[-2000:]
        left = _alive(marker)
        written = result.read_text()
        assert (marks / "started").exists() or seen, "the leftover never ran: the test would prove nothing"
        time.sleep(1.5)
        assert left == [] and _alive(marker) == [], "a process of the submission outlived the run"
        assert result.read_text() == written and "forged" not in written
        seen = (marks / "alive").read_text() if (marks / "alive").exists() else ""
        time.sleep(0.5)
        assert ((marks / "alive").read_text() if (marks / "alive").exists() else "") == seen
    finally:
        stop.set()
        watcher.join()
        for pid in _alive(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_the_autograders_run_script_refuses_where_it_cannot_confine(world, tmp_path):
    """Gradescope's run_autograder is one `--format gradescope` run: in the container with this machine's 0700-home
    Python it writes no results.json, and the dry run shows mha-check's one line and fails."""
    tmp_path.chmod(0o755)
    build = subprocess.run([sys.executable, "-m", "harness.frontends.cli", "autograder", "--target",
                            "attention.py:MultiHeadAttention", "-o", "autograder.zip"], capture_output=True,
                           text=True, cwd=tmp_path, timeout=300)
    assert build.returncode == 0, build.stderr
    (tmp_path / "student").mkdir()
    shutil.copy(CORRECT, tmp_path / "student" / "attention.py")
    run = mha(CONTAINER, sys.executable, "autograder", "--dry-run", str(tmp_path / "student"), "--zip",
              str(tmp_path / "autograder.zip"), cwd=tmp_path)
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr[-3000:]
    refusal = [ln for ln in run.stderr.splitlines() if ln.startswith("mha-check: error: ")]
    assert len(refusal) == 1 and "cannot read" in refusal[0] and "--allow-unconfined" in refusal[0], run.stderr
    assert "without a results.json" in run.stderr


HOSTILE = ROOT / "tests" / "hostile"
FENCED = ("ours_by_path", "classmates", "output_folder", "other_processes", "file_events", "file_metadata",
          "file_leases")  # what Landlock walls in where no namespace can (other_processes, file_events,
# file_metadata, file_leases: what it does not govern, the limits and scheduling of the user's other processes,
# watches on folders it may read, the metadata of files it may not open, and leases and inode flags on files of the
# user's, which the seccomp filter refuses)


def _hostile_single_run(prefix: list[str], python: str, name: str, base: Path, owner: int | None, *extra: str):
    """`tests/hostile/NAME.py` run alone, told where a classmate's world-readable submission, a host file and an
    output folder with a finished report lie (all owned by `owner` when given: the ordinary user's own files)."""
    classmate, out, sub = base / "classmate", base / "out", base / "submission"
    for folder in (classmate, out, sub):
        folder.mkdir(parents=True)
    (classmate / "attention.py").write_text(CORRECT.read_text())
    (out / "classmate.json").write_text('{"score": 17}\n')
    secret = base / "host-secret.txt"
    secret.write_text("a file of the grading machine\n")
    (sub / "attention.py").write_text((HOSTILE / f"{name}.py").read_text())
    (sub / "context.json").write_text(json.dumps({"classmates": [str(classmate)], "secret": str(secret),
                                                  "out": str(out), "reports": ["classmate.json"]}))
    for p in (base, classmate, classmate / "attention.py", out, out / "classmate.json", secret):
        p.chmod(0o755 if p.is_dir() else 0o644)  # world-readable, as an installation and a class folder are
        if owner is not None:
            os.chown(p, owner, owner)
    before = {p: p.read_bytes() for p in (classmate / "attention.py", out / "classmate.json", secret)}
    run = mha(prefix, python, f"{sub}/attention.py:MyAttn", "--format", "json", *extra, cwd=base,
              home=base if owner is not None else None)
    assert run.returncode == 1, run.stderr[-2000:]
    report = json.loads(run.stdout)
    assert {p: p.read_bytes() for p in before} == before and sorted(p.name for p in out.iterdir()) == [
        "classmate.json"], "a file outside the child's scratch changed"
    return report


def _walled_in(report: dict, name: str) -> None:
    statuses = {c["id"]: c["status"] for c in report["checks"]}
    assert "walls that gave way: []" in report["student_output"], (name, report["student_output"][-2000:])
    assert statuses["reference-match"] == "fail" and report["passed"] is False, name
    fence = report["isolation"]["landlock"]
    assert fence["in_force"] and fence["rules"] > 5 and report["isolation"]["namespaces"] == [], fence
    assert report["isolation"]["view"] == "host filesystem, limited by Landlock to the policy's paths"


@pytest.mark.parametrize("name", FENCED)
def test_root_in_a_container_walls_in_our_files_and_the_classmates(world, name):
    """Root in a container, no namespaces, the slot's uid: mha-check's install, a classmate's submission and a host
    file are world-readable, yet the child loads no correct layer of ours by path (reference/causal_mha.py, a mutant
    with its bug undone), reads no classmate and writes nothing outside its scratch: Landlock allows it only the
    interpreter, site-packages, the parts of harness it imports and its scratch.  Each attack computes the layer
    right only if a wall gave way."""
    python = readable_python(world)
    base = Path(tempfile.mkdtemp(prefix=f"fenced-{name}-", dir=world))
    report = _hostile_single_run(CONTAINER, python, name, base, None)
    assert 61000 <= report["isolation"]["uid"] <= 61998
    _walled_in(report, name)


@pytest.mark.parametrize("name", FENCED)
def test_an_ordinary_user_in_a_container_walls_in_its_own_files(world, name):
    """An ordinary user where no namespace can be made: the child keeps the user's own uid (a grade needs
    --allow-unconfined), so permissions protect nothing of the user's: a classmate's file of the same owner, the
    output folder.  Landlock still keeps the child to its scratch and away from mha-check's reference."""
    python = readable_python(world)
    base = Path(tempfile.mkdtemp(prefix=f"fenced-user-{name}-", dir=world / "home"))
    os.chown(base, USER, USER)
    report = _hostile_single_run([*CONTAINER, *AS_USER], python, name, base, USER)
    assert report["isolation"]["uid"] == USER
    _walled_in(report, name)


def test_a_grade_in_a_container_walls_in_every_forked_child(world):
    """`grade` as the container's root: every child is forked from the warm zygote (torch imported before the fork)
    and restricts itself after it, before the submission loads; a lazily imported module still loads (the correct
    classmate gets full marks), the attackers reach no layer of ours and no classmate."""
    python, home = readable_python(world), world / "home"
    base = Path(tempfile.mkdtemp(prefix="fenced-grade-", dir=home))
    base.chmod(0o755)
    subs = submissions(base)  # alice: the correct layer, world-readable
    (subs / "alice" / "attention.py").write_text(CORRECT.read_text().replace("class MultiHeadAttention",
                                                                              "class MyAttn"))
    for name in ("ours_by_path", "classmates"):
        (subs / name).mkdir()
        (subs / name / "attention.py").write_text((HOSTILE / f"{name}.py").read_text())
        (subs / name / "context.json").write_text(json.dumps({"classmates": [str(subs / "alice")]}))
    for p in subs.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    out = base / "out"
    run = mha(CONTAINER, python, "grade", str(subs), "--out", str(out), "--jobs", "1", "--format", "json",
              "--target", "attention.py:MyAttn", cwd=base)
    assert run.returncode == 0, run.stderr[-2000:]
    for name in ("ours_by_path", "classmates"):
        _walled_in(json.loads((out / f"{name}.json").read_text()), name)
    alice = json.loads((out / "alice.json").read_text())
    assert alice["passed"] and alice["isolation"]["landlock"]["in_force"], alice["isolation"]


DOCKER = ["python3", str(NONS), "--drop-sysadmin", "--docker-caps", "--"]  # root with Docker's 14 capabilities


@pytest.mark.parametrize("who, hiding", [("root", ""), ("root, Docker's capabilities", ""), ("user", ""),
                                         ("root, Docker's capabilities", "prctl"), ("user", "prctl"),
                                         ("root, Docker's capabilities", "exec"), ("user", "exec"),
                                         ("root, Docker's capabilities", "closed"), ("user", "closed"),
                                         ("root, Docker's capabilities", "page"), ("user", "page")])
def test_in_a_container_files_deleted_but_held_count_against_the_disk_budget(world, who, hiding):
    """In a container no tmpfs can be mounted for the scratch: it is a folder of the shared disk, measured while the
    child works.  tests/hostile/hidden_disk.py deletes each 15 MB file it writes and holds it (an open descriptor, or
    a mapping alone), 180 MB against a 64 MB budget that a walk of its folder never sees: found in the child's
    processes (the slot's uid as root; the tree below the child for an ordinary user), it is stopped as a disk
    limit (cannot tell, for review), its space freed.  Its scratch lies on a 256 MB disk of the test's own.
    Red team 6: root with Docker's capabilities has no CAP_SYS_PTRACE, and the kernel hid the slot uid's
    /proc/PID/fd from it (180 MB unseen, 17/19); a child that made itself non-dumpable ("prctl"), or held the files
    in a process that exec'd a program it may not read ("exec"), hid them even from its own uid; an ordinary user may
    not list a folder of mode 0300 that the child wrote 180 MB into ("closed").  Root now looks as the slot's uid,
    the filter refuses PR_SET_DUMPABLE, and what stays hidden (a process's files, a folder) is over the budget."""
    python = readable_python(world)
    prefix, owner = {"root": (CONTAINER, None), "root, Docker's capabilities": (DOCKER, None),
                     "user": ([*CONTAINER, *AS_USER], USER)}[who]
    base = Path(tempfile.mkdtemp(prefix=f"hidden-disk-{who}-", dir=world / "home"))
    disk = base / "disk"
    disk.mkdir()
    ids = f",uid={owner},gid={owner}" if owner else ""
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size=256m,mode=0755{ids}", "tmpfs", str(disk)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        sub = base / "submission"
        sub.mkdir()
        (sub / "attention.py").write_text((HOSTILE / "hidden_disk.py").read_text())
        (sub / "hold.txt").write_text("40")
        (sub / "hiding.txt").write_text(hiding)
        for p in (base, sub, sub / "attention.py", sub / "hold.txt", sub / "hiding.txt"):
            p.chmod(0o755 if p.is_dir() else 0o644)
            if owner is not None:
                os.chown(p, owner, owner)
        started = time.monotonic()
        run = mha(prefix, python, f"{sub}/attention.py:MyAttn", "--format", "json", "--time-limit", "90",
                  cwd=base, home=disk)
        assert run.returncode == 1, run.stderr[-2000:]
        assert time.monotonic() - started < 60  # stopped while it held the disk, not after its 40 s hold
        report = json.loads(run.stdout)
        assert report["isolation"]["namespaces"] == [] and report["isolation"]["submission_copy"]["bounded"][:3] == \
            "no:"
        construct = next(c for c in report["checks"] if c["id"] == "construct")
        said = {"exec": "hides what it holds open", "closed": "MB, more than" if owner is None else
                "a folder closed to mha-check's measure"}.get(hiding, "deleted but kept open")  # prctl: refused
        assert construct["status"] == "cannot_tell" and said in construct["message"], construct
        assert report["needs_review"] is True and [c for c in report["checks"] if c["status"] == "fail"] == []
        assert shutil.disk_usage(disk).used < 16 << 20  # an ordinary user's slot locks stay in its TMPDIR
        assert [p.name for p in disk.iterdir() if not p.name.startswith("mha-check-slots-")] == []
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.mark.parametrize("who", ["root", "user"])
def test_in_a_container_files_deeper_than_a_path_count_against_the_disk_budget(world, who):
    """tests/hostile/deep_disk.py writes 150 MB below a folder chain deeper than a path may name, against a 64 MB
    budget: red team 17's walk by path skipped it (ENAMETOOLONG) and the layer passed; it is now over the budget, a
    disk limit (cannot tell, for review), and its folder is removed whole."""
    python = readable_python(world)
    prefix, owner = {"root": (CONTAINER, None), "user": ([*CONTAINER, *AS_USER], USER)}[who]
    base = Path(tempfile.mkdtemp(prefix=f"deep-disk-{who}-", dir=world / "home"))
    disk = base / "disk"
    disk.mkdir()
    ids = f",uid={owner},gid={owner}" if owner else ""
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size=256m,mode=0755{ids}", "tmpfs", str(disk)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        sub = base / "submission"
        sub.mkdir()
        (sub / "attention.py").write_text((HOSTILE / "deep_disk.py").read_text())
        for p in (base, sub, sub / "attention.py"):
            p.chmod(0o755 if p.is_dir() else 0o644)
            if owner is not None:
                os.chown(p, owner, owner)
        run = mha(prefix, python, f"{sub}/attention.py:MyAttn", "--format", "json", "--time-limit", "60",
                  cwd=base, home=disk)
        assert run.returncode == 1, run.stderr[-2000:]
        report = json.loads(run.stdout)
        assert report["isolation"]["submission_copy"]["bounded"][:3] == "no:"
        said = " ".join(c["message"] for c in report["checks"])
        assert "deeper than a path may name" in said, said
        assert report["needs_review"] is True and [c for c in report["checks"] if c["status"] == "fail"] == []
        assert [p.name for p in disk.iterdir() if not p.name.startswith("mha-check-slots-")] == []
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _to_its_end(prefix: list[str], python: str, *args: str, base: Path) -> tuple[int, list[str], str]:
    """mha-check run to its end with TMPDIR `base`/tmp: its exit status, the processes of that run still running the
    moment it returned (each carries that TMPDIR in its environment: conftest.processes_left, without a grace), and
    its stderr.  Its output goes to files, not pipes: a pipe's reader waits for every process that holds the pipe,
    which would hide those that outlive the command."""
    tmp = base / "tmp"
    tmp.mkdir(mode=0o711, exist_ok=True)
    tmp.chmod(0o711)
    env = {**_session_token(), "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(base), "TMPDIR": str(tmp)}
    with open(base / "stdout", "w") as out, open(base / "stderr", "w") as err:
        proc = subprocess.Popen([*prefix, python, "-m", "harness.frontends.cli", *args], stdout=out, stderr=err,
                                cwd=ROOT, env=env)
        try:
            status = proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    left = processes_left(tmp, seconds=0)
    return status, left, (base / "stderr").read_text()


@pytest.mark.parametrize("case", ["root container, grade", "root container, grading", "root with namespaces, grade"])
def test_nothing_of_ours_runs_once_mha_check_has_returned(world, case):
    """Issue 27: the grader must not exit leaving processes.  `grade` in a container returned while its graders'
    zygotes were still ending (0.07 to 0.32 s after it, on an idle machine; 0.3 to 0.6 s in a trial): the command now
    waits for every process it started (harness.sandbox.reaper), and the zygote ends without the interpreter's
    shutdown.  The moment it has returned, no process of that run is left, in any environment."""
    container = case.startswith("root container")
    python = readable_python(world) if container else sys.executable
    base = Path(tempfile.mkdtemp(prefix="returned-", dir=world))
    base.chmod(0o755)
    subs = submissions(base)
    (subs / "bob").mkdir()
    (subs / "bob" / "attention.py").write_text(CORRECT.read_text())
    for p in subs.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    args = ("grade", str(subs), "--out", str(base / "out"), "--jobs", "2") if case.endswith("grade") else (
        str(subs / "alice" / "attention.py"), "--format", "gradescope", "-o", str(base / "results.json"))
    status, left, err = _to_its_end(CONTAINER if container else [], python, *args, base=base)
    try:
        assert status == 0, err[-2000:]
        assert left == [], f"{len(left)} processes of this run outlived it: {left}"
    finally:
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


SLEEPS_AT_IMPORT = "import time\ntime.sleep(300)\n"


def test_in_a_container_a_killed_runs_scratch_folder_is_swept_at_the_next_start(world):
    """Without CAP_SYS_ADMIN the scratch is a plain folder of the shared disk, with a copy of the student's code: a
    run killed outright (SIGKILL) left it for good.  The next start removes it, says so in one line, and grades."""
    python = readable_python(world)
    base = Path(tempfile.mkdtemp(prefix="swept-", dir=world))
    base.chmod(0o755)
    tmp = base / "tmp"
    tmp.mkdir(mode=0o711)
    tmp.chmod(0o711)
    slow = base / "slow"
    slow.mkdir()
    (slow / "attention.py").write_text(SLEEPS_AT_IMPORT + CORRECT.read_text())
    for p in (slow, slow / "attention.py"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    env = {**_session_token(), "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(base), "TMPDIR": str(tmp)}
    killed = subprocess.Popen([*CONTAINER, python, "-m", "harness.frontends.cli", str(slow / "attention.py"),
                               "--format", "json"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not list(tmp.glob("mha-check-*/scratch/attention.py")) and time.monotonic() < deadline:
        time.sleep(0.1)
    killed.kill()
    killed.wait(timeout=60)
    assert processes_left(tmp) == []  # its child and zygote are gone; its folder is not
    left = [p for p in tmp.iterdir() if p.name.startswith("mha-check-")]
    assert len(left) == 1 and (left[0] / "scratch" / "attention.py").exists()
    status, after, err = _to_its_end(CONTAINER, python, str(CORRECT), "--format", "json", base=base)
    assert status == 0 and after == [], err[-2000:]
    swept = [ln for ln in err.splitlines() if ln.startswith("mha-check: removed")]
    assert len(swept) == 1 and str(left[0]) in swept[0] and "tmpfs" not in swept[0], err
    assert [p for p in tmp.iterdir() if p.name.startswith("mha-check-")] == []


def test_in_a_container_the_graders_zygotes_come_from_the_warm_template():
    """Docker's default seccomp profile filters every process, the grader and the template too: the template refused
    every filtered sender, so each grader imported torch itself (1.5 to 2 s of CPU each).  It now tells a grader (as
    filtered as itself) from a submission's child (one filter more), and serves the grader."""
    code = ("from harness.sandbox.pool import ZygotePool\n"
            "pool = ZygotePool(2)\n"
            "try:\n    print(sum(z.proc is None for z in pool.all))\nfinally:\n    pool.close()\n")
    run = subprocess.run([*CONTAINER, sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["2"], (run.stdout, run.stderr[-2000:])
