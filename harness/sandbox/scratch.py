"""Per-slot housekeeping around a confined child, as isolate's --init and --cleanup do it.

- `Slot`: a slot number no other running child on this machine holds (an flock on /run/mha-check/slot-N.lock, so
  concurrent graders, even of different checkouts, never share one), and with it the child's uid (61000 + N).
- `Scratch`: a fresh folder owned by the slot's uid and closed to everyone else (0700 inside a 0711 folder),
  holding a COPY of the submission: the child may write there, never in the original, and no other child can
  see it.  Its removal copes with whatever the child left: closed folders, any depth, symlinks (never followed).
- The copy and `read_regular` read untrusted folders from the trusted process: regular files only (a FIFO would
  block, a symlink could point at /dev/zero or a classmate's file), within size and count budgets, without
  recursion.  Compiled code is never copied (`compiled_name`, `compiled_data`): what runs is source a person can
  read, and the copy lists what it left out and why (`Scratch.compiled`).
- Where the grader may mount (root with CAP_SYS_ADMIN), the scratch folder is a tmpfs of its own, limited in size
  and in inodes (`bounded`): a submission that fills its folder fills only that, never the disk or the inodes its
  classmates' copies, the batch's staging folder and the output folder share.
  Elsewhere (a container without CAP_SYS_ADMIN) the folder stays on the shared disk, each file bounded by the
  file-size limit, and the trusted side measures it while it waits for the child (`Scratch.overflow`): past the same
  budget the child is stopped, and its folder removed with it.
- `sweep_stale`: at the start of a grade or a single run, the scratch and batch folders (and their tmpfs) of graders
  killed outright (SIGKILL) are unmounted and removed, never a live grader's (`harness.sandbox.stale`).
- `kill_leftovers`: without a PID namespace a child may leave processes behind; they are killed by uid (from a
  process of that uid, as isolate does) before the verdict is written and the slot used again.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import importlib.machinery
import importlib.util
import os
import random
import signal
import stat
import tempfile
import time
from dataclasses import dataclass, field

from harness.sandbox import stale
from harness.sandbox import syscalls as linux
from harness.sandbox.policy import SLOTS, identity

MAX_FILES = 2000  # entries of one submission copied into its scratch
MAX_BYTES = 64 << 20
MAX_DEPTH = 16
BYTECODE_CACHE = "__pycache__"  # never copied, folder or link (red team 5: a linked cache ran in place of the source)
SKIPPED_DIRS = (BYTECODE_CACHE, "node_modules")  # and hidden folders and virtual environments (pyvenv.cfg)
COMPILED = "compiled code, no source to read: never copied, never run"  # the reason a copy gives for each
COMPILED_SUFFIXES = tuple(sorted({s.lower() for s in (*importlib.machinery.BYTECODE_SUFFIXES, ".pyo", ".pyd", ".so",
                                                      *importlib.machinery.EXTENSION_SUFFIXES)}))
COMPILED_MAGIC = (b"\x7fELF", importlib.util.MAGIC_NUMBER)  # a native library, this Python's bytecode: any name
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _lock_dir() -> str:
    """Root: /run/mha-check (only root can create it there).  Others: a folder of their own in the temp dir."""
    uid = os.geteuid()
    path = "/run/mha-check" if uid == 0 and os.path.isdir("/run") else \
        os.path.join(tempfile.gettempdir(), f"mha-check-slots-{uid}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o022:
        raise RuntimeError(f"{path} is not a private folder of uid {uid}: refusing to keep slot locks there")
    return path


@dataclass
class Slot:
    """A worker slot held by this process until `release()` (or its exit)."""
    number: int
    fd: int = -1

    @property
    def uid(self) -> int:
        return identity(self.number)[0]

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def claim_slot() -> Slot:
    """The first free slot from a random start (a slot just released may still be tearing its child down)."""
    folder = _lock_dir()
    start = random.randrange(SLOTS)
    for i in range(SLOTS):
        number = (start + i) % SLOTS
        fd = os.open(os.path.join(folder, f"slot-{number}.lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW |
                     os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return Slot(number, fd)
        except BlockingIOError:
            os.close(fd)
    raise RuntimeError(f"all {SLOTS} worker slots are taken")


_LIVE: set[str] = set()  # scratch roots this process made and has not removed yet (see remove_live)
_PARENT: str | None = None  # where this process makes scratch roots: the temp dir (None), or a batch's (place_in)


def place_in(folder: str) -> None:
    """Make this process's scratch roots inside `folder` (a batch's, removed by `grade` at its end): a grader killed
    from outside (SIGKILL) cannot remove the scratch of the submission it was grading, which holds a copy of that
    student's code.  `folder` must let the slots' uids pass (0711)."""
    global _PARENT

    _PARENT = folder


def remove_live() -> None:
    """Remove every scratch folder this process still holds.  For a grader stopped (SIGTERM) wherever it was: the
    interruption can land between a child's scratch being made and the code that would close it, and each folder
    holds a copy of a student's submission."""
    for root in list(_LIVE):
        remove_tree(root)
        _LIVE.discard(root)
        stale.let_go(root)


