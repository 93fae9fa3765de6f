"""Correct, causal when asked: forward(x, causal=False) and SDPA's is_causal, as diffusion and encoder code writes it.

Style: one attention class for encoder and decoder, with a head width that is optional in the constructor
(`head_dim: int | None = None`, derived and checked when not given). From a real-code trial: the flag was never set
(a correct layer told "Causal mask never applied", with a fix that would hard-wire causality), and mha-check passed
head_dim itself, which skipped the class's own divisibility check (told "No check that nheads divides d_out").
"""
import torch.nn as nn
import torch.nn.functional as F


class FlexibleAttention(nn.Module):
    def __init__(self, embed_dim: int, n_heads: int, head_dim: int | None = None, p_drop: float = 0.0):
        super().__init__()
        if head_dim is None:
            if embed_dim % n_heads:
                raise ValueError(f"embed_dim {embed_dim} is not divisible by n_heads {n_heads}")
            head_dim = embed_dim // n_heads
        self.n_heads, self.head_dim, self.p_drop = n_heads, head_dim, p_drop
        self.to_qkv = nn.Linear(embed_dim, 3 * n_heads * head_dim, bias=False)
        self.to_out = nn.Linear(n_heads * head_dim, embed_dim)

    def forward(self, x, causal: bool = False):
        b, n, _ = x.shape
        q, k, v = self.to_qkv(x).view(b, n, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p_drop if self.training else 0.0,
                                           is_causal=causal)
        return self.to_out(y.transpose(1, 2).reshape(b, n, self.n_heads * self.head_dim))


TARGET = "FlexibleAttention"
EXPECT = ()
