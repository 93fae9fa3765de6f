"""Ch03_MHA from the book "Build a Large Language Model (From Scratch)", bonus notebook.

Source: https://github.com/rasbt/LLMs-from-scratch/blob/00c240ff87163731b336d97f91aeb2943f5b452d/ch03/02_bonus_efficient-multihead-attention/mha-implementations.ipynb (code cell id 4ee6a61b-d25c-4a0c-8a59-f285544e3710, class Ch03_MHA)
Licence: MIT (Copyright (c) 2023-2024 Sebastian Raschka) per LICENSE.txt as stored in the index; newer files in the repo carry an "Apache License 2.0" header, both permissive.
Copied: verbatim (the class only; the notebook's `import torch.nn as nn` and the demo lines below the class are not copied; `import torch` / `import torch.nn as nn` added above)
Truth: identical to the lesson's causal MHA: separate W_query/W_key/W_value Linear(d_in, d_out, bias=qkv_bias), view(b, n, H, dh).transpose(1, 2), scores / sqrt(dh), triu(1) mask filled with -inf (buffer), softmax(-1), dropout on weights, transpose(1, 2).contiguous().view(b, n, d_out), out_proj Linear(d_out, d_out) with bias. Divisibility is asserted.
"""
import torch
import torch.nn as nn

TARGET = "Ch03_MHA"
TRUTH = "correct"
BUG = None
RULE_GAPS = ()
FORWARD = "x"
NOTES = "Constructor Ch03_MHA(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False). Mask is a float triu(1) buffer named 'mask' converted with .bool() in forward. masked_fill_ is in-place on the score tensor."
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None


class Ch03_MHA(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"

        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads  # Reduce the projection dim to match desired output dim

        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)  # Linear layer to combine head outputs
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape

        keys = self.W_key(x)  # Shape: (b, num_tokens, d_out)
        queries = self.W_query(x)
        values = self.W_value(x)

        # We implicitly split the matrix by adding a `num_heads` dimension
        # Unroll last dim: (b, num_tokens, d_out) -> (b, num_tokens, num_heads, head_dim)
        keys = keys.view(b, num_tokens, self.num_heads, self.head_dim)
        values = values.view(b, num_tokens, self.num_heads, self.head_dim)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim)

        # Transpose: (b, num_tokens, num_heads, head_dim) -> (b, num_heads, num_tokens, head_dim)
        keys = keys.transpose(1, 2)
        queries = queries.transpose(1, 2)
        values = values.transpose(1, 2)

        # Compute scaled dot-product attention (aka self-attention) with a causal mask
        attn_scores = queries @ keys.transpose(2, 3)  # Dot product for each head

        # Original mask truncated to the number of tokens and converted to boolean
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]

        # Use the mask to fill attention scores
        attn_scores.masked_fill_(mask_bool, -torch.inf)

        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        # Shape: (b, num_tokens, num_heads, head_dim)
        context_vec = (attn_weights @ values).transpose(1, 2)

        # Combine heads, where self.d_out = self.num_heads * self.head_dim
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        context_vec = self.out_proj(context_vec)  # optional projection

        return context_vec
