"""MultiHeadAttention with a KV cache from "Build a Large Language Model (From Scratch)", ch04 bonus 03_kv-cache.

Source: https://github.com/rasbt/LLMs-from-scratch/blob/2af686d70b27a0e514377a8f8c468be79def06f4/ch04/03_kv-cache/gpt_with_kv_cache.py (class MultiHeadAttention, the first class of the file)
Licence: MIT (Copyright (c) 2023-2024 Sebastian Raschka), LICENSE.txt at the repository root; the file itself carries no header.
Copied: verbatim (the class only, with its "# NEW" banners; the file's `import torch` and `import torch.nn as nn` kept, `import time` and `import tiktoken` and the GPT model below the class not copied). Checked against the fetched git history (git show 2af686d:ch04/03_kv-cache/gpt_with_kv_cache.py, commit "Add KV cache (#671)").
Truth: the lesson's causal MHA (W_query/W_key/W_value/out_proj, view(b, n, H, dh), transpose, triu(1) float mask buffer made bool in forward, scores / sqrt(dh), softmax, dropout, merge) with an internal KV cache: forward(x, use_cache=True) keeps the keys and values as (b, tokens, H, dh) in cache_k/cache_v buffers, appending along axis 1; reset_cache() empties them. Its mask is self.mask[:num_tokens, :num_tokens] (not offset by the cached tokens): for ONE new token per call that is a (1, 1) False mask broadcast over all cached keys, which is right (the new token may see every cached token), so a prompt followed by token-by-token decoding equals the full forward at every position. BUG: several new tokens at once on a non-empty cache are not masked right: a prompt of 3, then 2 new tokens in one call, raises (scores (2, 5) against the (2, 2) mask); pull request #697 "Fix bug in masking when kv cache is used" (6522be9, rasbt_ch04_kv_cache_ptr_mha.py) adds ptr_current_pos for that, and the maintainer notes there that for one token per call the two agree; generate_text_simple_cached feeds one token per call.
"""
import torch
import torch.nn as nn

TARGET = "MultiHeadAttention"
TRUTH = "bug"
BUG = "kv-cache-mask-chunk"
RULE_GAPS = ("kv-cache-internal",)
FORWARD = "x, use_cache=False"
NOTES = ("Constructor MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False). KV cache in "
         "registered (non-persistent) buffers cache_k / cache_v, reset_cache(); forward(x, use_cache=True) appends.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
EXPECTED_BECAUSE = 'kv-cache: a call of 2 new tokens after the prompt raises in masked_fill_ (fixed upstream by #697)'
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
        self.register_buffer(
            "mask",
            torch.triu(torch.ones(context_length, context_length),diagonal=1),
            persistent=False
        )

        ####################################################
        # NEW
        self.register_buffer("cache_k", None, persistent=False)
        self.register_buffer("cache_v", None, persistent=False)
        ####################################################

    def forward(self, x, use_cache=False):
        b, num_tokens, d_in = x.shape

        keys_new = self.W_key(x)  # Shape: (b, num_tokens, d_out)
        values_new = self.W_value(x)
        queries = self.W_query(x)

        # We implicitly split the matrix by adding a `num_heads` dimension
        # Unroll last dim: (b, num_tokens, d_out) -> (b, num_tokens, num_heads, head_dim)
        keys_new = keys_new.view(b, num_tokens, self.num_heads, self.head_dim)
        values_new = values_new.view(b, num_tokens, self.num_heads, self.head_dim)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim)

        ####################################################
        # NEW
        if use_cache:
            if self.cache_k is None:
                self.cache_k, self.cache_v = keys_new, values_new
            else:
                self.cache_k = torch.cat([self.cache_k, keys_new], dim=1)
                self.cache_v = torch.cat([self.cache_v, values_new], dim=1)
            keys, values = self.cache_k, self.cache_v
        else:
            keys, values = keys_new, values_new
        ####################################################

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

    ####################################################
    # NEW
    def reset_cache(self):
        self.cache_k, self.cache_v = None, None
    ####################################################
