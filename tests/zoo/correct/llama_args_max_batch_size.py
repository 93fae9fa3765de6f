"""Correct, Llama-style: built from an args object, it reads `args.max_batch_size` (and `args.n_kv_heads`, which
mha-check knows) to size a key/value cache it never uses in training.

Style: Meta's llama model.py Attention (wq/wk/wv without bias, repeat of K/V heads, cache buffers sized by
max_batch_size x max_seq_len), without rotary embeddings, with a causal mask made on x's device in forward, and with
the lesson's divisibility guard and output bias.
mha-check's config object had no max_batch_size: construct was cannot tell, naming the setting and the --arg
(this file was ours/config_lacks_setting.py). It answers max_batch_size as a constructor parameter of that name
gets it (harness.wire.config.MAX_BATCH), and the layer passes every check.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "Attention"


class Attention(nn.Module):
    def __init__(self, args):
        super().__init__()
        assert args.dim % args.n_heads == 0, "dim must be divisible by n_heads"
        self.n_heads = args.n_heads
        self.n_kv_heads = args.n_heads if args.n_kv_heads is None else args.n_kv_heads
        self.n_rep = self.n_heads // self.n_kv_heads
        self.head_dim = args.dim // args.n_heads
        self.wq = nn.Linear(args.dim, args.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(args.n_heads * self.head_dim, args.dim)
        cache = (args.max_batch_size, args.max_seq_len, self.n_kv_heads, self.head_dim)
        self.register_buffer("cache_k", torch.zeros(cache), persistent=False)
        self.register_buffer("cache_v", torch.zeros(cache), persistent=False)

    def forward(self, x):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim).transpose(1, 2)
        xk = self.wk(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim).transpose(1, 2)
        xv = self.wv(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim).transpose(1, 2)
        keys = torch.repeat_interleave(xk, self.n_rep, dim=1)
        values = torch.repeat_interleave(xv, self.n_rep, dim=1)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim)
        mask = torch.full((seqlen, seqlen), float("-inf"), device=x.device).triu(1)
        scores = F.softmax(scores + mask, dim=-1)
        output = torch.matmul(scores, values).transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.wo(output)
