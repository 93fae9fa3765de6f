"""sooftware/attentions' MultiHeadAttention: the "Attention Is All You Need" layer WITHOUT its output projection (the docstring promises "Concat(head_1, ..., head_h) · W_o", the code returns the concatenation), with heads folded into the batch HEAD-major and a boolean mask argument (True = masked).

Source: https://github.com/sooftware/attentions/blob/b1dd65be8f12fbe19525bc4ae0dbbc14975778a7/attentions.py (classes ScaledDotProductAttention and MultiHeadAttention; both unchanged since the commit that added the file's relative attention, 8434723, 2021-01-24, up to HEAD b1dd65b, 2022-03-04).
Licence: MIT (Copyright (c) 2020 KimSooHwan), LICENSE at the repository root.
Copied: verbatim, the file's imports and the two classes, taken from `git show b1dd65b:attentions.py` in the fetched history; the index's copy of attentions.py (read_file) was read and holds the same two classes; the other classes of the file (additive, location-aware, relative, customizing attention) are left out; this entry's constants are placed after the imports.
Truth: BUG, no output projection (the lesson's W_o, and the one its own docstring describes, is missing); otherwise a correct causal multi-head attention when called as m(x, x, x, mask) with a boolean (B, n, n) mask, True above the diagonal: query_proj/key_proj/value_proj Linear(d_model, d_model) with bias; split view(B, n, H, dh).permute(2, 0, 1, 3) -> (H*B, n, dh) (head-major); scores bmm / sqrt(dh); mask.unsqueeze(1).repeat(1, H, 1, 1).view(score.size()) (this reshapes (B, H, n, n) batch-major into the head-major (H*B) layout: harmless for a causal mask, the same for every sequence; it would mix the sequences' padding masks, not exercised); masked_fill_(-inf); softmax(-1); bmm; merge view(H, B, n, dh).permute(1, 2, 0, 3) -> (B, n, H*dh). No W_o: the output is the concatenation of the heads (the lesson's W_o = I, b_o = 0), checked in _truth.py against mha_forward with W_o = I. Returns (context, attn). Not causal by itself: only with the mask argument.
"""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor
import numpy as np
from typing import Optional, Tuple

TARGET = "MultiHeadAttention"
TRUTH = 'bug'
BUG = 'no-output-projection'
RULE_GAPS = ("no-output-projection", "causal-only-with-mask-argument", "mask-true-is-masked", "heads-folded-head-major",
             "tuple-output", "no-context-length")