def sweep_stale() -> str:
    """Unmount (lazily: a process may still have it open) and remove every folder of ours in the temp dir whose
    maker has ended without removing it (`harness.sandbox.stale`: a grader or single run killed outright); never a
    live grader's.  What was swept, in one line ("" for nothing)."""
    swept, mounts, left, mounted = [], 0, [], []
    for path, lock in stale.orphans(tempfile.gettempdir()):
        try:
            before = len(tmpfs_below(path))
            unmount_below(path)
            still = len(tmpfs_below(path))
            mounts += before - still
            if still:  # unmounting needs CAP_SYS_ADMIN (a container, an ordinary user): the folder stays whole, its
                mounted.append(path)  # owner lock too, for a sweep that can (without the lock none ever would)
                continue
            remove_tree(path)
            (left if os.path.lexists(path) else swept).append(path)
        finally:
            os.close(lock)
    if not swept and not left and not mounted:
        return ""
    named = ", ".join(swept[:3]) + (f" and {len(swept) - 3} more" if len(swept) > 3 else "")
    return (f"mha-check: removed {len(swept)} folder{'s' * (len(swept) != 1)} of earlier runs that were killed before "
            f"they could clean up (earlier mha-check runs of this user, uid {os.getuid()}, whose process is gone, in "
            f"{tempfile.gettempdir()}: never a run still going)" +
            (f" ({mounts} tmpfs unmounted)" if mounts else "") +
            (f": {named}" if swept else "") + (f"; could not remove {', '.join(left)}" if left else "") +
            (f"; left {', '.join(mounted)} as they are: a tmpfs is mounted in each, which only a process with "
             "CAP_SYS_ADMIN may unmount (the next mha-check run as root with it sweeps them; or `umount` them)"
             if mounted else ""))


class ScratchFull(Exception):
    """A child wrote more in its (unbounded) scratch folder than its budget allows."""


class NoRoom(RuntimeError):
    """The grading machine's disk had no room for the copy of a submission (ENOSPC, EDQUOT): never the student's
    doing (another submission may have filled it), so never a copy cut short that would read as their missing code."""


def usage(path: str, stop_at: int, closed: list[str] | None = None) -> tuple[int, int]:
    """(bytes on disk, files and folders) below `path`, never following a symlink; counting stops past `stop_at`
    entries (a folder of a million files is over any budget long before it is all counted).  Blocks, not sizes: a
    sparse file of a terabyte takes no disk.  Folders we may not list are added to `closed`: an ordinary user's
    grader shares the child's uid and has no CAP_DAC_OVERRIDE, and a folder of mode 0300 held 300 MB unseen (red
    team 6); and so are folders and files deeper than a path may name (ENAMETOOLONG: red team 17 wrote 300 MB under
    a folder chain 6,300 bytes deep, which a walk by path skipped), and entries whose size we may not read (a folder
    of mode 0600, listed but not searched).  Only what was removed meanwhile is nothing."""
    size, entries, todo = 0, 0, [path]
    while todo and entries <= stop_at:
        folder = todo.pop()
        try:
            with os.scandir(folder) as found:
                for entry in found:
                    entries += 1
                    try:
                        size += entry.stat(follow_symlinks=False).st_blocks * 512
                        if entry.is_dir(follow_symlinks=False):
                            todo.append(entry.path)
                    except FileNotFoundError:  # removed meanwhile
                        continue
                    except OSError:  # cannot be measured: over the budget, never nothing
                        if closed is not None:
                            closed.append(folder)
                        break
        except FileNotFoundError:  # removed meanwhile
            continue
        except OSError as e:
            if closed is not None and (isinstance(e, PermissionError) or e.errno == errno.ENAMETOOLONG):
                closed.append(folder)
    return size, entries


