"""Correct grouped-query attention in Hugging Face's style: `num_key_value_heads`, q_proj/k_proj/v_proj/o_proj
with Q/K/V biases (Qwen2 has them), `num_key_value_groups = num_heads // num_key_value_heads`, a `repeat_kv` on the
(B, KV, n, dh) tensor after the transpose, and `F.scaled_dot_product_attention(..., is_causal=True)`."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def repeat_kv(hidden_states: torch.Tensor, n_rep: int) -> torch.Tensor:
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class Qwen2StyleAttention(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, num_key_value_heads, max_position_embeddings=4096,
                 attention_dropout=0.0):
        super().__init__()
        if hidden_size % num_attention_heads:
            raise ValueError("hidden_size must be divisible by num_attention_heads")
        self.num_heads = num_attention_heads
        self.head_dim = hidden_size // num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.num_key_value_groups = self.num_heads // self.num_key_value_heads
        self.attention_dropout = attention_dropout
        self.q_proj = nn.Linear(hidden_size, self.num_heads * self.head_dim, bias=True)
        self.k_proj = nn.Linear(hidden_size, self.num_key_value_heads * self.head_dim, bias=True)
        self.v_proj = nn.Linear(hidden_size, self.num_key_value_heads * self.head_dim, bias=True)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, hidden_size, bias=True)

    def forward(self, hidden_states):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_output = F.scaled_dot_product_attention(
            query_states, key_states, value_states,
            dropout_p=self.attention_dropout if self.training else 0.0, is_causal=True)
        attn_output = attn_output.transpose(1, 2).contiguous().reshape(bsz, q_len, -1)
        return self.o_proj(attn_output)


TARGET = "Qwen2StyleAttention"
EXPECT = ()
