"""A small seccomp filter shared by both mechanisms (bubblewrap loads it with --seccomp FD, `confine` with prctl).

Why: as soon as a process can create a user namespace it is "root" over fresh namespaces, a large kernel attack
surface; bwrap's own --disable-userns needs a user namespace of its own, which bwrap run by real root does not
create.  So the filter refuses (EPERM) unshare() and clone() with any CLONE_NEW* flag, answers clone3() with
ENOSYS (its flags sit in memory the filter cannot read; glibc then falls back to clone), and refuses a short list
of interfaces a grading child never needs, a few commands of fcntl (a lease, dnotify), every ioctl but a short
allow-list (terminal queries, FIONREAD, FIONBIO, FIOCLEX), posix_fadvise(DONTNEED), and
prctl(PR_SET_DUMPABLE).  Other architectures' system calls (i386
on x86_64, x32) kill the process.  Only x86_64 and aarch64 are known; elsewhere `program()` returns None and the
report says so.
"""
from __future__ import annotations

import errno
import os
import struct

_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

# name: (x86_64, aarch64)
_DENIED = {
    "unshare": (272, 97), "setns": (308, 268), "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41),
    "chroot": (161, 51), "open_tree": (428, 428), "move_mount": (429, 429), "fsopen": (430, 430),
    "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433), "mount_setattr": (442, 442),
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294), "init_module": (175, 105),
    "finit_module": (313, 273), "delete_module": (176, 106), "open_by_handle_at": (304, 265),
    "acct": (163, 89), "swapon": (167, 224), "swapoff": (168, 225), "reboot": (169, 142), "syslog": (103, 116),
    # a new session is a new scheduler autogroup: 60 setsid spinners took 23x the CPU of a classmate's whole check
    "setsid": (112, 157),
    # memory written to a memfd is counted against no process: 3.8 GB past a 1 GB limit in a red team's trial;
    # memfd_secret's pages count against RLIMIT_MEMLOCK only while mapped (map, write, unmap: 2.4 GB from one process)
    "memfd_create": (319, 279), "memfd_secret": (447, 447),
    # fallocate with FALLOC_FL_KEEP_SIZE reserves disk blocks past RLIMIT_FSIZE: on its own output file (the grader's
    # disk, outside the bounded scratch) a red team filled the disk and five classmates lost their grades
    "fallocate": (285, 47),
    # no socket of its own: the channel to mha-check is inherited, and a layer needs none; without a network
    # namespace it reached the host's UDP and any pathname unix socket (Landlock does not govern connecting to one)
    "socket": (41, 198),
    # nor a socket pair: a descriptor sent into one (SCM_RIGHTS) and closed is in no /proc/PID/fd, so a deleted file
    # held there escaped the scratch's count (red team 7: 1.8 GB past a 64 MB budget in a container), and the
    # buffers of 110 pairs filled and never read held 2 GB that no memory limit counts, under every mechanism
    "socketpair": (53, 199),
    # System V IPC: a segment outlives its process and its creator's memory limit (a red team left 20 segments,
    # 5 GB, after the grader had exited, in a container where no IPC namespace ends them); torch needs none of it
    "shmget": (29, 194), "shmat": (30, 196), "shmctl": (31, 195), "shmdt": (67, 197),
    "semget": (64, 190), "semop": (65, 193), "semctl": (66, 191), "semtimedop": (220, 192),
    "msgget": (68, 186), "msgsnd": (69, 189), "msgrcv": (70, 188), "msgctl": (71, 187),
    # POSIX message queues likewise outlive their creator without an IPC namespace (red team 7: 256 queues left
    # after the grader exited, and every ordinary user's mq_open on the machine then failed); RLIMIT_MSGQUEUE is 0 too
    "mq_open": (240, 180), "mq_unlink": (241, 181), "mq_timedsend": (242, 182), "mq_timedreceive": (243, 183),
    "mq_notify": (244, 184), "mq_getsetattr": (245, 185),
    # a watch on a folder needs only its read permission, which Landlock does not govern: without a mount namespace
    # a child watched /tmp, /etc, the grader's home and a 0755 output folder and read the names written there, a
    # classmate's report among them (red team 10); a layer needs no file events
    "inotify_add_watch": (254, 27), "fanotify_init": (300, 262), "fanotify_mark": (301, 263),
    # nor an instance, useless without a watch: they are one count per uid (max_user_instances, 128), and an
    # ordinary user's child held them all, the user's own inotify_init1 failing while it lived (red team 11)
    # (aarch64 has only inotify_init1: the legacy name repeats it)
    "inotify_init": (253, 26), "inotify_init1": (294, 26),
    # a file's mode, owner, times and extended attributes: Landlock governs none of them, and a child of the grader's
    # own uid (an ordinary user's) made a 0600 file of the user's 0644, readable by every account (red team 10); by a
    # descriptor too (fchmod on a file it may only read, such as a venv of the user's).  A layer changes none.
    # (aarch64 has only the *at variants: the legacy names repeat them.)
    "chmod": (90, 53), "fchmod": (91, 52), "fchmodat": (268, 53), "fchmodat2": (452, 452),
    "chown": (92, 54), "fchown": (93, 55), "lchown": (94, 54), "fchownat": (260, 54),
    "utime": (132, 88), "utimes": (235, 88), "futimesat": (261, 88), "utimensat": (280, 88),
    "setxattr": (188, 5), "lsetxattr": (189, 6), "fsetxattr": (190, 7), "setxattrat": (463, 463),
    "removexattr": (197, 14), "lremovexattr": (198, 15), "fremovexattr": (199, 16), "removexattrat": (466, 466),
    # and its inode flags by path (Linux 6.17): no descriptor is opened, so no Landlock rule is asked; an ordinary
    # user's child set them on a classmate's file and the output folder (red team 11).  Reading them stays allowed.
    "file_setattr": (469, 469),
    # asynchronous I/O's events are one count for the machine (/proc/sys/fs/aio-max-nr), bounded by no limit of the
    # child's: red team 11's child held all 65536, and every other process's io_setup failed while it lived
    "io_setup": (206, 0),
}
# some commands of fcntl, by their number (arg1's low 32 bits: the kernel reads an unsigned int):
# fcntl(F_SETLEASE): a write lease is the owner's on a descriptor it may only read, and every other process's open
# of the file then waits for it, up to /proc/sys/fs/lease-break-time (45 s) each, while it ignores the SIGIO asking
# it to let go (red team 11: an ordinary user's child held its venv's .pth files and a new Python of that venv took
# 27 s to start); fcntl(F_NOTIFY), dnotify: a signal at every change of any folder it may open, the file events
# inotify_add_watch is refused for (red team 12).  Other commands (F_GETFL, F_SETFD, flock) stay allowed.  ioctl:
# below, an allow-list; the inode flags and attributes it refused by name before (the owner's on a read-only
# descriptor too, which stay after the child: synchronous writes, no-dump; append-only and immutable with
# CAP_LINUX_IMMUTABLE), the file's generation, fs-verity and encryption policies and keys are refused with the rest.
_COMMANDS = {
    "fcntl": ((72, 25), {"F_SETLEASE": 1024, "F_NOTIFY": 1026}),
}
# ioctl is an allow-list (red team 12): what Python, torch and their libraries ask of a descriptor, measured with
# strace over a grade and the hostile suite (TCGETS from isatty, TIOCGWINSZ, FIONBIO, FIOCLEX; nothing else reached
# the filter), with their obvious neighbours (FIONCLEX, FIONREAD, TIOCGPGRP, the inode flags read).  Every other
# command is refused (EPERM): the inode flags and attributes above, fs-verity, encryption keys, reflinks (FICLONE:
# blocks no limit counts), and whatever a driver or file system adds next.  The numbers are the same on aarch64.
_IOCTL, _IOCTL_ALLOWED = (16, 29), {"TCGETS": 0x5401, "TIOCGWINSZ": 0x5413, "TIOCGPGRP": 0x540F,
                                    "FIONREAD": 0x541B, "FIONBIO": 0x5421, "FIONCLEX": 0x5450, "FIOCLEX": 0x5451,
                                    "FS_IOC_GETFLAGS": 0x80086601, "FS_IOC32_GETFLAGS": 0x80046601}
