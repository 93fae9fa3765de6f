"""A hostile child: `hostile_child.py WALL` reads a JSON context line on stdin (paths and pids of the outside world),
attacks one wall, and prints one JSON line: {"wall", "held", "evidence"}.  "held" is judged from INSIDE; the tests
also check from outside that nothing changed.  Standard library only (it also runs under /usr/bin/python3, which
the slot's uid can read when there is no mount namespace)."""
import ctypes
import errno
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading


def _try(action) -> str | None:
    """None if `action` succeeded (the wall failed), else the error."""
    try:
        action()
        return None
    except (OSError, ValueError, MemoryError) as e:
        return f"{type(e).__name__}: {e}"


def _append(path, text="\n# planted\n"):
    with open(path, "a") as f:
        f.write(text)


def _create(path, text="import os\n"):
    with open(path, "x") as f:
        f.write(text)


def _read(path):
    with open(path) as f:
        return f.read()


def _pids():
    """The pids in /proc ([] where the child may not list it: Landlock without a PID namespace)."""
    try:
        return sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    except OSError:
        return []


def wall_tool_package(ctx):
    """mha-check's own package: read-only, not absent (the child imports its worker from it)."""
    visible = _try(lambda: _read(ctx["tool_module"])) is None
    errors = [_try(lambda: _append(ctx["tool_module"])), _try(lambda: _create(ctx["tool_dir"] + "/evil.py"))]
    return visible and all(errors), {"visible": visible, "errors": errors}


def wall_ours_by_path(ctx):
    """A correct layer of mha-check's own, read by the path of its file (to load and subclass it): the reference,
    a mutant, a correct layer of the zoo; and the trusted parts of harness, which the worker never imports."""
    errors = [_try(lambda path=path: _read(path)) for path in ctx["ours"]]
    return all(errors), dict(zip(ctx["ours"], errors))


def wall_checkout_tree(ctx):
    """The checkout mha-check runs from (an editable install, a clone) holds more than our worker: its tests, the
    reference, and whatever the instructor keeps beside them (an export, a results folder).  Its names are not the
    child's to list: red team 8 listed every folder below the checkout's root, a Landlock rule to list the root
    covering them all.  The root shows at most harness/ (and
    what a view binds there: a venv inside the checkout)."""
    errors = [_try(lambda path=path: os.listdir(path)) for path in ctx["checkout_folders"]]
    try:
        shown = sorted(set(os.listdir(ctx["checkout"])) - {"harness", *ctx["checkout_bound"]})
    except OSError:
        shown = []
    return all(errors) and not shown, {"errors": errors, "root_shows": shown[:10]}


def wall_site_packages(ctx):
    visible = _try(lambda: os.listdir(ctx["site_packages"])) is None
    errors = [_try(lambda: _create(os.path.join(ctx["site_packages"], "zz_iso_planted.pth"), "import os\n")),
              _try(lambda: _append(os.path.join(ctx["site_packages"], ctx["site_module"])))]
    return visible and all(errors), {"visible": visible, "errors": errors}


def wall_classmate(ctx):
    errors = [_try(lambda: os.listdir(ctx["classmate_dir"])),
              _try(lambda: _read(ctx["classmate_dir"] + "/submission.py")),
              _try(lambda: _append(ctx["classmate_dir"] + "/submission.py", "\nraise SystemExit\n")),
              _try(lambda: _create(ctx["classmate_dir"] + "/planted.py"))]
    return all(errors), errors


def wall_output_folder(ctx):
    errors = [_try(lambda: _create(ctx["output_dir"] + "/report-forged.json", '{"score": 100}')),
              _try(lambda: _append(ctx["output_dir"] + "/report.json", '{"score": 100}')),
              _try(lambda: os.rename(ctx["output_dir"] + "/report.json", ctx["output_dir"] + "/gone.json"))]
    return all(errors), errors


def wall_host_files(ctx):
    """/root may only show the folders leading to a read-only bind (this machine's Python lives in /root/.pyenv)."""
    try:
        leaked = sorted(set(os.listdir("/root")) - set(ctx["root_allowed"]))
    except OSError:
        leaked = []
    errors = [_try(lambda: _read("/etc/shadow")), _try(lambda: _read(ctx["host_secret"])),
              _try(lambda: os.listdir("/home"))]
    return all(errors) and not leaked, {"errors": errors, "leaked_from_root": leaked}