def held_unlinked(pids: list[int], dev: int, owner: tuple[int, int] | None = None) -> tuple[int, list[int]]:
    """(bytes on the filesystem `dev` held by files that `pids` keep open or mapped after deleting them (no name
    left: st_nlink 0), each file counted once; the pids whose open files could not be looked into).  Why: a walk of
    the scratch finds only named files, and a child that writes a file, deletes it and keeps it open holds the disk
    all the same (1.6 GB against a 64 MB budget, found by an attacker's trial); a file mapped and then closed is held
    by the mapping alone.  A mapping's file is measured through /proc/PID/map_files when we may open it (root with
    CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE), else by the length mapped (/proc/PID/maps: a lower bound).
    `owner`: the slot's (uid, gid), whose processes root looks into as that uid (`reading_as`: root without
    CAP_SYS_PTRACE, a Docker container's, may not otherwise).  A process that hides its files all the same (it made
    itself non-dumpable, or exec'd a program it may not read: red team 6) is named, never counted as holding
    nothing."""
    seen: dict[tuple[int, int], int] = {}
    hidden: list[int] = []
    with linux.reading_as(*owner) if owner else contextlib.nullcontext():
        for pid in pids:
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except PermissionError:
                if not linux.exited(pid):  # a zombie's files are closed, and its /proc/PID/fd is closed to us
                    hidden.append(pid)
                continue
            except OSError:  # gone meanwhile
                continue
            for fd in fds:
                try:
                    st = os.stat(f"/proc/{pid}/fd/{fd}")  # the open file itself, named or not
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode) and st.st_nlink == 0 and st.st_dev == dev:
                    seen[(st.st_dev, st.st_ino)] = st.st_blocks * 512
            for span, inode, mapped in _deleted_mappings(pid, dev):
                if (dev, inode) in seen:
                    continue
                try:
                    st = os.stat(f"/proc/{pid}/map_files/{span}")
                    size = st.st_blocks * 512 if st.st_nlink == 0 else 0
                except OSError:
                    size = mapped
                seen[(dev, inode)] = max(size, seen.get((dev, inode), 0))
    return sum(seen.values()), hidden


def _deleted_mappings(pid: int, dev: int) -> list[tuple[str, int, int]]:
    """(address span, inode, bytes mapped) of each mapping of `pid` whose file on `dev` was deleted."""
    want = f"{os.major(dev):02x}:{os.minor(dev):02x}"
    found = []
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.rstrip().endswith("(deleted)"):
                    continue
                fields = line.split(None, 5)
                if len(fields) < 6 or fields[3] != want:
                    continue
                start, end = (int(x, 16) for x in fields[0].split("-"))
                found.append((fields[0], int(fields[4]), end - start))
    except (OSError, ValueError):
        return []
    return found


