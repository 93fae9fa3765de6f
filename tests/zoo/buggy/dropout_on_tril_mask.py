"""Buggy (dropout on the mask, a 0/1 tril one): `keep = self.dropout(self.tril[:T, :T])` and
`wei.masked_fill(keep == 0, float('-inf'))`, the mask that is 1 where a token may attend passed through the
attention dropout.

Style: the lesson's MultiHeadAttention with a `tril` buffer (Karpathy's makemore spelling) compared with 0, the
dropout applied once more, rightly, to the weights. In eval() mode and with dropout 0 the layer is right; in train()
mode with dropout > 0 the mask's dropped entries hide allowed positions, and a token whose every allowed entry is
dropped (token 0 has only its own) has nothing to attend to: NaN. No future leaks, unlike dropout on a triu mask, and
no mutant is exactly this mistake (dropout-on-masked-scores gives NaN too, but drawn per sequence): named none.
"""
import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out, self.num_heads, self.head_dim = d_out, num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("tril", torch.tril(torch.ones(context_length, context_length)))

    def forward(self, x):
        B, T, _ = x.shape
        q = self.W_query(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.W_key(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.W_value(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        wei = q @ k.transpose(-2, -1) * self.head_dim ** -0.5
        keep = self.dropout(self.tril[:T, :T])  # dropout on the mask: some allowed entries become 0
        wei = wei.masked_fill(keep == 0, float("-inf"))
        wei = self.dropout(torch.softmax(wei, dim=-1))
        out = (wei @ v).transpose(1, 2).contiguous().view(B, T, self.d_out)
        return self.out_proj(out)


TARGET = "MultiHeadAttention"
EXPECT = ("causal-leakage",)
DIAGNOSIS = None  # no mutant is this mistake: "no known mistake matches", never dropout-on-masked-scores
