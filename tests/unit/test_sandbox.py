"""The confinement's pieces on their own: the policy says what it should, the trusted side reads untrusted folders
safely (regular files only, within budgets, no recursion), cleans up whatever a child left, refuses a deeply
nested header, and the reports and refusals say what was in force.  (The walls themselves: test_walls.py.)"""
from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import ROOT
from harness.frontends import pick, shards
from harness.sandbox import isolation, scratch
from harness.sandbox.limits import Limits, library_mb
from harness.sandbox.policy import Policy, interpreter_prefixes, make_policy, slot_ids, tool_paths
from harness.sandbox.syscalls import until_exited
from harness.wire import protocol


def test_policy_view_is_explicit(tmp_path):
    policy = make_policy(str(tmp_path), 3)
    if os.geteuid() == 0:
        assert (policy.uid, policy.gid) == (61003, 61003)
    assert policy.binds("rw") == [str(tmp_path)] and policy.cwd == str(tmp_path)
    ro = policy.binds("ro")
    assert "/usr" in ro and all(p in ro for p in map(os.path.realpath, tool_paths()))
    assert all(p in ro or any(p.startswith(r + "/") for r in ro) for p in interpreter_prefixes())
    forbidden = ("/root", "/home", "/etc", "/work", str(ROOT), "/proc", "/sys", "/var", "/tmp", "/run")
    assert not any(m.dest in forbidden for m in policy.view if m.kind in ("ro", "rw"))
    assert not any(m.dest.startswith(("/etc/shadow", "/etc/ssl", "/etc/resolv")) for m in policy.view)
    assert {m.kind for m in policy.view if m.dest in ("/proc", "/dev", "/tmp")} == {"proc", "dev", "tmpfs"}
    assert Policy.from_json(policy.to_json()) == policy



def test_a_submissions_view_holds_no_correct_layer_of_ours(tmp_path):
    """A submission's child sees mha-check's worker (harness) and nothing else of ours: not reference/ (the lesson's
    layer, loaded by its path it got full marks), mutants/ (one bug from the lesson's layer) or checks/; a child
    running our own code (a mutant imports mutants._info) sees all four."""
    ours = {os.path.realpath(os.path.join(ROOT, name)) for name in ("harness", "checks", "reference", "mutants")}
    submission = set(make_policy(str(tmp_path), 3).binds("ro")) & ours
    assert submission == {os.path.realpath(os.path.join(ROOT, "harness"))}
    assert set(make_policy(str(tmp_path), 3, own_code=True).binds("ro")) & ours == ours

