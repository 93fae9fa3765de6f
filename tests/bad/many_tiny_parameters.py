"""A correct layer (the lesson's, in Raschka's names) that also keeps 20,000 one-element parameters in a
ParameterList: its description (every parameter's name and shape) is larger than the 1 MB mha-check's trusted side
reads of one module.  Found by the fourth red team: it failed construct with "your code corrupted the channel ... it
writes to file descriptors it does not own", a false accusation of a limit of mha-check's.  It is cannot-tell, and
says why.
"""
import torch
import torch.nn as nn


class MyAttn(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.extra = nn.ParameterList([nn.Parameter(torch.zeros(1)) for _ in range(20000)])
        self.d_out, self.num_heads, self.head_dim = d_out, num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        split = lambda t: t.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)  # noqa: E731
        queries, keys, values = split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x))
        scores = queries @ keys.transpose(2, 3)
        scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        weights = self.dropout(torch.softmax(scores / keys.shape[-1] ** 0.5, dim=-1))
        context = (weights @ values).transpose(1, 2).contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context)
