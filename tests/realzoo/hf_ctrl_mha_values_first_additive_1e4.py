"""Hugging Face's CTRL MultiHeadAttention: forward takes its inputs VALUES FIRST, forward(v, k, q, mask, ...), projections Wq/Wk/Wv/dense declared (d_model_size, num_heads), and an ADDITIVE causal mask: the model passes mask = triu(ones(n, n), 1) (1 = masked, float) and the scores get `mask * -1e4` added (a finite penalty, not -inf).

Source: https://github.com/huggingface/transformers/blob/00b676f8f0489b88652a31d70751cc540dd06305/src/transformers/models/ctrl/modeling_ctrl.py (function scaled_dot_product_attention and class MultiHeadAttention; CTRLModel.forward builds `mask = torch.triu(torch.ones(seq_len + past_length, seq_len + past_length), 1)` and EncoderLayer calls `self.multi_head_attention(normed, normed, normed, mask, ...)`).
Licence: Apache-2.0 (file header: "Copyright 2018 Salesforce and HuggingFace Inc. team. Copyright (c) 2018, NVIDIA CORPORATION. All rights reserved. Licensed under the Apache License, Version 2.0").
Copied: verbatim, transcribed from the search index's copy of the file at the cited commit (read_file; the repository is too large to fetch here, and the text was not compared by program): the imports `import numpy as np`, `import torch`, `from torch import nn`, the function scaled_dot_product_attention and the class MultiHeadAttention. The file's imports from transformers (Cache, Conv1D, find_pruneable_heads_and_indices, prune_linear_layer, ...) are left out: only prune_heads uses two of them, and it is never called here; layer_past (a transformers Cache) stays None. This entry's constants are placed after the imports.
Truth: causal multi-head attention with a FINITE additive mask when called as m(x, x, x, triu(ones(n, n), 1)): Wq/Wk/Wv/dense Linear(d, d) with bias, reshape(B, -1, H, depth).permute(0, 2, 1, 3), q @ k^T / sqrt(depth), scores + mask * -1e4 (a future score s becomes s - 1e4: the future keeps weight exp(s_future - 1e4 - s_own), exactly 0 in no float format only when s_future - s_own < about -745 + 1e4, i.e. it leaks once a future score exceeds the query's own scores by about 1e4 - 745 in float64, or about 1e4 - 104 in float32), softmax(-1), @ v, permute back, reshape(B, -1, d), dense. Returns (output, attention_weights). No divisibility check (depth = int(d / H)). The inputs are taken in the order (v, k, q): a caller passing (q, k, v) gets keys and values swapped in cross-attention; in self-attention (all three x) the order does not matter.
"""
import numpy as np
import torch
from torch import nn

TARGET = "MultiHeadAttention"
TRUTH = "bug"
BUG = "finite additive mask -1e4"
RULE_GAPS = ("values-first-forward", "mask-argument-required", "additive-mask-1-is-masked", "no-divisibility-check",
             "tuple-output", "no-context-length")
FORWARD = "v, k, q, mask, layer_past=None, attention_mask=None, head_mask=None, use_cache=False, output_attentions=False, cache_position=None"
NOTES = ("MultiHeadAttention(d_model_size, num_heads, layer_idx=None). forward(v, k, q, mask, ...): mask REQUIRED, "
         "float or bool (n, n), 1 / True = masked, multiplied by -1e4 and ADDED to the scores. Returns (output, "
         "attention_weights). Weights Wq, Wk, Wv, dense, all with bias.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'finite-fill-100'
EXPECTED_BECAUSE = 'causal-leakage fails: the -1e4 additive mask lets the future in once scores are large, as a -1e4 fill does (early GPT-2: finite-fill-100, told with its own value, at the line that writes -1e4); no divisibility check too'


def scaled_dot_product_attention(q, k, v, mask, attention_mask=None, head_mask=None):
    # calculate attention
    matmul_qk = torch.matmul(q, k.permute(0, 1, 3, 2))

    dk = k.shape[-1]
    scaled_attention_logits = matmul_qk / np.sqrt(dk)

    if mask is not None:
        nd, ns = scaled_attention_logits.size(-2), scaled_attention_logits.size(-1)
        scaled_attention_logits += mask[ns - nd : ns, :ns] * -1e4

    if attention_mask is not None:
        # Apply the attention mask
        scaled_attention_logits = scaled_attention_logits + attention_mask

    attention_weights = torch.softmax(scaled_attention_logits, dim=-1)

    # Mask heads if we want to
    if head_mask is not None:
        attention_weights = attention_weights * head_mask

    output = torch.matmul(attention_weights, v)

    return output, attention_weights


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model_size, num_heads, layer_idx=None):
        super().__init__()
        self.num_heads = num_heads
        self.d_model_size = d_model_size
        self.layer_idx = layer_idx

        self.depth = int(d_model_size / self.num_heads)

        self.Wq = nn.Linear(d_model_size, d_model_size)
        self.Wk = nn.Linear(d_model_size, d_model_size)
        self.Wv = nn.Linear(d_model_size, d_model_size)

        self.dense = nn.Linear(d_model_size, d_model_size)
        self.pruned_heads = set()

    def prune_heads(self, heads):
        attention_head_size = self.d_model_size // self.num_heads
        if len(heads) == 0:
            return
        heads, index = find_pruneable_heads_and_indices(heads, self.num_heads, attention_head_size, self.pruned_heads)

        # Prune linear layers
        self.Wq = prune_linear_layer(self.Wq, index)
        self.Wk = prune_linear_layer(self.Wk, index)
        self.Wv = prune_linear_layer(self.Wv, index)
        self.dense = prune_linear_layer(self.dense, index, dim=1)

        # Update hyper params
        self.num_heads = self.num_heads - len(heads)
        self.d_model_size = attention_head_size * self.num_heads
        self.pruned_heads = self.pruned_heads.union(heads)

    def split_into_heads(self, x, batch_size):
        x = x.reshape(batch_size, -1, self.num_heads, self.depth)
        return x.permute([0, 2, 1, 3])

    def forward(
        self,
        v,
        k,
        q,
        mask,
        layer_past=None,
        attention_mask=None,
        head_mask=None,
        use_cache=False,
        output_attentions=False,
        cache_position=None,
    ):
        batch_size = q.shape[0]

        q = self.Wq(q)
        k = self.Wk(k)
        v = self.Wv(v)

        q = self.split_into_heads(q, batch_size)
        k = self.split_into_heads(k, batch_size)
        v = self.split_into_heads(v, batch_size)

        if layer_past is not None:
            k, v = layer_past.update(k, v, self.layer_idx, {"cache_position": cache_position})

        output = scaled_dot_product_attention(q, k, v, mask, attention_mask, head_mask)
        scaled_attention = output[0].permute([0, 2, 1, 3])
        attn = output[1]
        original_size_attention = scaled_attention.reshape(batch_size, -1, self.d_model_size)
        output = self.dense(original_size_attention)
        return output, attn
