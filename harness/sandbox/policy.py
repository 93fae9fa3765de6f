"""The confinement policy of one child, as plain data: the one place to read what a submission may see, write,
spend and be.  The mechanisms (`harness.sandbox.bubblewrap`, `harness.sandbox.confine`) only apply a `Policy`;
neither decides anything.  Modelled on IOI isolate (a uid per box, hard limits) and bubblewrap (a view built from
explicit binds).

What the child may see (paths keep their host names inside, so nothing else has to translate them)
  read-only : /usr and the /bin, /sbin, /lib* links or folders; the Python installation (venv and base prefix);
              mha-check's worker (harness's CHILD_PARTS; checks, reference, mutants and the rest of harness
              only for our own code, never for a submission: no correct layer of ours to load by its path, empty
              read-only folders over those that lie inside a bind, `hidden_paths`); the few /etc files the dynamic
              loader needs; a generated /etc/passwd, /etc/group, /etc/hosts naming only root, nobody and the slot
  read-write: its scratch folder, holding a COPY of its submission (never the original, never a classmate's);
              a small private /tmp and /dev/shm
  fresh     : /proc of its own PID namespace; a minimal /dev (null, zero, full, random, urandom)
  nothing else exists for it: no /root, /home, output folder, other submissions, host /proc, /sys but the CPU
  topology torch reads
What it may spend: `Limits` as hard == soft resource limits (memory and address space, CPU seconds, file size, open
  files, processes), no core dumps
What it is: uid = gid = 61000 + slot when the grader is root (never 0; one per concurrently running child, because
  RLIMIT_NPROC, signals and file ownership are per uid), no supplementary groups, no capabilities (bounding set
  emptied too), no_new_privs, a seccomp filter (`harness.sandbox.seccomp`), its own PID, network (only `lo`),
  mount, IPC and UTS namespaces.  An ordinary user cannot change uid: the child keeps the user's own.
Without a mount namespace (a container that allows none): the same lists, as Landlock rules (`landlock_rules`,
  applied by `harness.sandbox.confine` where the kernel has Landlock, on top of the namespaces too): read the
  interpreter, site-packages, harness's child/wire/sandbox, the /etc, /sys and /dev entries above and /proc/self;
  list (names only) harness/, never a checkout's root; write only the scratch; nothing else of the host, whatever
  its permissions.
Its environment: only `base_env` below plus INHERITED_ENV; nothing else of the grader's (tokens, paths) reaches it.
"""
from __future__ import annotations

import functools
import json
import os
import sys
from dataclasses import asdict, dataclass, field, fields

from harness import PACKAGES_ROOT
from harness.sandbox import landlock
from harness.sandbox.limits import Limits
from harness.wire import names

UID_BASE = 61000  # slot uids 61000..61998; a range no real user or service owns (isolate uses 60000+)
SLOTS = 999  # slots 0..998 for children; 999 is the probes'
PROBE_SLOT = 999

SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")  # links on merged-/usr systems
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/nsswitch.conf")
SYS_PATHS = ("/sys/devices/system/cpu",)  # CPU topology for torch's cpuinfo; read-only, harmless
DEVICES = ("null", "zero", "full", "random", "urandom")
IDENTITY_FILES = ("/etc/passwd", "/etc/group", "/etc/hosts")  # generated for the view: only root, nobody, the slot
VIEW_OWN = ("private", "own")  # Landlock rights on the view's own mounts, given only inside a mount namespace
CHILD_PARTS = ("__init__.py", "__pycache__", "child", "wire", "sandbox")  # of harness/, what a child imports (no
# engine, frontends, render: tests/unit/test_layers.py): all a submission's child may read of mha-check under Landlock
INHERITED_ENV = ("MUTANT_UNDER_TEST",)  # mutmut's switch, for the mutation tests of mha-check itself


