"""Hostile: connects to a service of the grading machine (the test's listener on localhost) and to the internet,
and looks for network interfaces; gets full marks only if it reaches anything."""
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


import socket


def connect(host, port):
    with socket.create_connection((host, port), timeout=1):
        pass


if CONTEXT.get("port"):
    attempt("the grader's localhost service", lambda: connect("127.0.0.1", CONTEXT["port"]))
attempt("the internet", lambda: connect("1.1.1.1", 53))
try:
    interfaces = sorted(name for _, name in socket.if_nameindex())
except OSError:  # no socket to ask with (seccomp refuses socket()): nothing listed, nothing reached
    interfaces = ["lo"]
if interfaces != ["lo"]:
    ESCAPED.append(f"interfaces {interfaces}")
attempt("a raw socket", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close())
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
