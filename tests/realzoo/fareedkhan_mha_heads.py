"""Head + MultiHeadAttention from FareedKhan-dev/train-llm-from-scratch (per-head modules, constructor (n_head, n_embed, context_length)).

Source: https://github.com/FareedKhan-dev/train-llm-from-scratch/blob/a5304d9f6c9b41685c27728528d31b93fcf1632f/src/models/attention.py (classes Head and MultiHeadAttention), as stored in the search index. Commit a5304d9 is not in the fetched snapshot of the repository (whose newest commit is 98f808c, 2026-06-24), so it could not be placed in the history; the same two classes, minus the one line `tril: torch.Tensor  # the causal mask, ...`, are at https://github.com/FareedKhan-dev/train-llm-from-scratch/blob/3b2cf0f1a42ab0a0f8613823a2c1eaeef9aef73a/src/models/attention.py lines 6-99 (checked with diff).
Licence: MIT (Copyright (c) 2025 Fareed Khan)
Copied: verbatim (classes Head and MultiHeadAttention incl. docstrings; imports as in the original; the __main__ demo is not copied)
Truth: correct causal MHA: each Head has key/query/value Linear(n_embed, n_embed // n_head, bias=False), registered tril buffer, scale 1/sqrt(head_size), masked_fill(tril == 0, -inf), softmax(-1); heads in nn.ModuleList, concatenated, proj Linear(n_embed, n_embed) with bias. No dropout. History (real bugs in earlier versions of this very file): scale 1/sqrt(C) with C = n_embed until PR #3 / commit 9acf1f3 (2025-03), and NO output projection until commit dfb9a11 ("fix: add missing output projection in MultiHeadAttention", 2026-05-30); those older texts are not in the index, so they are not separate zoo entries.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import math

TARGET = "MultiHeadAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("no-divisibility-check",)
FORWARD = "x"
NOTES = "Constructor MultiHeadAttention(n_head, n_embed, context_length) - heads FIRST. Per-head weights heads[h].query/key/value.weight (n_embed//n_head, n_embed); lesson W_q = cat over heads along dim 0. No divisibility check: for n_embed % n_head != 0 the constructor succeeds and forward fails in proj (cat width H*(n_embed//H) != n_embed)."
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = 'no-divisibility-check'
EXPECTED_BECAUSE = 'correct math; no divisibility check in the constructor'


class Head(nn.Module):
    """
    A single attention head.

    This module calculates attention scores and applies them to the values.
    It includes key, query, and value projections, and uses causal masking
    to prevent attending to future tokens.

    Args:
        head_size (int): The dimensionality of the key, query, and value projections.
        n_embed (int): The dimensionality of the input embedding.
        context_length (int): The maximum length of the input sequence, used for causal masking.
    """
    tril: torch.Tensor  # the causal mask, registered as a buffer in __init__

    def __init__(self, head_size: int, n_embed: int, context_length: int) -> None:
        """
        Initializes the attention head.

        Args:
            head_size (int): The dimensionality of the key, query, and value projections.
            n_embed (int): The dimensionality of the input embedding.
            context_length (int): The maximum length of the input sequence.
        """
        super().__init__()
        self.key = nn.Linear(n_embed, head_size, bias=False)   # Key projection
        self.query = nn.Linear(n_embed, head_size, bias=False) # Query projection
        self.value = nn.Linear(n_embed, head_size, bias=False) # Value projection
        # Lower triangular matrix for causal masking
        self.register_buffer('tril', torch.tril(torch.ones(context_length, context_length)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Forward pass through the attention head.

        Args:
            x (torch.Tensor): Input tensor of shape (B, T, C).

        Returns:
            torch.Tensor: Output tensor after applying attention.
        """
        B, T, C = x.shape
        head_size = self.key.out_features
        k = self.key(x)     # (B, T, head_size)
        q = self.query(x)   # (B, T, head_size)
        scale_factor = 1 / math.sqrt(head_size)
        # Calculate attention weights: (B, T, head_size) @ (B, head_size, T) -> (B, T, T)
        attn_weights = q @ k.transpose(-2, -1) * scale_factor
        # Apply causal masking
        attn_weights = attn_weights.masked_fill(self.tril[:T, :T] == 0, float('-inf'))
        attn_weights = F.softmax(attn_weights, dim=-1)
        v = self.value(x)   # (B, T, head_size)
        # Apply attention weights to values
        out = attn_weights @ v # (B, T, T) @ (B, T, head_size) -> (B, T, head_size)
        return out

class MultiHeadAttention(nn.Module):
    """
    Multi-Head Attention module.

    This module combines multiple attention heads in parallel. The outputs of each head
    are concatenated and passed through a final linear projection to form the output.

    Args:
        n_head (int): The number of parallel attention heads.
        n_embed (int): The dimensionality of the input embedding.
        context_length (int): The maximum length of the input sequence.
    """
    def __init__(self, n_head: int, n_embed: int, context_length: int) -> None:
        """
        Initializes the multi-head attention module.

        Args:
            n_head (int): The number of parallel attention heads.
            n_embed (int): The dimensionality of the input embedding.
            context_length (int): The maximum length of the input sequence.
        """
        super().__init__()
        self.heads = nn.ModuleList([Head(n_embed // n_head, n_embed, context_length) for _ in range(n_head)])
        self.proj = nn.Linear(n_embed, n_embed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Forward pass through the multi-head attention.

        Args:
            x (torch.Tensor): Input tensor of shape (B, T, C).

        Returns:
            torch.Tensor: Output tensor after concatenating the heads and applying the output projection.
        """
        # Concatenate the output of each head along the last dimension (C)
        x = torch.cat([h(x) for h in self.heads], dim=-1)
        # Apply final linear projection
        x = self.proj(x)
        return x
