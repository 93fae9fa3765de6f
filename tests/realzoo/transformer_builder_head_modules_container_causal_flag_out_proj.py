"""transformer-builder 0.1.0's attention: a "make your own transformers" package of COURSE-STYLE CONTAINERS - a
per-head `SelfAttention` module (any q_architecture / k_architecture / v_architecture module, nn.Identity by default;
SDPA with the head's own scale (None: 1/sqrt(its width)), a causal FLAG spelled `casual_masking` (False by default),
dropout_p passed to SDPA as it is, in training and evaluation alike) and a `MultiHeadAttention` container that runs
its list of heads through torch.jit.fork / torch.jit.wait, concatenates their outputs and applies `layer_after`
(nn.Identity by default: NO OUTPUT PROJECTION unless one is given).  The defaults are module instances shared by
every call of the constructor (`layer_before: nn.Module = nn.Identity()`), harmless for a module without
parameters.  The README's example builds heads as SelfAttention(q_architecture=nn.Linear(embedding_dim, d_head),
...) with d_head = embedding_dim // num_heads (no divisibility check), without the causal flag and without
layer_after.

Source: https://github.com/MrKekovich/transformer-builder (transformer-builder 0.1.0 on PyPI, the distribution's Home-page), files
transformer_builder/attention/self_attention.py and transformer_builder/attention/multi_head_attention.py as released in
transformer-builder 0.1.0.
Licence: BSD-3-Clause (METADATA "License: BSD-3-Clause", classifier "License :: OSI Approved :: BSD License"; LICENSE in the
wheel's dist-info: "Copyright (c) 2023, MrKekovich / All rights reserved." followed by PyTorch's BSD-3 notice and
conditions).
Copied: verbatim from the PyPI wheel transformer-builder==0.1.0 (pip download --no-deps): multi_head_attention.py lines 1-4 and
9-72 (whole but for its `from .self_attention import SelfAttention`, lines 6-7: the class is defined in this file) and
self_attention.py lines 3 and 6-94 (whole but for its own `import torch` / `from torch import nn`, lines 1-2, the same
imports as multi_head_attention.py's).  Left out: the package's ResidualConnection, encoder and (empty) decoder.
ADDED: this docstring, the factory build(d_model, num_heads, context_length=None) at the end - the README's heads
(q, k, v Linear(d_model, d_model // num_heads), with biases) with casual_masking=True, and layer_after =
nn.Linear(d_model, d_model), the output projection the lesson's layer has - and the constants.
Truth: correct (in _truth.py).  out = mha_forward with W_q, W_k, W_v the heads' Linears stacked by head (and their
biases) and W_o = layer_after, exactly, and an independent per-head loop; no leak.
"""
from typing import Iterable

import torch
from torch import nn
from torch.nn.functional import scaled_dot_product_attention


class SelfAttention(nn.Module):
    """
    This class implements the Self-Attention head.
    """

    def __init__(
        self,
        dropout: float = 0.0,
        casual_masking: bool = False,
        layer_before: nn.Module = nn.Identity(),
        q_architecture: nn.Module = nn.Identity(),
        k_architecture: nn.Module = nn.Identity(),
        v_architecture: nn.Module = nn.Identity(),
        layer_after: nn.Module = nn.Identity(),
        scale: float = None,
    ) -> None:
        """
        Args:
            dropout: The attention dropout.

            casual_masking: Whether to apply upper triangular masking to the input.
            Incompatible with mask passed in the forward pass

            layer_before: The layer before k, q, v.

            q_architecture: Architecture for the query.

            k_architecture: Architecture for the key.

            v_architecture: Architecture for the value.

            layer_after: Layer after the scaled dot product of the attention.

            scale: The scaling value.
            Used to scale the dot product of q and k
        """
        super().__init__()
        self.dropout = dropout
        self.casual_masking = casual_masking

        self.layer_before = layer_before
        self.q_architecture = q_architecture
        self.k_architecture = k_architecture
        self.v_architecture = v_architecture
        self.layer_after = layer_after

        self.scale = scale

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor = None,
    ) -> torch.Tensor:
        """
        This method implements the forward pass of the Self-Attention.
        Args:
            x: The input tensor of shape
            (optional_batch_size, sequence_length, embedding_dim).

            mask: Mask tensor of shape
            (optional_batch_size, sequence_length, sequence_length).
            Used to mask the attention, incompatible with casual masking.

        Returns:
            Tensor: The output tensor.
        """
        x = self.layer_before(x)

        query_future = torch.jit.fork(self.q_architecture, x)
        key_future = torch.jit.fork(self.k_architecture, x)
        value_future = torch.jit.fork(self.v_architecture, x)

        query = torch.jit.wait(query_future)
        key = torch.jit.wait(key_future)
        value = torch.jit.wait(value_future)

        attention = scaled_dot_product_attention(
            query=query,
            key=key,
            value=value,
            attn_mask=mask,
            dropout_p=self.dropout,
            scale=self.scale,
            is_causal=self.casual_masking,
        )

        attention = self.layer_after(attention)

        return attention


