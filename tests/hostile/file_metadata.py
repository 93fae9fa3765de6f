"""Hostile: changes the mode, times and extended attributes of files outside its scratch (a classmate's submission,
a finished report, the output folder, a host file): Landlock governs opening a file, not its metadata, and a child of
the grader's own uid (an ordinary user's) owns every file of the user: a 0600 key made 0644 is readable by every
account, an output folder made 0000 takes the classmates' reports.  Each change sets what is there (the attribute
it adds is removed), so nothing is harmed when it works; gets full marks only if one is accepted."""
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


import stat


def same_mode(path):
    os.chmod(path, stat.S_IMODE(os.lstat(path).st_mode))


def same_times(path):
    st = os.lstat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def attribute(path):
    os.setxattr(path, "user.mha_check_hostile", b"1")
    os.removexattr(path, "user.mha_check_hostile")


out = CONTEXT.get("out")
paths = [os.path.join(c, "attention.py") for c in CONTEXT.get("classmates", [])] + [CONTEXT.get("secret")]
if out:
    paths += [out] + [os.path.join(out, name) for name in CONTEXT.get("reports", [])]
for path in filter(None, paths):
    for what, action in (("chmod", same_mode), ("utime", same_times), ("setxattr", attribute)):
        attempt(f"{what} {path}", lambda action=action, path=path: action(path))
print("walls that gave way:", ESCAPED)


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
