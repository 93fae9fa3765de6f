"""modded-nanogpt's first rotary CausalSelfAttention: a @dataclass config, fused c_attn without biases, a self-contained Rotary module (cos/sin cached per sequence length, in float32) rotating the HALVES of each head by MINUS the angle (y1 = x1 cos + x2 sin, y2 = -x1 sin + x2 cos), SDPA is_causal=True.

Source: https://github.com/KellerJordan/modded-nanogpt/blob/f411b3d346aa52d3504324ca93c230fd84c6c07f/records/track_1_short/2024-10-10_Muon/train_gpt2.py (class Rotary, function apply_rotary_emb, class CausalSelfAttention, dataclass GPTConfig: the training script of the 2024-10-10 Muon record, kept in the repository's records). The same Rotary (but for one blank line), apply_rotary_emb and CausalSelfAttention were introduced in train_gpt2.py by 3e48a54 "upgrade with rotary embeddings" (2024-06-06); this copy is taken from the records file because the repository's LICENSE was only added in 73e9403 (2024-11-05), after that commit.
Licence: MIT (Copyright (c) 2024 Keller Jordan), LICENSE at the repository root.
Copied: verbatim, the imports the copied code uses (dataclass, torch, nn, F), the block from class Rotary to the end of class CausalSelfAttention (with the helper rmsnorm, unused by the class) and GPTConfig, taken from `git show f411b3d:records/track_1_short/2024-10-10_Muon/train_gpt2.py` in the fetched history (the search index's copies of this repository are mostly forks, so this text was not compared with it). The rest of the training script is left out; this entry's constants are placed after the imports.
Truth: BUG (latent): the math is a correct causal multi-head attention with a rotary position embedding, but Rotary keeps cos_cached/sin_cached as plain attributes and recomputes them only when the sequence length changes, so after module.to(device) a forward at the length last seen uses tensors on the old device (RuntimeError; the repository moves the model to CUDA before its first forward, so training never meets it). The math: c_attn Linear(C, 3C, bias=False) split [Q; K; V]; view(B, T, H, dh); RoPE on q and k over the two HALVES of each head (x1 = x[:dh/2], x2 = x[dh/2:]) with frequencies base**(-2i/dh) (base 10000), angle t * freq, but turned by -angle compared with the usual rotate-half convention (HF's y1 = x1 cos - x2 sin); SDPA with is_causal=True (scale 1/sqrt(dh)); merge transpose(1, 2).contiguous().view(B, T, C); c_proj Linear(C, C, bias=False). The scores depend only on relative positions, as for any RoPE; the layer equals the usual rotate-half RoPE layer whose W_q and W_k have the second half of every head's rows negated (_truth.py, float32 RoPE tables: compared at relative 1e-5). Divisibility asserted; odd head widths break the half split. Built only from a config (config.n_head, config.n_embd; GPTConfig here has no block_size).
"""
from dataclasses import dataclass

import torch
from torch import nn
import torch.nn.functional as F

TARGET = "CausalSelfAttention"
TRUTH = 'bug'
BUG = 'rotary cos/sin cached in plain attributes keyed by the sequence length only: stale device after module.to()'
RULE_GAPS = ("config-object", "rope-half-negative-angle", "float32-rope", "no-biases", "no-out-proj-bias",
             "no-context-length")
FORWARD = "x"
NOTES = ("CausalSelfAttention(config): config.n_head, config.n_embd (GPTConfig dataclass). Weights c_attn (3C, C) = "
         "[W_q; W_k; W_v], c_proj, no biases; buffer rotary.inv_freq (dh/2). Head widths must be even.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = None
EXPECTED_BECAUSE = "correct RoPE math (rotate-half turned by -angle: scores still depend on t - s only, and it is the usual rotation with half of each head's W_q and W_k rows negated, so not a bug; the reference turned the other way reproduces it and the weight checks pass, see tests/unit/test_rotary_negated.py), but a real latent defect: the rotary cos/sin cache is a plain attribute keyed by sequence length only, so after module.to(device) a forward at the same length uses the old device's tensors (mask-buffer fails); it is not the catalogued mask-plain-attribute (a mask), so no mistake is named; out-proj-bias rule fails too (bias=False)"


class Rotary(torch.nn.Module):

    def __init__(self, dim, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq)
        self.seq_len_cached = None
        self.cos_cached = None
        self.sin_cached = None

    def forward(self, x):
        seq_len = x.shape[1]
        if seq_len != self.seq_len_cached:
            self.seq_len_cached = seq_len
            t = torch.arange(seq_len, device=x.device).type_as(self.inv_freq)
            freqs = torch.outer(t, self.inv_freq).to(x.device)
            self.cos_cached = freqs.cos()
            self.sin_cached = freqs.sin()
        return self.cos_cached[None, :, None, :], self.sin_cached[None, :, None, :]

def apply_rotary_emb(x, cos, sin):
    assert x.ndim == 4 # multihead attention
    d = x.shape[3]//2
    x1 = x[..., :d]
    x2 = x[..., d:]
    y1 = x1 * cos + x2 * sin
    y2 = x1 * (-sin) + x2 * cos
    return torch.cat([y1, y2], 3)

def rmsnorm(x0, eps=1e-6):
    x = x0.float()
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return x.type_as(x0)

class CausalSelfAttention(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.head_dim = self.n_embd // self.n_head
        assert self.n_embd % self.n_head == 0
        # key, query, value projections for all heads, but in a batch
        self.c_attn = nn.Linear(self.n_embd, 3 * self.n_embd, bias=False)
        # output projection
        self.c_proj = nn.Linear(self.n_embd, self.n_embd, bias=False)
        self.rotary = Rotary(self.head_dim)

    def forward(self, x):
        B, T, C = x.size() # batch size, sequence length, embedding dimensionality (n_embd)
        # calculate query, key, values for all heads in batch and move head forward to be the batch dim
        qkv = self.c_attn(x)
        q, k, v = qkv.split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, self.head_dim)
        q = q.view(B, T, self.n_head, self.head_dim)
        v = v.view(B, T, self.n_head, self.head_dim)
        cos, sin = self.rotary(q)
        q = apply_rotary_emb(q, cos, sin)
        k = apply_rotary_emb(k, cos, sin)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C) # re-assemble all head outputs side by side
        # output projection
        y = self.c_proj(y)
        return y

@dataclass
class GPTConfig:
    vocab_size : int = 50257
    n_layer : int = 12
    n_head : int = 12
    n_embd : int = 768