def test_only_the_stated_environment_reaches_the_child(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADER_TOKEN", "secret")
    monkeypatch.setenv("MUTANT_UNDER_TEST", "x.y__mutmut_1")
    env = make_policy(str(tmp_path), 0).env
    assert "GRADER_TOKEN" not in env and env["MUTANT_UNDER_TEST"] == "x.y__mutmut_1"
    assert env["HOME"] == env["TMPDIR"] == str(tmp_path)
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == "1"


def test_limits_are_hard_and_complete():
    limits = Limits(memory_mb=100, cpu_seconds=3, file_mb=1, open_files=10, processes=5, library_mb=40)
    assert limits.rlimits() == {"RLIMIT_DATA": 100 << 20, "RLIMIT_AS": 140 << 20, "RLIMIT_CPU": 3,
                                "RLIMIT_FSIZE": 1 << 20, "RLIMIT_NOFILE": 10, "RLIMIT_NPROC": 5, "RLIMIT_CORE": 0,
                                "RLIMIT_MSGQUEUE": 0, "RLIMIT_RTPRIO": 0, "RLIMIT_NICE": 0}
    assert Limits(**limits.to_dict()) == limits


def test_slots_are_exclusive_and_never_root():
    assert slot_ids(0) == (61000, 61000)
    with pytest.raises(ValueError):
        slot_ids(-1)
    a, b = scratch.claim_slot(), scratch.claim_slot()
    try:
        assert a.number != b.number
        taken = subprocess.run([sys.executable, "-c", "import fcntl, sys; fd = open(sys.argv[1], 'a'); "
                                "fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)",
                                os.path.join(scratch._lock_dir(), f"slot-{a.number}.lock")], capture_output=True)
        assert taken.returncode != 0 and b"BlockingIOError" in taken.stderr  # another process cannot take it
    finally:
        a.release()
        b.release()


def test_the_copy_reads_only_regular_files_within_budgets(tmp_path):
    sub = tmp_path / "sub"
    (sub / "pkg").mkdir(parents=True)
    (sub / "attention.py").write_text("x = 1\n")
    (sub / "pkg" / "helper.py").write_text("y = 2\n")
    (sub / "big.bin").write_bytes(b"0" * 5000)
    os.mkfifo(sub / "pipe.py")
    os.symlink("/dev/zero", sub / "zero.py")
    os.symlink("../../classmate/attention.py", sub / "theirs.py")
    os.symlink(".", sub / "pkg" / "__pycache__")  # a cache as a link: Python would run its .pyc, not the source
    for skipped in (".git", "__pycache__", "venv"):
        (sub / skipped).mkdir()
        (sub / skipped / "x.py").write_text("")
    (sub / "venv" / "pyvenv.cfg").write_text("")
    deep = sub
    for _ in range(scratch.MAX_DEPTH + 3):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "deepest.py").write_text("")
    room = scratch.Scratch.with_copy(0, str(sub), file_limit=1000)
    try:
        copy = Path(room.path)
        assert (copy / "attention.py").read_text() == "x = 1\n" and (copy / "pkg" / "helper.py").exists()
        assert os.readlink(copy / "zero.py") == "/dev/zero"  # links stay links: resolved in the child's own view
        assert os.readlink(copy / "theirs.py") == "../../classmate/attention.py"
        assert not any((copy / name).exists() for name in ("big.bin", "pipe.py", ".git", "__pycache__", "venv"))
        assert not os.path.lexists(copy / "pkg" / "__pycache__")
        assert not list(copy.rglob("deepest.py"))
        assert any("big.bin" in s for s in room.skipped) and any("pipe.py" in s for s in room.skipped)
        assert any(f"(deeper than {scratch.MAX_DEPTH} folders)" in s for s in room.skipped), room.skipped  # said
        assert oct(copy.stat().st_mode & 0o777) == "0o700" and oct(Path(room.root).stat().st_mode & 0o777) == "0o711"
        if os.geteuid() == 0:
            assert {p.lstat().st_uid for p in [copy, *copy.rglob("*")]} == {slot_ids(0)[0]}
    finally:
        room.remove()
    assert not Path(room.root).exists()


def test_the_copy_leaves_out_compiled_code_by_name_and_by_content_and_says_why(tmp_path):
    """Code a person cannot read is never copied, so never run: bytecode and native modules by the names Python
    imports them under (a link so named too), and, under any name, a native library (ELF) or this Python's
    bytecode (which a loader of the submission's own could run).  Each is listed with the reason, apart from the
    other files left out (`Scratch.compiled`)."""
    import importlib.util

    sub = tmp_path / "sub"
    (sub / "native").mkdir(parents=True)
    (sub / "attention.py").write_text("import helpers\n")
    (sub / "notes.txt").write_text("pyc, so: words, not code\n")
    (sub / "helpers.pyc").write_bytes(importlib.util.MAGIC_NUMBER + bytes(12))
    (sub / "old.PYO").write_bytes(b"\0" * 16)
    (sub / "native" / "fast.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF" + bytes(60))
    (sub / "native" / "fast.abi3.so").write_bytes(b"not even ELF")
    (sub / "win.pyd").write_bytes(b"MZ")
    (sub / "blob.bin").write_bytes(b"\x7fELF" + bytes(60))  # a library under another name: ctypes.CDLL loads it
    (sub / "data.dat").write_bytes(importlib.util.MAGIC_NUMBER + bytes(12))  # marshal.loads(data[16:]) runs it
    (sub / "weights.npy").write_bytes(b"\x93NUMPY" + bytes(60))
    os.symlink("data.dat", sub / "shadow.pyc")
    room = scratch.Scratch.with_copy(0, str(sub), file_limit=1 << 20)
    try:
        copy = Path(room.path)
        assert sorted(p.name for p in copy.rglob("*")) == ["attention.py", "native", "notes.txt", "weights.npy"]
        assert sorted(room.compiled) == ["blob.bin", "data.dat", "helpers.pyc", "native/fast.abi3.so",
                                         "native/fast.cpython-311-x86_64-linux-gnu.so", "old.PYO", "shadow.pyc",
                                         "win.pyd"]
        assert all(scratch.COMPILED in s for s in room.skipped) and len(room.skipped) == len(room.compiled)
    finally:
        room.remove()