@dataclass
class Scratch:
    """A child's private folder: `path` (its working directory and home), inside `root` (removed with it);
    `bounded`: how its size is held, when a tmpfs of its own holds it ("" when it is a folder of the shared disk)."""
    root: str
    path: str
    copied: int = 0
    skipped: list[str] = field(default_factory=list)
    bounded: str = ""
    budget: tuple[int, int] | None = None  # (bytes, entries) an unbounded scratch may hold: measured, not mounted

    @classmethod
    def empty(cls, slot: int, room_bytes: int | None = None, room_files: int | None = None) -> "Scratch":
        """A fresh scratch; with `room_bytes` and `room_files`, a tmpfs of that size and that many inodes on top of
        the largest copy of a submission, where this process may mount one."""
        root = tempfile.mkdtemp(prefix=stale.PREFIX, dir=_PARENT)
        _LIVE.add(root)
        bounded = ""
        try:
            stale.hold(root)  # before anything is mounted or copied: a sweep knows it for ours, and alive
            os.chmod(root, 0o711)  # the slot's uid may pass through, not list
            path = os.path.join(root, "scratch")
            os.mkdir(path, 0o700)
            if os.geteuid() == 0:
                if room_bytes is not None and room_files is not None:
                    bounded = _mount_bounded(path, MAX_BYTES + room_bytes, MAX_FILES + room_files, identity(slot))
                os.chown(path, *identity(slot))
        except BaseException:
            remove_tree(root)
            _LIVE.discard(root)
            stale.let_go(root)
            raise
        return cls(root, path, bounded=bounded)

    @classmethod
    def with_copy(cls, slot: int, submission: str | None, file_limit: int, room_bytes: int | None = None,
                  room_files: int | None = None, left_out: tuple[str, ...] = ()) -> "Scratch":
        """A scratch holding a copy of the folder `submission` (nothing when None); `room_*`: see `empty`.
        `left_out`: what was left out of `submission` before (a batch's staged copy of a student's folder, see
        harness.frontends.submissions), listed first among what this copy leaves out."""
        room = cls.empty(slot, room_bytes, room_files)
        try:
            room.skipped = list(left_out)
            if submission is not None:
                room.copied, skipped = copy_submission(submission, room.path, identity(slot), file_limit)
                room.skipped += skipped
            if not room.bounded and room_bytes is not None and room_files is not None:
                size, entries = usage(room.path, MAX_FILES)
                room.budget = (size + room_bytes, entries + room_files)
        except BaseException:
            room.remove()
            raise
        return room

    def overflow(self, pids: list[int] = (), owner: tuple[int, int] | None = None) -> str | None:
        """What the child wrote past its budget in an unbounded scratch ("300 MB", "20000 files"), or None.
        `pids`: the child's processes, whose files deleted while held open (or mapped) on the scratch's filesystem
        count too: a walk of the folder never sees them, and they hold the disk as long as the child lives.
        `owner`: their (uid, gid) when it is a slot's (`held_unlinked`).  What cannot be measured (a folder closed
        to us, a process that hides its files) is over the budget: it is never counted as nothing."""
        if self.budget is None:
            return None
        closed: list[str] = []
        size, entries = usage(self.path, self.budget[1], closed)
        if entries > self.budget[1]:
            return f"more than {self.budget[1]} files and folders"
        if size > self.budget[0]:
            return f"{size >> 20} MB, more than {self.budget[0] >> 20} MB"
        if closed:
            where = os.path.relpath(closed[0], self.path)
            where = where if len(where) <= 80 else f"{where[:60]}... ({len(where)} characters)"
            return (f"a folder closed to mha-check's measure ({where}: it may not be listed, or lies deeper than a "
                    "path may name), so what it holds cannot be counted against the budget")
        try:
            hidden, unseen = held_unlinked(pids, os.stat(self.path).st_dev, owner) if pids else (0, [])
        except OSError:
            hidden, unseen = 0, []
        if unseen:
            return (f"files mha-check cannot measure: process {unseen[0]} of your code hides what it holds open (it "
                    "made itself non-dumpable, or ran a program it may not read)")
        if size + hidden > self.budget[0]:
            return (f"{(size + hidden) >> 20} MB ({hidden >> 20} MB of it in files it deleted but kept open), more "
                    f"than {self.budget[0] >> 20} MB")
        return None

    @property
    def compiled(self) -> list[str]:
        """The submission's files left out as compiled code (`compiled_name`, `compiled_data`), by their path in it."""
        return compiled_left_out(self.skipped)

    def describe(self) -> dict:
        return {"scratch": self.path, "copied_files": self.copied, "not_copied": self.skipped[:20],
                "bounded": self.bounded or "no: a folder of the shared disk (files up to the file-size limit)"}

    def remove(self) -> None:
        """Gone, or tried again for up to 2 s: the processes of a child killed in a PID namespace die after its
        first process, and one still inside a write can make a file after the tree was walked (a disk filler's
        scratch outlived its run once, on a loaded machine)."""
        for pause in REMOVE_PAUSES:
            time.sleep(pause)
            remove_tree(self.root)
            if not os.path.lexists(self.root):
                break
        _LIVE.discard(self.root)
        stale.let_go(self.root)  # one not removed after all is the next start's to sweep


