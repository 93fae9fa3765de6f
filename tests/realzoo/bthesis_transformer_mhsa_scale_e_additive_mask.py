"""A bachelor's thesis transformer's MHSelfAttention (bthesis-transformer, "'Transformers for Natural Language'
implementation for Bachelor's thesis"): Peter Bloem's "former" layer - toQueries/toKeys/toValues without bias,
unifyHeads with bias, heads folded into the batch (b * h, t, s) for bmm - causal only with the constructor flag
mask=True (DecoderBlock's maskedAttention), where an ADDITIVE mask is built in forward: triu(ones(t, t), 1) with its
ones replaced by -inf, added to the scores. Queries and keys are each divided by e ** (1/4) with e the EMBEDDING width
("instead of scaling the dot product"): the scores are divided by sqrt(e), not by sqrt(s) of the head width - the
bug former fixed upstream in e3125a4 (tests/realzoo/pbloem_former_selfattention_scale_e.py), here in another
published copy.

Source: https://pypi.org/project/bthesis-transformer/ (bthesis-transformer 0.1; the wheel's METADATA names no
repository: "Home-page: UNKNOWN"; author Ryan Ott), file bthesis-transformer/modules.py as released in
bthesis-transformer 0.1 on PyPI.
Licence: MIT (the wheel's METADATA classifier "License :: OSI Approved :: MIT License" and LICENSE in its dist-info,
"Copyright (c) 2023 Ryan Ott").
Copied: verbatim from the PyPI wheel bthesis-transformer==0.1 (pip download --no-deps): lines 1-3 of modules.py
(imports) and lines 6-71 (MHSelfAttention). The module's SimpleSelfAttention (single head, no mask, scores divided
by sqrt(queries.size(1)) - the number of tokens - despite its comment) and the blocks are left out.
ADDED: this entry's constants.
Truth: bug. With mask=True the output is mha_forward with W_q = toQueries * sqrt(s / e) = toQueries / sqrt(heads)
(scores / sqrt(e)), W_k, W_v, W_o = toKeys, toValues, unifyHeads (+ its bias), exactly; the lesson's layer (scores /
sqrt(s)) differs from it; no leak. With one head it is the lesson's layer. mask=False (the default) is bidirectional.
A second defect: the additive mask is made with torch.ones(t, t) without device=, so on any device but the CPU
forward raises (shown on the meta device).
"""
import torch
from torch import nn
from torch.nn import functional as F

TARGET = "MHSelfAttention"
TRUTH = "bug"
BUG = "scale-by-sqrt-d-model"
RULE_GAPS = ("causal-only-with-flag-named-mask", "additive-inf-mask-built-in-forward", "heads-folded-into-batch",
             "q-and-k-each-scaled-by-e-quarter", "no-context-length")
FORWARD = "x"
NOTES = ("MHSelfAttention(k, heads=4, mask=False): k is the embedding width. forward(x) -> (B, n, k); causal only "
         "with mask=True; scores / sqrt(k) instead of / sqrt(k // heads).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'scale-by-sqrt-d'
EXPECTED_BECAUSE = ("built with mask=True it is the lesson's layer with its scores divided by sqrt(d_model) "
                    "instead of sqrt(head width): reference-match fails and the scale-by-sqrt-d mistake reproduces "
                    "it exactly; mask-buffer fails too (the additive mask is made on the CPU)")


class MHSelfAttention(nn.Module):
    """Multi-head self-attention"""

    # k is the dimensionality of the embedding space (len of the input vector)
    def __init__(self, k, heads=4, mask=False):
        super().__init__()

        assert k % heads == 0  # embedding dimension must be divisible by number of heads
        self.k, self.heads, self.mask = k, heads, mask

        # computing queries, keys and values in parallel for all heads
        # bias=False so that we can use this as a simple projection
        self.toQueries = nn.Linear(k, k, bias=False)
        self.toKeys = nn.Linear(k, k, bias=False)
        self.toValues = nn.Linear(k, k, bias=False)

        self.unifyHeads = nn.Linear(k, k)  # W0 matrix

    def forward(self, x):
        b, t, e = x.size()
        h = self.heads

        assert e == self.k  # sanity check

        queries = self.toQueries(x)
        keys = self.toKeys(x)
        values = self.toValues(x)

        s = e // h  # s is the dimensionality of the embedding space per head

        # split the embedding space into multiple heads
        queries = queries.view(b, t, h, s)
        keys = keys.view(b, t, h, s)
        values = values.view(b, t, h, s)

        # fold heads into batch dimension so that we can bmm all heads at once
        # first swapping the time and head dimensions, then folding the heads into the batch dimension
        queries = queries.transpose(1, 2).contiguous().view(b * h, t, s)
        keys = keys.transpose(1, 2).contiguous().view(b * h, t, s)
        values = values.transpose(1, 2).contiguous().view(b * h, t, s)

        # scaling the queries and keys in place to save memory
        queries = queries / (e ** (1/4))
        keys = keys / (e ** (1/4))  # instead of scaling the dot product

        dot = torch.bmm(queries, keys.transpose(1, 2))  # (b * h, t, t)

        if self.mask:
            # Create a mask to remove the upper half of the dot matrix, excluding the diagonal
            mask = torch.triu(torch.ones(t, t), diagonal=1)
            # Set the masked positions to float('-inf') to minimize their impact on the softmax operation
            mask = mask.masked_fill(mask == 1, float('-inf'))
            # Add the mask to the dot product matrix
            dot = dot + mask.unsqueeze(0)

        # row-wise softmax
        dot = F.softmax(dot, dim=2)  # (b * h, t, t)

        # apply the attention weights to the values
        out = torch.bmm(dot, values).view(b, h, t, s)

        # swap head and time dimensions back again so that we can concatenate the heads
        out = out.transpose(1, 2).contiguous().view(b, t, h * s)

        # concatenate the heads and return
        return self.unifyHeads(out)
