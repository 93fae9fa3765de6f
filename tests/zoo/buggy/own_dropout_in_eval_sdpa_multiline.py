"""Buggy (student style, dropout-in-eval): the book's layer with its attention handed to
scaled_dot_product_attention over three lines, `dropout_p=self.dropout` on the third: SDPA has no idea of the
module's mode, so its dropout stays on after model.eval().  Found by a student trial: the report showed "you wrote:
context_vec = F.scaled_dot_product_attention(", the first line only, without the argument that is the mistake.

Style: the book's `W_query`, `W_key`, `W_value`, `out_proj`, `queries`, `keys`, `values`, `context_vec`.
"""
import torch.nn as nn
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.num_heads, self.head_dim = num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = dropout

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        keys = self.W_key(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values = self.W_value(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        context_vec = F.scaled_dot_product_attention(
            queries, keys, values, attn_mask=None,
            dropout_p=self.dropout, is_causal=True)
        context_vec = context_vec.transpose(1, 2).contiguous().view(b, num_tokens, self.num_heads * self.head_dim)
        return self.out_proj(context_vec)


TARGET = "MultiHeadAttention"
EXPECT = ("eval-determinism",)
DIAGNOSIS = "dropout-in-eval"
LINE = 28  # the first of the statement's three lines (the call); the report shows all three, joined
WROTE = ("context_vec = F.scaled_dot_product_attention(queries, keys, values, attn_mask=None, "
         "dropout_p=self.dropout, is_causal=True)")
