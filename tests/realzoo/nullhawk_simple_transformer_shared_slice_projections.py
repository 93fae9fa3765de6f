"""simple-transformer's SelfAttention: the widely copied "Transformer from scratch" layer - VALUES FIRST in
forward(values, keys, query, mask), and its projections are ONE Linear(head_dim, head_dim, bias=False) each for
values, keys and queries, applied to the input already cut into heads (x.reshape(N, n, heads, head_dim)): every
head reads only its own slice of the input, with the same weights as every other head; einsum scores divided by
sqrt(embed_size), the model width, not the head width; the mask is an argument (1 = keep), masked_fill(mask == 0,
-1e20); fc_out Linear(heads * head_dim, embed_size) with bias. The package's Transformer.make_trg_mask gives
tril(ones(n, n)).expand(N, 1, n, n).

Source: https://github.com/nullHawk/simple-transformer (the PyPI project's homepage), file
simple_transformer/self_attention.py as released in simple-transformer 0.0.1 on PyPI.
Licence: MIT (Copyright (c) 2025 nullHawk), LICENSE in the wheel's dist-info.
Copied: verbatim, the whole file simple_transformer/self_attention.py of the PyPI wheel simple-transformer==0.0.1
(pip download --no-deps). ADDED: this entry's constants after the imports.
Truth: bug, two mistakes. With the tril keep-mask it equals mha_forward with BLOCK-DIAGONAL projections (the shared
head_dim x head_dim matrix repeated on the diagonal, so a head sees only its own input slice) and the query weight
multiplied by sqrt(head_dim / embed_size): the scores are divided by sqrt(embed_size) instead of sqrt(head_dim).
With the same block-diagonal weights and the lesson's scale it differs; the parameter count is 3 head_dim^2 +
embed_size^2 + embed_size and shrinks as the heads grow. No leak given its mask (-1e20 underflows to an exact 0).
"""
import torch
import torch.nn as nn


TARGET = "SelfAttention"
TRUTH = "bug"
BUG = "scale-by-sqrt-d and shared per-slice head projections"
RULE_GAPS = ("values-first-forward", "causal-only-through-mask-arg", "mask-keep-1", "finite-fill-1e20",
             "no-divisibility-error-type-assert", "qkv-no-bias")
FORWARD = "values, keys, query, mask"
NOTES = ("SelfAttention(embed_size, heads). forward(values, keys, query, mask) -> (N, n, embed_size); mask (N, 1, n, n) "
         "or (n, n), 1 = keep. values/keys/queries: Linear(head_dim, head_dim, bias=False) shared by the heads.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("the heads share one head_dim x head_dim projection applied to their own input slice (param-count, "
                    "head-invariance) and the scores are divided by sqrt(embed_size)")


class SelfAttention(nn.Module):
    def __init__(self, embed_size, heads):
        super(SelfAttention, self).__init__()
        self.embed_size = embed_size
        self.heads = heads
        self.head_dim = embed_size // heads

        assert (self.head_dim * heads == embed_size), "Embed size needs to be divided by heads"

        self.values = nn.Linear(self.head_dim, self.head_dim, bias=False)
        self.keys = nn.Linear(self.head_dim, self.head_dim, bias=False)
        self.queries = nn.Linear(self.head_dim, self.head_dim, bias=False)
        self.fc_out = nn.Linear(heads * self.head_dim, embed_size)

    def forward(self, values, keys, query, mask):
        N = query.shape[0]
        value_len, key_len, query_len = values.shape[1], keys.shape[1], query.shape[1]

        # Split the embedding into self.heads pieces
        values = values.reshape(N, value_len, self.heads, self.head_dim)
        keys = keys.reshape(N, key_len, self.heads, self.head_dim)
        queries = query.reshape(N, query_len, self.heads, self.head_dim)

        values = self.values(values)
        keys = self.keys(keys)
        queries = self.queries(queries)

        energy = torch.einsum("nqhd,nkhd->nhqk", [queries, keys])
        # queries shape: (N, query_len, heads, heads_dim)
        # keys shape: (N, key_len, heads, heads_dim)
        # energy shape: (N, heads, query_len, key_len)

        if mask is not None:
            energy = energy.masked_fill(mask == 0, float("-1e20"))
        
        attention = torch.softmax(energy / (self.embed_size ** (1/2)), dim=3)

        out = torch.einsum("nhql,nlhd->nqhd", [attention, values]).reshape(
            N, query_len, self.heads * self.head_dim
        )
        # attention shape: (N, heads, query_len, key_len)
        # values shape: (N, value_len, heads, heads_dim)
        # out shape: (N, query_len, heads, head_dim) then flatten last two dimensions

        out = self.fc_out(out)
        return out
