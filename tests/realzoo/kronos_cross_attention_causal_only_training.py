"""MultiHeadCrossAttentionWithRoPE from Kronos (a foundation model for financial candlesticks): is_causal is tied to self.training, so in eval() the layer attends to the future.

Source: https://github.com/shiyu-coder/Kronos/blob/21eb36afc75bd5bbc82eddc4998e02c2f907094d/model/module.py (lines 284-312: class RotaryPositionalEmbedding; lines 356-397: class MultiHeadCrossAttentionWithRoPE); the line `is_causal_flag = self.training` has been in every version of model/module.py since the initial commit 9f946de. Text read from the index copy of model/module.py at commit 19cb9ae (a fork commit); the two copied classes are character-identical to the upstream file at 21eb36a (checked against the upstream git history).
Licence: MIT (Copyright (c) 2025 ShiYu), LICENSE at the repository root.
Copied: verbatim (class RotaryPositionalEmbedding, class MultiHeadCrossAttentionWithRoPE); `import torch`, `import torch.nn as nn`, `import torch.nn.functional as F` as in the original (its other imports - math, einops, torch.autograd.Function - are not used by these classes).
Truth: BUG, causal only while training: forward computes `is_causal_flag = self.training` and passes it to F.scaled_dot_product_attention, so after model.eval() the attention is bidirectional and position t sees tokens > t (train and eval compute different functions; teacher-forced evaluation leaks the future). In Kronos it is called with query = the sibling-token embedding and key = value = the hidden states of the same sequence (DependencyAwareLayer), i.e. a same-length "cross" attention that is meant to be causal. Apart from that: q/k/v/out Linear(d_model, d_model) with bias, view(B, n, H, dh).transpose(1, 2), RoPE (rotate-half) applied to q and k, SDPA default scale 1/sqrt(dh), attention dropout gated on training, merge transpose(1, 2).contiguous().view(B, n, d), out_proj, residual dropout. Evidence: issue https://github.com/shiyu-coder/Kronos/issues/199 ("Data Leakage during eval": "is_causal_flag = self.training ... self.training is False, means is_causal_flag=False, leading to model can see the full context"), open, line unchanged at 21eb36a.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "MultiHeadCrossAttentionWithRoPE"
TRUTH = "bug"
BUG = "causal-only-in-training"
RULE_GAPS = ("rope", "no-divisibility-check", "no-context-length")
FORWARD = "query, key, value, key_padding_mask=None"
NOTES = ("Constructor MultiHeadCrossAttentionWithRoPE(d_model, n_heads, attn_dropout_p=0.0, resid_dropout=0.0); d_in = d_out = d_model. "
         "forward(query, key, value, key_padding_mask=None) - for self-attention pass the same x three times. Causality depends on "
         "module.training: causal in train(), NOT causal in eval() (the bug). RoPE is applied inside (rotary buffer inv_freq in float32, so cos/sin are float32 even for float64 inputs; cos/sin "
         "cached as plain attributes on first use), so outputs cannot equal the lesson's layer (no positional rotation there) even when "
         "causal; a checker must compare against a RoPE-aware reference or only check causality. key_padding_mask (True = attend) "
         "combined with is_causal=True makes SDPA raise in training. No divisibility check (d_model // n_heads).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'no-mask'
EXPECTED_BECAUSE = 'is_causal=self.training: no mask at all in eval()'


class RotaryPositionalEmbedding(nn.Module):
    def __init__(self, dim):
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq)
        self.seq_len_cached = None
        self.cos_cached = None
        self.sin_cached = None

    def _update_cos_sin_cache(self, x, seq_len):
        if seq_len != self.seq_len_cached:
            self.seq_len_cached = seq_len
            t = torch.arange(seq_len, device=x.device).type_as(self.inv_freq)
            freqs = torch.einsum('i,j->ij', t, self.inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1).to(x.device)
            self.cos_cached = emb.cos()[None, None, :, :]
            self.sin_cached = emb.sin()[None, None, :, :]
        return self.cos_cached, self.sin_cached

    def forward(self, q, k):
        cos, sin = self._update_cos_sin_cache(q, q.shape[-2])
        return (
            (q * cos) + (self._rotate_half(q) * sin),
            (k * cos) + (self._rotate_half(k) * sin),
        )

    def _rotate_half(self, x):
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)


class MultiHeadCrossAttentionWithRoPE(nn.Module):
    def __init__(self, d_model, n_heads, attn_dropout_p=0.0, resid_dropout=0.0):
        super().__init__()
        self.d_model = d_model
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads

        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.rotary = RotaryPositionalEmbedding(self.head_dim)
        self.attn_dropout_p = attn_dropout_p
        self.resid_dropout = nn.Dropout(resid_dropout)

    def forward(self, query, key, value, key_padding_mask=None):
        batch_size, q_len, _ = query.shape
        _, seq_len, _ = key.shape

        q = self.q_proj(query).view(batch_size, q_len, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(key).view(batch_size, seq_len, self.n_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(value).view(batch_size, seq_len, self.n_heads, self.head_dim).transpose(1, 2)

        q, k = self.rotary(q, k)

        if key_padding_mask is not None:
            attn_mask = key_padding_mask.unsqueeze(1).unsqueeze(2)
            attn_mask = attn_mask.expand(-1, self.n_heads, q_len, -1)
        else:
            attn_mask = None

        is_causal_flag = self.training

        attn_output = F.scaled_dot_product_attention(
            q, k, v,
            attn_mask=attn_mask,
            dropout_p=self.attn_dropout_p if self.training else 0.0,
            is_causal=is_causal_flag
        )

        attn_output = attn_output.transpose(1, 2).contiguous().view(batch_size, q_len, self.d_model)
        return self.resid_dropout(self.out_proj(attn_output))