REMOVE_PAUSES = (0.0, 0.05, 0.2, 0.5, 1.2)  # seconds before each try of Scratch.remove


def _mount_bounded(path: str, size: int, inodes: int, owner: tuple[int, int]) -> str:
    """Mount a tmpfs of `size` bytes and `inodes` inodes on `path` (0700, owned by `owner`); what it is, or "" where
    this process may not mount (a container without CAP_SYS_ADMIN): the folder then stays on the shared disk."""
    try:
        linux.mount("tmpfs", path, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV,
                    f"size={size},nr_inodes={inodes},mode=0700,uid={owner[0]},gid={owner[1]}")
    except OSError:
        return ""
    return f"tmpfs of its own: {size >> 20} MB, {inodes} files and folders (the copy included)"


def unmount_below(path: str) -> None:
    """Detach every tmpfs mounted at or below `path` (a scratch's, also one a grader killed outright left behind),
    deepest first, so that removing the folder removes it all.  Only root mounts scratches."""
    if os.geteuid() != 0:
        return
    for point in tmpfs_below(path):
        try:
            linux.umount2(point, linux.MNT_DETACH)
        except OSError:
            pass


def tmpfs_below(path: str) -> list[str]:
    """The tmpfs mounted at or below `path`, deepest first."""
    top = os.path.realpath(path).rstrip("/") + "/"
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            points = [line.split()[4].replace("\\040", " ") for line in f if " - tmpfs " in line]
    except OSError:
        return []
    return sorted((p for p in points if (p + "/").startswith(top)), key=len, reverse=True)


def give(path: str, uid: int, gid: int) -> None:
    """Hand the folder `path` and everything in it (our own fresh copy) to uid:gid."""
    for folder, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            os.lchown(os.path.join(folder, name), uid, gid)
    os.chown(path, uid, gid)


def read_regular(path: str, limit: int) -> bytes | None:
    """The bytes of `path` if it is a regular file (not a symlink, FIFO or device) of at most `limit` bytes."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        fd = os.open(path, _READ)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return _read_at_most(fd, limit)
    finally:
        os.close(fd)


def _read_at_most(fd: int, limit: int) -> bytes | None:
    chunks, size = [], 0
    while True:
        chunk = os.read(fd, min(1 << 20, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return None


def compiled_name(name: str) -> bool:
    """A name Python imports compiled code under (bytecode, an extension module), in any case."""
    return name.lower().endswith(COMPILED_SUFFIXES)


def compiled_data(data: bytes) -> bool:
    """Bytes that are compiled code whatever the file's name: a native library or executable (ELF), or bytecode of
    this very Python (its magic number), which a loader of the submission's own could run."""
    return data.startswith(COMPILED_MAGIC)


def compiled_left_out(skipped: list[str] | tuple[str, ...]) -> list[str]:
    """The paths among a copy's `skipped` entries that were left out as compiled code."""
    mark = f" ({COMPILED})"
    return [entry[:-len(mark)] for entry in skipped if entry.endswith(mark)]


NAMED = 5  # compiled files a note names; the rest are counted


def compiled_note(paths: list[str]) -> str:
    """The report's sentence for compiled files left out of a submission (`Scratch.compiled`): which ones, why,
    and what to hand in instead.  Names are shown printable and short (a file name is the student's to choose)."""
    shown = ["".join(c if c.isprintable() else "?" for c in p)[:80] for p in paths[:NAMED]]
    more = f" and {len(paths) - NAMED} more" if len(paths) > NAMED else ""
    return (f"not graded: {', '.join(shown)}{more}, compiled code with no source a person can read (mha-check never "
            "copies or runs bytecode or native modules): hand in the source (.py) instead")


