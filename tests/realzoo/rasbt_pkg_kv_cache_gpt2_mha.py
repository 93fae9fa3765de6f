"""MultiHeadAttention with a KV cache passed in and returned, from the llms_from_scratch package (kv_cache/gpt2.py).

Source: https://github.com/rasbt/LLMs-from-scratch/blob/32965e0edde230fc835947f0a0e61f800acc90c7/pkg/llms_from_scratch/kv_cache/gpt2.py (class MultiHeadAttention); commit "remove redundant next_cache (#817)", the file's last change before the mirror's HEAD 28c65cd (2026-04-16); the index also stores it at 45308e0 with the same class.
Licence: the file header says "Copyright (c) Sebastian Raschka under Apache License 2.0 (see LICENSE.txt)"; the LICENSE.txt stored in the index is MIT (Copyright (c) 2023-2024 Sebastian Raschka). Permissive either way.
Copied: verbatim (the class only; the file's `import torch` and `import torch.nn as nn` kept; its `from .utils import KVCache   # noqa: F401` (a package-relative import the class does not use) and the GPT model below the class not copied); checked against the fetched git history (git show 32965e0:pkg/llms_from_scratch/kv_cache/gpt2.py).
Truth: BUG, the cache's causal mask takes key COLUMNS instead of query ROWS: forward(x, use_cache=False, start_pos=0, cache=None) returns (context_vec, next_cache); with use_cache=True the keys and values, after the head transpose (b, H, tokens, dh), are appended to cache = (k, v) along axis 2 (right), but the mask is causal_mask[:, -num_tokens:] of a (seq_len, seq_len) triangle, shape (seq_len, num_tokens), not causal_mask[-num_tokens:, :] (num_tokens, seq_len). Without a cache, and for the prompt on an empty cache, seq_len == num_tokens and it is the whole triangle (right); the first token decoded on a non-empty cache raises in masked_fill_ (a (1, 1, seq_len, 1) mask cannot be broadcast in place over (b, H, 1, seq_len) scores). Reported and fixed upstream: rasbt/LLMs-from-scratch pull request #1048 "Fix GPT-2 KV-cache generation" ("the causal mask sliced key columns instead of query rows, so the second incremental step failed with a broadcast error").
"""
import torch
import torch.nn as nn

TARGET = "MultiHeadAttention"
TRUTH = "bug"
BUG = "kv-cache-mask-columns"
RULE_GAPS = ("kv-cache-argument", "tuple-output")
FORWARD = "x, use_cache=False, start_pos=0, cache=None"
NOTES = ("Constructor MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False) "
         "(context_length unused: the mask is made in forward). Returns (context_vec, next_cache).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
EXPECTED_BECAUSE = 'kv-cache: decoding the first token after the prompt raises in masked_fill_'
DIAGNOSIS = None


class MultiHeadAttention(nn.Module):
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

    def forward(self, x, use_cache=False, start_pos=0, cache=None):
        b, num_tokens, d_in = x.shape

        keys = self.W_key(x)  # Shape: (b, num_tokens, d_out)
        values = self.W_value(x)
        queries = self.W_query(x)

        # We implicitly split the matrix by adding a `num_heads` dimension
        # Unroll last dim: (b, num_tokens, d_out) -> (b, num_tokens, num_heads, head_dim)
        keys = keys.view(b, num_tokens, self.num_heads, self.head_dim)
        values = values.view(b, num_tokens, self.num_heads, self.head_dim)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim)

        # Transpose: (b, num_tokens, num_heads, head_dim) -> (b, num_heads, num_tokens, head_dim)
        keys = keys.transpose(1, 2)
        queries = queries.transpose(1, 2)
        values = values.transpose(1, 2)

        if use_cache:
            if cache is not None:
                keys = torch.cat([cache[0], keys], dim=2)
                values = torch.cat([cache[1], values], dim=2)
            next_cache = (keys, values)
        else:
            next_cache = None

        seq_len = keys.size(2)
        causal_mask = torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool, device=x.device), diagonal=1)
        causal_mask = causal_mask[:, -num_tokens:][None, None, :, :]

        # Compute scaled dot-product attention (aka self-attention) with a causal mask
        attn_scores = queries @ keys.transpose(2, 3)  # Dot product for each head

        # Use the mask to fill attention scores
        attn_scores.masked_fill_(causal_mask, -torch.inf)

        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        # Shape: (b, num_tokens, num_heads, head_dim)
        context_vec = (attn_weights @ values).transpose(1, 2)

        # Combine heads, where self.d_out = self.num_heads * self.head_dim
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        context_vec = self.out_proj(context_vec)  # optional projection

        return context_vec, next_cache
