"""Correct, with a partial rotary embedding (GPT-NeoX's rotary_pct): only the first half of each head's features is
rotated (rotate-half within that slice), the rest passes through.  A real design, not a mistake, and not one of the
two conventions mha-check has a reference for.  So mha-check gives rotary_pct=1.0 (every feature turned), checks the
rest of the layer, which passes, and the report says so.  Given rotary_pct=0.5 by --arg (PARTIAL), no reference
reproduces it: what needs one is cannot tell (the report says the layer is rotary, why there is no reference, and
that without the --arg the rest is checked), never a failure.

Style: q_proj/k_proj/v_proj/o_proj, cos/sin buffers of the rotated width, masked_fill with a tril buffer.
"""
import torch
import torch.nn as nn

TARGET = "PartialRotaryAttention"
CANNOT_TELL = ()
PARTIAL = {"rotary_pct": 0.5}  # given by --arg: what needs a reference is cannot tell, and says why
SAYS = ("rotary_pct was given 1.0 (every feature of each head turned",)
ARG = {"rotary_pct": 1.0}


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class PartialRotaryAttention(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, max_position_embeddings, rotary_pct=0.5):
        super().__init__()
        assert hidden_size % num_attention_heads == 0
        self.num_heads, self.head_dim = num_attention_heads, hidden_size // num_attention_heads
        self.rot = int(self.head_dim * rotary_pct) // 2 * 2
        self.q_proj = nn.Linear(hidden_size, hidden_size)
        self.k_proj = nn.Linear(hidden_size, hidden_size)
        self.v_proj = nn.Linear(hidden_size, hidden_size)
        self.o_proj = nn.Linear(hidden_size, hidden_size)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, self.rot, 2).float() / max(self.rot, 1)))
        angles = torch.arange(max_position_embeddings).float()[:, None] * inv_freq[None, :]
        angles = torch.cat([angles, angles], dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        self.register_buffer("causal", torch.tril(torch.ones(max_position_embeddings, max_position_embeddings,
                                                             dtype=torch.bool)), persistent=False)

    def _rope(self, t, n):
        rot, keep = t[..., : self.rot], t[..., self.rot:]
        cos, sin = self.cos[:n].to(t.dtype), self.sin[:n].to(t.dtype)
        return torch.cat((rot * cos + rotate_half(rot) * sin, keep), dim=-1)

    def forward(self, hidden_states):
        b, n, d = hidden_states.shape
        heads = lambda t: t.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        q, k, v = heads(self.q_proj(hidden_states)), heads(self.k_proj(hidden_states)), heads(self.v_proj(hidden_states))
        q, k = self._rope(q, n), self._rope(k, n)
        scores = (q @ k.transpose(-1, -2)) / self.head_dim ** 0.5
        scores = scores.masked_fill(~self.causal[:n, :n], float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        return self.o_proj(out.transpose(1, 2).reshape(b, n, d))
