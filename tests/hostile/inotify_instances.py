"""Hostile: takes every inotify instance of its uid (fs.inotify.max_user_instances, 128 by default, one count for all
processes of a uid): a child of an ordinary user's uid held all 128 and the user's own inotify_init1 outside failed
(EMFILE) while it lived (red team 11), an editor's or a desktop's file watching among them.  The filter already
refuses a watch (inotify_add_watch), so an instance serves a layer nothing.  Each is closed at once, so nothing is
harmed when it works; gets full marks only if an instance is made."""
import ctypes
import os

import torch
import torch.nn as nn

ESCAPED = []  # evidence that a wall gave way

libc = ctypes.CDLL(None, use_errno=True)
made = libc.inotify_init1(0)
if made >= 0:
    os.close(made)
    ESCAPED.append("inotify_init1")
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
