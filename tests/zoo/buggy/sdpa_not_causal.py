"""Buggy: F.scaled_dot_product_attention called without is_causal=True (and the mask buffer never used).

Style: modern "just use SDPA" code with q_proj / k_proj / v_proj / o_proj (Llama-like names) and a bool mask
buffer that was meant for the manual path. With attn_mask=None and is_causal left at its default False every
token attends to the whole sequence, future included.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SelfAttention(nn.Module):
    def __init__(self, hidden_size, num_heads, max_seq_len, attn_dropout=0.0, qkv_bias=False):
        super().__init__()
        assert hidden_size % num_heads == 0
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=qkv_bias)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=qkv_bias)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=qkv_bias)
        self.o_proj = nn.Linear(hidden_size, hidden_size)
        self.attn_dropout = attn_dropout
        self.register_buffer("causal_mask", torch.ones(max_seq_len, max_seq_len, dtype=torch.bool).tril())

    def forward(self, x):
        bsz, q_len, _ = x.shape
        q = self.q_proj(x).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=None, dropout_p=self.attn_dropout if self.training else 0.0
        )
        out = out.transpose(1, 2).reshape(bsz, q_len, -1)
        return self.o_proj(out)


TARGET = "SelfAttention"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = "no-mask"  # the mutant this mistake should be diagnosed as
