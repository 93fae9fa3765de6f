"""Landlock (harness/sandbox/landlock.py): the rules a child gets, and what they allow, measured in a forked process
that restricts itself to them as a confined child does.  The end-to-end proof (a hostile submission in a container
that allows no namespaces) is tests/e2e/test_confinement.py; each wall from inside, tests/unit/test_walls.py."""
from __future__ import annotations

import errno
import json
import os
import socket
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from harness.sandbox import landlock, policy
from harness.sandbox import syscalls as linux
from harness.sandbox.policy import make_policy


def _available() -> str | None:
    try:
        landlock.abi()
        return None
    except OSError as e:
        return landlock.UNAVAILABLE.get(e.errno, str(e))


needs_landlock = pytest.mark.skipif(bool(_available()), reason=str(_available()))


def _covers(rules, path: str, rights=("read", "exec", "write", "device", "private", "own")) -> bool:
    return any(r in rights and (path == p or path.startswith(p.rstrip("/") + "/")) for r, p in rules)


def test_expand_hides_a_folder_below_an_allowed_one(tmp_path):
    """A Landlock rule covers everything below its folder: a folder that holds a hidden one is listed, and each
    of its other entries allowed on its own, recursively; the hidden one's contents are reached by no rule."""
    site = tmp_path / "site-packages"
    for name in ("torch/nn", "numpy", "harness/child", "harness/engine", "reference"):
        (site / name).mkdir(parents=True)
    (site / "six.py").write_text("")
    hidden = [str(site / "reference"), str(site / "harness" / "engine")]
    rules = landlock.expand("read", str(site), hidden)
    assert ("list", str(site)) in rules and ("list", str(site / "harness")) in rules
    assert {("read", str(site / n)) for n in ("torch", "numpy", "six.py", "harness/child")} <= set(rules)
    assert not _covers(rules, str(site / "reference" / "causal_mha.py"))
    assert not _covers(rules, str(site / "harness" / "engine" / "runner.py"))
    assert landlock.expand("read", str(site / "numpy"), hidden) == [("read", str(site / "numpy"))]
    assert landlock.expand("read", str(site / "reference"), hidden) == []


def test_a_link_into_a_folder_that_hides_is_no_rule(tmp_path):
    """`python -m venv` makes lib64 a link to lib: a rule opened on lib64 (O_PATH follows it) covered all of lib,
    our packages of a wheel install included (a red team read reference/ through it, 19/19).  The link is no rule;
    lib is reached by its own name, expanded around what hides."""
    venv = tmp_path / "venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    for name in ("torch", "reference", "harness/child"):
        (site / name).mkdir(parents=True)
    (venv / "lib64").symlink_to("lib")
    (venv / "bin").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (venv / "bin" / "out").symlink_to(tmp_path / "elsewhere")  # a link to a folder that holds nothing hidden: kept
    rules = landlock.expand("exec", str(venv), [str(site / "reference")])
    assert not any(path.startswith(str(venv / "lib64")) for _, path in rules), rules
    assert not _covers(rules, str(site / "reference" / "causal_mha.py")) and _covers(rules, str(site / "torch"))
    assert ("exec", str(venv / "bin")) in rules


