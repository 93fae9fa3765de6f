"""Buggy: the batch is packed into one long sequence before attention, so sequences attend to each other.

Style: SDPA with is_causal=True and separate W_q / W_k / W_v Linear layers plus `proj`. The author flattened
(B, T, C) to (1, B*T, C) "like the data loader's packed stream, one kernel call instead of B". Within each
sequence causality holds, but token t of sequence b also attends to all tokens of sequences 0..b-1, so the output
of one batch element depends on the others.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class PackedCausalAttention(nn.Module):
    def __init__(self, d_in, d_out, num_heads, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.context_length = context_length
        self.dropout = dropout
        self.W_q = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_k = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_v = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.proj = nn.Linear(d_out, d_out)

    def forward(self, x):
        B, T, _ = x.shape
        packed = x.reshape(1, B * T, -1)

        def heads(t):
            return t.view(1, B * T, self.num_heads, self.head_dim).transpose(1, 2)

        q, k, v = heads(self.W_q(packed)), heads(self.W_k(packed)), heads(self.W_v(packed))
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0
        )
        y = y.transpose(1, 2).reshape(B, T, -1)
        return self.proj(y)


TARGET = "PackedCausalAttention"
EXPECT = ("batch-independence",)
DIAGNOSIS = None  # packing is no transpose(0, 2): batch-seq-swap's own numbers, asked under the mapped weights, are
# not this layer's, and its fix (merge with transpose(1, 2)) would change nothing here; batch-independence says what
# is wrong (the output of one sequence depends on the others) and its fix fits (never reshape across axis 0)