def test_removal_copes_with_whatever_a_child_left(tmp_path):
    """Deeper than any path may be long, closed folders, symlinks out (never followed), files the slot owns."""
    root = tmp_path / "room"
    root.mkdir()
    outside = tmp_path / "keep.txt"
    outside.write_text("keep")
    fd = os.open(root, os.O_RDONLY)
    for i in range(2500):  # 2500 * 2 characters: beyond PATH_MAX
        os.mkdir("d", dir_fd=fd)
        if i % 500 == 0:
            os.symlink(str(outside), "link", dir_fd=fd)
            os.symlink(str(tmp_path), "dirlink", dir_fd=fd)
        child = os.open("d", os.O_RDONLY, dir_fd=fd)
        if i % 700 == 699:
            os.chmod("d", 0, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)
    scratch.remove_tree(str(root))
    assert not root.exists() and outside.read_text() == "keep"


def test_removal_never_changes_a_folder_that_a_living_process_swapped_in_as_a_link(tmp_path, monkeypatch):
    """Red team 18: a scratch is removed while a child's processes may still live (a PID namespace dies after its
    first process; a grader killed outright leaves its children's to the next start's sweep).  Root made each
    sub-folder 0700 by its name before opening it, and a folder swapped for a link between the listing and that
    chmod made root close the link's target (here a folder of the host's, 0755: /usr or the venv would close the
    Python every later child needs).  The swap lands, deterministically, just after the scratch is listed."""
    room = tmp_path / "room"
    (room / "d").mkdir(parents=True)
    host = tmp_path / "host"
    host.mkdir(mode=0o755)
    os.chmod(host, 0o755)
    real_scandir, swapped = os.scandir, []

    def scandir(path="."):
        entries = list(real_scandir(path))
        if not swapped and any(e.name == "d" for e in entries):
            os.rename(room / "d", tmp_path / "moved")
            os.symlink(host, room / "d")
            swapped.append(True)
        return _Listed(entries)

    monkeypatch.setattr(os, "scandir", scandir)
    scratch.remove_tree(str(room))
    monkeypatch.setattr(os, "scandir", real_scandir)
    assert swapped and oct(host.stat().st_mode & 0o777) == "0o755" and host.is_dir()