def test_a_submissions_rules_reach_no_layer_of_ours():
    """What a submission's child may read: the interpreter, site-packages and harness's child, wire and sandbox;
    never reference/, mutants/, checks/, tests/ (the zoo of correct layers) or the trusted parts of harness, even
    with the checkout's root on sys.path (an editable install), which it may not even list: a rule to list the root
    covers every folder below it, an export kept in the clone included (red team 8; the child loads harness by its
    path, harness.wire.names.boot).  Our own code (a mutant under test) lists the root and reads reference/ and
    mutants/ too.  It writes only its scratch."""
    scratch = "/tmp/mha-check-landlock-unit/scratch"
    rules = make_policy(scratch, 0).landlock
    host = [r for r in rules if r[0] not in policy.VIEW_OWN]  # the view's own mounts: given only inside a mount
    # namespace, where a fresh /tmp holds none of these (an install below the host's /tmp: docs/threat-model.md)
    for path in ("reference/causal_mha.py", "mutants/finite_fill_100.py", "checks/__init__.py",
                 "tests/zoo/correct/book_style.py", "harness/engine/runner.py", "harness/frontends/cli.py"):
        assert not _covers(host, str(ROOT / path)), path
    for path in ("harness/__init__.py", "harness/child/worker.py", "harness/wire/messages.py",
                 "harness/sandbox/confine.py"):
        assert _covers(rules, str(ROOT / path), ("read",)), path
    assert not _covers(rules, str(ROOT / "submissions" / "alice"), ("list", "read", "exec")), "the checkout listed"
    assert [p for r, p in rules if r == "write"] == [scratch]
    assert _covers(rules, os.path.realpath(os.__file__)) and _covers(rules, "/proc/self/status")
    own = make_policy(scratch, 0, own_code=True).landlock
    assert _covers(own, str(ROOT / "reference" / "causal_mha.py")) and _covers(own, str(ROOT / "mutants" / "x.py"))
    assert ("list", str(ROOT)) in own


