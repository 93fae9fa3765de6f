"""labml.ai annotated MultiHeadAttention (first version): SEQUENCE-FIRST layout [seq, batch, d], einsum 'ibhd,jbhd->ijbh', mask [seq_q, seq_k, batch], softmax over dim=1.

Source: https://github.com/labmlai/annotated_deep_learning_paper_implementations/blob/18298f68cfc79f8da910913463b3270ed3c7cf65/labml_nn/transformers/mha.py (lines 12-25: class PrepareForMultiHeadAttention; lines 28-113: class MultiHeadAttention); commit "annotations mha" on refs/heads/master.
Licence: MIT ("The MIT License (MIT) Copyright (c) 2020 Varuna Jayasiri", file `license` at the repository root; setup.py classifier "License :: OSI Approved :: MIT License")
Copied: verbatim (classes PrepareForMultiHeadAttention and MultiHeadAttention); `import math`, `from typing import Optional`, `import torch`, `from torch import nn as nn`, `from torch.nn import functional as F` as in the original. Shims ABOVE the copied block replace `from labml import tracker` (a namespace whose debug() does nothing; in labml it logs the tensor when debugging is on) and `from labml_helpers.module import Module` (= nn.Module; labml_helpers' Module is an nn.Module subclass).
Truth: correct causal MHA in a sequence-first layout when given a causal keep-mask: query/key/value PrepareForMultiHeadAttention = Linear(d_model, heads*d_k, bias=bias) + view(seq, batch, heads, d_k) (no transpose: heads stay at dim 2), scores einsum('ibhd,jbhd->ijbh') of shape [seq_q, seq_k, batch, heads], * 1/sqrt(d_k), masked_fill(mask == 0, -1e9) (finite fill), softmax over dim=1 (= the KEY axis in this layout, so it is right), dropout (default p=0.1), einsum('ijbh,jbhd->ibhd'), reshape(seq, batch, -1), output Linear(d_model, d_model) with bias. The layout is [seq, batch, features], so a (B, n, d) input must be transposed to (n, B, d) and the output back.
"""
import math
import types
from typing import Optional

import torch
from torch import nn as nn
from torch.nn import functional as F

# --- shims for the labml packages (see docstring) ---
tracker = types.SimpleNamespace(debug=lambda *args, **kwargs: None)
Module = nn.Module
# --- end of shims; copied block follows ---

TARGET = "MultiHeadAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("sequence-first-layout", "no-divisibility-check", "keyword-only-forward")
FORWARD = "*, query, key, value, mask=None"
NOTES = ("Constructor MultiHeadAttention(heads, d_model, dropout_prob=0.1, bias=True) - heads FIRST, dropout 0.1 by default "
         "(use eval()). __call__ is overridden (not forward) and takes KEYWORD-ONLY arguments query=, key=, value=, mask=; every "
         "tensor is SEQUENCE-FIRST: query/key/value (n, B, d_model), mask (n_q, n_k, B) or (1, n_k, B) with 1 = keep, output "
         "(n, B, d_model). Causal only through the mask, e.g. torch.tril(torch.ones(n, n))[:, :, None] (broadcast over the batch). "
         "Weights: query.linear, key.linear, value.linear (Linear(d_model, heads*d_k), bias per the `bias` arg), output "
         "Linear(d_model, d_model) always with bias. d_k = d_model // heads with no divisibility check (heads*d_k < d_model makes "
         "the output layer fail). Masked scores are -1e9. Stores the detached attention in self.attn.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'cannot_tell'
DIAGNOSIS = None
EXPECTED_BECAUSE = 'sequence-first layout, keyword-only forward: no call style reproduces'


class PrepareForMultiHeadAttention(Module):
    def __init__(self, d_model: int, heads: int, d_k: int, bias: bool):
        super().__init__()
        self.linear = nn.Linear(d_model, heads * d_k, bias=bias)
        self.heads = heads
        self.d_k = d_k

    def __call__(self, x: torch.Tensor):
        seq_len, batch_size, _ = x.shape

        x = self.linear(x)
        x = x.view(seq_len, batch_size, self.heads, self.d_k)

        return x


class MultiHeadAttention(Module):
    def __init__(self, heads: int, d_model: int, dropout_prob: float = 0.1, bias: bool=True):
        """
        ### Multi-Head Attention

        This computes multi-headed attention for given `query`, `key` and `value` vectors.
        `heads` is the number of heads.
        `d_model` is the number of features in the `query`, `key` and `value` vectors.
        """

        super().__init__()
        self.d_k = d_model // heads
        self.heads = heads

        # These transformer the `query`, `key` and `value` vectors for multi-headed attention/
        self.query = PrepareForMultiHeadAttention(d_model, heads, self.d_k, bias)
        self.key = PrepareForMultiHeadAttention(d_model, heads, self.d_k, bias)
        self.value = PrepareForMultiHeadAttention(d_model, heads, self.d_k, bias)

        # Output layer
        self.output = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout_prob)
        self.scale = 1 / math.sqrt(self.d_k)

        # We store attentions so that it can used for logging, or other computations if needed
        self.attn = None

    def get_scores(self, query: torch.Tensor, key: torch.Tensor):
        """
        ### Calculate scores between queries and keys
        """
        return torch.einsum('ibhd,jbhd->ijbh', query, key)

    def __call__(self, *,
                 query: torch.Tensor,
                 key: torch.Tensor,
                 value: torch.Tensor,
                 mask: Optional[torch.Tensor] = None):
        # `query`, `key` and `value`  have shape `[seq_len, batch_size, d_model]`
        seq_len, batch_size, _ = query.shape

        if mask is not None:
            # `mask` has shape `[seq_len, seq_len, batch_size]`,
            # where first dimension is the query dimension.
            # If the query dimension is equal to $`$ it will be broadcasted to match
            assert mask.shape[0] == 1 or mask.shape[0] == mask.shape[1]

            # Same mask applied to all `h` heads.
            mask = mask.unsqueeze(-1)

        # Prepare `query`, `key` and `value` for attention computation
        # These will then have shape `[seq_len, batch_size, heads, d_k]`
        query = self.query(query)
        key = self.key(key)
        value = self.value(value)

        # Compute attention scores
        scores = self.get_scores(query, key)

        # Scale scores
        scores *= self.scale

        # Apply mask
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)

        # $softmax$ attention
        attn = F.softmax(scores, dim=1)

        # Save attentions if debugging
        tracker.debug('attn', attn)

        # Apply dropout
        attn = self.dropout(attn)

        # Calculate the attention results
        x = torch.einsum("ijbh,jbhd->ibhd", attn, value)

        # Save attentions for any other calculations 
        self.attn = attn.detach()

        # Concatenate multiple heads
        x = x.reshape(seq_len, batch_size, -1)

        # Output layer
        return self.output(x)
