"""makemore's CausalSelfAttention: a @dataclass config (ModelConfig, block_size and vocab_size default None), one fused c_attn split [Q; K; V], the mask buffer named "bias".

Source: https://github.com/karpathy/makemore/blob/988aa59e4d8fefa526d06f3b453ad116258398d4/makemore.py (dataclass ModelConfig and class CausalSelfAttention; the class is unchanged since c079e1c "add a bag of words model...", 2022-08-21; HEAD 988aa59).
Licence: MIT (Copyright (c) 2022 Andrej Karpathy), LICENSE at the repository root.
Copied: verbatim, the imports the copied code uses (math, dataclass, torch, nn, F), the dataclass ModelConfig and class CausalSelfAttention, taken from `git show 988aa59:makemore.py` in the fetched history; the index's copy of makemore.py was read and holds the same class. The rest of the script (data, training, the other models) is left out; this entry's constants are placed after the imports.
Truth: correct causal multi-head attention: c_attn Linear(n_embd, 3 n_embd) with bias split [Q; K; V] along the features, view(B, T, H, C // H).transpose(1, 2), q @ k^T / sqrt(dh), masked_fill(bias[:, :, :T, :T] == 0, -inf) with the tril buffer "bias" (1, 1, block_size, block_size), softmax(-1), merge transpose(1, 2).contiguous().view(B, T, C), c_proj Linear(n_embd, n_embd) with bias. No dropout. Divisibility asserted. Built only from a config: CausalSelfAttention(config) reads config.n_embd, config.n_head, config.block_size.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F

TARGET = "CausalSelfAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("config-object", "dataclass-config-defaults-none", "fused-qkv", "mask-buffer-named-bias")
FORWARD = "x"
NOTES = ("CausalSelfAttention(config): config.n_embd, config.n_head, config.block_size (ModelConfig is a dataclass whose "
         "block_size and vocab_size default to None). Weights c_attn (3C, C) = [W_q; W_k; W_v], c_proj; buffer bias.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = 'correct and causal; built from a config object (n_embd, n_head, block_size); fused [q; k; v] split by rows'

@dataclass
class ModelConfig:
    block_size: int = None # length of the input sequences of integers
    vocab_size: int = None # the input integers are in range [0 .. vocab_size -1]
    # parameters below control the sizes of each model slightly differently
    n_layer: int = 4
    n_embd: int = 64
    n_embd2: int = 64
    n_head: int = 4

class CausalSelfAttention(nn.Module):
    """
    A vanilla multi-head masked self-attention layer with a projection at the end.
    It is possible to use torch.nn.MultiheadAttention here but I am including an
    explicit implementation here to show that there is nothing too scary here.
    """

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        # key, query, value projections for all heads, but in a batch
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        # output projection
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        # causal mask to ensure that attention is only applied to the left in the input sequence
        self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                                     .view(1, 1, config.block_size, config.block_size))
        self.n_head = config.n_head
        self.n_embd = config.n_embd

    def forward(self, x):
        B, T, C = x.size() # batch size, sequence length, embedding dimensionality (n_embd)

        # calculate query, key, values for all heads in batch and move head forward to be the batch dim
        q, k ,v  = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) # (B, nh, T, hs)

        # causal self-attention; Self-attend: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:,:,:T,:T] == 0, float('-inf'))
        att = F.softmax(att, dim=-1)
        y = att @ v # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C) # re-assemble all head outputs side by side

        # output projection
        y = self.c_proj(y)
        return y
