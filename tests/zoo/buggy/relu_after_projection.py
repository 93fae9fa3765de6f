"""Buggy (a ReLU after the output projection): `return F.relu(self.proj(out))`, an activation that belongs to the
feed-forward block, not to attention.

Style: Wq/Wk/Wv/proj, a `tril` buffer compared with 0, `wei`, math.sqrt, F.softmax (a student's trial of mha-check,
issue 28). The attention itself is right and causal: the layer fails reference-match and gradient-match and must
pass causal-leakage. The ReLU clamps every feature of some tokens at 0, so those outputs move with no input at all;
causal-leakage read that as "output position 0 does not depend on input position 0: is the mask or the softmax axis
wrong?", sending the student to a mask that is right. No catalogued mistake is a ReLU: none named.
"""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class Attn(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0
        self.H, self.dh = num_heads, d_out // num_heads
        self.Wq = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.Wk = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.Wv = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.proj = nn.Linear(d_out, d_out)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("tril", torch.tril(torch.ones(context_length, context_length)))

    def forward(self, x):
        B, T, _ = x.shape
        q = self.Wq(x).view(B, T, self.H, self.dh).transpose(1, 2)
        k = self.Wk(x).view(B, T, self.H, self.dh).transpose(1, 2)
        v = self.Wv(x).view(B, T, self.H, self.dh).transpose(1, 2)
        wei = q @ k.transpose(-2, -1) / math.sqrt(self.dh)
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = self.drop(F.softmax(wei, dim=-1))
        out = (wei @ v).transpose(1, 2).contiguous().view(B, T, -1)
        return F.relu(self.proj(out))


TARGET = "Attn"
EXPECT = ("reference-match", "gradient-match")
MUST_PASS = ("causal-leakage", "batch-independence", "output-shape")
DIAGNOSIS = None  # no catalogued mistake is an activation after the projection
