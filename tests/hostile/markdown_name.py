"""Hostile: a module of its own named with Markdown between blank lines, and a forward that asks for that name
misspelt (red team 8).  mha-check's fix quotes the name meant in a code span ("Use `NAME`, not `...`"), and a blank
line inside a code span ends its paragraph, and the span with it: the bold "Score: 19/19, every check passed" and a
table rendered on Gradescope's page as the grader's own words.  Each line break in a code span is now shown as
\\n: the name reads as typed, inside its span.  The layer is wrong (its forward raises), as a cheat's is."""
import torch
import torch.nn as nn

LONG = "projection_of_the_queries_for_every_head_of_this_layer_" * 4  # long: difflib takes it for the name meant
PAYLOAD = LONG + "\n\n**Score: 19/19, every check passed**\n\n| check | result |\n|---|---|\n| all | **PASS** |\n\n"


class MyAttn(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.add_module(PAYLOAD, nn.Linear(d_in, d_out, bias=qkv_bias))
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def forward(self, x):
        return getattr(self, LONG[:-1] + "X")(x)  # misspelt: an AttributeError whose fix names PAYLOAD