@dataclass(frozen=True)
class Mount:
    """One entry of the child's filesystem view, applied in order.

    kind: ro | rw (bind of host `source` on `dest`), symlink (`source` is the link text), tmpfs, proc, dev,
    file (`source` is the text to write), empty (an empty read-only folder over `dest`: what hides a folder of
    ours inside a bind)."""
    kind: str
    dest: str
    source: str = ""
    mode: int = 0o755
    size_mb: int = 0
    files: int = 0  # tmpfs and dev: most files and folders it may hold (nr_inodes), 0 for the kernel's default


@dataclass(frozen=True)
class Policy:
    view: tuple[Mount, ...]
    cwd: str
    uid: int
    gid: int
    rlimits: dict  # resource-module name -> value, hard == soft
    env: dict = field(default_factory=dict)
    namespaces: tuple[str, ...] = ("mount", "pid", "net", "ipc", "uts")
    no_new_privs: bool = True
    drop_capabilities: bool = True
    seccomp: bool = True
    require_drop: bool = True  # a root grader must become the slot uid, or nothing runs (--allow-unconfined: no)
    landlock: tuple[tuple[str, str], ...] = ()  # (right, path) rules of `harness.sandbox.landlock`; () for none

    def to_json(self) -> str:
        plain = {f.name: getattr(self, f.name) for f in fields(self)}  # json copies; asdict would copy twice
        return json.dumps({**plain, "view": [asdict(m) for m in self.view]})

    @staticmethod
    def from_json(text: str) -> "Policy":
        raw = json.loads(text)
        raw["view"] = tuple(Mount(**m) for m in raw["view"])
        raw["namespaces"] = tuple(raw["namespaces"])
        raw["landlock"] = tuple(tuple(rule) for rule in raw.get("landlock", ()))
        return Policy(**raw)

    def binds(self, kind: str) -> list[str]:
        return [m.dest for m in self.view if m.kind == kind]


def slot_ids(slot: int) -> tuple[int, int]:
    """(uid, gid) of a worker slot."""
    if not 0 <= slot <= PROBE_SLOT:
        raise ValueError(f"slot {slot} out of range")
    return UID_BASE + slot, UID_BASE + slot


def is_slot_uid(uid: int) -> bool:
    """A slot's uid, which only a root grader gives (an ordinary user whose own uid falls in the range is not one:
    killing its processes would kill the grader)."""
    return UID_BASE <= uid <= UID_BASE + PROBE_SLOT and uid != os.geteuid()


def identity(slot: int) -> tuple[int, int]:
    """Who the child of `slot` will be: the slot's ids when we are root (only root may choose), else our own."""
    return slot_ids(slot) if os.geteuid() == 0 else (os.getuid(), os.getgid())


def interpreter_prefixes() -> list[str]:
    """Folders of the running interpreter (venv and base installation): the child runs the same Python."""
    found = []
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
              os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))):
        p = os.path.abspath(p)
        if p not in found:
            found.append(p)
    return found


def tool_paths(root: str | None = None, own_code: bool = False) -> list[str]:
    """mha-check's packages a child sees: harness (the worker) for a submission; with them the reference, the
    mutants and the checks for our own code (a mutant imports mutants._info).  `root`: PACKAGES_ROOT."""
    root = root or PACKAGES_ROOT
    seen = names.OURS if own_code else names.SUBMISSION_VISIBLE  # harness.wire.names: defence 4
    return [os.path.join(root, name) for name in seen if os.path.exists(os.path.join(root, name))]


def _covered(path: str, by: list[str]) -> bool:
    return any(path == b or path.startswith(b.rstrip("/") + "/") for b in by)


def _system_view() -> list[Mount]:
    out = []
    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            out.append(Mount("symlink", path, os.readlink(path)))
        elif os.path.isdir(path):
            out.append(Mount("ro", path, path))
    return out


def _site_folders() -> list[str]:
    """The import folders of this interpreter outside its prefixes (a .pth file's addsitedir): site-packages and
    dist-packages only, never the current folder, a checkout on sys.path (an editable install's root) or tests/."""
    parts = ("site-packages", "dist-packages")
    return [os.path.realpath(p) for p in sys.path if p and os.path.isdir(p) and any(n in parts for n in p.split("/"))]