class MultiHeadAttention(nn.Module):
    """
    This class implements the Multi-Head Attention.
    """

    def __init__(
        self,
        layer_before: nn.Module = nn.Identity(),
        self_attention_heads: Iterable[nn.Module] = None,
        layer_after: nn.Module = nn.Identity(),
    ) -> None:
        """
        Args:
            layer_before: Used before the attention heads.

            self_attention_heads: The attention heads.

            layer_after: Used after the attention heads.
        """
        super().__init__()
        self.layer_before = layer_before

        self.self_attention_heads = nn.ModuleList(
            self_attention_heads
        ) or nn.ModuleList([SelfAttention()])

        if not self.self_attention_heads:
            raise ValueError("self_attention_heads must not be empty")

        self.layer_after = layer_after

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor = None,
    ) -> torch.Tensor:
        """
        This method implements the forward pass of the Multi-Head Attention.
        Concatenates output from the attention heads.
        Args:
            x: The input tensor of shape
            (optional_batch_size, sequence_length, embedding_dim).

            mask: The mask tensor of shape
            (optional_batch_size, sequence_length, sequence_length).
            Used to mask the attention.

        Returns:
            Tensor: The output tensor.
        """
        x = self.layer_before(x)
        heads_output_future = [
            torch.jit.fork(self_attention_head, x, mask)
            for self_attention_head in self.self_attention_heads
        ]

        heads_output = [
            torch.jit.wait(head_output_future)
            for head_output_future in heads_output_future
        ]

        x = torch.concat(heads_output, dim=-1)

        return self.layer_after(x)


# --- added (not in the package) ---
def build(d_model, num_heads, context_length=None):
    d_head = d_model // num_heads
    return MultiHeadAttention(
        self_attention_heads=[SelfAttention(casual_masking=True,
                                            q_architecture=nn.Linear(d_model, d_head),
                                            k_architecture=nn.Linear(d_model, d_head),
                                            v_architecture=nn.Linear(d_model, d_head)) for _ in range(num_heads)],
        layer_after=nn.Linear(d_model, d_model))
# --- end of the added part ---
# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "build"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("head-modules-container", "causal-flag-misspelled-casual", "jit-fork-heads", "shared-default-modules",
             "no-divisibility-check")
FORWARD = "x, mask=None"
NOTES = ("MultiHeadAttention(layer_before=nn.Identity(), self_attention_heads=None, layer_after=nn.Identity()) of "
         "SelfAttention(dropout=0.0, casual_masking=False, layer_before, q/k/v_architecture, layer_after, scale=None) "
         "heads; TARGET is the added factory build(d_model, num_heads, context_length=None).")
OUTCOME = 'rules'
DIAGNOSIS = 'no-divisibility-check'
EXPECTED_BECAUSE = ("correct causal multi-head attention from per-head modules with an output projection; the heads' "
                    "width d_model // num_heads is taken without a divisibility check (the README's own factory "
                    "line), so a width the heads do not divide builds a layer that only fails in forward")