# posix_fadvise(POSIX_FADV_DONTNEED) drops a file's clean pages from the page cache, on any file it may read: torch's
# libraries, a classmate's Python, the shared venv (red team 12: `import torch` of the next process 2.5 s -> 4.8 s
# after one pass over torch's files).  Other advice stays allowed (SEQUENTIAL, WILLNEED: its own reading).
_FADVISE, _FADV_DONTNEED, _ARG3 = (221, 223), 4, 40
# another process's limits, priority and scheduling: none of them is a signal or a file, so Landlock governs none,
# and the kernel lets a process change them for any process of its own uid (an ordinary user's child shares the
# grader's, the keeper's and every other process of the user's: red team 10 reached all three with prlimit,
# setpriority, sched_setaffinity and sched_setscheduler, enough to kill one (RLIMIT_CPU 0) or starve it (SCHED_IDLE)).
# These are allowed for the calling process only: pid 0 (glibc's setrlimit, os.nice and os.sched_setaffinity(0)).
_SELF_ONLY = {"prlimit64": (302, 261), "sched_setparam": (142, 118), "sched_setscheduler": (144, 119),
              "sched_setaffinity": (203, 122), "sched_setattr": (314, 274)}  # pid in arg0
_WHO_SELF_ONLY = {"setpriority": ((141, 140), 0), "ioprio_set": ((251, 30), 1)}  # (which, who): PRIO_PROCESS or
# IOPRIO_WHO_PROCESS, and who 0 (a process group or a user would reach others)
_CLONE, _CLONE3 = (56, 220), (435, 435)
# prctl(PR_SET_DUMPABLE): a non-dumpable process hides its /proc/PID/fd from a grader without CAP_SYS_PTRACE (root
# in a Docker container, an ordinary user), and with it every file it deleted but held open (red team 6: 300 MB
# against a 64 MB budget, unseen).  The confinement sets what it needs before the filter is installed.
_PRCTL, _PR_SET_DUMPABLE = (157, 167), 4
_NEW_NAMESPACES = 0x7E020000  # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET

