"""Buggy: masked scores filled with -10 instead of -inf, so future tokens keep a small nonzero weight.

Style: HF-like q_proj / k_proj / v_proj / out_proj, `_shape` helper, config-free keyword constructor
(embed_dim, num_heads, max_positions, dropout), a bool tril buffer and torch.where. "-10 is basically zero after
softmax": it is about e^-10 ~ 4.5e-5 of the weight per future token, an exact leak in float64.
"""
import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, embed_dim, num_heads, max_positions=1024, dropout=0.0):
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("causal", torch.tril(torch.ones(max_positions, max_positions, dtype=torch.bool)))

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def forward(self, hidden_states):
        bsz, tgt_len, _ = hidden_states.size()
        query_states = self._shape(self.q_proj(hidden_states) * self.scaling, tgt_len, bsz)
        key_states = self._shape(self.k_proj(hidden_states), tgt_len, bsz)
        value_states = self._shape(self.v_proj(hidden_states), tgt_len, bsz)

        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3))
        attn_weights = torch.where(self.causal[:tgt_len, :tgt_len], attn_weights, -10.0)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_probs = self.dropout(attn_weights)

        attn_output = torch.matmul(attn_probs, value_states)
        attn_output = attn_output.transpose(1, 2).reshape(bsz, tgt_len, self.embed_dim)
        return self.out_proj(attn_output)


TARGET = "Attention"
EXPECT = ("causal-leakage",)
DIAGNOSIS = "finite-fill"  # the mutant this mistake should be diagnosed as
