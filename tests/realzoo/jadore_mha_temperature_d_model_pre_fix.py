"""jadore801120/attention-is-all-you-need-pytorch's MultiHeadAttention at release 0.4, before "temperature definition fix" (e108f0f): the scores divided by sqrt(d_model) instead of sqrt(d_k); heads first in the constructor (n_head, d_model, d_k, d_v), heads folded into the batch head-major, the mask REPEATED per head (a (B, n, n) mask is needed), and the residual and LayerNorm inside the layer.

Source: https://github.com/jadore801120/attention-is-all-you-need-pytorch/blob/300418e8e9f4ee2ec8ddee6f8b4f6bbc6db8a2f0/transformer/SubLayers.py and https://github.com/jadore801120/attention-is-all-you-need-pytorch/blob/300418e8e9f4ee2ec8ddee6f8b4f6bbc6db8a2f0/transformer/Modules.py (class MultiHeadAttention and class ScaledDotProductAttention; commit "0.4", 2018-08-23). Fixed upstream three days later by https://github.com/jadore801120/attention-is-all-you-need-pytorch/commit/e108f0fc8514614781f1d3f910c3586d5c2a7b1d ("temperature definition fix", 2018-08-26): ScaledDotProductAttention(temperature=np.power(d_model, 0.5)) -> np.power(d_k, 0.5). In the repository's decoder the self-attention mask is get_subsequent_mask(seq) | padding: (B, n, n) bytes, 1 = masked.
Licence: MIT (Copyright (c) 2017 Victor Huang), LICENSE at the repository root.
Copied: verbatim, the two classes, with Modules.py's imports (torch, torch.nn, numpy) and SubLayers.py's `import torch.nn.functional as F`, taken from `git show 300418e:transformer/Modules.py` and `git show 300418e:transformer/SubLayers.py` in the fetched history (the search index holds only later versions of these files, so this text was not compared with it). `from transformer.Modules import ScaledDotProductAttention` is replaced by the copied class placed first; the modules' `__author__ = "Yu-Hsiang Huang"` lines and PositionwiseFeedForward are left out; this entry's constants are placed after the imports.
Truth: BUG. forward(q, k, v, mask=None) returns (output, attn); the mask is required in practice (mask.repeat(n_head, 1, 1) on None raises) and must be (B, n, n) bool, True = masked: repeat(n_head, 1, 1) lays it out head-major (index h * B + b), as the heads (permute(2, 0, 1, 3).view(-1, n, d_k)). w_qs/w_ks Linear(d_model, n_head * d_k), w_vs Linear(d_model, n_head * d_v), all with bias; scores bmm / temperature with temperature = sqrt(d_model) (THE BUG: the lesson, and the fix, divide by sqrt(d_k)); masked_fill(mask, -inf); softmax(dim=2) (the keys); attention dropout fixed at 0.1 (attn_dropout's default, not the layer's dropout); merge view(n_head, B, n, d_v).permute(1, 2, 0, 3).view(B, n, n_head * d_v); fc Linear(n_head * d_v, d_model); dropout; then layer_norm(output + residual) with residual = q: the layer returns LayerNorm(x + MHA(x)), a whole post-LN sublayer, not the lesson's MHA. _truth.py checks it equals LayerNorm(x + mha_forward(x, W_q * sqrt(d_k / d_model), ...)) exactly, and differs from the same with the right scaling.
"""
import torch
import torch.nn as nn
import numpy as np
import torch.nn.functional as F

TARGET = "MultiHeadAttention"
TRUTH = "bug"
BUG = "scale-by-sqrt-d (temperature sqrt(d_model), not sqrt(d_k))"
RULE_GAPS = ("heads-first-constructor", "head-width-arguments-d_k-d_v", "mask-required-per-sequence", "mask-true-is-masked",
             "heads-folded-head-major", "residual-and-layernorm-inside", "tuple-output", "no-divisibility-check",
             "no-context-length")