class _Listed(list):
    """A folder's entries, listed already, as os.scandir's iterator is used (`with`)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_read_regular_refuses_what_could_hang_or_flood(tmp_path):
    (tmp_path / "ok.py").write_text("class A: pass\n")
    os.mkfifo(tmp_path / "fifo.py")
    os.symlink("/dev/zero", tmp_path / "zero.py")
    (tmp_path / "big.py").write_text("#" * 2000)
    assert scratch.read_regular(str(tmp_path / "ok.py"), 1000) == b"class A: pass\n"
    for name in ("fifo.py", "zero.py", "big.py", "missing.py"):
        assert scratch.read_regular(str(tmp_path / name), 1000) is None


def test_auto_detection_tokenizes_regular_files_only(tmp_path):
    cases = {"plain": "import torch.nn as nn\nclass A(nn.Module):\n    pass\n",
             "multiline": "@decorate\nclass A(\n    torch.nn.Module,  # a comment\n):\n    pass\n",
             "in_text": 'x = "class A(nn.Module):"\n# class B(nn.Module):\n',
             "other_base": "class A(Base, metaclass=Meta):\n    pass\n",
             "nested": "x = " + "(" * 100000 + "1" + ")" * 100000 + "\nclass A(nn.Module):\n    pass\n",
             "broken": "class A(\n"}
    for name, text in cases.items():
        (tmp_path / f"{name}.py").write_text(text)
    (tmp_path / "huge.py").write_text(cases["plain"] + "#" * pick.MAX_SOURCE)
    os.mkfifo(tmp_path / "fifo.py")
    os.symlink(str(tmp_path / "plain.py"), tmp_path / "link.py")
    found = {p.stem for p in tmp_path.glob("*.py") if pick.defines_module(p)}
    assert found == {"plain", "multiline", "nested"}
    one = tmp_path / "one"
    one.mkdir()
    (one / "attention.py").write_text(cases["plain"])
    (one / "test_attention.py").write_text(cases["plain"])
    os.mkfifo(one / "notes.py")
    assert pick.find_target(one) == "attention.py"


def test_a_submissions_many_code_files_are_counted_not_all_named(tmp_path):
    """100000 empty .py files made a 32 MB report (every name, twice) and would make one as large as the names a
    student's folder can hold (red team 5): a report names a few and counts the rest."""
    folder = tmp_path / "bob"
    folder.mkdir()
    for i in range(300):
        (folder / f"m{i:03d}_{'x' * 150}.py").write_text("")
    for target in (None, "attention.py:MyAttn"):
        picked = pick.spec_for(folder, target, flat=False)
        assert picked.spec is None and ("300 code files" in picked.problem or target), picked
        assert len(picked.problem) < 3000 and "m000_" in picked.problem and "290 more" in picked.problem
    (folder / "attention.py").write_text("import torch.nn as nn\nclass A(nn.Module):\n    pass\n")
    picked = pick.spec_for(folder, None, flat=False)
    assert picked.spec == "attention.py" and "301 code files" in picked.note and len(picked.note) < 3000


def test_merge_reports_what_is_missing_or_malformed(tmp_path, capsys):
    def csv(name, text):
        (tmp_path / name).write_text(text)
        return str(tmp_path / name)

    good = [csv("summary-1-of-3.csv", "submission,passed\na,True\n"), csv("summary-3-of-3.csv", "submission,passed\n"
                                                                                                 "b,False\n")]
    out = io.StringIO()
    assert shards.merge(good, out) == 2 and "missing shards: 2/3" in capsys.readouterr().err
    good.append(csv("summary-2-of-3.csv", "submission,passed\nc,True\n"))
    assert shards.merge(good, out) == 0 and out.getvalue().splitlines()[1:] == ["a,True", "b,False", "c,True"]
    for bad, why in ((str(tmp_path / "nope.csv"), "cannot read"), (csv("x.csv", "a,b\n1,2\n"), "not a summary"),
                     (csv("y.csv", "submission,passed\na,True,extra\n"), "not a summary"),
                     (csv("z.csv", "\xff\xfe"), "not a summary"), (csv("w-of.csv", ""), "not a summary")):
        assert shards.merge([bad], io.StringIO()) == 2
        assert why in capsys.readouterr().err
    assert shards.merge([csv("summary-1-of-2.csv", "submission\na\n"), csv("summary-1-of-3.csv", "submission\nb\n")],
                       io.StringIO()) == 2
    assert "different splits" in capsys.readouterr().err


def test_a_deeply_nested_header_is_refused_not_a_crash():
    nested = b"[" * 100000 + b"]" * 100000
    with pytest.raises(protocol.ProtocolError, match="nested too deeply"):
        protocol.decode(io.BytesIO(len(nested).to_bytes(4, "big") + nested))