def copy_submission(source: str, dest: str, owner: tuple[int, int] | None, file_limit: int,
                    follow: bool = True) -> tuple[int, list[str]]:
    """Copy the folder `source` into `dest` (owned by `owner` when we are root; None: by us): regular files and
    folders, symlinks as links (never followed: the child resolves them in its own view); no hidden entries,
    caches or virtual environments; no compiled code (by name or by content: a person must be able to read what
    runs); at most MAX_FILES entries, MAX_BYTES in all, MAX_DEPTH deep, `file_limit` per file.  Returns (files
    copied, what was left out and why).

    Every folder below `source` is opened relative to the one it was listed in, never through a link (O_NOFOLLOW
    at each step), and every file relative to its folder: the student may write `source` while we copy it (a
    shared hand-in folder), and a sub-folder listed as a folder then swapped for a link (renameat2
    RENAME_EXCHANGE, in a loop) was listed again and read by its path as root, through the link (red team 18: an
    instructor's 0600 file in a 0700 folder was copied into the student's scratch, and its code printed it into
    its report).  `follow=False`: `source` itself is not followed either, where its last name is the student's to
    change (a folder in an export that students write, a sticky hand-in folder)."""
    chown = owner is not None and os.geteuid() == 0
    copied, skipped, total = 0, [], 0
    try:
        root = os.open(source, _FOLDER if not follow else _FOLDER & ~os.O_NOFOLLOW)  # follow: a link the operator
    except OSError as e:  # typed is theirs to follow, as before; below it, no link is followed
        return 0, [f"./ ({'a link, not a folder' if e.errno == errno.ELOOP else e.strerror})"]
    try:
        todo = [("", 0)]
        while todo:
            rel, depth = todo.pop()
            try:
                folder = _open_below(root, rel)
            except OSError as e:
                skipped.append(f"{rel or '.'}/ ({'a link, not a folder' if e.errno == errno.ELOOP else e.strerror})")
                continue
            try:
                with os.scandir(folder) as listing:
                    entries = sorted(listing, key=lambda e: e.name)
                done = _copy_entries(folder, entries, rel, depth, dest, owner if chown else None, file_limit, todo,
                                     skipped, (copied, total))
            except OSError as e:
                skipped.append(f"{rel or '.'}/ ({e.strerror})")
                continue
            finally:
                os.close(folder)
            copied, total, full = done
            if full:
                return copied, skipped
    finally:
        os.close(root)
    return copied, skipped


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_below(root: int, rel: str) -> int:
    """The folder `rel` below the open folder `root`, opened one name at a time, none of them a link (ELOOP)."""
    fd = os.dup(root)
    try:
        for part in (p for p in rel.split(os.sep) if p):
            below = os.open(part, _FOLDER, dir_fd=fd)
            os.close(fd)
            fd = below
    except BaseException:
        os.close(fd)
        raise
    return fd


def _copy_entries(folder: int, entries: list, rel: str, depth: int, dest: str, owner: tuple[int, int] | None,
                  file_limit: int, todo: list, skipped: list, counts: tuple[int, int]) -> tuple[int, int, bool]:
    """Copy one listed folder's entries (`folder` open on it); sub-folders are queued on `todo`.  Returns (files
    copied, bytes copied, whether the entry budget ran out)."""
    copied, total = counts
    for entry in entries:
        name = os.path.join(rel, entry.name)
        target = os.path.join(dest, name)
        if entry.name.startswith(".") or entry.name == BYTECODE_CACHE:  # a cache, as a folder or a link: what
            continue  # Python would run in place of the source (an unchecked-hash .pyc is never compared with it)
        if copied + len(skipped) >= MAX_FILES:
            skipped.append(f"{name} (more than {MAX_FILES} entries)")
            return copied, total, True
        try:
            if not entry.is_dir(follow_symlinks=False) and compiled_name(entry.name):  # a link so named too
                skipped.append(f"{name} ({COMPILED})")
            elif entry.is_symlink():
                os.symlink(os.readlink(entry.name, dir_fd=folder), target)
                if owner is not None:
                    os.lchown(target, *owner)
            elif entry.is_dir(follow_symlinks=False):
                if entry.name in SKIPPED_DIRS or _is_venv_in(folder, entry.name):
                    continue
                if depth + 1 > MAX_DEPTH:  # said, as every other entry left out is (red team 17: a file below a
                    skipped.append(f"{name}/ (deeper than {MAX_DEPTH} folders)")  # deep chain vanished unsaid)
                    continue
                os.mkdir(target, 0o755)
                if owner is not None:
                    os.chown(target, *owner)
                todo.append((name, depth + 1))
            elif entry.is_file(follow_symlinks=False):
                limit = min(file_limit, MAX_BYTES - total)
                data = _read_file(entry.name, limit, folder)
                if data is None:
                    skipped.append(f"{name} (larger than {limit} bytes)")
                elif compiled_data(data):
                    skipped.append(f"{name} ({COMPILED})")
                else:
                    _write_file(target, data, owner)
                    copied, total = copied + 1, total + len(data)
            else:
                skipped.append(f"{name} (not a regular file)")
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise NoRoom(f"no room left on the grading machine's disk for a copy of this submission "
                             f"({e.strerror}): not the student's doing; grade it again") from None
            skipped.append(f"{name} ({e.strerror})")
    return copied, total, False