def wall_proc_parent(ctx):
    pids = _pids()
    cmdlines = []
    for pid in {*pids, ctx["parent_pid"], ctx["spawner_pid"]}:  # by number too, where /proc cannot be listed
        try:
            cmdlines.append(_read(f"/proc/{pid}/cmdline").replace("\0", " "))
        except OSError:
            pass
    seen = [c for c in cmdlines if ctx["parent_marker"] in c]
    held = ctx["parent_pid"] not in pids and ctx["spawner_pid"] not in pids and not seen and len(pids) <= 6 \
        and _try(lambda: _read(f"/proc/{ctx['parent_pid']}/status")) is not None
    return held, {"pids": pids[:20], "parent_cmdline_seen": bool(seen)}


def wall_proc_mem(ctx):
    me = os.getpid()
    targets = ({ctx["parent_pid"], ctx["spawner_pid"], ctx["sentinel_pid"]} | set(_pids())) - {me}
    opened = []
    for pid in sorted(targets):
        if os.path.exists(f"/proc/{pid}") and _try(lambda: open(f"/proc/{pid}/mem", "r+b").close()) is None:
            opened.append(pid)
    return not opened, {"opened_mem_of": opened, **({"me": me, "sentinel": ctx["sentinel_pid"]} if opened else {})}


def wall_rlimits(ctx):
    problems = []
    for name, value in ctx["limits"].items():
        which = getattr(resource, name)
        soft, hard = resource.getrlimit(which)
        if soft != value or hard != value:
            problems.append(f"{name} is {soft}/{hard}, expected {value}")
        higher = resource.RLIM_INFINITY if value == 0 else value * 2
        if _try(lambda: resource.setrlimit(which, (higher, higher))) is None:
            problems.append(f"raised {name}")
        elif _try(lambda: resource.setrlimit(which, (hard, resource.RLIM_INFINITY))) is None:
            problems.append(f"raised hard {name}")
    return not problems, problems


