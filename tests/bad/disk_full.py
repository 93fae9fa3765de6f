"""Bad environment, not a bad layer: the forward is the lesson's, but writing its log line finds the disk full (as
another submission of a batch left it, in a red team's trial where a classmate's print then failed two checks and
cost them marks).  ENOSPC is the machine's: cannot tell, for a person to review, never a failing check."""
import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.h, self.dh = num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def forward(self, x):
        raise OSError(28, "No space left on device")  # what print() or a log write raises on a full disk
