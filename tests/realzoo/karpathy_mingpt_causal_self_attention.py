"""minGPT CausalSelfAttention (2020-2022 version): config object, separate key/query/value Linear with bias, registered tril mask buffer, residual dropout.

Source: https://github.com/karpathy/minGPT/blob/3ed14b2cec0dfdad3f4b2831f2b4a86d11aef150/mingpt/model.py (lines 19-29: class GPTConfig; lines 37-79: class CausalSelfAttention); commit "i know it doesn't look like much, but this kwarg was not used lol :D" on refs/heads/master (before the July 2022 refactor that fused key/query/value into c_attn).
Licence: MIT ("The MIT License (MIT) Copyright (c) 2020 Andrej Karpathy", LICENSE at the repository root)
Copied: verbatim (class GPTConfig, class CausalSelfAttention); `import math`, `import torch`, `import torch.nn as nn`, `from torch.nn import functional as F` as in the original. Added BELOW the copied block: a factory build(d, nheads, context_length, attn_pdrop=0.0, resid_pdrop=0.0) that fills the config object.
Truth: correct causal MHA: key/query/value Linear(n_embd, n_embd) WITH bias, view(B, T, nh, hs).transpose(1, 2), scores * 1/sqrt(hs), masked_fill(mask[:, :, :T, :T] == 0, -inf) with a registered tril buffer named "mask" of shape (1, 1, bs, bs), softmax(-1), attention dropout, merge transpose(1, 2).contiguous().view(B, T, C), proj Linear(n_embd, n_embd) with bias, then residual dropout (resid_drop). GPTConfig's class defaults are attn_pdrop = resid_pdrop = 0.1.
"""
import math

import torch
import torch.nn as nn
from torch.nn import functional as F

TARGET = "build"
TRUTH = "correct"
BUG = None
RULE_GAPS = ()
FORWARD = "x"
NOTES = ("Config-object constructor CausalSelfAttention(config) reading config.n_embd, n_head, block_size, attn_pdrop, resid_pdrop; "
         "minGPT's GPTConfig(vocab_size, block_size, **kwargs) has class defaults attn_pdrop = resid_pdrop = embd_pdrop = 0.1. TARGET is "
         "the added factory build(d, nheads, context_length, attn_pdrop=0.0, resid_pdrop=0.0). Separate projections named key, query, "
         "value (in that order in the module) and proj; mask buffer named 'mask' (tril of ones, 1 = keep, shape (1, 1, bs, bs)). "
         "Dropout also on the output (resid_drop).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None


class GPTConfig:
    """ base GPT config, params common to all GPT versions """
    embd_pdrop = 0.1
    resid_pdrop = 0.1
    attn_pdrop = 0.1

    def __init__(self, vocab_size, block_size, **kwargs):
        self.vocab_size = vocab_size
        self.block_size = block_size
        for k,v in kwargs.items():
            setattr(self, k, v)


class CausalSelfAttention(nn.Module):
    """
    A vanilla multi-head masked self-attention layer with a projection at the end.
    It is possible to use torch.nn.MultiheadAttention here but I am including an
    explicit implementation here to show that there is nothing too scary here.
    """

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        # key, query, value projections for all heads
        self.key = nn.Linear(config.n_embd, config.n_embd)
        self.query = nn.Linear(config.n_embd, config.n_embd)
        self.value = nn.Linear(config.n_embd, config.n_embd)
        # regularization
        self.attn_drop = nn.Dropout(config.attn_pdrop)
        self.resid_drop = nn.Dropout(config.resid_pdrop)
        # output projection
        self.proj = nn.Linear(config.n_embd, config.n_embd)
        # causal mask to ensure that attention is only applied to the left in the input sequence
        self.register_buffer("mask", torch.tril(torch.ones(config.block_size, config.block_size))
                                     .view(1, 1, config.block_size, config.block_size))
        self.n_head = config.n_head

    def forward(self, x):
        B, T, C = x.size() # batch size, sequence length, embedding dimensionality (n_embd)

        # calculate query, key, values for all heads in batch and move head forward to be the batch dim
        k = self.key(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)
        q = self.query(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)
        v = self.value(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)

        # causal self-attention; Self-attend: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:,:,:T,:T] == 0, float('-inf'))
        att = F.softmax(att, dim=-1)
        att = self.attn_drop(att)
        y = att @ v # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C) # re-assemble all head outputs side by side

        # output projection
        y = self.resid_drop(self.proj(y))
        return y


# --- added factory (not part of the original): the class is sized through a config object ---
def build(d, nheads, context_length, attn_pdrop=0.0, resid_pdrop=0.0):
    cfg = GPTConfig(vocab_size=1, block_size=context_length, n_embd=d, n_head=nheads,
                    attn_pdrop=attn_pdrop, resid_pdrop=resid_pdrop)
    return CausalSelfAttention(cfg)