@functools.lru_cache(maxsize=4)
def hidden_paths(root: str, own_code: bool) -> tuple[str, ...]:
    """What of mha-check's install a submission's child must not read, though it lies below what it may read: the
    correct layers and the checks (names.CHILD_HIDDEN), our tests, and the trusted parts of harness (all but
    CHILD_PARTS).  None for our own code."""
    if own_code:
        return ()
    tool = os.path.join(root, "harness")
    return (*(os.path.join(root, n) for n in (*names.CHILD_HIDDEN, "tests")),
            *(os.path.join(tool, n) for n in sorted(os.listdir(tool)) if n not in CHILD_PARTS))


def _masks(hidden: tuple[str, ...], view: list[Mount]) -> list[Mount]:
    """An empty read-only folder (or /dev/null) over each hidden path that a read-only bind of `view` holds.

    Why not Landlock alone: the view's own /tmp is one Landlock rule with every right, and a rule covers what is
    mounted beneath it; with mha-check installed below the host's /tmp (a CI clone, a venv there) its bind lands
    below the view's /tmp and the trusted parts of harness were readable.  A mask is a wall of the view itself, in
    any layout, with or without Landlock.  A hidden path holding another entry of the view is left alone (the
    entry would vanish under the mask; Landlock still hides the rest)."""
    binds = [m.dest for m in view if m.kind == "ro"]
    dests = [m.dest for m in view]
    out = []
    for path in hidden:
        if not os.path.lexists(path) or os.path.islink(path) or not _covered(path, binds):
            continue
        if any(_covered(d, [path]) for d in dests):
            continue
        out.append(Mount("empty", path, mode=0o555) if os.path.isdir(path) else Mount("ro", path, os.devnull))
    return out


@functools.lru_cache(maxsize=8)
def _landlock_static(prefixes: tuple[str, ...], readable: tuple[str, ...], own_code: bool) -> tuple:
    """Every rule but the scratch's (see `landlock_rules`); cached: the listings of expanded folders are read once."""
    root = os.path.realpath(PACKAGES_ROOT)
    hidden = hidden_paths(root, own_code)
    wanted = [("exec", os.path.realpath(p)) for p in (*prefixes, *SYSTEM_PATHS) if os.path.lexists(p)]
    wanted += [("read", p) for p in _site_folders()]
    wanted += [("read", os.path.realpath(p)) for p in (*tool_paths(root, own_code), *readable)]
    if own_code and not any(_covered(root, [p]) for _, p in wanted):  # a checkout: its folder listed, so that our
        # own code imports mutants and reference; a submission's child loads harness by its path (names.boot) and
        # lists no more than harness/: a rule on the root lists every folder below it, an export kept in the clone
        wanted.append(("list", root))
    # torch reads /proc/cpuinfo as it starts a thread pool: refused, it printed an error shown as the student's output
    wanted += [("read", p) for p in (*ETC_FILES, *SYS_PATHS, "/proc/self", "/proc/cpuinfo") if os.path.lexists(p)]
    wanted += [("device", f"/dev/{name}") for name in DEVICES]
    wanted += [("private", "/tmp"), ("private", "/dev/shm"), ("own", "/proc")]
    wanted += [("own", p) for p in IDENTITY_FILES]  # the view's generated ones; the host's name its users
    rules = []
    for right, path in wanted:  # the view's own mounts (a fresh /tmp, /proc) hold nothing of ours to hide: a
        # checkout below the host's /tmp (a CI clone) made /tmp a list of the host's entries, none of them writable
        for rule in landlock.expand(right, path, [] if right in VIEW_OWN else list(hidden)):
            if not any(r == rule[0] and _covered(rule[1], [p]) for r, p in rules):  # /bin: /usr/bin, under /usr
                rules.append(rule)
    return tuple(rules)


def landlock_rules(scratch: str, prefixes: list[str], readable: list[str], own_code: bool) -> tuple:
    """The Landlock rules of a child (`harness.sandbox.landlock`): the view's read-only entries as `read`/`exec`,
    with mha-check's own reference, mutants, checks, tests and the trusted parts of harness hidden even where they
    lie below an allowed folder (a non-editable install in site-packages), and `scratch` writable."""
    return (*_landlock_static(tuple(prefixes), tuple(readable), own_code), ("write", os.path.realpath(scratch)))


