"""Correct: a whole pre-norm SUBLAYER, x + attention(RMSNorm(x)), as Llama-style blocks write it, with torch's own
nn.RMSNorm inside the class.

Style: a student's "transformer block, attention half": norm_attn = nn.RMSNorm(d), a fused Wqkv without biases,
rearranged with unflatten/movedim, F.scaled_dot_product_attention(is_causal=True), wo with a bias, and the residual
added inside forward.  Issue 28: the norm's d parameters made param-count fail a correct layer, and no reading
reproduced it (every weight check cannot-tell); the norm is now switched off and the input taken away from the output
(the report says so), and the attention is judged.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class PreNormAttentionSublayer(nn.Module):
    def __init__(self, d_model, n_heads, max_seq_len=128):
        super().__init__()
        assert d_model % n_heads == 0, "d_model must be a multiple of n_heads"
        self.n_heads = n_heads
        self.norm_attn = nn.RMSNorm(d_model, eps=1e-6)
        self.Wqkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.wo = nn.Linear(d_model, d_model)
        self.max_seq_len = max_seq_len

    def forward(self, x):
        h = self.norm_attn(x)
        q, k, v = self.Wqkv(h).unflatten(-1, (3, self.n_heads, -1)).movedim(-3, 0).transpose(2, 3)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.wo(y.transpose(1, 2).flatten(-2))


TARGET = "PreNormAttentionSublayer"
EXPECT = ()
