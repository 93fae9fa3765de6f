"""ESPnet's MultiHeadedAttention (speech recognition / TTS / speech translation decoders; Shigeki Karita): linear_q /
linear_k / linear_v / linear_out, forward(query, key, value, mask, expand_kv=False) with a REQUIRED mask (#batch, 1,
time2) or (#batch, time1, time2) where 1 = attend (its decoders pass subsequent_mask, a bool tril); scores filled
with finfo(dtype).min where the mask is 0 and the probabilities ZEROED there again after the softmax; three paths:
PyTorch SDPA (use_sdpa), flash_attn (use_flash_attn, with its own `causal` flag) and the default matmul path;
optional LayerNorm on q and k (qk_norm).

Source: https://github.com/espnet/espnet (espnet 202511 on PyPI, the distribution's Home-page), file
espnet/nets/pytorch_backend/transformer/attention.py as released in espnet 202511.
Licence: Apache-2.0 (the wheel's METADATA "License: Apache Software License", the LICENSE in its dist-info/licenses,
and the file's header "Copyright 2019 Shigeki Karita, Apache 2.0").
Copied: verbatim from the PyPI wheel espnet==202511 (pip download --no-deps): lines 1-13 of
espnet/nets/pytorch_backend/transformer/attention.py (header and imports) and lines 24-265 (MultiHeadedAttention).
Line 15 (`from espnet.nets.pytorch_backend.transformer.layer_norm import LayerNorm`) is replaced by the shim below;
lines 17-21 (a try-import of flash_attn that prints a message when the package is missing) are left out: their names
serve only use_flash_attn=True, off by default.
ADDED: the LayerNorm shim (ESPnet's LayerNorm(nout, dim=-1) is torch's LayerNorm over the last axis, which is how
qk_norm uses it) and this entry's constants.
Truth: correct given its mask: with the (B, n, n) bool tril mask its decoders pass and dropout off, mha_forward with
linear_q/k/v/out (weights and biases), exactly, on the default path and on the SDPA path (use_sdpa=True); no leak.
"""

#!/usr/bin/env python3
# -*- coding: utf-8 -*-

# Copyright 2019 Shigeki Karita
#  Apache 2.0  (http://www.apache.org/licenses/LICENSE-2.0)

"""Multi-Head Attention layer definition."""

import logging
import math

import torch
from torch import nn
# --- added for the zoo: ESPnet's LayerNorm (espnet/nets/pytorch_backend/transformer/layer_norm.py: torch's LayerNorm
# over the last axis for dim=-1, the only use here) ---
LayerNorm = nn.LayerNorm
# --- end of shim ---

TARGET = "MultiHeadedAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("required-keep-mask-argument", "finfo-min-fill-and-zero-after-softmax", "heads-first-constructor",
             "no-context-length", "attn-kept-as-attribute")
