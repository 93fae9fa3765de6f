"""pytorch-forecasting's InterpretableMultiHeadAttention (the Temporal Fusion Transformer's attention): heads
first in the constructor (n_head, d_model), a ModuleList of per-head query layers and one of key layers (Linear
(d_model, d_model // n_head) each, with bias), ONE value layer SHARED by every head, an inner ScaledDotProductAttention
(bmm, keys by permute(0, 2, 1), scale by sqrt(d_k) as a tensor, masked_fill(mask, mask_bias = -1e9) with True =
masked, nn.Softmax(dim=2) module), the heads' outputs STACKED and AVERAGED (torch.mean over the heads), then w_h
Linear(d_v, d_model, bias=False); forward(q, k, v, mask=None) returns (outputs, attn). By design (TFT, Lim et al.
2021, "interpretable" multi-head attention): the heads share their values so that their average attention can be
read, which is not the lesson's multi-head attention.

Source: https://github.com/sktime/pytorch-forecasting (the project the distribution's README links to), file
pytorch_forecasting/models/temporal_fusion_transformer/sub_modules.py as released in pytorch-forecasting 1.8.0 on PyPI.
Licence: MIT (Copyright (c) 2020 - present, the pytorch-forecasting developers; Copyright (c) 2020 Jan Beitner),
LICENSE in the wheel's dist-info.
Copied: verbatim from the PyPI wheel pytorch_forecasting==1.8.0 (pip download --no-deps): the file's imports (lines
5-10) and the classes ScaledDotProductAttention and InterpretableMultiHeadAttention (lines 438-545). ADDED: this
entry's constants after the imports.
Truth: not the lesson's layer (a bug for a causal multi-head attention exercise). Given the causal mask (True =
masked) it equals, exactly, w_h(mean over heads h of softmax(q_h k_h^T / sqrt(d_k)) (x W_v + b_v)) with one W_v of
d_model // n_head rows: no future leak, but its parameters (2 n_head (d_model d_k + d_k) + d_model d_v + d_v +
d_v d_model) change with the number of heads and no reading gives the lesson's layer. With one head it is the
lesson's single head followed by w_h, and then equal to mha_forward with W_o = w_h.
"""
from copy import deepcopy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "InterpretableMultiHeadAttention"
TRUTH = "bug"
BUG = "heads averaged with shared values (TFT's interpretable attention, by design)"
RULE_GAPS = ("heads-first-constructor", "per-head-modules-by-role", "shared-value-projection", "heads-averaged",
             "causal-only-through-mask-arg", "mask-bool-true-masked", "finite-fill-1e9", "softmax-module",
             "out-proj-no-bias", "tuple-output", "no-divisibility-check")
FORWARD = "q, k, v, mask=None"
NOTES = ("InterpretableMultiHeadAttention(n_head, d_model, dropout=0.0, mask_bias=-1e9). forward(q, k, v, mask=None) "
         "-> (outputs (B, n, d_model), attn (B, n, n_head, n)); mask True = masked.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("the heads share one value projection and are averaged, not concatenated: the parameter count "
                    "changes with the heads and no reading reproduces the lesson's layer; no catalogued mistake is this")


class ScaledDotProductAttention(nn.Module):
    """Scaled Dot-Product Attention.

    Parameters
    ----------
    dropout : float, optional
        Dropout rate, by default None
    scale : bool, optional
        Whether to scale the attention scores, by default True
    mask_bias : float, optional
        Bias for the mask in forward, by default -1e9.
        Set to -float("inf") to allow mixed precision training.
    """

    def __init__(self, dropout: float = None, scale: bool = True, mask_bias=-1e9):
        super().__init__()
        if dropout is not None:
            self.dropout = nn.Dropout(p=dropout)
        else:
            self.dropout = dropout
        self.softmax = nn.Softmax(dim=2)
        self.scale = scale
        self.mask_bias = mask_bias

    def forward(self, q, k, v, mask=None):
        attn = torch.bmm(q, k.permute(0, 2, 1))  # query-key overlap

        if self.scale:
            dimension = torch.as_tensor(
                k.size(-1), dtype=attn.dtype, device=attn.device
            ).sqrt()
            attn = attn / dimension

        if mask is not None:
            attn = attn.masked_fill(mask, self.mask_bias)
        attn = self.softmax(attn)

        if self.dropout is not None:
            attn = self.dropout(attn)
        output = torch.bmm(attn, v)
        return output, attn


class InterpretableMultiHeadAttention(nn.Module):
    """Interpretable Multi-Head Attention module.

    Parameters
    ----------
    n_head : int
        Number of attention heads.
    d_model : int
        Dimension of the model.
    dropout : float, optional
        Dropout rate, by default 0.0
    mask_bias : float, optional
        Bias for the mask in ScaledDotProductAttention.forward, by default -1e9.
        Set to -float("inf") to allow mixed precision training.
    """

    def __init__(self, n_head: int, d_model: int, dropout: float = 0.0, mask_bias=-1e9):
        super().__init__()

        self.n_head = n_head
        self.d_model = d_model
        self.mask_bias = mask_bias
        self.d_k = self.d_q = self.d_v = d_model // n_head
        self.dropout = nn.Dropout(p=dropout)

        self.v_layer = nn.Linear(self.d_model, self.d_v)
        self.q_layers = nn.ModuleList(
            [nn.Linear(self.d_model, self.d_q) for _ in range(self.n_head)]
        )
        self.k_layers = nn.ModuleList(
            [nn.Linear(self.d_model, self.d_k) for _ in range(self.n_head)]
        )
        self.attention = ScaledDotProductAttention(mask_bias=mask_bias)
        self.w_h = nn.Linear(self.d_v, self.d_model, bias=False)

        self.init_weights()

    def init_weights(self):
        for name, p in self.named_parameters():
            if "bias" not in name:
                torch.nn.init.xavier_uniform_(p)
            else:
                torch.nn.init.zeros_(p)

    def forward(self, q, k, v, mask=None) -> tuple[torch.Tensor, torch.Tensor]:
        heads = []
        attns = []
        vs = self.v_layer(v)
        for i in range(self.n_head):
            qs = self.q_layers[i](q)
            ks = self.k_layers[i](k)
            head, attn = self.attention(qs, ks, vs, mask)
            head_dropout = self.dropout(head)
            heads.append(head_dropout)
            attns.append(attn)

        head = torch.stack(heads, dim=2) if self.n_head > 1 else heads[0]
        attn = torch.stack(attns, dim=2)

        outputs = torch.mean(head, dim=2) if self.n_head > 1 else head
        outputs = self.w_h(outputs)
        outputs = self.dropout(outputs)

        return outputs, attn