FORWARD = "q, k, v, mask=None"
NOTES = ("MultiHeadAttention(n_head, d_model, d_k, d_v, dropout=0.1): d_k and d_v are per-head widths (the paper's "
         "d_model / n_head). forward(q, k, v, mask=None) needs a bool (B, n, n) mask, True = masked. Returns "
         "(LayerNorm(x + attention), attn). Weights w_qs, w_ks, w_vs, fc, layer_norm.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'scale-by-sqrt-d'
EXPECTED_BECAUSE = ('real bug (scores / sqrt(d_model), fixed in e108f0f) inside a post-LN residual block (LayerNorm(x + '
                    'MHA(x))): with the LayerNorm switched off and the input taken away from the output, scale-by-sqrt-d '
                    'reproduces it (reference-match and gradient-match fail); causal once given the (B, n, n) mask; '
                    'param-count leaves the LayerNorm out and passes')


class ScaledDotProductAttention(nn.Module):
    ''' Scaled Dot-Product Attention '''

    def __init__(self, temperature, attn_dropout=0.1):
        super().__init__()
        self.temperature = temperature
        self.dropout = nn.Dropout(attn_dropout)
        self.softmax = nn.Softmax(dim=2)

    def forward(self, q, k, v, mask=None):

        attn = torch.bmm(q, k.transpose(1, 2))
        attn = attn / self.temperature

        if mask is not None:
            attn = attn.masked_fill(mask, -np.inf)

        attn = self.softmax(attn)
        attn = self.dropout(attn)
        output = torch.bmm(attn, v)

        return output, attn

class MultiHeadAttention(nn.Module):
    ''' Multi-Head Attention module '''

    def __init__(self, n_head, d_model, d_k, d_v, dropout=0.1):
        super().__init__()

        self.n_head = n_head
        self.d_k = d_k
        self.d_v = d_v

        self.w_qs = nn.Linear(d_model, n_head * d_k)
        self.w_ks = nn.Linear(d_model, n_head * d_k)
        self.w_vs = nn.Linear(d_model, n_head * d_v)
        nn.init.xavier_normal_(self.w_qs.weight)
        nn.init.xavier_normal_(self.w_ks.weight)
        nn.init.xavier_normal_(self.w_vs.weight)

        self.attention = ScaledDotProductAttention(temperature=np.power(d_model, 0.5))
        self.layer_norm = nn.LayerNorm(d_model)

        self.fc = nn.Linear(n_head * d_v, d_model)
        nn.init.xavier_normal_(self.fc.weight)

        self.dropout = nn.Dropout(dropout)


    def forward(self, q, k, v, mask=None):

        d_k, d_v, n_head = self.d_k, self.d_v, self.n_head

        sz_b, len_q, _ = q.size()
        sz_b, len_k, _ = k.size()
        sz_b, len_v, _ = v.size()

        residual = q

        q = self.w_qs(q).view(sz_b, len_q, n_head, d_k)
        k = self.w_ks(k).view(sz_b, len_k, n_head, d_k)
        v = self.w_vs(v).view(sz_b, len_v, n_head, d_v)

        q = q.permute(2, 0, 1, 3).contiguous().view(-1, len_q, d_k) # (n*b) x lq x dk
        k = k.permute(2, 0, 1, 3).contiguous().view(-1, len_k, d_k) # (n*b) x lk x dk
        v = v.permute(2, 0, 1, 3).contiguous().view(-1, len_v, d_v) # (n*b) x lv x dv

        mask = mask.repeat(n_head, 1, 1) # (n*b) x .. x ..
        output, attn = self.attention(q, k, v, mask=mask)

        output = output.view(n_head, sz_b, len_q, d_v)
        output = output.permute(1, 2, 0, 3).contiguous().view(sz_b, len_q, -1) # b x lq x (n*dv)

        output = self.dropout(self.fc(output))
        output = self.layer_norm(output + residual)

        return output, attn
