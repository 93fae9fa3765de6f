"""MultiHeadAttentionWrapper from the book's bonus ch03.py BEFORE commit f1fa9df: full-width heads concatenated, no output projection.

Source: https://github.com/rasbt/LLMs-from-scratch/blob/da33ce8054e71dba98ee5e2b16ce9907e8eb1d76/ch03/02_bonus_efficient-multihead-attention/ch03.py (lines 5-41: classes CausalAttention and MultiHeadAttentionWrapper)
Licence: MIT (Copyright (c) 2023-2024 Sebastian Raschka)
Copied: verbatim (lines 5-41 incl. trailing whitespace; `import torch` / `import torch.nn as nn` as in the original lines 1-2)
Truth: BUG relative to the lesson: num_heads full single-head layers (each Linear(d_in, d_out), scaled by sqrt(d_out)) concatenated to width num_heads*d_out with NO output projection, and the benchmark called it with d_out=embed_dim, i.e. full-width heads (12 x 768 = 9216 wide output). Evidence: fixed by commit https://github.com/rasbt/LLMs-from-scratch/commit/f1fa9df15cf2927db09e7bb23127f562b8f6bde8 ("Fix mha wrapper implementations in ch03 bonus", PR #68 fix_ch03_impl_wrapper), which added out_proj = Linear(d_out*num_heads, d_out*num_heads) and changed the call to d_out=embed_dim//12.
"""
import torch
import torch.nn as nn

TARGET = "MultiHeadAttentionWrapper"
TRUTH = "bug"
BUG = "full-width-heads-no-out-proj"
RULE_GAPS = ("no-divisibility-check", "no-out-proj-bias")
FORWARD = "x"
NOTES = "Constructor (d_in, d_out, block_size, dropout, num_heads, qkv_bias=False); d_out is per head, output width num_heads*d_out != d_out. No out projection parameters at all. Each head is causal, so a pure leakage test passes; only a comparison with the reference (or an output-width check) catches it. This is also the book's main-chapter teaching wrapper (by design there), so it is a bug only as an MHA implementation."
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'full-width-heads-no-projection'


class CausalAttention(nn.Module):

    def __init__(self, d_in, d_out, block_size, dropout, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key   = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout) # New
        self.register_buffer('mask', torch.triu(torch.ones(block_size, block_size), diagonal=1)) # New

    def forward(self, x):
        b, num_tokens, d_in = x.shape # New batch dimension b
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)

        attn_scores = queries @ keys.transpose(1, 2) # Changed transpose
        attn_scores.masked_fill_(  # New, _ ops are in-place
            self.mask.bool()[:num_tokens, :num_tokens], -torch.inf) 
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights) # New

        context_vec = attn_weights @ values
        return context_vec
    
    
class MultiHeadAttentionWrapper(nn.Module):

    def __init__(self, d_in, d_out, block_size, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, block_size, dropout, qkv_bias) 
             for _ in range(num_heads)]
        )

    def forward(self, x):
        return torch.cat([head(x) for head in self.heads], dim=-1)