def _status():
    with open("/proc/self/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def wall_capabilities(ctx):
    status = _status()
    caps = {k: status[k] for k in ("CapInh", "CapPrm", "CapEff", "CapAmb", "CapBnd")}
    errors = [_try(lambda: os.chown(".", 0, 0)),
              _try(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close())]
    held = all(int(caps[k], 16) == 0 for k in ("CapInh", "CapPrm", "CapEff", "CapAmb")) and all(errors)
    return held, {"caps": caps, "errors": errors}


def wall_no_new_privs(ctx):
    status = _status()
    return status["NoNewPrivs"].strip() == "1", {"NoNewPrivs": status["NoNewPrivs"], "Seccomp": status["Seccomp"]}


def wall_identity(ctx):
    ids = {"uid": os.getresuid(), "gid": os.getresgid(), "groups": os.getgroups()}
    held = (set(ids["uid"]) == {ctx["expected_uid"]} and set(ids["gid"]) == {ctx["expected_gid"]}
            and 0 not in ids["uid"] and 0 not in ids["gid"] and 0 not in ids["groups"])
    return held, ids


def wall_network(ctx):
    """The grader's localhost port, and the host's network: either a network namespace of its own (only `lo`) or no
    socket at all (seccomp refuses socket(): no UDP, no unix socket, no list of the interfaces either)."""
    try:
        names = sorted(name for _, name in socket.if_nameindex())
    except OSError as e:
        names = f"refused: {e}"

    def connect():
        with socket.create_connection(("127.0.0.1", ctx["host_port"]), timeout=2):
            pass
    error = _try(connect)
    udp = _try(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close())
    walled = names == ["lo"] or (str(names).startswith("refused") and udp is not None)
    return walled and error is not None, {"interfaces": names, "connect": error, "udp": udp}


def wall_signals(ctx):
    others = [p for p in (ctx["parent_pid"], ctx["spawner_pid"]) if p != os.getpid()]  # without namespaces the
    errors = [_try(lambda: os.kill(p, 0)) for p in others]  # spawner may be this very process (exec)
    errors.append(_try(lambda: os.kill(ctx["sentinel_pid"], signal.SIGKILL)))
    _try(lambda: os.kill(-1, signal.SIGKILL))  # everything we may signal, except ourselves; checked from outside
    return all(errors), errors


def wall_fork_bomb(ctx):
    limit = ctx["limits"]["RLIMIT_NPROC"]
    read, write = os.pipe()
    children, stopped = [], None
    for _ in range(limit * 3):
        try:
            pid = os.fork()
        except OSError as e:
            stopped = e.errno
            break
        if pid == 0:
            os.close(write)
            os.read(read, 1)  # wait until the parent is done counting
            os._exit(0)
        children.append(pid)
    os.close(write)
    for pid in children:
        os.waitpid(pid, 0)
    return stopped == errno.EAGAIN and len(children) < limit, {"forked": len(children), "stopped": stopped}


def wall_user_namespace(ctx):
    libc = ctypes.CDLL(None, use_errno=True)
    results = {}
    for name, flag in (("user", 0x10000000), ("mount", 0x00020000), ("net", 0x40000000)):
        results[name] = libc.unshare(flag) == 0 or ctypes.get_errno()
    return not any(v is True for v in results.values()), results


def wall_new_session(ctx):
    """A new session is a new scheduler autogroup: spinners each in their own would outweigh a classmate's check."""
    try:
        os.setsid()
    except OSError as e:
        return True, f"setsid refused: {e}"
    return False, "setsid worked: a session of its own, an autogroup of its own"


def wall_memfd(ctx):
    """Memory written into a memfd is shared memory counted against no process's limit (a red team held 3.8 GB past
    a 1 GB --memory-mb this way)."""
    try:
        fd = os.memfd_create("hoard")
    except OSError as e:
        return True, f"memfd_create refused: {e}"
    os.close(fd)
    return False, "memfd_create worked: memory beyond the limit can be held"


def wall_memfd_secret(ctx):
    """memfd_secret's pages count against RLIMIT_MEMLOCK only while mapped: map, write, unmap, keep the fd, and a red
    team held 2.4 GB past every limit from one process (issue 27, rt3)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(447, 0)  # memfd_secret (x86_64 and aarch64)
    if fd < 0:
        return True, f"memfd_secret refused: {os.strerror(ctypes.get_errno())}"
    os.close(fd)
    return False, "memfd_secret worked: unevictable memory no limit counts"


def wall_fallocate(ctx):
    """fallocate(fd, FALLOC_FL_KEEP_SIZE, ...) reserves disk blocks without growing the file, past RLIMIT_FSIZE: on
    the child's own output file (the grader's disk, outside the bounded scratch) a red team filled the disk and cost
    five classmates their grades (issue 27, rt3).  Tried on a file of the scratch, 1 MB."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    path = "reserved"  # in the working directory, the scratch
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        if libc.fallocate(fd, 1, 0, 1 << 20) != 0:  # FALLOC_FL_KEEP_SIZE
            return True, f"fallocate refused: {os.strerror(ctypes.get_errno())}"
        return False, "fallocate worked: disk blocks reserved past the file-size limit"
    finally:
        os.close(fd)
        os.unlink(path)


def wall_sysv_ipc(ctx):
    """A System V shared memory segment outlives its process and counts against no process's memory limit: without
    an IPC namespace a red team left 5 GB of them behind after the grader had exited."""
    libc = ctypes.CDLL(None, use_errno=True)
    ipc_private, ipc_creat = 0, 0o1000
    shmid = libc.shmget(ipc_private, 1 << 20, ipc_creat | 0o600)
    if shmid < 0:
        return True, f"shmget refused: {os.strerror(ctypes.get_errno())}"
    libc.shmctl(shmid, 0, None)  # IPC_RMID: leave nothing behind even when the wall is missing
    return False, "shmget worked: memory can outlive the child"


def wall_socketpair(ctx):
    """A descriptor sent into a socket pair and closed is in no /proc/PID/fd: a deleted file held there escaped the
    scratch's count (red team 7: 1.8 GB past a 64 MB budget), and a pair's buffers hold memory no limit counts."""
    try:
        a, b = socket.socketpair()
    except OSError as e:
        return True, f"socketpair refused: {e}"
    a.close()
    b.close()
    return False, "socketpair worked: descriptors and memory can be parked where no count sees them"