def _is_venv_in(folder: int, name: str) -> bool:
    try:
        os.lstat(os.path.join(name, "pyvenv.cfg"), dir_fd=folder)
    except OSError:
        return False
    return True


def _read_file(name: str, limit: int, folder: int) -> bytes | None:
    """The bytes of the regular file `name` in the open `folder` (never a link, FIFO or device), None past `limit`."""
    fd = os.open(name, _READ, dir_fd=folder)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file")
        return _read_at_most(fd, limit)
    finally:
        os.close(fd)


def _write_file(target: str, data: bytes, owner: tuple[int, int] | None) -> None:
    out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(out, view):]
        if owner is not None:
            os.fchown(out, *owner)
    finally:
        os.close(out)


def remove_tree(path: str) -> None:
    """Remove `path` and everything below it, whatever a child made of it: iterative (any depth, no recursion),
    relative to open folders (no path-length limit), never following a symlink, opening closed folders (0000)
    first; a tmpfs mounted below it (a bounded scratch) is detached first.  Never raises for what it cannot
    remove."""
    unmount_below(path)
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
            return
        os.chmod(path, 0o700)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    names: list[str] = []  # the path from `path` down to the folder `fd` is open on
    try:
        while True:
            sub = _empty_folder(fd)
            if sub is not None:  # descend into the first sub-folder
                try:
                    child = _enter(sub, fd)
                except OSError:
                    return
                os.close(fd)
                fd, names = child, names + [sub]
                continue
            if not names:
                break
            parent = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = parent
            try:
                os.rmdir(names.pop(), dir_fd=fd)
            except OSError:
                return
    finally:
        os.close(fd)
    try:
        os.rmdir(path)
    except OSError:
        pass


