"""Which walls a child gets on this machine, how a single run's child is started inside them, and what every report
says about them.

Mechanisms, strongest first (each applies the same `harness.sandbox.policy.Policy`):
    bwrap   : bubblewrap (`harness.sandbox.bubblewrap`), single runs only
    builtin : our own namespaces, view and drop (`harness.sandbox.confine`): single runs without bubblewrap, and
              every child forked from the batch zygote (bubblewrap cannot confine a process that already runs)
    none    : no namespace could be created (a container without CAP_SYS_ADMIN, an ordinary user without user
              namespaces): resource limits, no_new_privs, seccomp, and the slot uid when we are root
A mechanism that fails here is not tried again by this process.  MHA_CHECK_ISOLATION=bwrap|builtin|none forces one
(tests; an administrator who knows better).  The record of what was in force is measured inside the child before
any of the submission's code runs, and handed over on a pipe that is closed before that code starts.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from harness.sandbox import bubblewrap, confine, scratch
from harness.sandbox import syscalls as linux
from harness.sandbox.confine import MAX_RECORD
from harness.sandbox.limits import Limits
from harness.sandbox.policy import PROBE_SLOT, Policy, make_policy, slot_ids
from harness.wire import names

MECHANISMS = ("bwrap", "builtin", "none")
FORCE = "MHA_CHECK_ISOLATION"
LABELS = {"bwrap": "bubblewrap", "builtin": "built-in namespaces", "none": "no namespaces"}
_broken: dict[str, str] = {}  # mechanism -> why it failed in this process


class IsolationFailed(RuntimeError):
    """The child could not be confined as asked: nothing of the untrusted program ran."""


def forced() -> str | None:
    value = os.environ.get(FORCE) or None
    if value is not None and value not in MECHANISMS:
        raise IsolationFailed(f"{FORCE}={value!r}: expected one of {', '.join(MECHANISMS)}")
    return value


def self_applied(policy: Policy) -> Policy:
    """The policy as `confine` applies it (the launcher, a zygote's child): it takes the namespaces the kernel
    allows and falls back to none by itself; MHA_CHECK_ISOLATION=none asks for none."""
    return dataclasses.replace(policy, namespaces=()) if forced() == "none" else policy


def python_command(code: str, python: str | None = None) -> list[str]:
    """`python -I -B -c CODE` (no environment, no user site, no current folder on sys.path, no bytecode written)."""
    return [python or sys.executable, "-I", "-B", "-c", code]


def read_record(fd: int, timeout: float) -> dict | None:
    """The isolation record from the status pipe (None: the child ended without one); closes `fd`."""
    data, end = b"", time.monotonic() + timeout
    try:
        while len(data) <= MAX_RECORD:
            if not linux.ready_by(fd, end):
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    try:
        record = json.loads(data) if data else None
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _attesting(code: str, policy: Policy, fd: int, variant: str) -> str:
    """Under bubblewrap the worker's own first lines measure and report what is in force (see confine.attest)."""
    return names.boot(f"from harness.sandbox.confine import attest; attest({policy.to_json()!r}, {fd}, 'bwrap', "
                      f"{bubblewrap.namespaces(variant)!r}); del attest; {code}")


def _start(mechanism: str, policy: Policy, code: str, python: str | None, timeout: float, popen: dict):
    """One attempt: (Popen, record), or IsolationFailed with nothing of `code` run."""
    if mechanism == "bwrap" and not bubblewrap.executable():
        raise IsolationFailed("bwrap: bubblewrap is not installed")
    ours, theirs = os.pipe()
    variant = bubblewrap.default_variant()
    try:
        if mechanism == "bwrap":
            argv = python_command(_attesting(code, policy, theirs, variant), python)
            proc = bubblewrap.popen(policy, argv, pass_fds=[theirs], **popen)
        else:  # the launcher confines itself, then execs python
            policy = dataclasses.replace(policy, namespaces=()) if mechanism == "none" else policy
            proc = subprocess.Popen(confine.command(policy, python_command(code, python), theirs),
                                    pass_fds=[theirs], start_new_session=True, env={}, **popen)
    except OSError as e:
        os.close(ours)
        raise IsolationFailed(f"{mechanism}: cannot start: {e}") from None
    finally:
        os.close(theirs)
    record = read_record(ours, timeout)
    if record is None:
        proc.kill()
        proc.wait()
        raise IsolationFailed(f"{mechanism}: confinement failed (status {proc.returncode})")
    if mechanism == "bwrap":
        record["variant"] = variant
    return proc, record


def start(policy: Policy, code: str, *, python: str | None = None, unconfined_fallback: bool = False,
          timeout: float = 60, **popen) -> tuple[subprocess.Popen, dict]:
    """Start `python -I -B -c CODE` confined by `policy` with the strongest mechanism that works here; `popen`
    (stdin, stdout, stderr) goes to Popen: the pipes are the caller's protocol channel, stderr its log.  Kill the
    tree with os.killpg(proc.pid, SIGKILL).  `unconfined_fallback`: as root, when no mechanism can drop to the
    slot uid, run as root rather than not at all (the record says so).  Raises IsolationFailed when nothing
    worked; nothing of CODE ran then.  A failed attempt's messages are cut from the log."""
    choice = forced()
    attempts = [(choice, policy)] if choice else \
        [(m, policy) for m in ("bwrap", "builtin") if m not in _broken and (m != "bwrap" or bubblewrap.executable())]
    if unconfined_fallback and policy.require_drop and os.geteuid() == 0:  # stays root, without capabilities
        attempts.append(("none", dataclasses.replace(policy, uid=0, gid=0, require_drop=False)))
    log = popen.get("stderr")
    mark = log.tell() if hasattr(log, "seek") else None
    reasons = []
    for mechanism, attempt in attempts:
        if attempt.uid != policy.uid:
            scratch.give(attempt.cwd, attempt.uid, attempt.gid)
        try:
            return _start(mechanism, attempt, code, python, timeout, popen)
        except IsolationFailed as e:
            said = ""
            if mark is not None:
                log.seek(mark)
                said = log.read()[-300:].decode(errors="replace").strip()
                log.seek(mark)
                log.truncate()
            if attempt is policy and not choice:
                _broken[mechanism] = f"{e} {said}".strip()
            reasons.append(f"{e} {said}".strip())
    raise IsolationFailed("no way to confine the child works here: " + "; ".join(reasons))


# -- what the reports say ------------------------------------------------------------------------------------------
FULL_NAMESPACES = ("ipc", "mount", "net", "pid", "uts")  # the policy's own (an ordinary user adds "user")
READABLE_PYTHON = "install mha-check in a Python every user can read (/usr, /opt, /usr/local)"
UNREADABLE_FIX = ("run mha-check from such a Python (a venv made from /usr/bin/python3 will do: docs/grading.md, "
                  "\"Batch\", where it can grade), or pass --allow-unconfined to accept that knowingly (the outputs "
                  "then say so)")
GRADING_FIX = ("grade as root where a child can be given another uid (CAP_SETUID and CAP_SETGID; CAP_SYS_ADMIN or "
               "user namespaces for namespaces), or as an ordinary user where user namespaces are allowed, or pass "
               "--allow-unconfined to accept it knowingly (the outputs then say so)")


def unfit_to_grade(record: dict) -> str:
    """Why a grade must not come from a child confined as `record` says ("": it may).  A grade needs a child that
    can write nothing of the grader's: never root, never the grader's own uid with the host's files in view (an
    ordinary user's child in its own user and mount namespaces sees only its scratch, read-write), no capabilities,
    no way to gain privileges, limits it cannot raise."""
    if not record:
        return "no isolation record: the child was not confined"
    uid = record.get("uid")
    if uid == 0 or record.get("gid") == 0:
        return "the child would run as root (no unprivileged uid could be used)"
    if uid == os.geteuid() and "mount" not in record.get("namespaces", ()):
        if record.get("landlock", {}).get("in_force"):  # the files are walled off, the uid is still the grader's
            return (f"the child would run as the grader's own uid {uid} without namespaces (no user namespaces "
                    "here): Landlock alone would stand between it and the grader's files and processes, and a "
                    "process it leaves behind could not be told from the grader's own")
        return (f"the child would run as the grader's own uid {uid} with the host's files in view (no user "
                "namespaces here): it could rewrite mha-check, the reports and every classmate's submission")
    for key, words in (("capabilities_dropped", "it would keep capabilities"),
                       ("no_new_privs", "no_new_privs would not be set"),
                       ("limits_hard_equals_soft", "it could raise its resource limits")):
        if not record.get(key):
            return f"the child would run with less than the policy: {words}"
    return ""


def shortfall(record: dict) -> list[str]:
    """What of the full policy was not in force for this child (empty: all of it), in a few words each."""
    if not record:
        return ["not confined"]
    out = []
    missing = [n for n in FULL_NAMESPACES if n not in record.get("namespaces", ())]
    if missing:
        out.append(f"no {'/'.join(missing)} namespace{'s' * (len(missing) > 1)}")
    if record.get("uid") == 0:
        out.append("ran as root")
    elif record.get("uid") == os.geteuid() and "mount" not in record.get("namespaces", ()):
        out.append("ran as the grader's own uid")
    if "mount" not in record.get("namespaces", ()) and not record.get("landlock", {}).get("in_force"):
        out.append("no Landlock (the host's files behind permissions only)")
    out += [words for key, words in (("capabilities_dropped", "kept capabilities"), ("no_new_privs", "no no_new_privs"),
                                     ("seccomp", "no seccomp"), ("limits_hard_equals_soft", "raisable limits"))
            if not record.get(key)]
    return out


WALLS = (("a uid of its own", ("ran as root", "ran as the grader's own uid")),
         ("Landlock", ("no Landlock", "not confined")), ("no capabilities", ("kept capabilities",)),
         ("no_new_privs", ("no no_new_privs",)), ("seccomp", ("no seccomp",)), ("hard limits", ("raisable limits",)))


def still_held(short: str) -> list[str]:
    """The walls that held for a child whose shortfall (`shortfall`, joined by "; ") is `short`: a closing warning
    that lists only what was missing left an instructor unable to tell a container's child (own uid, seccomp,
    Landlock) from one that ran as root (a user trial).  Landlock is named only where it stood in for a missing
    mount namespace (with one, the view walls the files off whether or not Landlock was there)."""
    if "not confined" in short:
        return []
    return [wall for wall, gone in WALLS
            if not any(g in short for g in gone) and (wall != "Landlock" or "mount" in short)]


def describe(record: dict) -> dict:
    """The report's `isolation` block: the record measured in the child, plus one line for people, what of the
    full policy was missing and whether a grade may come from it."""
    return {"summary": summary(record), **record, "full_policy": not shortfall(record),
            "short_of_policy": shortfall(record), "unfit_to_grade": unfit_to_grade(record)}


def summary(record: dict) -> str:
    uid = record["uid"]
    who = f"uid {uid}"
    if uid == 0:
        who += " = ROOT (no unprivileged uid could be used)"
    elif uid == os.geteuid():
        who += " (the grader's own: only root can use another)"
    parts = [f"{LABELS.get(record['mechanism'], record['mechanism'])}: {who}",
             "no capabilities" if record["capabilities_dropped"] else "KEEPS CAPABILITIES"]
    parts += [word for word, on in (("no_new_privs", record["no_new_privs"]), ("seccomp", record["seccomp"])) if on]
    line = ", ".join(parts)
    fenced = record.get("landlock", {}).get("in_force")
    if record["namespaces"]:
        line += (f"; own {', '.join(record['namespaces'])} namespaces (no network, private /proc); read-only view, "
                 "writable only its scratch copy and a private /tmp") + ("; Landlock behind it" if fenced else "")
    elif fenced:
        fence = record["landlock"]
        line += ("; NO namespaces: it shares the host's process and network namespaces, within Landlock: it reads "
                 "only the interpreter, its libraries and mha-check's worker, writes only its scratch" +
                 ", connects to no TCP port" * bool(fence.get("tcp_refused")) +
                 ", signals only its own processes" * bool(fence.get("signals_scoped")))
    else:
        line += "; NO namespaces: it sees the host's processes, network and world-readable files"
    return line + ("; hard limits" if record["limits_hard_equals_soft"] else "; RAISABLE limits")


def protections(limits: Limits) -> list[str]:
    """The report's list of the limits and habits every child has (adapter.protections); what confined it, which
    varies with the machine and the slot, is the report's isolation block."""
    return ["separate process (verdict computed outside it)", "process group killed on exit",
            f"CPU {limits.cpu_seconds} s", f"wall clock {limits.call_seconds:g} s per request (pooled over the "
            "requests sent together), "
            f"{limits.total_seconds:g} s in all", f"memory {limits.memory_mb} MB (address space "
            f"{limits.memory_mb + limits.library_mb} MB with torch's libraries)",
            f"files up to {limits.file_mb} MB", f"{limits.open_files} open files", f"{limits.processes} processes",
            "no core dumps", "only the private channel inherited", "throwaway working directory with a copy of "
            "the submission", "the isolation block says what confined it"]


# -- may a batch start at all? -------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def can_drop_privileges(uid: int | None = None) -> tuple[bool, str]:
    """Can this process make a child that is `uid`, with no groups and no capabilities?  Tried for real in a
    throwaway forked child."""
    uid = uid if uid is not None else slot_ids(PROBE_SLOT)[0]
    if os.geteuid() != 0:
        return False, f"not root (uid {os.geteuid()}): children keep the grader's own uid"
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            with open("/proc/self/status") as f:
                caps = {k: v for k, v in (line.split(":\t", 1) for line in f if ":\t" in line)}
            os._exit(0 if int(caps["CapEff"], 16) == int(caps["CapPrm"], 16) == 0 else 1)
        except BaseException:  # noqa: BLE001
            os._exit(2)
    _, raw = os.waitpid(pid, 0)
    code = os.WEXITSTATUS(raw) if os.WIFEXITED(raw) else -1
    return (True, "ok") if code == 0 else (False, {1: "capabilities survive the uid change",
                                                   2: "setresuid/setgroups refused"}.get(code, "child died"))


@functools.lru_cache(maxsize=None)
def probe() -> dict:
    """The record a trivial child gets here, confined as the batch's children are (a zygote's children confine
    themselves, as the launcher does), or {"error": why} when that fails."""
    room = scratch.Scratch.empty(PROBE_SLOT)
    try:
        with tempfile.TemporaryFile() as log:
            try:
                proc, record = _start("builtin", self_applied(make_policy(room.path, PROBE_SLOT)), "pass", None, 60,
                                      {"stdout": subprocess.DEVNULL, "stderr": log})
            except IsolationFailed as e:
                log.seek(0)
                return {"error": f"{e}: {log.read()[-300:].decode(errors='replace').strip()}"}
            proc.wait(timeout=60)
            return record
    finally:
        room.remove()


def refusal() -> list[str]:
    """Reasons a grader must not start a batch here (empty: go): submissions that would run as root or as the
    grader's own uid with the host's files in view, keep capabilities, raise their limits or gain privileges."""
    if os.geteuid() == 0:
        ok, why = can_drop_privileges()
        if not ok:
            return [f"a child cannot be given an unprivileged uid ({why})"]
    record = probe()
    if "error" in record:
        return [explain(record["error"])]
    why = unfit_to_grade(record)
    return [why] if why else []


def explain(error: str) -> str:
    """A confinement failure in one line, in the words of its most likely cause."""
    unreadable = re.search(r"uid (\d+) cannot read ([^;\n]+)", error)
    if unreadable:
        paths = ", ".join(dict.fromkeys(p.strip() for p in unreadable.group(2).split(",")))
        return (f"without a mount namespace here the child's uid {unreadable.group(1)} cannot read {paths} (the "
                f"Python that runs mha-check, e.g. one below a 0700 home): {READABLE_PYTHON}")
    if "CAP_SETUID" in error or "setresuid" in error:
        return "a child cannot be given an unprivileged uid (no CAP_SETUID/CAP_SETGID here)"
    return " ".join(error.split())[:300]


def refusal_line(reasons: list[str]) -> str:
    """The one line a grading front end refuses with: why, and what to do (where the reason says what to do
    itself, a Python the child cannot read, the general advice to grade as root would mislead: root it is)."""
    fix = UNREADABLE_FIX if any(READABLE_PYTHON in r for r in reasons) else GRADING_FIX
    return "submissions cannot be confined here: " + "; ".join(reasons) + ". To grade: " + fix
