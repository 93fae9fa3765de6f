"""Hostile: text that no report may carry as it is.  It prints, raises and names a parameter with every C0 control
character, DEL, C1 controls, the bidi controls that reorder a line on screen (U+202A-202E, U+2066-2069, U+200E/200F),
the non-characters U+FFFE and U+FFFF, a lone surrogate, and Markdown that would pass for the grader's words ("**PASS**",
a table).  JUnit XML must still parse; every text format shows these as visible escapes (\\x1b, \\u202e), never
obeyed, and Gradescope's Markdown shows the student's words as words."""
import sys

import torch
import torch.nn as nn

CONTROLS = "".join(chr(i) for i in range(32)) + "\x7f\x85\x9b"
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f"
NONCHARACTERS = "\ufffe\uffff"
MARKDOWN = "\n\n**PASS** every check\n\n| check | result |\n|---|---|\n| causal-leakage | **PASS** |\n"
TEXT = f"abc{CONTROLS}def \u202egnp.exe{BIDI}{NONCHARACTERS}\ud800 end{MARKDOWN}"
sys.stdout.buffer.write(TEXT.encode("utf-8", "surrogatepass") + b"\n")
sys.stdout.flush()


class MyAttn(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0
        self.h, self.dh = num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.add_module("out" + BIDI + "\x1b[31m", nn.Linear(d_out, d_out))  # a parameter name with bidi controls
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def forward(self, x):
        sys.stdout.buffer.write(TEXT.encode("utf-8", "surrogatepass") + b"\n")
        sys.stdout.flush()
        raise ValueError(TEXT)
