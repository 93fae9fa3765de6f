"""Correct, Llama-style with a setting mha-check does not know: built from an args object, it reads
`args.softcap` (a logit soft cap, Gemma 2's, off when None) beside `args.max_batch_size` and `args.n_kv_heads`,
which mha-check knows.

Style: Meta's llama model.py Attention (wq/wk/wv without bias, repeat of K/V heads, cache buffers sized by
max_batch_size x max_seq_len), without rotary embeddings, with a causal mask made on x's device in forward, and with
the lesson's divisibility guard and output bias.
mha-check's config object has no softcap: cannot tell, naming the setting and the --arg, never a failing
construct; `--arg softcap=None` makes it pass.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "Attention"
CANNOT_TELL = ("construct",)
SAYS = ("'softcap'", "--arg softcap=VALUE")
ARG = {"softcap": None}


class Attention(nn.Module):
    def __init__(self, args):
        super().__init__()
        assert args.dim % args.n_heads == 0, "dim must be divisible by n_heads"
        self.n_heads = args.n_heads
        self.n_kv_heads = args.n_heads if args.n_kv_heads is None else args.n_kv_heads
        self.n_rep = self.n_heads // self.n_kv_heads
        self.head_dim = args.dim // args.n_heads
        self.softcap = args.softcap
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
        if self.softcap is not None:
            scores = self.softcap * torch.tanh(scores / self.softcap)
        mask = torch.full((seqlen, seqlen), float("-inf"), device=x.device).triu(1)
        scores = F.softmax(scores + mask, dim=-1)
        output = torch.matmul(scores, values).transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.wo(output)
