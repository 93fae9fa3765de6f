"""d3rlpy 2.8.1's CausalSelfAttention (the Decision Transformer's and Gato's attention): keys FIRST in both the
annotations and __init__ (_k, _q, _v, then _proj), spelled-out constructor names CausalSelfAttention(embed_size,
num_heads, context_size, attn_dropout, resid_dropout) with no defaults and no divisibility check, a float tril buffer
"_mask" (1, 1, ctx, ctx) made by a module-level create_attention_mask, the future filled with a FINITE -10000
(masked_fill), then a REQUIRED padding mask forward(x, attention_mask) of shape (B, T) (asserted 2-D) ADDED as
attention_mask * -10000 - 1 = a padded step, as d3rlpy's callers pass it (`1 - batch.masks`, masks 1 = valid).

Source: https://github.com/takuseno/d3rlpy (the wheel's METADATA Home-page), file d3rlpy/models/torch/transformers.py
as released in d3rlpy 2.8.1 on PyPI.  The callers: d3rlpy/algos/transformer/torch/decision_transformer_impl.py passes
`1 - inpt.masks` / `1 - batch.masks`; d3rlpy/dataset/trajectory_slicers.py makes masks np.ones for the real steps and
batch_pad_array pads them with zeros in front, so attention_mask is 1 on the padded steps, 0 elsewhere.
Licence: MIT (LICENSE in the wheel's dist-info, "MIT License / Copyright (c) 2021 Takuma Seno"; METADATA
"License: MIT License").
Copied: verbatim from the PyPI wheel d3rlpy==2.8.1 (pip download --no-deps), every copied line compared by program
with the unpacked wheel: lines 1 and 4-6 (imports) and 23-94 (create_attention_mask and class CausalSelfAttention,
whole).  Left out: lines 2-3 and 7-22 (abc, the package's relative imports and __all__, none reached by the class)
and 95-end (the MLP, the GPT-2 block and the Decision Transformer models).
ADDED: this docstring and the entry's constants.
Truth: correct math given a padding mask of zeros (in _truth.py): CausalSelfAttention(12, 3, 10, 0.0, 0.0) in eval()
called as m(x, zeros(B, n)) = mha_forward (_q, _k, _v, _proj with their biases) and the per-head loop to 1e-10
(the -10000 fill leaves exp(-10000) = 0 in float64), no leak; attention_mask = ones(B, n) gives the same output (a
constant added to every score); a padded step (1) is hidden from the others as a -10000 score.  The fill is finite:
with W_k = -W_q scaled so that the scores reach about -1e6, the future moves the past.
"""
import math
import torch
import torch.nn.functional as F
from torch import nn


def create_attention_mask(context_size: int) -> torch.Tensor:
    mask = torch.ones(context_size, context_size, dtype=torch.float32)
    return torch.tril(mask).view(1, 1, context_size, context_size)


class CausalSelfAttention(nn.Module):  # type: ignore
    _num_heads: int
    _context_size: int
    _k: nn.Linear
    _q: nn.Linear
    _v: nn.Linear
    _proj: nn.Linear
    _attn_dropout: nn.Dropout
    _proj_dropout: nn.Dropout
    _mask: torch.Tensor

    def __init__(
        self,
        embed_size: int,
        num_heads: int,
        context_size: int,
        attn_dropout: float,
        resid_dropout: float,
    ):
        super().__init__()
        self._num_heads = num_heads
        self._context_size = context_size
        self._k = nn.Linear(embed_size, embed_size)
        self._q = nn.Linear(embed_size, embed_size)
        self._v = nn.Linear(embed_size, embed_size)
        self._proj = nn.Linear(embed_size, embed_size)
        self._attn_dropout = nn.Dropout(attn_dropout)
        self._proj_dropout = nn.Dropout(resid_dropout)
        mask = create_attention_mask(context_size)
        self.register_buffer("_mask", mask)

    def forward(
        self, x: torch.Tensor, attention_mask: torch.Tensor
    ) -> torch.Tensor:
        assert x.dim() == 3, f"Expects (B, T, N), but got {x.shape}"
        assert (
            attention_mask.dim() == 2
        ), f"Expects (B, T), but got {attention_mask.shape}"
        batch_size, context_size, _ = x.shape
        assert context_size <= self._context_size, "Exceeds context_size"

        # (B, T, N) -> (B, T, H, N / H) -> (B, H, T, N / H)
        shape = (batch_size, context_size, self._num_heads, -1)
        k = self._k(x).view(shape).transpose(1, 2)
        q = self._q(x).view(shape).transpose(1, 2)
        v = self._v(x).view(shape).transpose(1, 2)

        # (B, H, T, N / H) -> (B, H, T, T)
        qkT = torch.matmul(q, k.transpose(2, 3))
        attention = qkT / math.sqrt(k.shape[-1])
        attention = attention.masked_fill(
            self._mask[..., :context_size, :context_size] == 0, -10000
        )
        attention = (
            attention
            + attention_mask.view(batch_size, 1, 1, context_size) * -10000
        )
        attention = F.softmax(attention, dim=-1)
        attention = self._attn_dropout(attention)

        # (B, H, T, T) x (B, H, T, N / H) -> (B, H, T, N / H)
        output = torch.matmul(attention, v)
        # (B, H, T, N / H) -> (B, T, N)
        output = output.transpose(1, 2).reshape(batch_size, context_size, -1)

        return self._proj_dropout(self._proj(output))



# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "CausalSelfAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("keys-declared-first", "spelled-out-names", "padding-mask-argument-required", "finite-fill-1e4",
             "no-divisibility-check")
FORWARD = "x, attention_mask"
NOTES = ("CausalSelfAttention(embed_size, num_heads, context_size, attn_dropout, resid_dropout); causal by its own "
         "buffer; attention_mask (B, T) required, float 1 = padded step, added times -10000.")
OUTCOME = 'cannot_tell'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("a correct layer with its own causal buffer whose REQUIRED attention_mask is a padding mask (B, T), "
                    "1 = padded, added times -10000: no causal mask mha-check offers fits it (each raises at "
                    "attention_mask.view(batch_size, 1, 1, context_size) or hides the past), so the math cannot be "
                    "judged; given zeros(B, n) it is the lesson's layer (rules: divisibility, the -10000 fill)")
