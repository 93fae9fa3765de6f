"""Buggy: a fused projection split in three with chunk, then F.scaled_dot_product_attention(q, k, k,
is_causal=True): the keys passed where the values belong, so the value third of the fused weight never reaches the
output (it gets no gradient; parameters-used cannot say which third, the fused weight as a whole still has one) and
every output is a weighted average of the keys.  Written for the keys-as-values mistake in a style other than the
trial's `probs @ k`: a fused attention, a dataclass-free (d_model, n_heads, block_size) constructor."""
import torch.nn as nn
import torch.nn.functional as F


class FusedSdpaAttention(nn.Module):
    def __init__(self, d_model, n_heads, block_size):
        super().__init__()
        if d_model % n_heads:
            raise ValueError("d_model must be divisible by n_heads")
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
        k = k.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
        v = v.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, k, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


TARGET = "FusedSdpaAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "keys-as-values"
LINE = 25
