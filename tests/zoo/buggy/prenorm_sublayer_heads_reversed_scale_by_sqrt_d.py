"""Buggy (scale-by-sqrt-d, in a pre-norm sublayer whose heads are merged in reverse order): the scores are scaled by
1/sqrt(d_model), the model width, instead of 1/sqrt(head width), and the heads are merged last head first
(`y.flip(1)`) before `wo`.

Style: a student's "transformer block, attention half", x + attention(RMSNorm(x)): norm_attn = nn.RMSNorm(d), a
fused Wqkv without biases rearranged with unflatten/movedim, F.scaled_dot_product_attention(is_causal=True, scale=)
and the residual added inside forward.  With the norm switched off and the input taken away (as for the correct
tests/zoo/correct/prenorm_sublayer_rmsnorm.py), the reversed merge is the lesson's layer with wo's input columns read
last head first; the scale is the mistake.
"""
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
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=x.size(-1) ** -0.5)
        return x + self.wo(y.flip(1).transpose(1, 2).flatten(-2))


TARGET = "PreNormAttentionSublayer"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "scale-by-sqrt-d"  # the mutant this mistake should be diagnosed as