FORWARD = "query, key, value, mask=None"
NOTES = ("Constructor MultiHeadAttention(d_model=512, num_heads=8). forward(query, key, value, mask=None), mask bool "
         "(B, n, n), True = masked. Returns (context, attn). Weights query_proj, key_proj, value_proj (with bias); no "
         "output projection.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'no-output-projection'
EXPECTED_BECAUSE = ('the attention itself is right once called with a (B, n, n) True-is-masked mask, but there is no '
                    'W_o (its own docstring promises Concat(...) . W_o): param-count fails in the no-output-projection '
                    'pattern; read without W_o (W_o the identity) the lesson\'s math reproduces it, so the weight checks '
                    'judge the rest and pass (issue 28 item 3)')


class ScaledDotProductAttention(nn.Module):
    """
    Scaled Dot-Product Attention proposed in "Attention Is All You Need"
    Compute the dot products of the query with all keys, divide each by sqrt(dim),
    and apply a softmax function to obtain the weights on the values

    Args: dim, mask
        dim (int): dimention of attention
        mask (torch.Tensor): tensor containing indices to be masked

    Inputs: query, key, value, mask
        - **query** (batch, q_len, d_model): tensor containing projection vector for decoder.
        - **key** (batch, k_len, d_model): tensor containing projection vector for encoder.
        - **value** (batch, v_len, d_model): tensor containing features of the encoded input sequence.
        - **mask** (-): tensor containing indices to be masked

    Returns: context, attn
        - **context**: tensor containing the context vector from attention mechanism.
        - **attn**: tensor containing the attention (alignment) from the encoder outputs.
    """
    def __init__(self, dim: int):
        super(ScaledDotProductAttention, self).__init__()
        self.sqrt_dim = np.sqrt(dim)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        score = torch.bmm(query, key.transpose(1, 2)) / self.sqrt_dim

        if mask is not None:
            score.masked_fill_(mask.view(score.size()), -float('Inf'))

        attn = F.softmax(score, -1)
        context = torch.bmm(attn, value)
        return context, attn



class MultiHeadAttention(nn.Module):
    """
    Multi-Head Attention proposed in "Attention Is All You Need"
    Instead of performing a single attention function with d_model-dimensional keys, values, and queries,
    project the queries, keys and values h times with different, learned linear projections to d_head dimensions.
    These are concatenated and once again projected, resulting in the final values.
    Multi-head attention allows the model to jointly attend to information from different representation
    subspaces at different positions.

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) · W_o
        where head_i = Attention(Q · W_q, K · W_k, V · W_v)

    Args:
        d_model (int): The dimension of keys / values / quries (default: 512)
        num_heads (int): The number of attention heads. (default: 8)

    Inputs: query, key, value, mask
        - **query** (batch, q_len, d_model): In transformer, three different ways:
            Case 1: come from previoys decoder layer
            Case 2: come from the input embedding
            Case 3: come from the output embedding (masked)

        - **key** (batch, k_len, d_model): In transformer, three different ways:
            Case 1: come from the output of the encoder
            Case 2: come from the input embeddings
            Case 3: come from the output embedding (masked)

        - **value** (batch, v_len, d_model): In transformer, three different ways:
            Case 1: come from the output of the encoder
            Case 2: come from the input embeddings
            Case 3: come from the output embedding (masked)

        - **mask** (-): tensor containing indices to be masked

    Returns: output, attn
        - **output** (batch, output_len, dimensions): tensor containing the attended output features.
        - **attn** (batch * num_heads, v_len): tensor containing the attention (alignment) from the encoder outputs.
    """
    def __init__(self, d_model: int = 512, num_heads: int = 8):
        super(MultiHeadAttention, self).__init__()

        assert d_model % num_heads == 0, "d_model % num_heads should be zero."

        self.d_head = int(d_model / num_heads)
        self.num_heads = num_heads
        self.scaled_dot_attn = ScaledDotProductAttention(self.d_head)
        self.query_proj = nn.Linear(d_model, self.d_head * num_heads)
        self.key_proj = nn.Linear(d_model, self.d_head * num_heads)
        self.value_proj = nn.Linear(d_model, self.d_head * num_heads)

    def forward(
            self,
            query: Tensor,
            key: Tensor,
            value: Tensor,
            mask: Optional[Tensor] = None
    ) -> Tuple[Tensor, Tensor]:
        batch_size = value.size(0)

        query = self.query_proj(query).view(batch_size, -1, self.num_heads, self.d_head)  # BxQ_LENxNxD
        key = self.key_proj(key).view(batch_size, -1, self.num_heads, self.d_head)      # BxK_LENxNxD
        value = self.value_proj(value).view(batch_size, -1, self.num_heads, self.d_head)  # BxV_LENxNxD

        query = query.permute(2, 0, 1, 3).contiguous().view(batch_size * self.num_heads, -1, self.d_head)  # BNxQ_LENxD
        key = key.permute(2, 0, 1, 3).contiguous().view(batch_size * self.num_heads, -1, self.d_head)      # BNxK_LENxD
        value = value.permute(2, 0, 1, 3).contiguous().view(batch_size * self.num_heads, -1, self.d_head)  # BNxV_LENxD

        if mask is not None:
            mask = mask.unsqueeze(1).repeat(1, self.num_heads, 1, 1)  # BxNxQ_LENxK_LEN

        context, attn = self.scaled_dot_attn(query, key, value, mask)

        context = context.view(self.num_heads, batch_size, -1, self.d_head)
        context = context.permute(1, 2, 0, 3).contiguous().view(batch_size, -1, self.num_heads * self.d_head)  # BxTxND

        return context, attn
