"""HF-transformers-style rotary attention: a LlamaRotaryEmbedding-like submodule that turns `position_ids` (B, n) into
cos/sin of the full head width, `apply_rotary_pos_emb` with rotate_half, an optional additive attention_mask (the
layer masks the future itself when none is given), and `position_ids=None` that the layer does not fill in itself:
forward needs the positions, which mha-check gives as 0..n-1 in the layout that reproduces."""
import torch
import torch.nn as nn

TARGET = "LlamaStyleAttention"


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class LlamaStyleAttention(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, rope_theta=10000.0):
        super().__init__()
        assert hidden_size % num_attention_heads == 0
        self.num_heads, self.head_dim = num_attention_heads, hidden_size // num_attention_heads
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.o_proj = nn.Linear(hidden_size, hidden_size)
        self.rotary_emb = RotaryEmbedding(self.head_dim, base=rope_theta)

    def forward(self, hidden_states, attention_mask=None, position_ids=None):
        bsz, q_len, _ = hidden_states.size()
        shape = (bsz, q_len, self.num_heads, self.head_dim)
        q = self.q_proj(hidden_states).view(shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        cos, sin = self.rotary_emb(v, position_ids)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        scores = q @ k.transpose(2, 3) / self.head_dim ** 0.5
        if attention_mask is None:
            future = torch.triu(torch.ones(q_len, q_len, dtype=torch.bool, device=hidden_states.device), 1)
            attention_mask = torch.zeros(q_len, q_len, dtype=scores.dtype, device=scores.device).masked_fill(
                future, float("-inf"))
        weights = torch.softmax(scores + attention_mask, dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(bsz, q_len, -1)
        return self.o_proj(out)
