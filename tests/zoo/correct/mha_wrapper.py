"""Correct: a thin wrapper around torch.nn.MultiheadAttention with a causal bool mask buffer.

Style: "don't reinvent it, use the library". Q/K/V live in the fused `attn.in_proj_weight` (3*E, E) in q; k; v
order, with `attn.in_proj_bias` (bias=True gives Q/K/V biases *and* the out_proj bias, so this layer always has
the +3*d_out Q/K/V bias parameters), the output projection is `attn.out_proj`. The mask follows PyTorch's bool
convention (True = not allowed) and is a non-persistent buffer sliced to the sequence length. d_in == d_out.
Divisibility is enforced by nn.MultiheadAttention itself (AssertionError).
"""
import torch
import torch.nn as nn


class TorchCausalAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, max_len=512, dropout=0.0):
        super().__init__()
        self.attn = nn.MultiheadAttention(
            embed_dim, num_heads, dropout=dropout, bias=True, batch_first=True
        )
        causal = torch.ones(max_len, max_len, dtype=torch.bool).triu(diagonal=1)
        self.register_buffer("mask", causal, persistent=False)

    def forward(self, x):
        n = x.size(1)
        out, _ = self.attn(x, x, x, attn_mask=self.mask[:n, :n], need_weights=False)
        return out


TARGET = "TorchCausalAttention"
EXPECT = ()
