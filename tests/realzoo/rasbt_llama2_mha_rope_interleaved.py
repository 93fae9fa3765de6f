"""MultiHeadAttention with RoPE from the book's "Converting GPT to Llama 2" notebook, in its earlier form: RoPE on
interleaved pairs (x[..., ::2], x[..., 1::2]) with sin/cos tables of width head_dim // 2 registered as buffers.

Source: https://github.com/rasbt/LLMs-from-scratch/blob/011aac3e51eee3753498c96722898d2ce507ce26/ch05/07_gpt_to_llama/converting-gpt-to-llama2.ipynb (cells 8 and 10: precompute_rope_params, compute_rope, class MultiHeadAttention)
Licence: MIT (Copyright (c) 2023-2024 Sebastian Raschka) per the repository's LICENSE.txt as stored in the index; newer files in the repository carry an "Apache License 2.0" header. Permissive either way.
Copied: verbatim (the two code cells; `import torch`, `import torch.nn as nn` added above); compared character for character with the notebook text stored in the search index at the cited commit (read_file), not with fetched git history.
Truth: correct causal MHA with rotary position embedding in the interleaved convention (pair i = (x_2i, x_2i+1) of each head, turned by position * 10000^(-2i/head_dim)), on the queries and keys after the head split; positions 0..n-1 of the layer's own tables; scaling by sqrt(head_dim) after the mask; no bias anywhere (out_proj too). _truth.py checks it against reference.rotary_mha.rope_mha_forward(convention="interleaved").
"""
import torch
import torch.nn as nn

TARGET = "MultiHeadAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("no-out-proj-bias",)
FORWARD = "x"
NOTES = "Constructor (d_in, d_out, context_length, num_heads, dtype=None). Rotary (interleaved pairs), theta 10000 hard-coded; no biases (out_proj too)."
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = 'out-proj-no-bias'
EXPECTED_BECAUSE = 'correct rotary MHA (interleaved convention, found from the numbers); only the out-proj-bias rule fails'


def precompute_rope_params(head_dim, context_length=4096):
    assert head_dim % 2 == 0, "Embedding dimension must be even"

    # Compute the inverse frequencies
    inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2) / head_dim))

    # Generate position indices
    positions = torch.arange(context_length)

    # Compute the angles using inverse frequencies and positions
    angles = positions[:, None] * inv_freq[None, :]  # Shape: (context_length, emb_dim // 2)

    # Precompute sine and cosine of the angles
    sin = torch.sin(angles)  # Shape: (context_length, emb_dim // 2)
    cos = torch.cos(angles)  # Shape: (context_length, emb_dim // 2)

    return sin, cos


def compute_rope(x, sin, cos):
    # x: (batch_size, num_heads, seq_len, head_dim)
    batch_size, num_heads, seq_len, head_dim = x.shape
    assert head_dim % 2 == 0, "Head dimension must be even"

    # Split x into even and odd parts
    x1 = x[..., ::2]  # Shape: (batch_size, num_heads, seq_len, head_dim // 2)
    x2 = x[..., 1::2]

    # Ensure sin and cos have correct shapes
    sin = sin[:seq_len, :].unsqueeze(0).unsqueeze(0)  # Shape: (1, 1, seq_len, head_dim // 2)
    cos = cos[:seq_len, :].unsqueeze(0).unsqueeze(0)

    # Apply the rotary transformation
    x_rotated_0 = x1 * cos - x2 * sin
    x_rotated_1 = x1 * sin + x2 * cos

    # Interleave x_rotated_0 and x_rotated_1
    x_rotated = torch.stack((x_rotated_0, x_rotated_1), dim=-1)
    x_rotated = x_rotated.flatten(-2)

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
        sin, cos = precompute_rope_params(head_dim=self.head_dim, context_length=context_length)
        self.register_buffer("sin", sin)
        self.register_buffer("cos", cos)
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
        keys = compute_rope(keys, self.sin, self.cos)
        queries = compute_rope(queries, self.sin, self.cos)
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