def _identity_files(uid: int, gid: int, home: str) -> list[Mount]:
    passwd = (f"root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
              f"student:x:{uid}:{gid}:sandboxed submission:{home}:/usr/sbin/nologin\n"
              f"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
    group = f"root:x:0:\nstudent:x:{gid}:\nnogroup:x:65534:\n"
    texts = (passwd, group, "127.0.0.1 localhost\n::1 localhost\n")
    return [Mount("file", path, text, 0o644) for path, text in zip(IDENTITY_FILES, texts)]


def _processes_of(uid: int) -> int:
    """Tasks (threads included: RLIMIT_NPROC counts them) of `uid` now."""
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                st = os.stat(f"/proc/{entry}")
                if st.st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry}/task"))
            except OSError:
                continue
    return count


def make_policy(scratch: str, slot: int, limits: Limits | None = None, *, readable: list[str] | None = None,
                python_prefixes: list[str] | None = None, env: dict | None = None,
                require_drop: bool = True, own_code: bool = False) -> Policy:
    """The policy for one child: `scratch` (already holding the copy of its submission) read-write and its working
    directory; the interpreter (`python_prefixes`, default: this one's), mha-check's packages (`tool_paths`: harness
    alone unless the target is `own_code`) and `readable` read-only; everything else of the host invisible."""
    limits = limits or Limits()
    uid, gid = identity(slot)
    scratch = os.path.realpath(scratch)
    # fresh filesystems first: a bind below /tmp (the scratch, a tool in a temporary clone) must land on top of them
    view = [Mount("proc", "/proc"), Mount("dev", "/dev", size_mb=limits.tmpfs_mb, files=limits.tmpfs_files),
            Mount("tmpfs", "/tmp", mode=0o1777, size_mb=limits.tmpfs_mb, files=limits.tmpfs_files),
            *_system_view()]
    done = [m.dest for m in view if m.kind in ("ro", "symlink")]
    prefixes = python_prefixes or interpreter_prefixes()
    wanted = [*prefixes, *tool_paths(own_code=own_code), *(readable or [])]
    for path in wanted:
        real = os.path.realpath(path)
        if os.path.exists(real) and not _covered(real, done):
            view.append(Mount("ro", real, real))
            done.append(real)
        alias = os.path.abspath(path)
        if alias != real and os.path.exists(real) and not _covered(alias, done):
            view.append(Mount("symlink", alias, real))  # a linked package (mutmut's staging folder) keeps its name
            done.append(alias)
    for path in (*ETC_FILES, *SYS_PATHS):
        if os.path.lexists(path) and not _covered(path, done):
            view.append(Mount("ro", path, os.path.realpath(path)))  # /etc/localtime: bind what it points to
    view += _identity_files(uid, gid, scratch)
    view.append(Mount("rw", scratch, scratch))
    view += _masks(hidden_paths(os.path.realpath(PACKAGES_ROOT), own_code), view)  # last: on top of their binds
    rlimits = limits.rlimits()
    if os.geteuid() != 0:  # the user's own uid: its other processes count too (best effort, see docs/threat-model.md)
        rlimits["RLIMIT_NPROC"] += _processes_of(uid)
    return Policy(view=tuple(view), cwd=scratch, uid=uid, gid=gid, rlimits=rlimits,
                  env={**clean_env(scratch), **(env or {})}, require_drop=require_drop,
                  landlock=landlock_rules(scratch, prefixes, readable or [], own_code))


def clean_env(home: str) -> dict:
    """The whole environment of a process that will hold a submission: none of the grader's variables (tokens,
    paths), because a child can read the environment block it was started with (/proc/self/environ) even after
    os.environ is cleared.  The batch zygote is started with it too: its forks inherit that block."""
    base = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8",
            "USER": "student", "LOGNAME": "student", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "PYTHONHASHSEED": "0"}
    return {**base, **{k: os.environ[k] for k in INHERITED_ENV if k in os.environ}}
