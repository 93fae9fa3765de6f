"""language-modeling-transformers' (package `lmt`) MultiHeadAttention: built from a ModelConfig dataclass
(embed_dim, num_heads, context_length, qkv_bias; its dropout is never read here), a fused qkv_proj Linear(d, 3d)
chunked [Q; K; V], heads split with view + transpose, scores times a precomputed 1/sqrt(head_dim), then an ADDITIVE
causal mask: a registered buffer `causal_mask` = full((ctx, ctx), -inf).triu(diagonal=1) (0 on and below the
diagonal, -inf above), sliced [:n, :n] and added to the scores; out_proj Linear(d, d, bias=False).

Source: https://pypi.org/project/language-modeling-transformers/0.2.8/ (the distribution names no repository; author
Michael Ellis), files lmt/layers/attention/multihead_attention.py and lmt/models/config.py as released in
language-modeling-transformers 0.2.8 on PyPI.
Licence: Apache-2.0 (each file's header: "Copyright 2025 Michael Ellis"; LICENSE in the wheel's dist-info).
Copied: verbatim from the PyPI wheel language_modeling_transformers==0.2.8 (pip download --no-deps): the licence
header and imports of multihead_attention.py, models/config.py's imports and its ModelConfig dataclass (lines 16-49),
and the class MultiHeadAttention (lines 25-124); the package-internal import `from lmt.models.config import
ModelConfig` is replaced by the copied dataclass. ADDED: this entry's constants after the imports.
Truth: correct. mha_forward with qkv_proj's three blocks and out_proj, exactly (1e-10), no leak; with qkv_bias=True
too. Lesson rule not followed: the output projection has no bias.
"""
# Copyright 2025 Michael Ellis
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""Implementation of Multi-Head Attention Layer."""

import math

import torch
import torch.nn as nn
from dataclasses import dataclass

from torch.nn import Module

TARGET = "MultiHeadAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("config-dataclass", "fused-qkv-chunk", "additive-inf-mask-buffer", "out-proj-no-bias")
FORWARD = "x"
NOTES = ("MultiHeadAttention(model_config: ModelConfig(context_length, vocab_size, num_layers, num_heads, embed_dim, "
         "dropout, qkv_bias, ff_network)). forward(x) -> (B, n, embed_dim).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = 'out-proj-no-bias'
EXPECTED_BECAUSE = "the lesson's math with an additive -inf mask buffer; only the output projection's bias is missing"

@dataclass
class ModelConfig:
    """Configuration for the model architecture.

    Attributes:
        context_length (int): Max sequence length (context window).
        vocab_size (int): Vocabulary size, e.g., GPT-2 vocab size.
        num_layers (int): Number of transformer blocks.
        num_heads (int): Number of attention heads.
        embed_dim (int): Embedding dimension.
        dropout (float): Probability of a weight to be zeroed. Regularization
            technique to prevent overfitting. Must be a float between 0.0
            and 1.0.
        qkv_bias (bool, optional): If True, enables bias in the query, key,
                and value projections within the attention mechanism of each
                transformer block. Defaults to False.
        ff_network (nn.Module | None, optional): A custom feed-forward
            network to be used within each transformer block. If None, a
            default feed-forward network will be used. Defaults to None.
    """

    context_length: int = 4
    vocab_size: int = 50257
    num_layers: int = 12
    num_heads: int = 12
    embed_dim: int = 768
    dropout: float = 0.1
    qkv_bias: bool = False
    ff_network: Module | None = None


class MultiHeadAttention(nn.Module):
    """Multi-Head Attention Layer."""

    # Correctly type self.mask as a Tensor
    causal_mask: torch.Tensor

    def __init__(self, model_config: ModelConfig):
        """Initialize the Multi-Head Attention layer.

        Instead of a single attention 'head' as in the SelfAttention or
        CausalAttention classes, MultiHeadAttention calculates attention
        weights using `num_heads` self-attention mechanisms each
        with causal masks in parallel. The output of the `num_heads`
        self-attention heads are concatenated together and applied to the
        queries to produce the context vectors.


        Args:
            model_config (ModelConfig): Configuration object containing model
                parameters.

        """
        super().__init__()
        assert model_config.embed_dim % model_config.num_heads == 0, (
            'embed_dim must be divisible by num_heads'
        )
        self.embed_dim = model_config.embed_dim
        self.num_heads = model_config.num_heads
        self.head_dim = model_config.embed_dim // model_config.num_heads

        # Using fused qkv
        # This reduces memory overhead
        self.qkv_proj = nn.Linear(
            model_config.embed_dim,
            3 * model_config.embed_dim,
            bias=model_config.qkv_bias,
        )

        self.out_proj = nn.Linear(
            model_config.embed_dim, model_config.embed_dim, bias=False
        )

        self.register_buffer(
            'causal_mask',
            torch.full(
                (model_config.context_length, model_config.context_length),
                float('-inf'),
            ).triu(diagonal=1),
        )

        # Pre-compute scaling factor for efficiency
        self.scale = 1.0 / math.sqrt(self.head_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Forward pass of the Multi-Head Attention layer.

        Args:
            x (torch.Tensor): Token embedding vectors with shape (batch_size,
                seq_length, embed_dim). Assumed to have position vectors
                added previously or no position vectors will be added.

        Returns:
            torch.Tensor: Context vector, a reweighting of the input token
                embedding vectors according to the multi-head scaled
                dot-product attention mechanism with a causal mask and the
                same dimension as the input (batch_size, seq_length,
                embed_dim).

        """
        b, seq_length, _ = x.shape

        # With fused qkv we can compute the query, keys and values in a
        # single matrix multiplication instead of three separate ones
        qkv = self.qkv_proj(x)  # [batch, seq_len, 3 * embed_dim]
        queries, keys, values = qkv.chunk(3, dim=-1)

        keys = keys.view(b, seq_length, self.num_heads, self.head_dim)
        queries = queries.view(b, seq_length, self.num_heads, self.head_dim)
        values = values.view(b, seq_length, self.num_heads, self.head_dim)

        keys = keys.transpose(1, 2)
        queries = queries.transpose(1, 2)
        values = values.transpose(1, 2)

        attn_scores = queries @ keys.transpose(-2, -1)
        attn_scores = attn_scores * self.scale

        # Prevent attention to future tokens in autoregressive modeling
        causal_mask = self.causal_mask[:seq_length, :seq_length]
        attn_scores = attn_scores + causal_mask

        attn_weights = nn.functional.softmax(attn_scores, dim=-1)

        context_vec = (attn_weights @ values).transpose(1, 2)
        context_vec = context_vec.contiguous().view(
            b, seq_length, self.embed_dim
        )
        context_vec = self.out_proj(context_vec)

        return context_vec
