"""Buggy (a trial, 2026-12-06): a Hugging Face-style layer (config dataclass, q_proj/k_proj/v_proj/o_proj,
forward(hidden_states, attention_mask=None, past_key_value=None, use_cache=False) returning a tuple) builds its own
causal mask with `triu` where `tril` was meant: each token sees itself and every later one, and the past is filled
with finfo.min.  Called without a mask it hides the past and shows the future; with a caller's causal mask only the
diagonal is left.  No call was judged causal, so output-shape said it could not tell how to call forward and every
check was skipped: a real bug with no failing check (issue 28 item 3).  The plain call hides positions by itself:
the layer masks itself, wrongly, and causal-leakage fails there.  No mutant hid exactly the past then; since
mask-hides-past (a student's tril(..., -1), the same numbers) it is named, at the line that makes the mask.

Style: Hugging Face Llama-like attention with a dataclass config, past_key_value and use_cache, an additive
attention_mask added after the layer's own mask, softmax in float32.
"""
import torch
import torch.nn as nn
from dataclasses import dataclass


@dataclass
class AttnConfig:
    hidden_size: int = 64
    num_attention_heads: int = 4
    max_position_embeddings: int = 128
    attention_dropout: float = 0.0


class HFStyleAttention(nn.Module):
    def __init__(self, config: AttnConfig):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.q_proj = nn.Linear(config.hidden_size, config.hidden_size)
        self.k_proj = nn.Linear(config.hidden_size, config.hidden_size)
        self.v_proj = nn.Linear(config.hidden_size, config.hidden_size)
        self.o_proj = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.attention_dropout)

    def forward(self, hidden_states, attention_mask=None, past_key_value=None, use_cache=False):
        bsz, q_len, _ = hidden_states.size()
        shape = lambda t: t.view(bsz, -1, self.num_heads, self.head_dim).transpose(1, 2)
        q = shape(self.q_proj(hidden_states))
        k = shape(self.k_proj(hidden_states))
        v = shape(self.v_proj(hidden_states))
        if past_key_value is not None:
            k = torch.cat([past_key_value[0], k], dim=2)
            v = torch.cat([past_key_value[1], v], dim=2)
        present = (k, v) if use_cache else None
        w = torch.matmul(q, k.transpose(2, 3)) / self.head_dim ** 0.5
        kv_len = k.shape[2]
        causal = torch.ones(q_len, kv_len, dtype=torch.bool, device=w.device).triu(kv_len - q_len)
        w = w.masked_fill(~causal, torch.finfo(w.dtype).min)
        if attention_mask is not None:
            w = w + attention_mask
        w = self.dropout(torch.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype))
        out = torch.matmul(w, v).transpose(1, 2).reshape(bsz, q_len, -1)
        return self.o_proj(out), None, present


TARGET = "HFStyleAttention"
EXPECT = ("causal-leakage",)
DIAGNOSIS = "mask-hides-past"
