"""Hostile: watches folders outside its scratch for file events (inotify, fanotify): a watch needs only the folder's
read permission, which Landlock does not govern, and its events name every file made, opened or written there, a
classmate's report as the grader writes it, a classmate's submission, the grader's home.  Gets full marks only if a
watch on any of them is accepted."""
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


import ctypes

libc = ctypes.CDLL(None, use_errno=True)
FAN_REPORT_FID, FAN_MARK_ADD, FAN_CREATE, AT_FDCWD = 0x200, 0x1, 0x100, -100


def inotify_watch(fd, path):
    if libc.inotify_add_watch(fd, path.encode(), 0xFFF) < 0:  # every event
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


def fanotify_watch(path):
    fd = libc.fanotify_init(FAN_REPORT_FID, os.O_RDONLY)
    if fd < 0 or libc.fanotify_mark(fd, FAN_MARK_ADD, ctypes.c_uint64(FAN_CREATE), AT_FDCWD, path.encode()) < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


folders = [*CONTEXT.get("classmates", []), CONTEXT.get("out"), "/home", "/root"]
if CONTEXT.get("secret"):
    folders.append(os.path.dirname(CONTEXT["secret"]))
watcher = libc.inotify_init1(os.O_NONBLOCK)
for folder in filter(None, folders):
    if watcher >= 0:
        attempt(f"inotify on {folder}", lambda folder=folder: inotify_watch(watcher, folder))
    attempt(f"fanotify on {folder}", lambda folder=folder: fanotify_watch(folder))
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