FORWARD = "query, key, value, mask, expand_kv=False"
NOTES = ("MultiHeadedAttention(n_head, n_feat, dropout_rate, qk_norm=False, use_flash_attn=False, causal=False, "
         "cross_attn=False, use_sdpa=False); forward(query, key, value, mask) -> (B, time1, n_feat).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("ESPnet's decoder attention given its bool keep-mask is the lesson's layer (finfo.min fill, then the "
                    "masked probabilities zeroed, which changes nothing): every check passes")


class MultiHeadedAttention(nn.Module):
    """Multi-Head Attention layer.

    Args:
        n_head (int): The number of heads.
        n_feat (int): The number of features.
        dropout_rate (float): Dropout rate.
        qk_norm (bool): Normalize q and k before dot product.
        use_flash_attn (bool): Use flash_attn implementation.
        causal (bool): Apply causal attention.
        cross_attn (bool): Cross attention instead of self attention.
        use_sdpa (bool): Use PyTorch's scaled dot product attention.

    """

    def __init__(
        self,
        n_head,
        n_feat,
        dropout_rate,
        qk_norm=False,
        use_flash_attn=False,
        causal=False,
        cross_attn=False,
        use_sdpa=False,
    ):
        """Construct an MultiHeadedAttention object."""
        super(MultiHeadedAttention, self).__init__()

        assert n_feat % n_head == 0
        # We assume d_v always equals d_k
        self.d_k = n_feat // n_head
        self.h = n_head
        self.linear_q = nn.Linear(n_feat, n_feat)
        self.linear_k = nn.Linear(n_feat, n_feat)
        self.linear_v = nn.Linear(n_feat, n_feat)
        self.linear_out = nn.Linear(n_feat, n_feat)
        self.attn = None
        self.dropout = (
            nn.Dropout(p=dropout_rate) if not use_flash_attn else nn.Identity()
        )
        self.dropout_rate = dropout_rate

        # LayerNorm for q and k
        self.q_norm = LayerNorm(self.d_k) if qk_norm else nn.Identity()
        self.k_norm = LayerNorm(self.d_k) if qk_norm else nn.Identity()

        self.use_flash_attn = use_flash_attn
        self.causal = causal  # only used with flash_attn
        self.cross_attn = cross_attn  # only used with flash_attn

        self.use_sdpa = use_sdpa

    def forward_qkv(self, query, key, value, expand_kv=False):
        """Transform query, key and value.

        Args:
            query (torch.Tensor): Query tensor (#batch, time1, size).
            key (torch.Tensor): Key tensor (#batch, time2, size).
            value (torch.Tensor): Value tensor (#batch, time2, size).
            expand_kv (bool): Used only for partially autoregressive (PAR) decoding.

        Returns:
            torch.Tensor: Transformed query tensor (#batch, n_head, time1, d_k).
            torch.Tensor: Transformed key tensor (#batch, n_head, time2, d_k).
            torch.Tensor: Transformed value tensor (#batch, n_head, time2, d_k).

        """
        n_batch = query.size(0)
        q = self.linear_q(query).view(n_batch, -1, self.h, self.d_k)

        if expand_kv:
            k_shape = key.shape
            k = (
                self.linear_k(key[:1, :, :])
                .expand(n_batch, k_shape[1], k_shape[2])
                .view(n_batch, -1, self.h, self.d_k)
            )
            v_shape = value.shape
            v = (
                self.linear_v(value[:1, :, :])
                .expand(n_batch, v_shape[1], v_shape[2])
                .view(n_batch, -1, self.h, self.d_k)
            )
        else:
            k = self.linear_k(key).view(n_batch, -1, self.h, self.d_k)
            v = self.linear_v(value).view(n_batch, -1, self.h, self.d_k)

        q = q.transpose(1, 2)  # (batch, head, time1, d_k)
        k = k.transpose(1, 2)  # (batch, head, time2, d_k)
        v = v.transpose(1, 2)  # (batch, head, time2, d_k)

        q = self.q_norm(q)
        k = self.k_norm(k)

        return q, k, v

    def forward_attention(self, value, scores, mask):
        """Compute attention context vector.

        Args:
            value (torch.Tensor): Transformed value (#batch, n_head, time2, d_k).
            scores (torch.Tensor): Attention score (#batch, n_head, time1, time2).
            mask (torch.Tensor): Mask (#batch, 1, time2) or (#batch, time1, time2).

        Returns:
            torch.Tensor: Transformed value (#batch, time1, d_model)
                weighted by the attention score (#batch, time1, time2).

        """
        n_batch = value.size(0)
        if mask is not None:
            mask = mask.unsqueeze(1).eq(0)  # (batch, 1, *, time2)
            min_value = torch.finfo(scores.dtype).min
            scores = scores.masked_fill(mask, min_value)
            self.attn = torch.softmax(scores, dim=-1).masked_fill(
                mask, 0.0
            )  # (batch, head, time1, time2)
        else:
            self.attn = torch.softmax(scores, dim=-1)  # (batch, head, time1, time2)

        p_attn = self.dropout(self.attn)
        x = torch.matmul(p_attn, value)  # (batch, head, time1, d_k)
        x = (
            x.transpose(1, 2).contiguous().view(n_batch, -1, self.h * self.d_k)
        )  # (batch, time1, d_model)

        return self.linear_out(x)  # (batch, time1, d_model)

    def forward(self, query, key, value, mask, expand_kv=False):
        """Compute scaled dot product attention.

        Args:
            query (torch.Tensor): Query tensor (#batch, time1, size).
            key (torch.Tensor): Key tensor (#batch, time2, size).
            value (torch.Tensor): Value tensor (#batch, time2, size).
            mask (torch.Tensor): Mask tensor (#batch, 1, time2) or
                (#batch, time1, time2).
            expand_kv (bool): Used only for partially autoregressive (PAR) decoding.
                When set to `True`, `Linear` layers are computed only for the first
                batch. This is useful to reduce the memory usage during decoding
                when the batch size is #beam_size x #mask_count, which can be large.
                Typically, in single waveform inference of PAR, `Linear` layers
                should not be computed for all batches for source-attention.

        Returns:
            torch.Tensor: Output tensor (#batch, time1, d_model).
        """
        # Use PyTorch's Scaled Dot Product Attention implementation
        if getattr(self, "use_sdpa", False):
            q, k, v = self.forward_qkv(query, key, value, expand_kv)

            # The shape of mask must be broadcastable to the shape of attention weights
            out = torch.nn.functional.scaled_dot_product_attention(
                q,
                k,
                v,
                mask.unsqueeze(1) if mask is not None else None,
                dropout_p=self.dropout_rate if self.training else 0.0,
            )  # (batch, head, time1, d_k)

            out = out.transpose(1, 2)  # (batch, time1, head, d_k)
            out = out.reshape(out.shape[0], out.shape[1], -1)  # (batch, time1, d_model)
            return self.linear_out(out)  # (batch, time1, d_model)

        # Use Flash Attention implementation
        if self.use_flash_attn:
            try:
                # In the causal case, the last row will be the key mask
                key_nonpad_mask = mask[:, -1, :]  # (#batch, time2)
                if self.cross_attn:
                    # For cross attention, we do not know the query padding
                    query_nonpad_mask = torch.ones(
                        size=query.shape[:2], dtype=torch.bool, device=query.device
                    )
                else:
                    query_nonpad_mask = key_nonpad_mask

                if key_nonpad_mask.eq(0).any():
                    # Use variable length implementation if padded
                    q, indices_q, cu_seqlens_q, max_seqlen_q = unpad_input(
                        query, query_nonpad_mask
                    )[:4]
                    k, indices_k, cu_seqlens_k, max_seqlen_k = unpad_input(
                        key, key_nonpad_mask
                    )[:4]
                    v, _, _, _ = unpad_input(value, key_nonpad_mask)[:4]

                    q = self.linear_q(q).reshape(-1, self.h, self.d_k)
                    k = self.linear_k(k).reshape(-1, self.h, self.d_k)
                    v = self.linear_v(v).reshape(-1, self.h, self.d_k)

                    q = self.q_norm(q)
                    k = self.k_norm(k)

                    out = flash_attn_varlen_func(
                        q,
                        k,
                        v,
                        cu_seqlens_q,
                        cu_seqlens_k,
                        max_seqlen_q,
                        max_seqlen_k,
                        dropout_p=self.dropout_rate if self.training else 0.0,
                        causal=self.causal,
                    )  # (total, nheads, headdim)

                    out = out.reshape(out.shape[0], -1)
                    out = self.linear_out(out)

                    out = pad_input(out, indices_q, query.shape[0], query.shape[1])
                    return out

                else:
                    # Use fixed length implementation if not padded,
                    # which is faster than the variable length implementation
                    del key_nonpad_mask
                    q, k, v = self.forward_qkv(query, key, value)

                    out = flash_attn_func(
                        q.transpose(1, 2),
                        k.transpose(1, 2),
                        v.transpose(1, 2),
                        dropout_p=self.dropout_rate if self.training else 0.0,
                        causal=self.causal,
                    )  # (batch_size, seqlen, nheads, headdim)
                    del q, k, v

                    out = out.reshape(out.shape[0], out.shape[1], -1)
                    out = self.linear_out(out)
                    return out

            except Exception as e:
                logging.warning(
                    f"Flash Attention failed, falling back to default attention: {e}"
                )
                self.use_flash_attn = False

        # Fall back to the default implementation
        q, k, v = self.forward_qkv(query, key, value, expand_kv)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.d_k)
        return self.forward_attention(v, scores, mask)
