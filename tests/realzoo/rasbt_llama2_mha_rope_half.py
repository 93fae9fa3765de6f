"""MultiHeadAttention with RoPE from the book's "Converting GPT to Llama 2" notebook, in its current form: RoPE in the
rotate-half convention (x1 = first half, x2 = second half, cat((-x2, x1))) with cos/sin tables of width head_dim.

Source: https://github.com/rasbt/LLMs-from-scratch/blob/19c065b342a7512129d3e9ffdfe00cf683e4205e/ch05/07_gpt_to_llama/converting-gpt-to-llama2.ipynb (cells 8 and 10: precompute_rope_params, compute_rope, class MultiHeadAttention)
Licence: MIT (Copyright (c) 2023-2024 Sebastian Raschka) per the repository's LICENSE.txt as stored in the index; newer files in the repository carry an "Apache License 2.0" header. Permissive either way.
Copied: verbatim (the two code cells; `import torch`, `import torch.nn as nn` added above); compared character for character with the notebook text stored in the search index at the cited commit (read_file), not with fetched git history.
Truth: correct causal MHA with rotary position embedding in the rotate-half convention (pair i = (x_i, x_i+head_dim/2) of each head, turned by position * theta_base^(-2i/head_dim), theta_base = 10000), on the queries and keys after the head split; positions 0..n-1 of the layer's own tables; scaling by sqrt(head_dim) after the mask; no bias anywhere (out_proj too). _truth.py checks it against reference.rotary_mha.rope_mha_forward(convention="half").
"""
import torch
import torch.nn as nn

TARGET = "MultiHeadAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("no-out-proj-bias",)
FORWARD = "x"
NOTES = "Constructor (d_in, d_out, context_length, num_heads, dtype=None). Rotary (rotate-half), theta_base 10000 (a default of precompute_rope_params, not of the constructor); no biases (out_proj too)."
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = 'out-proj-no-bias'
EXPECTED_BECAUSE = 'correct rotary MHA (rotate-half convention, found from the numbers); only the out-proj-bias rule fails'


def precompute_rope_params(head_dim, theta_base=10_000, context_length=4096):
    assert head_dim % 2 == 0, "Embedding dimension must be even"

    # Compute the inverse frequencies
    inv_freq = 1.0 / (theta_base ** (torch.arange(0, head_dim, 2)[: (head_dim // 2)].float() / head_dim))

    # Generate position indices
    positions = torch.arange(context_length)

    # Compute the angles
    angles = positions[:, None] * inv_freq[None, :]  # Shape: (context_length, head_dim // 2)

    # Expand angles to match the head_dim
    angles = torch.cat([angles, angles], dim=1)  # Shape: (context_length, head_dim)

    # Precompute sine and cosine
    cos = torch.cos(angles)
    sin = torch.sin(angles)

    return cos, sin

def compute_rope(x, cos, sin):
    # x: (batch_size, num_heads, seq_len, head_dim)
    batch_size, num_heads, seq_len, head_dim = x.shape
    assert head_dim % 2 == 0, "Head dimension must be even"

    # Split x into first half and second half
    x1 = x[..., : head_dim // 2]  # First half
    x2 = x[..., head_dim // 2 :]  # Second half

    # Adjust sin and cos shapes
    cos = cos[:seq_len, :].unsqueeze(0).unsqueeze(0)  # Shape: (1, 1, seq_len, head_dim)
    sin = sin[:seq_len, :].unsqueeze(0).unsqueeze(0)

    # Apply the rotary transformation
    rotated = torch.cat((-x2, x1), dim=-1)
    x_rotated = (x * cos) + (rotated * sin)

    return x_rotated.to(dtype=x.dtype)


#####################################
# Chapter 3
#####################################
class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, num_heads, dtype=None):  # ,dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by n_heads"

        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads  # Reduce the projection dim to match desired output dim

        ################################### NEW ###################################
        # Set bias=False and dtype=dtype for all linear layers below
        ###########################################################################
        self.W_query = nn.Linear(d_in, d_out, bias=False, dtype=dtype)
        self.W_key = nn.Linear(d_in, d_out, bias=False, dtype=dtype)
        self.W_value = nn.Linear(d_in, d_out, bias=False, dtype=dtype)
        self.out_proj = nn.Linear(d_out, d_out, bias=False, dtype=dtype)  # Linear layer to combine head outputs
        # self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

        ################################### NEW ###################################
        cos, sin = precompute_rope_params(head_dim=self.head_dim, context_length=context_length)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)
        ###########################################################################


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

        ################################### NEW ###################################
        keys = compute_rope(keys, self.cos, self.sin)
        queries = compute_rope(queries, self.cos, self.sin)
        ###########################################################################

        # Compute scaled dot-product attention (aka self-attention) with a causal mask
        attn_scores = queries @ keys.transpose(2, 3)  # Dot product for each head

        # Original mask truncated to the number of tokens and converted to boolean
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]

        # Use the mask to fill attention scores
        attn_scores.masked_fill_(mask_bool, -torch.inf)

        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        # attn_weights = self.dropout(attn_weights)

        # Shape: (b, num_tokens, num_heads, head_dim)
        context_vec = (attn_weights @ values).transpose(1, 2)

        # Combine heads, where self.d_out = self.num_heads * self.head_dim
        context_vec = context_vec.reshape(b, num_tokens, self.d_out)
        context_vec = self.out_proj(context_vec)  # optional projection

        return context_vec