def wall_posix_mq(ctx):
    """A POSIX message queue outlives its creator without an IPC namespace (red team 7 left 256, and every ordinary
    user's mq_open on the machine then failed); refused by seccomp, and RLIMIT_MSGQUEUE is 0."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mq_open.restype = ctypes.c_int
    name = f"/mha-wall-{os.getpid()}".encode()
    fd = libc.mq_open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600, None)
    if fd < 0:
        return resource.getrlimit(resource.RLIMIT_MSGQUEUE) == (0, 0), \
            f"mq_open refused: {os.strerror(ctypes.get_errno())}; RLIMIT_MSGQUEUE " \
            f"{resource.getrlimit(resource.RLIMIT_MSGQUEUE)}"
    libc.mq_unlink(name)  # leave nothing behind even when the wall is missing
    return False, "mq_open worked: a queue can outlive the child"


def wall_file_events(ctx):
    """A watch on a folder outside the scratch (inotify, fanotify) needs only its read permission, which Landlock does
    not govern: red team 10's child watched /tmp, /etc and a 0755 output folder and read a classmate's report's name
    as it was written; dnotify (fcntl F_NOTIFY) signals every change of such a folder (red team 12).  Refused by
    seccomp, on its own scratch too (a refusal is the filter's)."""
    libc = ctypes.CDLL(None, use_errno=True)
    folder = ctx["output_dir"]
    errors = []
    fd = libc.inotify_init1(os.O_NONBLOCK)
    if fd >= 0:
        for path in (folder, "/"):
            ok = libc.inotify_add_watch(fd, path.encode(), 0xFFF) >= 0
            errors.append(None if ok else f"inotify {path}: {os.strerror(ctypes.get_errno())}")
        os.close(fd)
    else:  # no instance to watch with: the watch itself is still refused by the filter (EPERM, not EBADF)
        libc.inotify_add_watch(-1, b"/", 0xFFF)
        errors.append(None if ctypes.get_errno() != errno.EPERM else "inotify_add_watch: refused")
    instance = libc.inotify_init1(os.O_NONBLOCK)  # an instance alone: per uid, 128 (red team 11 held them all)
    errors.append(None if instance >= 0 else f"inotify_init1: {os.strerror(ctypes.get_errno())}")
    if instance >= 0:
        os.close(instance)
    fan = libc.fanotify_init(0x200, os.O_RDONLY)  # FAN_REPORT_FID: what an unprivileged process may ask
    errors.append(None if fan >= 0 else f"fanotify_init: {os.strerror(ctypes.get_errno())}")
    if fan >= 0:
        os.close(fan)
    import fcntl  # dnotify (fcntl F_NOTIFY): a signal whenever the folder changes, on any folder it may open
    for path in (folder, "/", "."):
        try:
            dfd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue  # not in its view (Landlock, the mount namespace): nothing to watch
        try:
            notify = _try(lambda: fcntl.fcntl(dfd, fcntl.F_NOTIFY, fcntl.DN_CREATE | fcntl.DN_MULTISHOT))
            errors.append(f"dnotify {path}: {notify}" if notify and notify.startswith("PermissionError") else None)
            if notify is None:
                fcntl.fcntl(dfd, fcntl.F_NOTIFY, 0)
        finally:
            os.close(dfd)
    return all(errors), errors


def wall_leases_and_flags(ctx):
    """A write lease (fcntl F_SETLEASE) and a file's inode flags (ioctl FS_IOC_SETFLAGS, file_setattr by path) are
    its owner's on a descriptor it may only read, or on none: red team 11's child, of an ordinary user's uid, leased
    the user's venv's .pth files (a new Python of that venv waited 27 s to start) and flagged a classmate's file and
    the output folder by path.  Played on a file of the child's own (a refusal is the filter's, never the owner's),
    each set to what it is; refused by seccomp, while reading the lease and the flags and flock stay usable."""
    import array
    import fcntl
    libc = ctypes.CDLL(None, use_errno=True)
    path = os.path.abspath("leased.txt")
    _create(path, "")
    fd = os.open(path, os.O_RDONLY)

    def lease():
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)

    flags = array.array("l", [0])
    own = [_try(lambda: fcntl.fcntl(fd, fcntl.F_GETLEASE)), _try(lambda: fcntl.fcntl(fd, fcntl.F_GETFL)),
           _try(lambda: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)), _try(lambda: fcntl.flock(fd, fcntl.LOCK_UN)),
           _try(lambda: fcntl.ioctl(fd, 0x80086601, flags, True))]  # FS_IOC_GETFLAGS

    def attributes():
        attr = ctypes.create_string_buffer(24)  # struct file_attr; file_getattr (468) stays allowed
        for number in (468, 469):
            if libc.syscall(number, -100, path.encode(), attr, 24, 0) != 0:
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))

    errors = [_try(lease), _try(lambda: fcntl.ioctl(fd, 0x40086602, flags, True)), _try(attributes)]
    os.close(fd)
    refused = all(e and e.startswith("PermissionError") for e in errors)
    return refused and not any(own[:4]), {"lease, flags, file_setattr": errors, "own": own}


