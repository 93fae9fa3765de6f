"""llm.c reference PyTorch GPT-2: CausalSelfAttention (manual attention, no dropout, no flash).

Source: https://github.com/karpathy/llm.c/blob/00627070aaf71756ba12acb6d32ae151f25b4a24/train_gpt2.py (lines 37-69: class CausalSelfAttention); commit 0062707 is on branches of karpathy/llm.c (e.g. refs/heads/attempt_fix_zero1).
Licence: MIT (Copyright (c) 2024 Andrej Karpathy)
Copied: verbatim with these additions: a minimal config dataclass (n_embd, n_head, block_size) above and a factory build() below; imports as in the original.
Truth: correct causal MHA: fused c_attn Linear(n_embd, 3*n_embd) (bias) with [W_q; W_k; W_v] row blocks, split(n_embd, dim=2), view(B, T, nh, hs).transpose(1, 2), scores * 1/sqrt(hs), masked_fill(bias == 0, -inf) with a registered tril buffer named "bias" of shape (1, 1, bs, bs), softmax(-1), merge transpose(1, 2).contiguous().view(B, T, C), c_proj Linear(n_embd, n_embd) with bias. Q/K/V always have bias.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F


# --- shim: minimal config object (the original GPTConfig also has vocab_size, n_layer) ---
@dataclass
class GPTConfig:
    block_size: int = 16
    n_head: int = 4
    n_embd: int = 32
# --- end of shim; copied block follows ---

TARGET = "build"
TRUTH = "correct"
BUG = None
RULE_GAPS = ()
FORWARD = "x"
NOTES = "Config-object constructor; TARGET is the added factory build(d, nheads, context_length). The causal mask buffer is called 'bias' (a tril of ones, 1 = keep) - a checker that looks for parameters/buffers named 'bias' must not mistake it for a Linear bias. No dropout at all."
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None


class CausalSelfAttention(nn.Module):

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        # key, query, value projections for all heads, but in a batch
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        # output projection
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        # regularization
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        # not really a 'bias', more of a mask, but following the OpenAI/HF naming though
        self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                                     .view(1, 1, config.block_size, config.block_size))

    def forward(self, x):
        B, T, C = x.size() # batch size, sequence length, embedding dimensionality (n_embd)
        # calculate query, key, values for all heads in batch and move head forward to be the batch dim
        qkv = self.c_attn(x)
        q, k, v = qkv.split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)
        # manual implementation of attention
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:,:,:T,:T] == 0, float('-inf'))
        att = F.softmax(att, dim=-1)
        y = att @ v # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C) # re-assemble all head outputs side by side
        # output projection
        y = self.c_proj(y)
        return y


# --- added factory (not part of the original): the class is sized through a config object ---
def build(d, nheads, context_length):
    return CausalSelfAttention(GPTConfig(block_size=context_length, n_head=nheads, n_embd=d))
