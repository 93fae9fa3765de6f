"""tllm CausalSelfAttention (spelled "CasualSelfAttention" upstream): nanoGPT/llm.c-style fused-qkv causal self-attention.

Source: https://github.com/priyangkarghosh/tllm/blob/23637ebe748d2e653437ce7f04eff08ad5451c75/src/model/attention.py (class CasualSelfAttention, the whole file apart from its imports). Commit as stored in the search index (read with read_file at that commit); not cross-checked against a fetched git history.
Licence: MIT (Copyright (c) 2025 priyangkarghosh), LICENSE at the repository root (index commit 48e346c).
Copied: verbatim (class CasualSelfAttention, character for character including the blank lines with trailing spaces). The original's `from model.config import GPTConfig` is replaced by a minimal GPTConfig dataclass shim above the class with only the three fields the class reads (n_embd, n_head, block_size); imports math, torch, torch.nn as nn, functional as F as in the original.
Truth: correct causal MHA: fused c_attn Linear(n_embd, 3*n_embd) (bias) with [W_q; W_k; W_v] row blocks, split(n_embd, dim=2), view(B, T, nh, hs).transpose(1, 2), scores * 1/sqrt(hs), masked_fill(bias == 0, -inf) with a registered tril buffer named "bias" (1, 1, bs, bs), softmax(-1), merge transpose(1, 2).contiguous().view(B, T, C), c_proj Linear(n_embd, n_embd) with bias. No dropout. Constructor asserts n_embd % n_head == 0. The attribute c_proj.NANOGPT_SCALE_INIT is a plain int flag (used by the model's weight init), not a parameter.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F


# --- shim: minimal config object (the original imports GPTConfig from model.config) ---
@dataclass
class GPTConfig:
    n_embd: int = 32
    n_head: int = 4
    block_size: int = 16
# --- end of shim; copied block follows ---

TARGET = "CasualSelfAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ()
FORWARD = "x"
NOTES = "Constructor CasualSelfAttention(config: GPTConfig) - a single annotated config parameter (n_embd, n_head, block_size); no factory is added, the class itself is the target. The causal mask buffer is called 'bias' (tril of ones, 1 = keep), as in nanoGPT/llm.c. Head width is computed in forward as C // n_head."
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None


class CasualSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        
        assert config.n_embd % config.n_head == 0, "n_embd must be divisible by n_head"
        
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.c_proj.NANOGPT_SCALE_INIT = 1 # no idea what this does
        
        self.n_head = config.n_head
        self.n_embd = config.n_embd

        self.register_buffer(
            "bias",
            torch.tril(torch.ones(config.block_size, config.block_size))
                .view(1, 1, config.block_size, config.block_size)
        )

    def forward(self, x):
        B, T, C = x.size()
        H = C // self.n_head

        # project to q, k, v
        qkv = self.c_attn(x)
        q, k, v = qkv.split(self.n_embd, dim=2)
        q = q.view(B, T, self.n_head, H).transpose(1, 2)
        k = k.view(B, T, self.n_head, H).transpose(1, 2)
        v = v.view(B, T, self.n_head, H).transpose(1, 2)

        # scaled dot-product attention
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(H))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
        att = F.softmax(att, dim=-1)

        y = att @ v  # (B, n_head, T, H)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        y = self.c_proj(y)
        return y