def wall_ioctls(ctx):
    """ioctl is an allow-list (red team 12): what Python and torch ask of a descriptor (a terminal's attributes and
    size, bytes waiting, blocking, close-on-exec, the inode flags read) works or fails as the kernel says; any other
    command is refused by the filter (EPERM), a harmless one played here on a file of its own: FIGETBSZ (the block
    size), FS_IOC_FIEMAP's neighbour FS_IOC_GETVERSION, and FICLONE (a reflink, whose blocks no limit counts)."""
    import array
    import fcntl
    import termios
    path = os.path.abspath("ioctl.txt")
    _create(path, "x" * 4096)
    fd = os.open(path, os.O_RDWR)
    r, w = os.pipe()
    os.write(w, b"abc")
    buf = array.array("i", [0])
    word = array.array("l", [0])
    usable = {"FIONREAD": _try(lambda: fcntl.ioctl(r, termios.FIONREAD, buf, True)) is None and buf[0] == 3,
              "FIOCLEX": _try(lambda: fcntl.ioctl(fd, termios.FIOCLEX)) is None,
              "FIONCLEX": _try(lambda: fcntl.ioctl(fd, termios.FIONCLEX)) is None,
              "FIONBIO": _try(lambda: fcntl.ioctl(r, termios.FIONBIO, array.array("i", [1]), True)) is None,
              "TCGETS": "Inappropriate ioctl" in str(_try(lambda: fcntl.ioctl(r, termios.TCGETS, bytes(64)))),
              "TIOCGWINSZ": "Inappropriate ioctl" in str(_try(lambda: fcntl.ioctl(r, termios.TIOCGWINSZ, bytes(8)))),
              "isatty": os.isatty(r) is False,
              "FS_IOC_GETFLAGS": "Operation not permitted" not in str(_try(lambda: fcntl.ioctl(fd, 0x80086601,
                                                                                               word, True)))}
    refused = {name: _try(lambda: fcntl.ioctl(fd, number, array.array("l", [0]), True))
               for name, number in (("FIGETBSZ", 2), ("FS_IOC_GETVERSION", 0x80087601))}
    refused["FICLONE"] = _try(lambda: fcntl.ioctl(fd, 0x40049409, r))
    os.close(fd), os.close(r), os.close(w)
    held = all(usable.values()) and all(e and e.startswith("PermissionError") for e in refused.values())
    return held, {"usable": usable, "refused": refused}


def wall_page_cache(ctx):
    """posix_fadvise(POSIX_FADV_DONTNEED) drops a file's cached pages for every process, on any file it may read
    (torch's libraries: the next `import torch` of a classmate reads them from disk again).  Refused by seccomp,
    played on a file of its own; the advice about its own reading stays allowed."""
    path = os.path.abspath("cached.txt")
    _create(path, "x" * 65536)
    fd = os.open(path, os.O_RDONLY)
    dontneed = _try(lambda: os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED))
    own = [_try(lambda: os.posix_fadvise(fd, 0, 0, advice))
           for advice in (os.POSIX_FADV_SEQUENTIAL, os.POSIX_FADV_WILLNEED, os.POSIX_FADV_NORMAL)]
    os.close(fd)
    return bool(dontneed and dontneed.startswith("PermissionError")) and not any(own), \
        {"dontneed": dontneed, "own": own}


