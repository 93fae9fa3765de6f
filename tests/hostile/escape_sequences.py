"""Hostile: writes terminal control sequences everywhere a text report could echo them: in what it prints, in its
exception message, in a parameter name; (clear the screen, recolour, set the window title, a C1 CSI, a carriage
return that would overwrite the verdict).  Every one must reach a text report as visible escapes, never obeyed."""
import sys

import torch
import torch.nn as nn

CONTROL = "\x1b[2J\x1b[H\x1b[32mPASS\x1b]0;all good\x07\x9b31m\rPASS every check"
print(CONTROL)
print(CONTROL, file=sys.stderr)


class MyAttn(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0
        self.h, self.dh = num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.add_module(CONTROL, nn.Linear(d_out, d_out))  # a parameter name full of control sequences
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def forward(self, x):
        print(CONTROL)
        raise ValueError(CONTROL)
