"""CS336-style rotary attention (tests/zoo/correct/rotary_cs336.py) with two rotary mistakes at once: the RoPE
submodule turns the values as well as the queries, and never the keys.

Before, no rotary convention and no single known mistake reproduced it, so the weights were not mapped, every weight
check was cannot-tell and no check failed: a real bug with the verdict CANNOT TELL.  Two rotary mistakes now compose
(`variants.compose`: both declare the same `rope` setting), the mapping is proven by the pair under one reading and
one convention, and both are named from the numbers.  `mha-check trace` marks both at the line of forward that calls
the RoPE submodule: the queries turned while the keys reach the scores straight from their projection (the first
turn the forward makes, so that mistake comes first), and the values' rotation.
"""
import torch
import torch.nn as nn

TARGET = "MultiheadSelfAttentionWithRoPE"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = ("rope-keys-not-rotated", "rope-on-values")  # two mistakes at once: both named from the numbers, in
# the order the forward reaches their marks


class RotaryPositionalEmbedding(nn.Module):
    def __init__(self, theta: float, d_k: int, max_seq_len: int, device=None):
        super().__init__()
        freqs = 1.0 / (theta ** (torch.arange(0, d_k, 2, device=device).float() / d_k))
        angles = torch.arange(max_seq_len, device=device).float()[:, None] * freqs[None, :]
        self.register_buffer("cos", torch.cos(angles), persistent=False)
        self.register_buffer("sin", torch.sin(angles), persistent=False)

    def forward(self, x: torch.Tensor, token_positions: torch.Tensor) -> torch.Tensor:
        cos, sin = self.cos[token_positions], self.sin[token_positions]
        x_even, x_odd = x[..., 0::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., 0::2] = x_even * cos - x_odd * sin
        out[..., 1::2] = x_even * sin + x_odd * cos
        return out


class MultiheadSelfAttentionWithRoPE(nn.Module):
    def __init__(self, d_model: int, num_heads: int, max_seq_len: int, theta: float = 10000.0):
        super().__init__()
        assert d_model % num_heads == 0
        self.num_heads, self.d_k = num_heads, d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.output_proj = nn.Linear(d_model, d_model)
        self.rope = RotaryPositionalEmbedding(theta, self.d_k, max_seq_len)

    def forward(self, x: torch.Tensor, token_positions: torch.Tensor) -> torch.Tensor:
        *batch, seq, d_model = x.shape
        heads = lambda t: t.view(*batch, seq, self.num_heads, self.d_k).transpose(-3, -2)
        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        pos = token_positions.unsqueeze(-2) if token_positions.dim() > 1 else token_positions
        q, v = self.rope(q, pos), self.rope(v, pos)
        scores = q @ k.transpose(-2, -1) / self.d_k ** 0.5
        causal = torch.tril(torch.ones(seq, seq, dtype=torch.bool, device=x.device))
        scores = scores.masked_fill(~causal, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        return self.output_proj(out.transpose(-3, -2).reshape(*batch, seq, d_model))