def wall_aio(ctx):
    """Asynchronous I/O events are one count for the machine (/proc/sys/fs/aio-max-nr), bounded by no limit of the
    child's: red team 11's child held all 65536 and every other process's io_setup failed while it lived.  Refused by
    seccomp (a context made where the wall is missing is destroyed at once)."""
    libc = ctypes.CDLL(None, use_errno=True)
    setup, destroy = {"x86_64": (206, 207), "aarch64": (0, 1)}[os.uname().machine]
    context = ctypes.c_ulong(0)
    if libc.syscall(setup, 1, ctypes.byref(context)) == 0:
        libc.syscall(destroy, context)
        return False, "io_setup worked"
    return ctypes.get_errno() == errno.EPERM, f"io_setup refused: {os.strerror(ctypes.get_errno())}"


def wall_other_processes(ctx):
    """Another process's limits, nice value, CPU affinity and scheduling policy: no signal and no file, so Landlock
    governs none of them, and the kernel allows them on any process of the same uid (red team 10: an ordinary user's
    child reached its grader and keeper; RLIMIT_CPU 0 kills, SCHED_IDLE starves).  Each is set to what it is, so
    nothing is harmed where the wall is missing; the child's own stay changeable (glibc's setrlimit, os.nice)."""
    libc = ctypes.CDLL(None, use_errno=True)
    nr = {"x86_64": (302, 141, 203, 144), "aarch64": (261, 140, 122, 119)}[os.uname().machine]
    pid = ctx["sentinel_pid"]

    class Rlimit(ctypes.Structure):
        _fields_ = [("cur", ctypes.c_uint64), ("max", ctypes.c_uint64)]

    def call(number, *args):
        if libc.syscall(number, *args) < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))

    limit = Rlimit(*resource.getrlimit(resource.RLIMIT_NOFILE))  # the sentinel's are the grader's defaults: a
    # write of ours that worked would be a change, harmless to a sleeping process
    mask = ctypes.create_string_buffer(b"\x01" + b"\0" * 127)
    param = ctypes.c_int(0)
    errors = [_try(lambda: call(nr[0], pid, 7, ctypes.byref(limit), None)),
              _try(lambda: call(nr[1], 0, pid, 0)),
              _try(lambda: call(nr[2], pid, 128, mask)),
              _try(lambda: call(nr[3], pid, 0, ctypes.byref(param)))]
    own = [_try(lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0))), _try(lambda: os.nice(0)),
           _try(lambda: os.sched_setaffinity(0, os.sched_getaffinity(0)))]
    return all(errors) and not any(own), {"others": errors, "own": own}


def wall_realtime(ctx):
    """Red team 11's leftover: RLIMIT_RTPRIO and RLIMIT_NICE were the grader's.  Above 0, a child of no privilege
    could make itself real-time (SCHED_FIFO busy loop: classmates and the grader get the CPU only when the kernel's
    real-time throttling lets them) or lower its nice value below theirs.  Both hard limits must be 0, and so both
    attempts refused; raising its own nice value (lower priority) stays allowed."""
    limits = {name: resource.getrlimit(getattr(resource, name)) for name in ("RLIMIT_RTPRIO", "RLIMIT_NICE")}
    before = os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0)
    fifo = _try(lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1)))
    if fifo is None:  # where the wall is missing: back to what it was at once (no busy loop is ever run)
        os.sched_setscheduler(0, before[0], os.sched_param(0))
    rr = _try(lambda: os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(1)))
    if rr is None:
        os.sched_setscheduler(0, before[0], os.sched_param(0))
    lower = _try(lambda: os.setpriority(os.PRIO_PROCESS, 0, before[1] - 1))
    own = _try(lambda: os.setpriority(os.PRIO_PROCESS, 0, before[1] + 1))
    held = all(v == (0, 0) for v in limits.values()) and fifo is not None and rr is not None and lower is not None \
        and own is None
    return held, {"limits": limits, "fifo": fifo, "rr": rr, "lower_nice": lower, "raise_own_nice": own}


