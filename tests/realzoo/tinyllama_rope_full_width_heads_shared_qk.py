"""tinyllama's roPEMultiAttentionHead(context_window, emb_dim, n_heads, gq_ratio): a ModuleList of
roPEAttentionHead modules, EACH with full-width projections Linear(emb_dim, emb_dim); "grouped query" by sharing the
w_q AND w_k Linear objects among gq_ratio consecutive heads (w_v stays per head); RoPE as a dense (context_window,
emb_dim, emb_dim) rotation matrix R kept as a plain attribute, with theta = 10000 ** (-2 * (i - 1) / embedding_dim);
an unused nn.Embedding and RMSnorm in every head; a hand-written SDPA (modified_dot_product_attention) with
dropout_p=0.2 hard-coded (off in eval); forward(x, kv_cache) with a REQUIRED kv_cache flag and a cache dict as an
attribute; heads concatenated into Linear(emb_dim * n_heads, emb_dim).

Source: https://github.com/miftahmoha/tinyllama (the PyPI project's repository), file tinyllama/models/llama.py as
released in tinyllama 0.0.2b0 on PyPI.
Licence: Apache-2.0 (LICENSE in the wheel's dist-info, appendix "Copyright [2024] [miftahmoha]").
Copied: verbatim from the PyPI wheel tinyllama==0.0.2b0 (pip download --no-deps): tinyllama/models/llama.py's imports
(but `from tinyllama... import`) and modified_dot_product_attention, roPEAttentionHead, roPEMultiAttentionHead;
INLINED verbatim in place of those package imports: DEVICE (tinyllama/globals.py), get_rotary_matrix
(tinyllama/encoding/roPE.py) and RMSnorm (tinyllama/normalization/rms.py), with `from typing import Tuple` that rms.py
imports. SwiGLU (imported, unused by the attention) is left out. ADDED: this entry's constants after the imports.
Truth: bug, three at once. (1) The frequencies 10000 ** (-2 (i - 1) / d) are off by one (the standard is i): the
output equals an independent per-head computation with that shift (4e-16: the rotation matrix takes the default dtype, float64 here) and
differs from the standard frequencies by 0.61 (relative). (2) Each head is emb_dim wide: the parameters grow with the heads
(full-width heads, scores / sqrt(emb_dim)). (3) gq_ratio shares the query and key projections within a group, so the
heads of a group compute identical attention weights (grouped-query attention shares keys and values). Causal: yes.
"""
import math
from collections import OrderedDict
from copy import deepcopy

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from typing import Tuple

TARGET = "roPEMultiAttentionHead"
TRUTH = "bug"
BUG = "RoPE frequencies off by one (i - 1), full-width heads, queries and keys shared within a group"
RULE_GAPS = ("rope-dense-rotation-matrix", "per-head-modules", "required-cache-flag", "unused-parameters",
             "plain-attribute-tensors", "no-divisibility-check", "hard-coded-dropout")
