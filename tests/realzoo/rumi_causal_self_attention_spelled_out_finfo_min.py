"""RUMI-8M's CausalSelfAttention: every name spelled out - CausalSelfAttention(embedding_dim, num_heads,
context_length, dropout) with `head_dimension`, `qkv_projection` (one fused Linear chunked [Q; K; V]),
`output_projection`, `attention_scores`, `attention_weights`; a ValueError for an indivisible width and for a sequence
longer than the context; a non-persistent (1, 1, L, L) bool tril buffer, scores filled with finfo.min where it is
False; attention and output dropout.

Source: https://pypi.org/project/rumi-llm/ (rumi-llm 1.0.0; the wheel's METADATA names no repository), file
rumi/rumi_transformer.py as released in rumi-llm 1.0.0 on PyPI.
Licence: MIT (the wheel's METADATA "License-Expression: MIT" and LICENSE in its dist-info, "Copyright (c) 2026
Rishyab").
Copied: verbatim from the PyPI wheel rumi-llm==1.0.0 (pip download --no-deps): lines 1-7 of rumi/rumi_transformer.py
(imports) and lines 10-172 (CausalSelfAttention).
ADDED: this entry's constants.
Truth: correct: mha_forward with qkv_projection's thirds (weights and biases) as W_q, W_k, W_v and W_o =
output_projection, exactly (the finfo.min fill leaves exp(...) = 0 in float64 for ordinary scores); no leak.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "CausalSelfAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("spelled-out-embedding-dim-head-dimension", "fused-qkv-chunk", "finfo-min-fill",
             "non-persistent-bool-buffer")
FORWARD = "x"
NOTES = ("CausalSelfAttention(embedding_dim, num_heads, context_length, dropout). forward(x) -> (B, n, "
         "embedding_dim); raises for n > context_length.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("the lesson's layer with every name spelled out, a divisibility check, biases and an output "
                    "projection: every check must pass (mask-fill: finfo.min is the lowest float, no finite fill "
                    "above it can be beaten)")


class CausalSelfAttention(nn.Module):
    """
    Multi-head causal self-attention.

    Future tokens are masked so that token t can only attend
    to tokens <= t.

    The causal mask is stored as:
        [1, 1, context_length, context_length]

    so it broadcasts naturally across:
        batch size
        attention heads
    """

    def __init__(
        self,
        embedding_dim: int,
        num_heads: int,
        context_length: int,
        dropout: float,
    ) -> None:
        super().__init__()

        if embedding_dim % num_heads != 0:
            raise ValueError(
                "embedding_dim must be divisible by num_heads."
            )

        self.embedding_dim = embedding_dim
        self.num_heads = num_heads
        self.head_dimension = embedding_dim // num_heads
        self.context_length = context_length

        self.qkv_projection = nn.Linear(
            embedding_dim,
            3 * embedding_dim,
        )

        self.output_projection = nn.Linear(
            embedding_dim,
            embedding_dim,
        )

        self.attention_dropout = nn.Dropout(dropout)
        self.output_dropout = nn.Dropout(dropout)

        # Create a lower-triangular causal mask.
        #
        # Shape:
        # [1, 1, context_length, context_length]
        #
        # The first dimension broadcasts over batch.
        # The second dimension broadcasts over attention heads.
        causal_mask = torch.tril(
            torch.ones(
                context_length,
                context_length,
                dtype=torch.bool,
            )
        ).unsqueeze(0).unsqueeze(0)

        self.register_buffer(
            "causal_mask",
            causal_mask,
            persistent=False,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch_size, sequence_length, embedding_dim = x.shape

        if sequence_length > self.context_length:
            raise ValueError(
                f"Sequence length {sequence_length} exceeds "
                f"context length {self.context_length}."
            )

        qkv = self.qkv_projection(x)

        query, key, value = torch.chunk(
            qkv,
            chunks=3,
            dim=-1,
        )

        query = query.view(
            batch_size,
            sequence_length,
            self.num_heads,
            self.head_dimension,
        ).transpose(1, 2)

        key = key.view(
            batch_size,
            sequence_length,
            self.num_heads,
            self.head_dimension,
        ).transpose(1, 2)

        value = value.view(
            batch_size,
            sequence_length,
            self.num_heads,
            self.head_dimension,
        ).transpose(1, 2)

        attention_scores = torch.matmul(
            query,
            key.transpose(-2, -1),
        )

        attention_scores = attention_scores / (
            self.head_dimension ** 0.5
        )

        # Select the required sequence region.
        #
        # Result shape:
        # [1, 1, sequence_length, sequence_length]
        mask = self.causal_mask[
            :,
            :,
            :sequence_length,
            :sequence_length,
        ]

        attention_scores = attention_scores.masked_fill(
            ~mask,
            torch.finfo(attention_scores.dtype).min,
        )

        attention_weights = F.softmax(
            attention_scores,
            dim=-1,
        )

        attention_weights = self.attention_dropout(
            attention_weights
        )

        attention_output = torch.matmul(
            attention_weights,
            value,
        )

        attention_output = attention_output.transpose(
            1,
            2,
        ).contiguous()

        attention_output = attention_output.view(
            batch_size,
            sequence_length,
            embedding_dim,
        )

        output = self.output_projection(
            attention_output
        )

        output = self.output_dropout(output)

        return output