_RET_ALLOW, _RET_KILL_PROCESS, _RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_NR, _ARCH_OFF, _ARG0, _ARG1 = 0, 4, 16, 24  # offsets in struct seccomp_data (arg0's low 32 bits: little endian)


def _assemble(code: list[tuple]) -> bytes:
    """Tiny assembler: ("label", name) marks a position; jump targets are label names or "next"."""
    labels, position = {}, 0
    for op in code:
        if op[0] == "label":
            labels[op[1]] = position
        else:
            position += 1
    out, position = b"", 0
    for op in code:
        if op[0] == "label":
            continue
        kind, k, *targets = op
        jt = jf = 0
        if targets:
            jt, jf = (0 if t == "next" else labels[t] - position - 1 for t in targets)
        out += struct.pack("<HBBI", kind, jt, jf, k)
        position += 1
    return out


def program() -> bytes | None:
    machine = os.uname().machine
    if machine not in _ARCH:
        return None
    col = 0 if machine == "x86_64" else 1
    code: list[tuple] = [(_LD_ABS, _ARCH_OFF), (_JEQ, _ARCH[machine], "next", "kill"), (_LD_ABS, _NR)]
    if machine == "x86_64":
        code.append((_JGE, 0x40000000, "kill", "next"))  # the x32 ABI
    code += [(_JEQ, nr[col], "eperm", "next") for nr in _DENIED.values()]
    code += [(_JEQ, nr[col], "self", "next") for nr in _SELF_ONLY.values()]
    code += [(_JEQ, nr[col], f"who-{name}", "next") for name, (nr, _) in _WHO_SELF_ONLY.items()]
    code += [(_JEQ, nr[col], f"commands-{name}", "next") for name, (nr, _) in _COMMANDS.items()]
    code.append((_JEQ, _IOCTL[col], "ioctl", "next"))
    code.append((_JEQ, _FADVISE[col], "fadvise", "next"))
    code += [(_JEQ, _CLONE3[col], "enosys", "next"), (_JEQ, _CLONE[col], "clone", "next"),
             (_JEQ, _PRCTL[col], "prctl", "next"), (_RET, _RET_ALLOW),
             ("label", "clone"), (_LD_ABS, _ARG0), (_JSET, _NEW_NAMESPACES, "eperm", "next"), (_RET, _RET_ALLOW),
             ("label", "prctl"), (_LD_ABS, _ARG0), (_JEQ, _PR_SET_DUMPABLE, "eperm", "next"), (_RET, _RET_ALLOW),
             ("label", "self"), (_LD_ABS, _ARG0), (_JEQ, 0, "next", "eperm"), (_RET, _RET_ALLOW)]
    for name, (_, which) in _WHO_SELF_ONLY.items():
        code += [("label", f"who-{name}"), (_LD_ABS, _ARG0), (_JEQ, which, "next", "eperm"), (_LD_ABS, _ARG1),
                 (_JEQ, 0, "next", "eperm"), (_RET, _RET_ALLOW)]
    for name, (_, refused) in _COMMANDS.items():
        code += [("label", f"commands-{name}"), (_LD_ABS, _ARG1)]
        code += [(_JEQ, command, "eperm", "next") for command in refused.values()]
        code.append((_RET, _RET_ALLOW))
    code += [("label", "fadvise"), (_LD_ABS, _ARG3), (_JEQ, _FADV_DONTNEED, "eperm", "next"), (_RET, _RET_ALLOW)]
    code += [("label", "ioctl"), (_LD_ABS, _ARG1)]
    code += [(_JEQ, command, "allow", "next") for command in _IOCTL_ALLOWED.values()]
    code += [(_RET, _RET_ERRNO | errno.EPERM), ("label", "allow"), (_RET, _RET_ALLOW)]
    code += [("label", "eperm"), (_RET, _RET_ERRNO | errno.EPERM),
             ("label", "enosys"), (_RET, _RET_ERRNO | errno.ENOSYS),
             ("label", "kill"), (_RET, _RET_KILL_PROCESS)]
    return _assemble(code)