def _enter(name: str, parent: int) -> int:
    """The sub-folder `name` of the open folder `parent`, opened and made 0700 (a child may leave it closed, 0000 or
    0500); never through a link.  A process of the child's may still live while its scratch is removed (a PID
    namespace dies after its first process; a grader killed outright leaves its children's scratch to the next
    start's sweep), and a folder it swapped for a link between the listing and a chmod by name made root change the
    link's target: red team 18 closed a host folder to 0700 so.  The mode is changed on the folder opened itself
    (O_NOFOLLOW; by a descriptor, or an O_PATH one where the folder is closed to us), never on what a name leads to."""
    try:
        fd = os.open(name, _FOLDER, dir_fd=parent)
    except PermissionError:  # closed to us (an ordinary user's grader, the child's own uid): open it by its handle
        handle = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
        try:
            os.chmod(f"/proc/self/fd/{handle}", 0o700)  # the folder the handle holds, a link never (O_NOFOLLOW)
            return os.open(f"/proc/self/fd/{handle}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        finally:
            os.close(handle)
    try:
        os.fchmod(fd, 0o700)  # 0500: its entries could not be unlinked
    except BaseException:
        os.close(fd)
        raise
    return fd


def _empty_folder(fd: int) -> str | None:
    """Unlink every non-folder entry of the folder `fd`; return the name of a sub-folder if one is left."""
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                return entry.name
            try:
                os.unlink(entry.name, dir_fd=fd)
            except OSError:
                pass
    return None


def processes_of(uid: int, zombies: bool = False) -> list[int]:
    """Pids whose real uid is `uid` (read from status: /proc/PID of a non-dumpable process belongs to root);
    zombies (dead, waiting to be reaped) only when asked."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status") as f:
                    fields = dict(line.split(":", 1) for line in f if line.startswith(("State:", "Uid:")))
            except (OSError, ValueError):
                continue
            if int(fields["Uid"].split()[0]) == uid and (zombies or not fields["State"].strip().startswith("Z")):
                found.append(int(entry))
    return found


def kill_leftovers(uid: int, seconds: float = 2.0, keep: tuple[int, ...] = ()) -> list[int]:
    """SIGKILL every process of `uid` but `keep` until none is left or `seconds` pass; returns the pids seen.
    Only for a slot's own uid: never the grader's (an ordinary user's children share it).  Without `keep`, as root,
    the kill is isolate's (`kill_as`): from a process of that uid, so that a pid reused by someone else's process
    between reading /proc and the kill is never hit, and a process forking as fast as it can is not outrun."""
    if not keep and os.geteuid() == 0 and uid != 0:
        seen = processes_of(uid)
        kill_as(uid, seconds)
        return sorted(set(seen))
    seen: list[int] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pids = [p for p in processes_of(uid) if p not in keep]
        if not pids:
            break
        for pid in pids:
            seen.append(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)
    return sorted(set(seen))


def kill_as(uid: int, seconds: float = 2.0) -> bool:
    """isolate's clean-up: a forked process becomes `uid` and sends SIGKILL to every process it may signal
    (kill(-1): all of that uid but itself, in one pass of the kernel over the process list), again until none is
    left (ESRCH) and /proc shows none alive.  True when none is left within `seconds`."""
    end = time.monotonic() + seconds
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            while time.monotonic() < end:
                try:
                    os.kill(-1, signal.SIGKILL)
                except ProcessLookupError:  # nothing of this uid left to signal
                    os._exit(0)
                if not [p for p in processes_of(uid) if p != os.getpid()]:  # zombies only (signalled, not reaped)
                    os._exit(0)
                time.sleep(0.005)
            os._exit(1)
        except BaseException:  # noqa: BLE001 - never return into the grader from the fork
            os._exit(2)
    raw = _wait_killer(pid, end + 1.0)
    if raw is None:  # stopped or killed by what it was killing, or stuck: root kills them one by one instead
        _kill_each(uid, end + seconds)
    while time.monotonic() < end and processes_of(uid):  # signalled: gone once the kernel has torn them down
        time.sleep(0.005)
    return (raw is None or os.WIFEXITED(raw) and os.WEXITSTATUS(raw) == 0) and not processes_of(uid)


def _wait_killer(pid: int, until: float) -> int | None:
    """The killer's exit status, or None (it reaped) where it did not end by itself by `until`, or was stopped or
    killed.  Once it is the slot's uid, the slot's processes may signal it: without a PID namespace and without
    Landlock's signal scoping (kernels before 6.12), a leftover spinning on kill(-1, SIGSTOP) stopped it, and the
    grader's wait for it never ended (red team 18: 2 clean-ups in 9 with eight such spinners)."""
    while True:
        done, raw = os.waitpid(pid, os.WNOHANG | os.WUNTRACED)
        if done and not os.WIFSTOPPED(raw):
            return raw if os.WIFEXITED(raw) else None
        if done or time.monotonic() > until:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.002)


def _kill_each(uid: int, until: float) -> None:
    """Root's own kill of every process of `uid` by its pid (a stopped process dies of SIGKILL too), until none is
    left or `until`: the fallback where the killer of `kill_as` could not finish."""
    while time.monotonic() < until:
        pids = processes_of(uid, zombies=False)
        if not pids:
            return
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        time.sleep(0.005)
