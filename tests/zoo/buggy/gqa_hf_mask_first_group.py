"""Buggy grouped-query attention in Hugging Face's style (num_key_value_heads, o_proj): the causal mask is added to
the scores of the first key/value group's query heads only (`attn_weights[:, :self.num_key_value_groups]`), so the
other heads see the future. With a single key/value head the first group is every head, and nothing leaks."""
import math

import torch
import torch.nn as nn


def repeat_kv(hidden_states: torch.Tensor, n_rep: int) -> torch.Tensor:
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class GQAttention(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, num_key_value_heads, max_position_embeddings=2048):
        super().__init__()
        if hidden_size % num_attention_heads:
            raise ValueError("hidden_size must be divisible by num_attention_heads")
        self.num_heads = num_attention_heads
        self.head_dim = hidden_size // num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.num_key_value_groups = num_attention_heads // num_key_value_heads
        self.q_proj = nn.Linear(hidden_size, hidden_size)
        self.k_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim)
        self.v_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim)
        self.o_proj = nn.Linear(hidden_size, hidden_size)

    def forward(self, hidden_states):
        bsz, q_len, _ = hidden_states.size()
        q = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        k, v = repeat_kv(k, self.num_key_value_groups), repeat_kv(v, self.num_key_value_groups)
        attn_weights = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        causal = torch.full((q_len, q_len), float("-inf"), device=hidden_states.device).triu(1)
        first = self.num_key_value_groups
        attn_weights = torch.cat([attn_weights[:, :first] + causal, attn_weights[:, first:]], dim=1)  # the mistake
        attn_weights = torch.softmax(attn_weights, dim=-1)
        out = torch.matmul(attn_weights, v).transpose(1, 2).contiguous().reshape(bsz, q_len, -1)
        return self.o_proj(out)


TARGET = "GQAttention"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = "gqa-mask-one-group"  # the mutant this mistake should be diagnosed as
