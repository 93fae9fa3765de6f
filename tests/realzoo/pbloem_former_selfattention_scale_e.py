"""SelfAttention (the "canonical" one) from Peter Bloem's `former`, before "Fix bug in scaling MHSA": queries and keys each divided by d_model**(1/4).

Source: https://github.com/pbloem/former/blob/557e7679e2491c25989df1e4c1c67565ce4f17a8/former/modules.py (lines 9-87: class SelfAttention) and https://github.com/pbloem/former/blob/557e7679e2491c25989df1e4c1c67565ce4f17a8/former/util/util.py (lines 117-131: function mask_); commit "Fixing various import issues." on refs/heads/master. The class text is the same from ba8a22f (2021-04-30) until the fix.
Licence: MIT (Copyright (c) 2019 Peter Bloem), LICENSE at the repository root.
Copied: verbatim (function mask_ from former/util/util.py and class SelfAttention from former/modules.py); `import torch`, `from torch import nn`, `import torch.nn.functional as F` as in the original modules.py (whose `from .util import mask_, d, slice_diag` is replaced by the copied mask_).
Truth: BUG, scale by sqrt(d_model): heads are split correctly (view(b, t, h, s).transpose(1, 2), folded into the batch as (b*h, t, s)), but queries and keys are each divided by e**(1/4) with e = the FULL embedding width, so the scores are q.k / sqrt(e) instead of / sqrt(s) (s = e/h): softer attention than the reference for every h > 1. Everything else is the lesson's layer (three Linear(emb, emb, bias=False), -inf above the diagonal when mask=True, softmax over the key axis, merge transpose(1, 2).contiguous().view(b, t, s*h), unifyheads Linear(emb, emb) with bias), and it is exactly causal. Evidence: fix commit https://github.com/pbloem/former/commit/e3125a4ce303b33a1610827bed0bdf8c347ef721 ("Fix bug in scaling MHSA.": `queries / (e ** (1/4))` -> `queries / (s ** (1/4))`, same for keys).
"""
import torch
from torch import nn
import torch.nn.functional as F

TARGET = "SelfAttention"
TRUTH = "bug"
BUG = "scale-by-sqrt-d"
RULE_GAPS = ("causal-only-with-flag", "no-context-length")
FORWARD = "x"
NOTES = ("Constructor SelfAttention(emb, heads=8, mask=False): d_in = d_out = emb; CAUSAL ONLY WITH mask=True. Divisibility asserted. "
         "Q/K/V Linear(emb, emb, bias=False) named toqueries/tokeys/tovalues, out unifyheads Linear(emb, emb) with bias. No context length, "
         "no mask buffer (mask_ writes -inf into the scores in place). Folds heads into the batch (b*h, t, s) and uses bmm. With heads=1 "
         "the bug vanishes (e == s).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'scale-by-sqrt-d'
EXPECTED_BECAUSE = 'the names tokeys, toqueries, tovalues say the roles (keys declared first): under that reading the scale-by-sqrt-d mistake reproduces the module exactly'


def mask_(matrices, maskval=0.0, mask_diagonal=True):
    """
    Masks out all values in the given batch of matrices where i <= j holds,
    i < j if mask_diagonal is false

    In place operation

    :param tns:
    :return:
    """

    h, w = matrices.size(-2), matrices.size(-1)

    indices = torch.triu_indices(h, w, offset=0 if mask_diagonal else 1)
    matrices[..., indices[0], indices[1]] = maskval


class SelfAttention(nn.Module):
    """
    Canonical implementation of multi-head self attention.
    """

    def __init__(self, emb, heads=8, mask=False):
        """

        :param emb:
        :param heads:
        :param mask:
        """

        super().__init__()

        assert emb % heads == 0, f'Embedding dimension ({emb}) should be divisible by nr. of heads ({heads})'

        self.emb = emb
        self.heads = heads
        self.mask = mask

        s = emb // heads
        # - We will break the embedding into `heads` chunks and feed each to a different attention head

        self.tokeys    = nn.Linear(emb, emb, bias=False)
        self.toqueries = nn.Linear(emb, emb, bias=False)
        self.tovalues  = nn.Linear(emb, emb, bias=False)

        self.unifyheads = nn.Linear(emb, emb)

    def forward(self, x):

        b, t, e = x.size()
        h = self.heads
        assert e == self.emb, f'Input embedding dim ({e}) should match layer embedding dim ({self.emb})'

        s = e // h

        keys    = self.tokeys(x)
        queries = self.toqueries(x)
        values  = self.tovalues(x)

        keys    = keys.view(b, t, h, s)
        queries = queries.view(b, t, h, s)
        values  = values.view(b, t, h, s)

        # -- We first compute the k/q/v's on the whole embedding vectors, and then split into the different heads.
        #    See the following video for an explanation: https://youtu.be/KmAISyVvE1Y

        # Compute scaled dot-product self-attention

        # - fold heads into the batch dimension
        keys = keys.transpose(1, 2).contiguous().view(b * h, t, s)
        queries = queries.transpose(1, 2).contiguous().view(b * h, t, s)
        values = values.transpose(1, 2).contiguous().view(b * h, t, s)

        queries = queries / (e ** (1/4))
        keys    = keys / (e ** (1/4))
        # - Instead of dividing the dot products by sqrt(e), we scale the keys and values.
        #   This should be more memory efficient

        # - get dot product of queries and keys, and scale
        dot = torch.bmm(queries, keys.transpose(1, 2))

        assert dot.size() == (b*h, t, t)

        if self.mask: # mask out the upper half of the dot matrix, excluding the diagonal
            mask_(dot, maskval=float('-inf'), mask_diagonal=False)

        dot = F.softmax(dot, dim=2)
        # - dot now has row-wise self-attention probabilities

        # apply the self attention to the values
        out = torch.bmm(dot, values).view(b, h, t, s)

        # swap h, t back, unify heads
        out = out.transpose(1, 2).contiguous().view(b, t, s * h)

        return self.unifyheads(out)
