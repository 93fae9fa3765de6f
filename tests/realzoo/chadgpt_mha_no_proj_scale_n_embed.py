"""ChadGPT's first MultiHeadAttention (a learner's project after Karpathy's "Let's build GPT"): keyword-only constructor (*, num_heads, n_embed, head_size, block_size), per-head Head modules concatenated with NO output projection, and each head scaled by C**-0.5 with C = n_embed (the input width), not head_size.

Source: https://github.com/ChadBowman/ChadGPT/blob/10a7ee605a7baae1ab5fd8331d9a5e1d5828a3d3/multi_head_attention.py and head.py at the same commit ("add multi head attention for running multiple attention groups in parallel", 2023-03-28). The next commit, 887fc2a ("add residual connections"), adds `self.proj = nn.Linear(num_heads * head_size, n_embed)` after the concatenation; the C**-0.5 scale is unchanged at HEAD (transformer/head.py).
Licence: MIT, as declared in the repository's setup.py (license="MIT", author Chad Bowman); the repository has no LICENSE file, so there is no copyright line to quote (as for karpathy/ng-video-lecture's README-declared MIT).
Copied: verbatim from `git show 10a7ee6:head.py` (class Head, with its imports `import torch`, `import torch.nn as nn`, `from torch.nn import functional as F`) and `git show 10a7ee6:multi_head_attention.py` (class MultiHeadAttention; its `from head import Head` is replaced by the Head class above it). ADDED: this entry's constants after the imports.
Truth: causal, but two mistakes: heads concatenated without W_o (the output is the heads side by side, num_heads * head_size wide), and every head's scores scaled by n_embed**-0.5 (C is the input's last axis) instead of head_size**-0.5. = mha_forward with W_o = I, b_o = 0 and W_q scaled by sqrt(head_size / n_embed), exact; the lesson's scaling (or a W_o) differs. Key/query/value Linear(n_embed, head_size, bias=False) per head; tril buffer; -inf fill. No divisibility check.
"""
import torch
import torch.nn as nn
from torch.nn import functional as F

TARGET = "MultiHeadAttention"
TRUTH = "bug"
BUG = "no output projection, and scores scaled by sqrt(n_embed) (fixed upstream: the projection in 887fc2a)"
RULE_GAPS = ("keyword-only-constructor", "per-head-modules", "head-size-argument", "no-qkv-bias", "no-divisibility-check")
FORWARD = "x"
NOTES = ("MultiHeadAttention(*, num_heads, n_embed, head_size, block_size): keyword-only. forward(x) -> (B, n, "
         "num_heads * head_size). Weights heads.{h}.key / query / value (head_size, n_embed) without bias; buffer "
         "heads.{h}.tril (block_size, block_size). No output projection.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'scale-by-sqrt-d'
ALSO = 'no-output-projection'  # the second mistake named with it (Diagnosis.also)
EXPECTED_BECAUSE = ('two mistakes, both named: read without an output projection (W_o the identity), the scale '
                    '1/sqrt(n_embed) reproduces the layer, so reference-match and gradient-match judge it and fail, '
                    'and the two made together are its outputs number for number; the scale comes first in the '
                    'forward (issue 28 item 3: before, without W_o no reading was certain, reference-match could not '
                    'tell, and only the missing projection was named)')


class Head(nn.Module):
    """ A head of self-attention """
    def __init__(self, *, n_embed, head_size, block_size):
        super().__init__()
        self.key = nn.Linear(n_embed, head_size, bias=False)
        self.query = nn.Linear(n_embed, head_size, bias=False)
        self.value = nn.Linear(n_embed, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x)  # (B, T, C)
        q = self.query(x)  # (B, T, C)
        # compute attention scores
        # (B, T, C) @ (B, C, T) -> (B, T, T)
        # normalize
        weights = q @ k.transpose(-2, -1) * C**-0.5
        # Tril to create a "moving average" of T
        # Also, we are only allowing the past to communicate with any node,
        # making this a decoder block
        weights = weights.masked_fill(self.tril[:T, :T] == 0, float("-inf"))  # (B, T, T)
        # softmax to normalize to probability
        weights = F.softmax(weights, dim=-1)
        # perform the weighted aggregation of the values
        v = self.value(x)  # (B, T, C)
        out = weights @ v  # (B, T, T) @ (B, T, C) -> (B, T, C)
        return out


class MultiHeadAttention(nn.Module):
    """ multiple heads of self-attention in parallel """
    def __init__(self, *, num_heads, n_embed, head_size, block_size):
        super().__init__()
        self.heads = nn.ModuleList([Head(
            n_embed=n_embed,
            head_size=head_size,
            block_size=block_size
        ) for _ in range(num_heads)])

    def forward(self, x):
        return torch.cat([h(x) for h in self.heads], dim=-1)