def test_the_summary_says_what_was_missing():
    record = {"mechanism": "none", "uid": 0, "capabilities_dropped": True, "no_new_privs": True, "seccomp": True,
              "namespaces": [], "limits_hard_equals_soft": False}
    line = isolation.summary(record)
    assert "ROOT" in line and "NO namespaces" in line and "RAISABLE" in line
    confined = dict(record, mechanism="bwrap", uid=61001, namespaces=["mount", "net", "pid"],
                    limits_hard_equals_soft=True)
    line = isolation.summary(confined)
    assert line.startswith("bubblewrap: uid 61001, no capabilities") and "no network" in line


def test_confinement_imports_without_torch_or_numpy():
    probe = ("import sys; import harness.sandbox.isolation, harness.sandbox.confine, harness.sandbox.scratch, "
             "harness.sandbox.bubblewrap, harness.sandbox.seccomp; "
             "print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); {probe}"],
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


def test_every_trusted_module_is_loaded_before_a_submission_runs():
    code = ("import sys, pkgutil, importlib; from harness.sandbox import trusted; trusted.preload(); "
            "missing = [m.name for p in trusted.TRUSTED_PACKAGES for m in pkgutil.walk_packages("
            "importlib.import_module(p).__path__, p + '.') if m.name not in sys.modules and m.name not in "
            "trusted.NOT_HERE]; print(missing, 'torch' in sys.modules, 'numpy.random' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.stdout.split() == ["[]", "False", "True"], done.stderr[-2000:]


@pytest.mark.skipif(os.geteuid() != 0, reason="a root grader")
def test_a_root_grader_knows_whether_it_can_drop_privileges():
    assert isolation.can_drop_privileges() == (True, "ok")
    assert isolation.refusal() == []
    code = "from harness.sandbox import isolation; print(isolation.can_drop_privileges(), isolation.refusal())"
    done = subprocess.run(["setpriv", "--inh-caps=-all", "--bounding-set=-setuid,-setgid", "--", sys.executable,
                           "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert "(False, 'setresuid/setgroups refused')" in done.stdout, done.stderr


def test_forced_mechanism_is_validated(monkeypatch):
    monkeypatch.setenv(isolation.FORCE, "chroot")
    with pytest.raises(isolation.IsolationFailed, match="expected one of"):
        isolation.forced()
    monkeypatch.setenv(isolation.FORCE, "none")
    policy = make_policy("/tmp", 0)
    assert isolation.self_applied(policy).namespaces == ()
    json.dumps(policy.to_json())


def test_torch_libraries_get_address_space_on_top_of_the_memory_budget():
    """PyPI's CUDA build maps about 3.2 GB on `import torch`: with the address space equal to the memory budget
    every target died at construct (MemoryError, bad_alloc).  The budget is the data segment; the address space adds
    the libraries found on disk (446 MB for this CPU build)."""
    found = library_mb()
    assert found > 100  # torch's own libtorch_cpu alone is larger
    limits = Limits(memory_mb=3072)
    assert limits.library_mb == found
    assert limits.rlimits()["RLIMIT_DATA"] == 3072 << 20
    assert limits.rlimits()["RLIMIT_AS"] == (3072 + found) << 20


def test_waiting_for_a_child_wakes_when_it_exits_not_at_the_deadline():
    """The grader and the zygote wait for a killed child before the slot's next submission: woken by its exit."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    started = time.monotonic()
    os.kill(child.pid, signal.SIGKILL)
    until_exited(child.pid, started + 30)
    assert child.poll() == -signal.SIGKILL and time.monotonic() - started < 15
    until_exited(child.pid, time.monotonic() + 30)  # reaped already: returns (after a short sleep), never raises
    assert time.monotonic() - started < 15


KEPT_AS_ROOT = """
import dataclasses, json, os, sys
sys.path.insert(0, {root!r})
from harness.sandbox import isolation, scratch
from harness.sandbox.confine import confine
from harness.sandbox.limits import Limits
from harness.sandbox.policy import make_policy
slot = scratch.claim_slot()
room = scratch.Scratch.empty(slot.number)
scratch.give(room.path, 0, 0)
policy = dataclasses.replace(isolation.self_applied(make_policy(room.path, slot.number, Limits())), uid=0, gid=0,
                             require_drop=False)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    record = confine(policy)
    found = {{"uid": os.getuid(), "namespaces": record["namespaces"]}}
    for path in ("/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger"):
        try:
            with open(path, "w"):
                pass  # opened only: nothing is written
            found[path] = "writable"
        except OSError as e:
            found[path] = e.strerror
    os.write(w, json.dumps(found).encode())
    os._exit(0)
os.close(w)
os.waitpid(pid, 0)
print(os.read(r, 65536).decode())
scratch.remove_tree(room.root)
slot.release()
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a child kept as root exists only when the grader is root")
def test_a_child_kept_as_root_cannot_write_the_kernels_settings():
    """Found by an attacker: where the slot's uid cannot be used, the child runs as root without capabilities, and
    the built-in view's /proc let it open /proc/sys/kernel/core_pattern for writing (a program the kernel would run
    as root at the next crash).  /proc/sys and its kin are read-only in the view, as bubblewrap makes them."""
    run = subprocess.run([sys.executable, "-c", KEPT_AS_ROOT.format(root=str(ROOT))], capture_output=True, text=True,
                         timeout=60)
    found = json.loads(run.stdout or "{}") if run.returncode == 0 else {}
    assert found.get("uid") == 0 and "mount" in found["namespaces"], run.stderr[-2000:]
    assert found["/proc/sys/kernel/core_pattern"] == "Read-only file system", found
    assert found["/proc/sysrq-trigger"] != "writable", found  # absent where the kernel has no magic SysRq key


def test_a_stopped_grader_removes_every_scratch_folder_it_still_holds():
    """Found by the Ctrl-C test of grade, once in six runs: the stop landed between a child's scratch being made and
    run_checks taking the child, and that copy of a submission stayed behind."""
    held, closed = scratch.Scratch.empty(0), scratch.Scratch.empty(1)
    closed.remove()
    assert os.path.isdir(held.root) and not os.path.exists(closed.root)
    scratch.remove_live()
    assert not os.path.exists(held.root)


@pytest.mark.skipif(os.geteuid() != 0, reason="plays a root grader (slot uids)")
def test_leftovers_of_a_slot_are_killed_as_that_uid_whatever_they_do():
    """isolate's clean-up: a process of the slot's uid kills everything of that uid, again until none is left; a
    chain that forks as fast as it can and a process in a session of its own are gone, a process of another slot
    stays (a pid read from /proc and reused before the kill can never hit someone else)."""
    slot, other = scratch.claim_slot(), scratch.claim_slot()
    procs = []
    try:
        chain = "while :; do sh -c 'sleep 60' & sleep 0.005; done"
        for argv in (["sh", "-c", chain], ["setsid", "sleep", "60"]):
            procs.append(subprocess.Popen(argv, user=slot.uid, group=slot.uid, extra_groups=[],
                                          start_new_session=True))
        sentinel = subprocess.Popen(["sleep", "60"], user=other.uid, group=other.uid, extra_groups=[])
        procs.append(sentinel)
        deadline = time.monotonic() + 30  # the chain's first fork: at once when idle, later on a loaded machine
        while len(scratch.processes_of(slot.uid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(scratch.processes_of(slot.uid)) >= 3
        assert scratch.kill_as(slot.uid) is True
        assert scratch.processes_of(slot.uid) == [] and sentinel.poll() is None
    finally:
        for p in procs:
            p.kill()
            p.wait()
        scratch.kill_leftovers(slot.uid)
        slot.release()
        other.release()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root kills as a slot's uid")
def test_the_clean_up_of_a_slot_ends_even_when_a_leftover_stops_the_process_that_kills_them(monkeypatch):
    """Red team 18: isolate's clean-up forks a process that becomes the slot's uid, and without a PID namespace or
    Landlock's signal scoping (kernels before 6.12, or a Docker seccomp profile without Landlock) a leftover of the
    child's spinning on kill(-1, SIGSTOP) stopped it too, 2 times in 9 with eight spinners: the grader then waited
    for it for ever, its batch never ending.  Here the killer is stopped, deterministically, as it becomes the uid."""
    slot = scratch.claim_slot()
    leftover = subprocess.Popen(["sleep", "60"], user=slot.uid, group=slot.uid, extra_groups=[],
                                start_new_session=True)
    real = os.setresuid

    def stopped_on_becoming(*ids):
        real(*ids)
        os.kill(os.getpid(), signal.SIGSTOP)  # what a leftover's kill(-1, SIGSTOP) does, landing here

    monkeypatch.setattr(os, "setresuid", stopped_on_becoming)
    done = {}
    waiting = threading.Thread(target=lambda: done.setdefault("none_left", scratch.kill_as(slot.uid, 2.0)),
                               daemon=True)
    try:
        waiting.start()
        waiting.join(20)
        hung = waiting.is_alive()
        time.sleep(0.2)
        survived = leftover.poll() is None
    finally:
        monkeypatch.setattr(os, "setresuid", real)
        for pid in scratch.processes_of(slot.uid, zombies=True):  # a stopped killer, before the fix
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        waiting.join(10)
        leftover.kill()
        leftover.wait()
        slot.release()
    assert not hung, "kill_as waited for ever for a killer stopped by the slot's processes"
    assert not survived and done.get("none_left") is True


def test_a_grade_needs_a_child_that_can_write_nothing_of_the_graders():
    """Root, or the grader's own uid with the host's files in view, is unfit to grade; the slot's uid without
    namespaces is fit but short of the full policy; an ordinary user's own uid in its own namespaces is fit."""
    base = {"uid": 61005, "gid": 61005, "namespaces": [], "capabilities_dropped": True, "no_new_privs": True,
            "seccomp": True, "limits_hard_equals_soft": True}
    full = {**base, "namespaces": ["ipc", "mount", "net", "pid", "uts"]}
    assert isolation.unfit_to_grade(full) == "" and isolation.shortfall(full) == []
    assert isolation.unfit_to_grade(base) == "" and isolation.shortfall(base) == [
        "no ipc/mount/net/pid/uts namespaces", "no Landlock (the host's files behind permissions only)"]
    fenced = {**base, "landlock": {"in_force": True, "abi": 7, "rules": 25}}  # the files walled in all the same
    assert isolation.shortfall(fenced) == ["no ipc/mount/net/pid/uts namespaces"]
    assert isolation.shortfall({**full, "landlock": {"in_force": False, "why": "x"}}) == []  # behind a view: extra
    assert "root" in isolation.unfit_to_grade({**base, "uid": 0, "gid": 0})
    own = {**base, "uid": os.geteuid(), "gid": os.getegid()}
    if os.geteuid() != 0:
        assert "grader's own uid" in isolation.unfit_to_grade(own)
        landlocked = isolation.unfit_to_grade({**own, "landlock": {"in_force": True, "abi": 7, "rules": 25}})
        assert "grader's own uid" in landlocked and "Landlock alone" in landlocked  # still refused, said truly
        assert isolation.unfit_to_grade({**own, "namespaces": [*full["namespaces"], "user"]}) == ""
    assert "raise" in isolation.unfit_to_grade({**base, "limits_hard_equals_soft": False})
    joined = lambda record: "; ".join(isolation.shortfall(record))
    assert isolation.still_held(joined(fenced)) == ["a uid of its own", "Landlock", "no capabilities", "no_new_privs",
                                                    "seccomp", "hard limits"]  # what grade's closing warning adds
    assert isolation.still_held(joined(base)) == ["a uid of its own", "no capabilities", "no_new_privs", "seccomp",
                                                  "hard limits"]
    assert "a uid of its own" not in isolation.still_held(joined({**base, "uid": 0, "gid": 0}))
    assert isolation.still_held(joined({})) == []
    assert "Landlock" not in isolation.still_held(joined({**full, "seccomp": False}))  # the view, not Landlock
    described = isolation.describe({**base, "mechanism": "none", "groups": []})
    assert described["full_policy"] is False and described["unfit_to_grade"] == ""
    assert "no such file" in isolation.explain("x: no such file") and "/root/.pyenv" in isolation.explain(
        "builtin: ConfinementError: without a mount namespace uid 61003 cannot read /root/.pyenv, /root/.pyenv")
    # a root grader refused for a Python its children cannot read is told to change Python, not to grade as root
    unreadable = isolation.refusal_line([isolation.explain("uid 61003 cannot read /root/.pyenv")])
    assert "grade as root" not in unreadable and "a venv made from /usr/bin/python3" in unreadable
    assert "grade as root" in isolation.refusal_line(["a child cannot be given an unprivileged uid (EPERM)"])


ORPHAN = """
import os, select, signal, sys, time
sys.path.insert(0, {root!r})
from harness.sandbox import syscalls as linux
if {no_pidfd}:
    del os.pidfd_open  # a kernel before Linux 5.3: the parent's pid decides
if {new_pid_namespace}:
    linux.unshare(linux.CLONE_NEWPID)  # the child is pid 1 of it: getppid() says 0, its parent alive or not
parent = os.getpid()
pid = linux.fork_dying_with_parent(signal.SIGKILL)
if pid:
    print(pid, flush=True)
    os._exit(0)  # the parent ends before its child has armed again (as a zygote killed right after its fork)
linux.prctl(linux.PR_SET_PDEATHSIG, 0)  # as a uid change clears it
watch = linux.parent_watch()
if watch is not None:
    select.select([watch], [], [], 10)
else:
    while os.getppid() == parent:
        time.sleep(0.01)
linux.rearm_parent_death(signal.SIGKILL)
open({survived!r}, "w").close()  # reached only by a child that outlived its parent
time.sleep(30)
"""


def _ended(pid: int, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except (FileNotFoundError, ProcessLookupError):
            return True
        time.sleep(0.01)
    return False


@pytest.mark.parametrize("how", ["pidfd", "getppid", "pid-namespace"])
def test_a_child_whose_parent_ended_before_it_armed_its_death_signal_ends_too(tmp_path, how):
    """A fork whose parent is gone before the child (re)arms PR_SET_PDEATHSIG never gets the signal from the kernel:
    a submission's process forked by a zygote killed at that moment lived on, talking to the grader, and the suite
    waited for it until CI's time ran out.  `rearm_parent_death` ends it instead; in a new PID namespace, whose
    first process sees no parent (getppid() is 0), the pidfd still tells."""
    if how == "pid-namespace" and os.geteuid() != 0:
        pytest.skip("a new PID namespace needs root here")
    survived = tmp_path / "survived"
    script = ORPHAN.format(root=str(ROOT), no_pidfd=how == "getppid", new_pid_namespace=how == "pid-namespace",
                           survived=str(survived))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    child = int(done.stdout.split()[0])
    try:
        assert _ended(child, 20), f"the child {child} outlived its parent"
        assert not survived.exists()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def test_a_pool_process_whose_parent_died_before_it_asked_to_die_with_it_ends():
    """A grader is handed grade's pid before the fork: a grade killed before the grader's initializer asked the
    kernel for SIGTERM at its death left a grader reparented, waiting on its pool's queue for good (getppid() taken
    then was already the new parent's)."""
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); import signal\n"
            "from harness.sandbox import syscalls\n"
            "syscalls.die_with_parent(signal.SIGTERM, 1)  # a parent that is not ours any more\n"
            "print('outlived its parent')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, ""), done
