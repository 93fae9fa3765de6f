"""labml-nn's RETRO SelfAttention: a whole pre-norm sublayer - LayerNorm(d_model) INSIDE, query/key/value Linear(
d_model, n_heads * d_k) with biases, a rotate-half rotary embedding whose theta table (d_k / 2 elements) is a FROZEN
nn.Parameter(requires_grad=False) built in float32, einsum 'bihd,bjhd->bhij' on (B, n, H, d_k), the scale 1/sqrt(d_k),
a causal mask made in forward only when the REQUIRED flag is_causal is True (tril(new_ones) == 0 filled with -inf), an
nn.Softmax(dim=-1) module, einsum back, the output Linear, and the residual h + h_res added inside.

Source: https://github.com/labmlai/annotated_deep_learning_paper_implementations (the PyPI project's homepage), file
labml_nn/transformers/retro/model.py as released in labml-nn 0.5.1 on PyPI.
Licence: MIT (the wheel's classifier "License :: OSI Approved :: MIT License"; the wheel carries no licence file; the
repository's `license` file is "The MIT License (MIT) Copyright (c) 2020 Varuna Jayasiri", as recorded for
labml_mha_seq_first.py).
Copied: verbatim from the PyPI wheel labml_nn==0.5.1 (pip download --no-deps): lines 1-185 of
labml_nn/transformers/retro/model.py (the module docstring, which becomes a plain string after this one, the imports,
RotaryPositionalEmbeddings and SelfAttention) but for line 20, `from labml.logger import inspect` (the labml package;
`inspect` is used only by the file's _test, not copied), which is left out. ADDED: this entry's constants after the
imports.
Truth: correct. SelfAttention(d_model, n_heads, d_k, is_causal=True)(h) = h + MHA_rope(LayerNorm(h)), where MHA_rope
is the rotate-half rotary reference (theta 10000) with query, key, value, output and all four biases, to relative 1e-5
(theta is float32); no leak. With is_causal=False the future moves the past. Not the lesson's layer as it stands (the
norm and the residual are part of the module); with the norm switched off and the input taken away it is. Its theta
parameter changes the parameter count with the head width, but nothing learns it (requires_grad=False): a constant.
Lesson rules not followed: no divisibility check (d_k is an argument).
"""
"""
---
title: RETRO model
summary: >
  RETRO model with encoder for neighbors and autoregressive decoder
---

# RETRO model

This is the model definition for
 [RETRO](index.html).
"""

import math
from typing import Set

import torch
from torch import nn


TARGET = "SelfAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("prenorm-and-residual-inside", "rope-rotate-half", "frozen-theta-parameter", "required-is-causal-flag",
             "head-dim-argument", "einsum-bihd", "softmax-module")
