"""Decision Transformer's Atari CausalSelfAttention (minGPT-derived): a config object, projections declared KEYS FIRST (key, query, value) and a mask buffer one longer than the block (block_size + 1).

Source: https://github.com/kzl/decision-transformer/blob/0dd6289390e6eab9a019210d220ee13339534fc7/atari/mingpt/model_atari.py (class GPTConfig and class CausalSelfAttention; HEAD of the repository, "fixed comment", 2021-08-23).
Licence: MIT. The file itself carries "The MIT License (MIT) Copyright (c) 2020 Andrej Karpathy" (kept below, as the licence asks); the repository's LICENSE.md is MIT, "Copyright (c) 2021 Decision Transformer (Decision Transformer: Reinforcement Learning via Sequence Modeling) Authors (https://arxiv.org/abs/2106.01345)".
Copied: verbatim, the file's licence header, its imports up to `from torch.nn import functional as F` (the `logger = logging.getLogger(__name__)` line and `import numpy as np` are left out), class GPTConfig and class CausalSelfAttention, taken from `git show 0dd6289:atari/mingpt/model_atari.py` in the fetched history; the index's copy at the same commit (read_file) was read and holds the same text; the GELU, GPT1Config, Block and GPT classes are left out; this entry's constants are placed after the imports.
Truth: correct causal multi-head attention: key/query/value/proj Linear(n_embd, n_embd) with bias, declared in the order key, query, value (and computed k, q, v in that order); view(B, T, H, C // H).transpose(1, 2); q @ k^T / sqrt(dh); masked_fill(mask[:, :, :T, :T] == 0, -inf) with the tril buffer "mask" of size block_size + 1 (the Atari model feeds block_size + 1 tokens: return, state, action triples); softmax(-1); attn dropout; merge transpose(1, 2).contiguous().view(B, T, C); proj; resid dropout. `layer_past` is accepted and ignored. Divisibility asserted. Built only from a config: CausalSelfAttention(config) reads config.n_embd, config.n_head, config.block_size, config.attn_pdrop, config.resid_pdrop (GPTConfig(vocab_size, block_size, **kwargs) sets the rest as attributes; the dropouts default to 0.1 as class attributes).
"""
"""
The MIT License (MIT) Copyright (c) 2020 Andrej Karpathy

Permission is hereby granted, free of charge, to any person obtaining a copy of this software and associated documentation files (the "Software"), to deal in the Software without restriction, including without limitation the rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies of the Software, and to permit persons to whom the Software is furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
"""

import math
import logging

import torch
import torch.nn as nn
from torch.nn import functional as F

TARGET = "CausalSelfAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("config-object", "keys-first-declaration", "mask-buffer-block-size-plus-one", "dropout-0.1-by-default")
FORWARD = "x, layer_past=None"
NOTES = ("CausalSelfAttention(config): config.n_embd, config.n_head, config.block_size, config.attn_pdrop, "
         "config.resid_pdrop; GPTConfig(vocab_size, block_size, **kwargs). Weights key, query, value, proj (declared "
         "keys first), all with bias; buffer mask (1, 1, block_size + 1, block_size + 1).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = 'correct and causal; the config object must be built (n_embd, n_head, block_size, attn_pdrop, resid_pdrop) and the keys-first declarations read by name, not by position'

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
        # self.register_buffer("mask", torch.tril(torch.ones(config.block_size, config.block_size))
        #                              .view(1, 1, config.block_size, config.block_size))
        self.register_buffer("mask", torch.tril(torch.ones(config.block_size + 1, config.block_size + 1))
                                     .view(1, 1, config.block_size + 1, config.block_size + 1))
        self.n_head = config.n_head

    def forward(self, x, layer_past=None):
        B, T, C = x.size()

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
