"""MultiHeadAttention from ajhalthor/Transformer-Neural-Network (YouTube series "Transformers from scratch"): per-head interleaved fused qkv, merge without permute.

Source: https://github.com/ajhalthor/Transformer-Neural-Network/blob/41f49f51cb82134dc7367bf177fe51f03e8a62e0/transformer.py (lines 10-18: function scaled_dot_product; lines 77-95: class MultiHeadAttention); commit on refs/heads/main.
Licence: MIT (Copyright (c) 2023 Ajay Halthor)
Copied: verbatim (function scaled_dot_product and class MultiHeadAttention; `import torch`, `import math`, `from torch import nn`, `import torch.nn.functional as F` as in the original file; its unused `import numpy as np` is dropped)
Truth: BUG, merge without transpose: after attention `values` has shape (B, H, n, dh) and is reshaped straight to (B, n, H*dh), which mixes tokens and heads (token t's output row is built from several tokens of one head), so outputs differ from the reference AND a future token changes earlier outputs. Also an unusual but legitimate split: qkv_layer Linear(d_model, 3*d_model) reshaped to (B, n, H, 3*dh) and chunked on the last axis, i.e. the fused weight is laid out per head as [q_h; k_h; v_h] blocks (not [Q; K; V]). The mask is ADDITIVE and supplied by the caller (float, -inf or a large negative above the diagonal; it is added after permute(1, 0, 2, 3), so it must broadcast against (H, B, n, n): shape (n, n) or (B, n, n)). Evidence: issue https://github.com/ajhalthor/Transformer-Neural-Network/issues/8 ("permute before reshape") and PR https://github.com/ajhalthor/Transformer-Neural-Network/pull/4 ("Fix, avoid ending up with the wrong merged head values for each token").
"""
import torch
import math
from torch import nn
import torch.nn.functional as F

TARGET = "MultiHeadAttention"
TRUTH = "bug"
BUG = "merge-no-transpose"
RULE_GAPS = ("no-divisibility-check",)
FORWARD = "x, mask"
NOTES = "Constructor MultiHeadAttention(d_model, num_heads). forward(x, mask) with mask REQUIRED positionally (None allowed = no masking at all); additive float mask, 0 = keep, -inf (or -1e9) = masked, shape (n, n) or (B, n, n). Fused qkv_layer weight (3*d_model, d_model) in PER-HEAD interleaved layout: rows [h*3*dh : h*3*dh+dh] = W_q head h, next dh rows = W_k head h, next dh = W_v head h. Output projection linear_layer Linear(d_model, d_model) with bias; qkv has bias. (The original file also imports numpy; dropped here because the class does not use it.)"
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'merge-no-transpose'


def scaled_dot_product(q, k, v, mask=None):
    d_k = q.size()[-1]
    scaled = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d_k)
    if mask is not None:
        scaled = scaled.permute(1, 0, 2, 3) + mask
        scaled = scaled.permute(1, 0, 2, 3)
    attention = F.softmax(scaled, dim=-1)
    values = torch.matmul(attention, v)
    return values, attention


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.qkv_layer = nn.Linear(d_model , 3 * d_model)
        self.linear_layer = nn.Linear(d_model, d_model)
    
    def forward(self, x, mask):
        batch_size, sequence_length, d_model = x.size()
        qkv = self.qkv_layer(x)
        qkv = qkv.reshape(batch_size, sequence_length, self.num_heads, 3 * self.head_dim)
        qkv = qkv.permute(0, 2, 1, 3)
        q, k, v = qkv.chunk(3, dim=-1)
        values, attention = scaled_dot_product(q, k, v, mask)
        values = values.reshape(batch_size, sequence_length, self.num_heads * self.head_dim)
        out = self.linear_layer(values)
        return out