FORWARD = "h"
NOTES = ("SelfAttention(d_model, n_heads, d_k, is_causal). forward(h) -> h + output(attention(norm(h))); parameters "
         "norm.weight/bias, query/key/value/output weight and bias, rotary_pe.theta (d_k / 2, frozen).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = 'no-divisibility-check'
EXPECTED_BECAUSE = ("a correct pre-norm rotary sublayer: with the LayerNorm switched off and the residual taken away the "
                    "rotate-half rotary reference reproduces it; its frozen theta is a constant (not counted); only the "
                    "divisibility rule is not followed")


class RotaryPositionalEmbeddings(nn.Module):
    """
    ## [RoPE embeddings](../rope/index.html)

    *We use rotary position embeddings in self-attention layers.
    We assume the positional information gets embedded in embeddings
    and therefore not use them in causal attention.
    [Non-causal self-attention needs explicit positional information
     because it cannot infer it](https://arxiv.org/abs/3999902edc8511eba3db37f65e372566).*
    """

    def __init__(self, d: int, base: int = 10_000):
        """
        * `d` is the number of features $d$
        * `base` is the constant used for calculating $\Theta$
        """
        super().__init__()
        # $\Theta = {\theta_i = 10000^{\frac{2(i-1)}{d}}, i \in [1, 2, ..., \frac{d}{2}]}$
        self.theta = nn.Parameter(1. / (base ** (torch.arange(0, d, 2).float() / d)), requires_grad=False)

    def forward(self, x: torch.Tensor):
        """
        * `x` is the Tensor at the head of a key or a query with shape `[ batch_size, seq_len, n_heads, d]`
        """
        # Extract the shape
        batch_size, seq_len, n_heads, d = x.shape

        # $\frac{d}{2}$
        d_2 = d // 2

        # Create position indexes `[0, 1, ..., seq_len - 1]`
        seq_idx = torch.arange(seq_len, device=x.device).type_as(self.theta)

        # Calculate the product of position index and $\theta_i$
        idx_theta = torch.einsum('n,d->nd', seq_idx, self.theta)

        # Concatenate so that for row $m$ we have
        # $[m \theta_0, m \theta_1, ..., m \theta_{\frac{d}{2}}, m \theta 0, m \theta 1, ..., m \theta_{\frac{d}{2}}]$
        idx_theta2 = torch.cat([idx_theta, idx_theta], dim=1)

        # Calculate
        # $[-x^{(\frac{d}{2} + 1)}, -x^{(\frac{d}{2} + 2)}, ..., -x^{(d)}, x^{(1)}, x^{(2)}, ..., -x^{(\frac{d}{2})}]$
        neg_half_x = torch.cat([-x[:, :, :, d_2:], x[:, :, :, :d_2]], dim=-1)

        # Calculate
        #
        # \begin{align}
        # \begin{pmatrix}
        # x^{(i)}_m \cos m \theta_i - x^{(i + \frac{d}{2})}_m \sin m \theta_i \\
        # x^{(i + \frac{d}{2})}_m \cos m\theta_i + x^{(i)}_m \sin m \theta_i \\
        # \end{pmatrix} \\
        # \end{align}
        #
        # for $i \in {1, 2, ..., \frac{d}{2}}$
        rx = (x * idx_theta2.cos()[None, :, None, :]) + (neg_half_x * idx_theta2.sin()[None, :, None, :])

        #
        return rx


class SelfAttention(nn.Module):
    """
    ## Self-Attention Layer $\text{A\small{TTN}}$

    This applies causal and non-causal [multi-headed self-attention](../mha.html).
    """

    def __init__(self, d_model: int, n_heads: int, d_k: int, is_causal: bool):
        """
        * `d_model` is the number of features in transformer embeddings
        * `n_heads` is the number of attention heads
        * `d_k` is the number of features per head
        * `is_causal` indicates whether this is causal attention (masked)
        """
        super().__init__()

        self.is_causal = is_causal
        self.n_heads = n_heads
        self.d_k = d_k

        # To scale attentions before softmax by $\frac{1}{\sqrt{d_k}}$
        self.scale = 1 / math.sqrt(self.d_k)

        # Linear layers for query, key and value heads.
        self.query = nn.Linear(d_model, n_heads * d_k)
        self.key = nn.Linear(d_model, n_heads * d_k)
        self.value = nn.Linear(d_model, n_heads * d_k)

        # Pre-norm layer. The paper uses RMSNorm instead.
        self.norm = nn.LayerNorm(d_model)

        # Softmax for attention probabilities
        self.softmax = nn.Softmax(dim=-1)

        # Rotary positional embeddings
        self.rotary_pe = RotaryPositionalEmbeddings(self.d_k)

        # Final linear layer
        self.output = nn.Linear(n_heads * d_k, d_model)

    def mask_attention(self, attn: torch.Tensor):
        """
        ### Mask the attention layer for causal attention

        * `attn` is the attention matrix of shape `[batch_size, n_heads, seq_len, seq_len]`
        """

        # No masking for non-causal attention
        if not self.is_causal:
            return attn

        # Create a triangular mask
        mask = torch.tril(attn.new_ones(attn.shape[-2:]))
        # Filter by the mask
        return attn.masked_fill(mask == 0, float('-inf'))

    def forward(self, h: torch.Tensor):
        """
        * `h` is the transformer embeddings of shape `[batch_size, seq_len, d_model]`
        """

        # Residual connection
        h_res = h

        # Pre-normalization
        h = self.norm(h)

        # Get query, key, and values and split them in to heads.
        # These will have shapes `[batch_size, seq_len, n_heads, d_k]`
        mh_shape = (*h.shape[:-1], self.n_heads, self.d_k)
        q = self.query(h).view(mh_shape)
        k = self.key(h).view(mh_shape)
        v = self.value(h).view(mh_shape)

        # Apply rotary positional embeddings
        q = self.rotary_pe(q)
        k = self.rotary_pe(k)

        # Calculate attentions
        attn = torch.einsum('bihd,bjhd->bhij', q, k)
        # Scale it by $\frac{1}{\sqrt{d_k}}$
        attn = attn * self.scale

        # Apply masks if it's causal attention
        attn = self.mask_attention(attn)

        # Calculate attention probabilities
        attn = self.softmax(attn)

        # Get values
        h = torch.einsum("bhij,bjhd->bihd", attn, v)

        # Change from shape `[batch_size, seq_len, n_heads, d_k]`
        # to `[batch_size, seq_len, n_heads * d_k]`
        h = h.reshape(*h.shape[:-2], -1)

        # Apply final linear layer.
        # The result will have shape `[batch_size, seq_len, d_model]`
        h = self.output(h)

        # Add the residual connection
        return h + h_res

