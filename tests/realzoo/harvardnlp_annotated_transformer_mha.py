"""MultiHeadedAttention from "The Annotated Transformer" (Harvard NLP): forward(query, key, value, mask), mask from subsequent_mask.

Source: https://github.com/harvardnlp/annotated-transformer/blob/0a91a254735c07532e23733dce8a693e504f3a08/the_annotated_transformer.py (lines 286-288: clones; lines 441-446: subsequent_mask; lines 519-528: attention; lines 589-628: class MultiHeadedAttention); commit on refs/heads/master.
Licence: MIT (Copyright (c) 2018 Alexander Rush)
Copied: verbatim (functions clones, subsequent_mask, attention and class MultiHeadedAttention; `import torch`, `import torch.nn as nn`, `import math`, `import copy` as in the original imports)
Truth: correct causal MHA when called as m(x, x, x, subsequent_mask(n)): four Linear(d_model, d_model) WITH bias in self.linears (q, k, v, out), view(nbatches, -1, h, d_k).transpose(1, 2), scores / sqrt(d_k), masked_fill(mask == 0, -1e9) (FINITE fill: a masked weight is exp(-1e9 - max) which underflows to exactly 0 in float32/float64 unless scores reach ~1e9), softmax(-1), dropout (default p=0.1!), merge transpose(1, 2).contiguous().view(nbatches, -1, h*d_k), last Linear. Not causal by itself: causality comes only from the mask argument.
"""
import torch
import torch.nn as nn
import math
import copy

TARGET = "MultiHeadedAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ('mask-fill',)
FORWARD = "query, key, value, mask=None"
NOTES = "Constructor MultiHeadedAttention(h, d_model, dropout=0.1) - heads FIRST and dropout 0.1 by default (use eval() or dropout=0.0). Causal only with a mask: mask is bool/0-1 with 1/True = KEEP (tril), shape (1, n, n) or (B, n, n) (it is unsqueezed at dim 1 for heads); subsequent_mask(n) builds it. Weights in self.linears[0..3] = q, k, v, out (all with bias). Masked scores are filled with -1e9, not -inf. Stores the attention map in self.attn."
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = 'fill-minus-1e9'  # the rule broken, named at its fill (the math is correct)
EXPECTED_BECAUSE = 'causal once called with a (1, n, n) keep-mask, which mha-check finds by reproduction; its -1e9 fill breaks the lesson rule mask-fill (allowed scores below -1e9 let the future in)'


def clones(module, N):
    "Produce N identical layers."
    return nn.ModuleList([copy.deepcopy(module) for _ in range(N)])


def subsequent_mask(size):
    "Mask out subsequent positions."
    attn_shape = (1, size, size)
    subsequent_mask = torch.triu(torch.ones(attn_shape), diagonal=1).type(
        torch.uint8
    )
    return subsequent_mask == 0


def attention(query, key, value, mask=None, dropout=None):
    "Compute 'Scaled Dot Product Attention'"
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn


class MultiHeadedAttention(nn.Module):
    def __init__(self, h, d_model, dropout=0.1):
        "Take in model size and number of heads."
        super(MultiHeadedAttention, self).__init__()
        assert d_model % h == 0
        # We assume d_v always equals d_k
        self.d_k = d_model // h
        self.h = h
        self.linears = clones(nn.Linear(d_model, d_model), 4)
        self.attn = None
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        "Implements Figure 2"
        if mask is not None:
            # Same mask applied to all h heads.
            mask = mask.unsqueeze(1)
        nbatches = query.size(0)

        # 1) Do all the linear projections in batch from d_model => h x d_k
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            for lin, x in zip(self.linears, (query, key, value))
        ]

        # 2) Apply attention on all the projected vectors in batch.
        x, self.attn = attention(
            query, key, value, mask=mask, dropout=self.dropout
        )

        # 3) "Concat" using a view and apply a final linear.
        x = (
            x.transpose(1, 2)
            .contiguous()
            .view(nbatches, -1, self.h * self.d_k)
        )
        del query
        del key
        del value
        return self.linears[-1](x)