FORWARD = "x, kv_cache"
NOTES = ("roPEMultiAttentionHead(context_window, emb_dim, n_heads, gq_ratio); forward(x, kv_cache) -> (B, n, emb_dim); "
         "heads[h].w_q / w_k shared by heads h // gq_ratio; w_v per head; linear(emb_dim * n_heads, emb_dim).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("head-invariance and param-count fail (full-width heads, unused embedding and RMSnorm "
                    "parameters), registered fails (R and the cache dict are plain attributes); three mistakes at "
                    "once and unused parameters: none is named alone")

# ---- INLINED from tinyllama/globals.py (line 6), tinyllama/encoding/roPE.py (get_rotary_matrix) and
# tinyllama/normalization/rms.py (RMSnorm), verbatim, in place of `from tinyllama... import ...`:
DEVICE = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")


def get_rotary_matrix(context_window, embedding_dim):
    R = torch.zeros(
        (context_window, embedding_dim, embedding_dim), requires_grad=False
    ).to(DEVICE)
    for position in range(context_window):
        for i in range(embedding_dim // 2):
            theta = 10000.0 ** (-2.0 * (i - 1) / embedding_dim)
            m_theta = position * theta
            R[position, 2 * i, 2 * i] = np.cos(m_theta)
            R[position, 2 * i, 2 * i + 1] = -np.sin(m_theta)
            R[position, 2 * i + 1, 2 * i] = np.sin(m_theta)
            R[position, 2 * i + 1, 2 * i + 1] = np.cos(m_theta)
    return R


class RMSnorm(nn.Module):
    def __init__(self, layer_shape: Tuple, eps=1e-8, bias: bool = False):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(layer_shape))

    def forward(self, x: torch.Tensor):
        ff_rms = torch.linalg.norm(x, dim=(1, 2), keepdim=True) * x[0].numel() ** -0.5
        x = x / ff_rms
        # [: x.shape[1], :]: allows run in evalutation mode
        x = self.scale[: x.shape[1], :].unsqueeze(0) * x
        return x
# ---- end of the inlined helpers; tinyllama/models/llama.py follows.


def modified_dot_product_attention(
    self: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask=None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale=None,
) -> Tensor:
    L, S = query.size(-2), key.size(-2)
    scale_factor = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    attn_bias = torch.zeros(L, S, dtype=query.dtype)
    if is_causal:
        assert attn_mask is None
        temp_mask = torch.ones(L, S, dtype=torch.bool).tril(diagonal=0)
        attn_bias.masked_fill_(temp_mask.logical_not(), float("-inf"))
        attn_bias.to(query.dtype)

    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            attn_bias.masked_fill_(attn_mask.logical_not(), float("-inf"))
        else:
            attn_bias += attn_mask
    attn_weight = query @ key.transpose(-2, -1) * scale_factor
    attn_bias = attn_bias.to(DEVICE)
    attn_weight += attn_bias

    attn_weight = torch.softmax(attn_weight, dim=-1)
    attn_weight = torch.dropout(attn_weight, dropout_p, train=self.training)
    return attn_weight @ value


class roPEAttentionHead(nn.Module):
    def __init__(
        self, context_window: int, emb_dim: int, w_q: nn.Linear, w_k: nn.Linear
    ):
        super().__init__()
        self.emb_dim = emb_dim
        self.embedding = nn.Embedding(context_window, emb_dim)
        self.rms = RMSnorm((context_window, emb_dim))

        self.w_q = w_q
        self.w_k = w_k
        self.w_v = nn.Linear(emb_dim, emb_dim)

        self.R = get_rotary_matrix(context_window, emb_dim)
        self.cache = {
            "k_rot": torch.empty(1, 0, emb_dim, requires_grad=False).to(DEVICE),
            "v": torch.empty(1, 0, emb_dim, requires_grad=False).to(DEVICE),
        }

    def forward(self, x: Tensor, kv_cache: bool, return_attn_weights: bool = False):
        _, C, _ = x.shape

        # computes queries, keys & values
        q = self.w_q(x)
        k = self.w_k(x)
        v = self.w_v(x)

        # using roPE
        q_rot = torch.bmm(q.transpose(0, 1), self.R[:C].transpose(1, 2)).transpose(0, 1)
        k_rot = torch.bmm(k.transpose(0, 1), self.R[:C].transpose(1, 2)).transpose(0, 1)

        if kv_cache:
            self.cache["k_rot"] = torch.cat((self.cache["k_rot"], k_rot), dim=1)
            self.cache["v"] = torch.cat((self.cache["v"], v), dim=1)

            if q_rot.size(1) > 1:
                activations = modified_dot_product_attention(
                    self,
                    q_rot,
                    self.cache["k_rot"],
                    self.cache["v"],
                    dropout_p=0.2,
                    is_causal=True,
                )
            else:
                activations = modified_dot_product_attention(
                    self,
                    q_rot,
                    self.cache["k_rot"],
                    self.cache["v"],
                    dropout_p=0.2,
                    is_causal=False,
                )
        else:
            activations = modified_dot_product_attention(
                self, q_rot, k_rot, v, dropout_p=0.2, is_causal=True
            )

        # shouldn't work with kv_cache, but not needed
        if return_attn_weights:
            attn_weights = torch.bmm(q_rot, k_rot.transpose(-2, -1)) / np.sqrt(
                self.emb_dim
            )
            attn_weights = torch.softmax(attn_weights, dim=-1)
            return activations, attn_weights

        return activations


class roPEMultiAttentionHead(nn.Module):
    def __init__(self, context_window: int, emb_dim: int, n_heads: int, gq_ratio: int):
        super().__init__()

        self.heads = []
        for i in range(n_heads):
            if i % gq_ratio == 0:
                w_q = nn.Linear(emb_dim, emb_dim)
                w_k = nn.Linear(emb_dim, emb_dim)

            self.heads += [roPEAttentionHead(context_window, emb_dim, w_q, w_k)]
        self.heads = nn.ModuleList(self.heads)

        self.linear = nn.Linear(emb_dim * n_heads, emb_dim)
        self.dropout = nn.Dropout(0.2)

    def forward(self, x: Tensor, kv_cache: bool):
        x = [head(x, kv_cache) for head in self.heads]
        x = torch.cat(x, dim=-1)

        x = self.linear(x)
        x = self.dropout(x)

        return x
