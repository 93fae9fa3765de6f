"""Bark (Suno) text/coarse GPT: CausalSelfAttention with KV cache, adapted from nanoGPT; SDPA dropout not gated on training.

Source: https://github.com/suno-ai/bark/blob/15606ed12fd07bfea79bed6413615adf002da983/bark/model.py (lines 23-90: class CausalSelfAttention); the same dropout_p=self.dropout line is still in bark/model.py at the mirror's HEAD.
Licence: MIT (Copyright (c) Suno, Inc. & Affiliates)
Copied: verbatim with these additions: a minimal config dataclass above and a factory build() below; imports as in the original.
Truth: BUG, dropout in eval: on torch >= 2.0 the flash path calls F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout, is_causal=...) regardless of self.training, so with config.dropout > 0 attention weights are dropped at inference. With dropout = 0 and layer_past=None it is a correct causal MHA (fused c_attn [W_q; W_k; W_v], SDPA is_causal=True, c_proj with bias when config.bias). forward returns a TUPLE (y, present). Evidence: PR https://github.com/suno-ai/bark/pull/662 ("fix: disable dropout during inference in scaled_dot_product_attention ... dropout_p=self.dropout unconditionally"), closed unmerged; same bug as nanoGPT's fixed in 7399dfe. Also, with its cache: the flash path sets is_causal=False whenever layer_past is given (its comment: "the last query can attend on all previous keys/values"), which is right for one new token per call and lets 2 new tokens fed in one call after a prompt see each other (verified by _truth.py; mha-check's kv-cache fails it with 'chunk unmasked'; the root cause named stays dropout-in-eval).
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F


# --- shim: minimal config object (the original GPTConfig also has vocab sizes and n_layer) ---
@dataclass
class GPTConfig:
    block_size: int = 16
    n_head: int = 4
    n_embd: int = 32
    dropout: float = 0.0
    bias: bool = True
# --- end of shim; copied block follows ---

TARGET = "build"
TRUTH = "bug"
BUG = "dropout-in-eval"
RULE_GAPS = ()
FORWARD = "x, layer_past=None, use_cache=False"
NOTES = "Config-object constructor; TARGET is the added factory build(d, nheads, context_length, p_drop=0.0, bias=True). forward returns (y, present) - a tuple, not a tensor; present is None unless use_cache=True. Fused c_attn rows [W_q; W_k; W_v]. No mask buffer on torch >= 2 (is_causal=True). Bug only with p_drop > 0 in eval mode."
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'dropout-in-eval'


class CausalSelfAttention(nn.Module):

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        # key, query, value projections for all heads, but in a batch
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        # output projection
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        # regularization
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        # flash attention make GPU go brrrrr but support is only in PyTorch nightly and still a bit scary
        self.flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention')
        if not self.flash:
            # print("WARNING: using slow attention. Flash Attention atm needs PyTorch nightly and dropout=0.0")
            # causal mask to ensure that attention is only applied to the left in the input sequence
            self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                                        .view(1, 1, config.block_size, config.block_size))

    def forward(self, x, layer_past=None, use_cache=False):
        B, T, C = x.size() # batch size, sequence length, embedding dimensionality (n_embd)

        # calculate query, key, values for all heads in batch and move head forward to be the batch dim
        q, k ,v  = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)

        if layer_past is not None:
            past_key = layer_past[0]
            past_value = layer_past[1]
            k = torch.cat((past_key, k), dim=-2)
            v = torch.cat((past_value, v), dim=-2)

        FULL_T = k.shape[-2]

        if use_cache is True:
            present = (k, v)
        else:
            present = None

        # causal self-attention; Self-attend: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
        if self.flash:
            # efficient attention using Flash Attention CUDA kernels
            if layer_past is not None:
                # in theory the attention is still causal but because we're computing it incrementally,
                # the last query can attend on all previous keys/values, which which is equivalent to non-causal 
                is_causal = False
            else:
                is_causal = True

            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout, is_causal=is_causal)
        else:
            # manual implementation of attention
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:,:,FULL_T-T:FULL_T,:FULL_T] == 0, float('-inf'))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C) # re-assemble all head outputs side by side

        # output projection
        y = self.resid_dropout(self.c_proj(y))
        return (y, present)


# --- added factory (not part of the original): the class is sized through a config object ---
def build(d, nheads, context_length, p_drop=0.0, bias=True):
    return CausalSelfAttention(GPTConfig(block_size=context_length, n_head=nheads, n_embd=d, dropout=p_drop, bias=bias))
