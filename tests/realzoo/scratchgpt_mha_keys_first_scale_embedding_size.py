"""ScratchGPT's MultiHeadAttention: the ng-video-lecture design in its own names - a ModuleList of `Head` modules,
each declaring its KEY projection first (`_key`, `_query`, `_value`, bias-free Linear(embedding_size, head_size)), a
float tril buffer, masked_fill(tril == 0, -inf), softmax, attention dropout; heads concatenated and projected by
`_proj` (with bias), then dropout.  MultiHeadAttention(num_heads, embedding_size, block_size, head_size,
dropout_rate): the head width is a separate argument (the package passes embedding_size // num_heads).

Source: https://github.com/LabStrangeLoop/scratchgpt (scratchgpt 0.5.1 on PyPI, the distribution's Homepage), file
scratchgpt/model/model.py as released in scratchgpt 0.5.1.
Licence: MIT (the wheel's METADATA "License: MIT License" and LICENSE in its dist-info, "Copyright (c) 2025
LabStrangeLoop").
Copied: verbatim from the PyPI wheel scratchgpt==0.5.1 (pip download --no-deps): lines 1-2, 4 and 6-7 of
scratchgpt/model/model.py (imports) and lines 12-67 (Head, MultiHeadAttention).  Left out: line 5 (`from ptflops
import get_model_complexity_info`) and line 9 (`from scratchgpt.config import ScratchGPTConfig`), used only by code
not copied; FeedFoward, Block, TransformerLanguageModel and print_model_complexity.
ADDED: this entry's constants.
Truth: a real bug: each head scales its scores by 1 / sqrt(C) with C = the input's width (embedding_size), not
1 / sqrt(head_size): built with num_heads=3, embedding_size=12, head_size=4 the layer is exactly mha_forward with the
scores divided by sqrt(12) instead of sqrt(4), and differs from the lesson's layer (in _truth.py).  The same line
`normalization_term: float = 1.0 / math.sqrt(C)` is in every release on PyPI (0.3.0, 0.4.0, 0.5.1); it is the
line karpathy/ng-video-lecture fixed in its PR #6 (C**-0.5 -> head_size**-0.5), see
karpathy_ng_video_lecture_prefix.py.
"""
import math
from typing import Any
import torch
from torch import Tensor, nn
from torch.nn import functional as F


TARGET = "MultiHeadAttention"
TRUTH = "bug"
BUG = "scale-sqrt-d-model"
RULE_GAPS = ("per-head-modules", "keys-first-declaration", "head-size-argument", "no-divisibility-check",
             "no-qkv-bias")
FORWARD = "context"
NOTES = ("MultiHeadAttention(num_heads, embedding_size, block_size, head_size, dropout_rate); forward(context) -> "
         "(B, T, embedding_size) when num_heads * head_size = embedding_size")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'scale-by-sqrt-d'
EXPECTED_BECAUSE = "each head divides its scores by sqrt(embedding_size) instead of sqrt(head_size)"



class Head(nn.Module):
    def __init__(
        self,
        embedding_size: int,
        block_size: int,
        head_size: int,
        dropout_rate: float,
    ) -> None:
        super().__init__()

        self._key = nn.Linear(embedding_size, head_size, bias=False)
        self._query = nn.Linear(embedding_size, head_size, bias=False)
        self._value = nn.Linear(embedding_size, head_size, bias=False)
        self._dropout = nn.Dropout(dropout_rate)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, context: Tensor) -> Tensor:
        B, T, C = context.shape
        key = self._key(context)
        query = self._query(context)

        normalization_term: float = 1.0 / math.sqrt(C)
        attention_scores = query @ key.transpose(-2, -1) * normalization_term
        attention_scores = attention_scores.masked_fill(
            self.tril[:T, :T] == 0,  # type: ignore
            float("-inf"),
        )
        attention_scores = F.softmax(attention_scores, dim=-1)

        attention_scores = self._dropout(attention_scores)

        value = self._value(context)

        out: Tensor = attention_scores @ value
        return out


class MultiHeadAttention(nn.Module):
    def __init__(
        self,
        num_heads: int,
        embedding_size: int,
        block_size: int,
        head_size: int,
        dropout_rate: float,
    ) -> None:
        super().__init__()
        self._heads = nn.ModuleList(Head(embedding_size, block_size, head_size, dropout_rate) for _ in range(num_heads))
        self._proj = nn.Linear(embedding_size, embedding_size)
        self._dropout = nn.Dropout(dropout_rate)

    def forward(self, context: Tensor) -> Tensor:
        out: Tensor = torch.cat([head(context) for head in self._heads], dim=-1)
        out = self._proj(out)
        out = self._dropout(out)
        return out