def wall_oom_first(ctx):
    """Red team 8: many processes of up to the memory limit each, on a machine with many cores, could exhaust its
    memory before the footprint watch stops them; the kernel's out-of-memory killer must then take the child's
    processes first (oom_score_adj 1000, inherited), and the child cannot lower that again."""
    with open("/proc/self/oom_score_adj") as f:
        value = f.read().strip()
    lowered = _try(lambda: _write("/proc/self/oom_score_adj", "0")) is None
    return value == "1000" and not lowered, {"oom_score_adj": value, "lowered": lowered}


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def wall_join_namespace(ctx):
    """setns() into the namespaces of any process whose /proc/PID/ns entry we can open (the grader's network
    namespace was once joinable)."""
    libc = ctypes.CDLL(None, use_errno=True)
    me, joined, opened = os.getpid(), [], 0
    for pid in sorted(({ctx["parent_pid"], ctx["spawner_pid"]} | set(_pids())) - {me}):
        for ns in ("net", "mnt", "pid", "user"):
            try:
                fd = os.open(f"/proc/{pid}/ns/{ns}", os.O_RDONLY)
            except OSError:
                continue
            opened += 1
            if libc.setns(fd, 0) == 0:
                joined.append((pid, ns))
            os.close(fd)
    return not joined, {"opened": opened, "joined": joined}


def wall_memory(ctx):
    size = ctx["limits"]["RLIMIT_DATA"] + (256 << 20)  # the memory budget, not the address space with libraries
    error = _try(lambda: bytearray(size))
    return error is not None, error


def wall_file_size(ctx):
    size = ctx["limits"]["RLIMIT_FSIZE"] + 1
    error = _try(lambda: _create("big.bin", "x" * size))
    return error is not None and os.path.getsize("big.bin") <= size - 1, error


def wall_devices(ctx):
    errors = [_try(lambda: open(path, "rb").close()) for path in ("/dev/mem", "/dev/kmsg", ctx["host_disk"])]
    return all(errors), errors


def wall_inherited_fds(ctx):
    """Only stdin/stdout/stderr (the channel and the log): no status pipe, memfd or grader socket leaked in."""
    fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
    extra = []
    for fd in fds:
        if fd > 2:
            try:
                extra.append((fd, os.readlink(f"/proc/self/fd/{fd}")))
            except OSError:
                pass  # the descriptor listdir itself used, closed by now
    return not extra, {"fds": fds, "extra": extra}


def wall_tmp_files(ctx):
    """The private /tmp holds at most its count of files (nr_inodes): empty files cost the host's kernel memory,
    not size, so a size limit alone lets a child make millions of them.  Where /tmp is the host's, one file is
    tried (and removed): Landlock refuses it; without Landlock it is made, the gap."""
    if not ctx["private_tmp"]:
        path = f"/tmp/mha-check-wall-{os.getpid()}"
        error = _try(lambda: os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)))
        if error is None:
            os.unlink(path)
        return error is not None, {"private_tmp": False, "host_tmp": error or "writable"}
    made = 0
    try:
        for made in range(3 * ctx["tmp_files"]):
            os.close(os.open(f"/tmp/f{made}", os.O_CREAT | os.O_WRONLY, 0o600))
    except OSError as e:
        return e.errno == errno.ENOSPC and made <= ctx["tmp_files"], {"made": made, "errno": e.errno}
    return False, {"made": 3 * ctx["tmp_files"]}


def wall_still_usable(ctx):
    """The positive control: what a submission legitimately needs still works."""
    problems = []
    if "SUBMISSION" not in _read("submission.py"):
        problems.append("cannot read own submission copy")
    private = ["/tmp/t.txt", "/dev/shm/t"] if ctx["private_tmp"] else []  # else they are the host's
    for path in ("scratch-file.txt", os.path.join(os.environ.get("TMPDIR", "/tmp"), "t.txt"), *private):
        if _try(lambda: _create(path, "ok")) is not None:
            problems.append(f"cannot write {path}")
    box = []
    thread = threading.Thread(target=lambda: box.append(sum(range(1000))))
    thread.start()
    thread.join()
    if box != [499500]:
        problems.append("threads")
    try:
        out = subprocess.run([sys.executable, "-c", "print(6*7)"], capture_output=True, text=True, timeout=30)
        if out.stdout.strip() != "42":
            problems.append(f"subprocess: {out.stderr[-200:]}")
    except OSError as e:
        problems.append(f"subprocess: {e}")
    if _read("/dev/null") != "" or len(open("/dev/urandom", "rb").read(8)) != 8:
        problems.append("devices")
    return not problems, problems


def main():
    wall = sys.argv[1]
    ctx = json.loads(sys.stdin.readline())
    held, evidence = globals()["wall_" + wall](ctx)
    print(json.dumps({"wall": wall, "held": bool(held), "evidence": evidence}, default=str), flush=True)


if __name__ == "__main__":
    main()
