"""nanoGPT CausalSelfAttention as of commit 6170531 ("enable sdpa for nonzero dropout"), before the "dont always dropout!" fix.

Source: https://github.com/karpathy/nanoGPT/blob/6170531b8a5f1c15dbf41121d54909e29838af0a/model.py (lines 37-84: class CausalSelfAttention). Text read from an index copy of a nanoGPT-derived file whose CausalSelfAttention is character-identical to these lines (checked against the git history of karpathy/nanoGPT).
Licence: MIT (Copyright (c) 2022 Andrej Karpathy)
Copied: verbatim with these additions: a minimal config dataclass (n_embd, n_head, block_size, bias, dropout) and a factory build() ABOVE/BELOW the copied class; imports as in the original file.
Truth: BUG, dropout in eval: on torch >= 2.0 the flash path calls F.scaled_dot_product_attention(..., dropout_p=self.dropout, is_causal=True) unconditionally, and SDPA's dropout does not look at module.eval(), so with config.dropout > 0 the layer drops attention weights at inference (output random, differs from the reference in eval mode). With dropout = 0 it is a correct causal MHA: fused c_attn Linear(n_embd, 3*n_embd) with [W_q; W_k; W_v] row blocks, split(n_embd, dim=2), view(B, T, nh, hs).transpose(1, 2), SDPA default scale 1/sqrt(hs), merge transpose(1, 2).contiguous().view(B, T, C), c_proj Linear(n_embd, n_embd, bias=config.bias). Evidence: commit https://github.com/karpathy/nanoGPT/commit/7399dfe39d24579cc1fb391475864ad28f19f6f7 ("dont always dropout!", PR #240) changed it to dropout_p=self.dropout if self.training else 0; the same recurring bug is described in huggingface/pytorch-image-models PR #1978.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F


# --- shim: minimal config object (the original GPTConfig has more fields) ---
@dataclass
class GPTConfig:
    n_embd: int = 32
    n_head: int = 4
    block_size: int = 16
    bias: bool = True
    dropout: float = 0.0
# --- end of shim; copied block follows ---

TARGET = "build"
TRUTH = "bug"
BUG = "dropout-in-eval"
RULE_GAPS = ()
FORWARD = "x"
NOTES = "Constructor takes a config object (n_embd, n_head, block_size, bias, dropout); TARGET is the added factory build(d, nheads, context_length, p_drop=0.0, bias=True). Fused c_attn rows [W_q; W_k; W_v]; c_proj has bias only if config.bias. On torch >= 2.0 the SDPA path is always taken (no mask buffer registered). Bug visible only with p_drop > 0 in eval mode (output non-deterministic)."
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
        # flash attention make GPU go brrrrr but support is only in PyTorch >= 2.0
        self.flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention')
        if not self.flash:
            print("WARNING: using slow attention. Flash Attention requires PyTorch >= 2.0")
            # causal mask to ensure that attention is only applied to the left in the input sequence
            self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                                        .view(1, 1, config.block_size, config.block_size))

    def forward(self, x):
        B, T, C = x.size() # batch size, sequence length, embedding dimensionality (n_embd)

        # calculate query, key, values for all heads in batch and move head forward to be the batch dim
        q, k ,v  = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)

        # causal self-attention; Self-attend: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
        if self.flash:
            # efficient attention using Flash Attention CUDA kernels
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=self.dropout, is_causal=True)
        else:
            # manual implementation of attention
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:,:,:T,:T] == 0, float('-inf'))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C) # re-assemble all head outputs side by side

        # output projection
        y = self.resid_dropout(self.c_proj(y))
        return y


# --- added factory (not part of the original): the class is sized through a config object ---
def build(d, nheads, context_length, p_drop=0.0, bias=True):
    return CausalSelfAttention(GPTConfig(n_embd=d, n_head=nheads, block_size=context_length, bias=bias, dropout=p_drop))
