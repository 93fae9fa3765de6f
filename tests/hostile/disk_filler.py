"""Hostile: fills the folder it runs in with data (files just under the file-size limit) and then with empty files,
up to 300 MB and 20000 files, and holds them while its classmates are graded (found by an attacker's trial: with the
scratch folders on the disk everyone shares, 15 of 20 classmates got 0 or cannot-tell); and is wrong.  Its folder is
a tmpfs of its own where mha-check can mount one: it fills only that."""
import os
import time

import torch
import torch.nn as nn

CHUNK = b"\0" * (1 << 20)


def _fill() -> None:
    try:
        os.makedirs("fill", exist_ok=True)
        for i in range(20):
            with open(f"fill/big{i}", "wb") as f:
                for _ in range(15):  # 15 MB: below the file-size limit
                    f.write(CHUNK)
    except OSError:
        pass
    try:
        for i in range(20000):
            open(f"fill/n{i}", "w").close()
    except OSError:
        pass


def _hold() -> float:
    """Seconds to hold the space: hold.txt beside it says (a batch test gives its classmates time to be graded)."""
    try:
        with open("hold.txt") as f:
            return float(f.read())
    except (OSError, ValueError):
        return 3.0


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