def _restricted_child(rules, private_ok: bool, probes: dict) -> dict:
    """Fork; the child sets no_new_privs, restricts itself to `rules` (None: not at all), tries each probe (read,
    write or list a path, connect to a port, signal a pid) and reports {name: error or None} and the record."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            linux.prctl(linux.PR_SET_NO_NEW_PRIVS, 1)
            out = {"record": None if rules is None else landlock.restrict(rules, private_ok)}
            for name, (how, path) in probes.items():
                try:
                    if how == "read":
                        Path(path).read_bytes()
                    elif how == "connect":
                        socket.create_connection(("127.0.0.1", path), timeout=5).close()
                    elif how == "signal":
                        os.kill(path, 0)
                    elif how == "list":
                        os.listdir(path)
                    else:
                        with open(path, "a") as f:
                            f.write("x")
                    out[name] = None
                except OSError as e:
                    out[name] = errno.errorcode.get(e.errno, str(e.errno))
            os.write(w, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        data = f.read()
    os.waitpid(pid, 0)
    return json.loads(data)


@needs_landlock
def test_a_restricted_process_reads_and_writes_only_what_its_rules_allow(tmp_path):
    allowed, hidden, scratch, other = (tmp_path / n for n in ("site", "site/reference", "scratch", "classmate"))
    for folder in (hidden, scratch, other):
        folder.mkdir(parents=True)
    for path in (allowed / "torch.py", hidden / "causal_mha.py", other / "attention.py", scratch / "mine.py"):
        path.write_text("x = 1\n")
    rules = [*landlock.expand("read", str(allowed), [str(hidden)]), ("write", str(scratch)),
             ("device", "/dev/null"), ("private", str(other))]
    got = _restricted_child(rules, False, {
        "read_allowed": ("read", allowed / "torch.py"), "list_hidden": ("list", hidden),
        "read_hidden": ("read", hidden / "causal_mha.py"), "read_classmate": ("read", other / "attention.py"),
        "write_classmate": ("write", other / "attention.py"), "write_allowed": ("write", allowed / "torch.py"),
        "write_scratch": ("write", scratch / "mine.py"), "create_scratch": ("write", scratch / "new.py"),
        "write_null": ("write", "/dev/null"), "read_etc": ("read", "/etc/hostname")})
    assert got["record"]["in_force"] and got["record"]["abi"] >= 1 and got["record"]["rules"] == len(rules) - 1
    assert {k for k, v in got.items() if v is None} == {"read_allowed", "list_hidden", "write_scratch",
                                                        "create_scratch", "write_null"}, got
    assert {v for k, v in got.items() if k != "record" and v is not None} == {"EACCES"}
    inside = _restricted_child(rules, True, {"write_private": ("write", other / "attention.py")})
    assert inside["write_private"] is None  # `private`: only inside a mount namespace, where it is our own tmpfs


@needs_landlock
def test_tcp_and_signals_beyond_its_own_processes_are_refused_where_the_kernel_can():
    """ABI 4: no TCP connection (the grader's localhost service); ABI 6: no signal to a process outside the child's
    own (its parent, here; without a PID namespace, any process of its uid).  The same probes without Landlock
    succeed, so the refusals are Landlock's."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        probes = {"connect": ("connect", listener.getsockname()[1]), "signal": ("signal", os.getpid())}
        free = _restricted_child(None, False, probes)
        assert free["connect"] is None and free["signal"] is None
        got = _restricted_child([], False, probes)
    fence = got["record"]
    assert fence["tcp_refused"] is (fence["abi"] >= 4) and fence["signals_scoped"] is (fence["abi"] >= 6)
    assert got["connect"] == ("EACCES" if fence["tcp_refused"] else None)
    assert got["signal"] == ("EPERM" if fence["signals_scoped"] else None)


def test_a_checkout_below_tmp_leaves_the_views_own_tmp_whole(tmp_path, monkeypatch):
    """A CI clone lives below the host's /tmp: hiding its reference/ made the view's /tmp (a fresh tmpfs) a list of
    the host's entries, so the child could write none of its own /tmp and could list every folder below the host's
    (a classmate's) where no namespace drops that rule."""
    root = tmp_path / "clone"
    for name in ("harness/child", "harness/wire", "harness/sandbox", "harness/engine", "reference", "tests"):
        (root / name).mkdir(parents=True)
    (root / "harness" / "__init__.py").write_text("")
    monkeypatch.setattr(policy, "PACKAGES_ROOT", str(root))
    policy._landlock_static.cache_clear()
    try:
        rules = policy.landlock_rules(str(tmp_path / "scratch"), [sys.prefix], [], False)
    finally:
        policy._landlock_static.cache_clear()
    assert ("private", "/tmp") in rules and ("list", "/tmp") not in rules
    assert not _covers([r for r in rules if r[0] != "private"], str(root / "reference" / "x.py"))


def test_a_checkout_below_tmp_hides_the_trusted_harness_in_the_view_itself(tmp_path, monkeypatch):
    """The view's own /tmp is one Landlock rule with every right, and it covers what is bound beneath it: with a
    checkout below the host's /tmp (the CI rehearsal's clone) harness/engine was readable in the namespaced view.
    Each hidden folder inside a read-only bind now gets an empty read-only folder over it, after the bind."""
    root = tmp_path / "clone"
    for name in ("harness/child", "harness/wire", "harness/sandbox", "harness/engine", "harness/frontends",
                 "reference", "tests"):
        (root / name).mkdir(parents=True)
    (root / "harness" / "__init__.py").write_text("")
    (root / "harness" / "notes.txt").write_text("")
    monkeypatch.setattr(policy, "PACKAGES_ROOT", str(root))
    policy._landlock_static.cache_clear()
    try:
        view = make_policy(str(tmp_path / "scratch"), 0).view
    finally:
        policy._landlock_static.cache_clear()
    dests = [m.dest for m in view]
    harness = str(root / "harness")
    assert ("ro", harness) in [(m.kind, m.dest) for m in view]
    masks = {m.dest: m for m in view if m.dest.startswith(harness + "/")}
    assert {p: (m.kind, m.source) for p, m in masks.items()} == {
        f"{harness}/engine": ("empty", ""), f"{harness}/frontends": ("empty", ""),
        f"{harness}/notes.txt": ("ro", os.devnull)}
    assert all(dests.index(p) > dests.index(harness) for p in masks)
    assert not any(d.startswith(str(root / "reference")) for d in dests)  # never bound: nothing to mask
