"""MHAEinsum from the book's bonus notebook, as it was before the fix of issue #857 (weights stored as nn.Parameter, used through einsum).

Source: https://github.com/rasbt/LLMs-from-scratch/blob/00c240ff87163731b336d97f91aeb2943f5b452d/ch03/02_bonus_efficient-multihead-attention/mha-implementations.ipynb (code cell id 92481814-068d-439b-a65c-b1310ebbe0aa, class MHAEinsum)
Licence: MIT (Copyright (c) 2023-2024 Sebastian Raschka)
Copied: verbatim (class only; `import math`, `import torch`, `import torch.nn as nn` added above)
Truth: BUG. W_query/W_key/W_value are created with shape (d_out, d_in) but applied as einsum("bnd,di->bni", x, W), i.e. Q = x @ W, which contracts x's last axis with W's FIRST axis (d_out). So any d_in != d_out fails with an einsum shape error although the constructor accepts it. For d_in == d_out it computes a correct causal MHA, but with the matrix used in x @ W orientation: the lesson's nn.Linear weight is W.T. Evidence: issue https://github.com/rasbt/LLMs-from-scratch/issues/857, fixed by commit 27d52d6378b99c419006d284cd1a7301ad533fca (PR #893, "Fix MHAEinsum weight dimension bug when d_in != d_out"), which changed the shapes to (d_in, d_out) and einsum to "bnd,do->bno".
"""
import math

import torch
import torch.nn as nn

TARGET = "MHAEinsum"
TRUTH = "bug"
BUG = "einsum-weight-shape-d-in-ne-d-out"
RULE_GAPS = ()
FORWARD = "x"
NOTES = "Constructor (d_in, d_out, context_length, dropout, num_heads, qkv_bias=False). Raw nn.Parameter matrices W_query/W_key/W_value of shape (d_out, d_in) but USED as x @ W (so the Linear-convention weight is W.T; with d_in == d_out a checker that copies Linear weights into W without transposing will see a mismatch that is not the bug). Biases bias_q/bias_k/bias_v (None unless qkv_bias). out_proj is nn.Linear with bias. The bug only shows with d_in != d_out."
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = None
EXPECTED_BECAUSE = 'a raw weight shaped for d_in = d_out: forward raises otherwise; no catalogued mistake'


class MHAEinsum(nn.Module):

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"

        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads

        self.W_query = nn.Parameter(torch.randn(d_out, d_in))
        self.W_key = nn.Parameter(torch.randn(d_out, d_in))
        self.W_value = nn.Parameter(torch.randn(d_out, d_in))

        if qkv_bias:
            self.bias_q = nn.Parameter(torch.zeros(d_out))
            self.bias_k = nn.Parameter(torch.zeros(d_out))
            self.bias_v = nn.Parameter(torch.zeros(d_out))
        else:
            self.register_parameter("bias_q", None)
            self.register_parameter("bias_k", None)
            self.register_parameter("bias_v", None)

        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))
        self.reset_parameters()


    def reset_parameters(self):
        nn.init.kaiming_uniform_(self.W_query, a=math.sqrt(5))
        nn.init.kaiming_uniform_(self.W_key, a=math.sqrt(5))
        nn.init.kaiming_uniform_(self.W_value, a=math.sqrt(5))
        if self.bias_q is not None:
            fan_in, _ = nn.init._calculate_fan_in_and_fan_out(self.W_query)
            bound = 1 / math.sqrt(fan_in)
            nn.init.uniform_(self.bias_q, -bound, bound)
            nn.init.uniform_(self.bias_k, -bound, bound)
            nn.init.uniform_(self.bias_v, -bound, bound)

    def forward(self, x):
        b, n, _ = x.shape

        # Calculate Q, K, V using einsum, first perform linear transformations
        Q = torch.einsum("bnd,di->bni", x, self.W_query)
        K = torch.einsum("bnd,di->bni", x, self.W_key)
        V = torch.einsum("bnd,di->bni", x, self.W_value)

        # Add biases if they are used
        if self.bias_q is not None:
            Q += self.bias_q
            K += self.bias_k
            V += self.bias_v

        # Reshape for multi-head attention
        Q = Q.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        K = K.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        V = V.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)

        # Scaled dot-product attention
        scores = torch.einsum("bhnd,bhmd->bhnm", Q, K) / (self.head_dim ** 0.5)

        # Apply mask
        mask = self.mask[:n, :n]
        scores = scores.masked_fill(mask.bool(), -torch.inf)

        # Softmax and dropout
        attn_weights = torch.softmax(scores, dim=-1)
        attn_weights = self.dropout(attn_weights)

        # Aggregate the attended context vectors
        context_vec = torch.einsum("bhnm,bhmd->bhnd", attn_weights, V)

        # Combine heads and project the output
        context_vec = context_vec.transpose(1, 2).reshape(b, n, self.d_out)
        context_vec = self.out_proj(context_vec)

        return context_vec
