"""GroupedQueryAttention from the book's bonus material on grouped-query attention (ch04/04_gqa), with a KV cache.

Source: https://github.com/rasbt/LLMs-from-scratch/blob/48611932d3d78080cc251ed85d40546d70811bcc/ch04/04_gqa/gpt_with_kv_gqa.py (class GroupedQueryAttention)
Licence: file header says "Copyright (c) Sebastian Raschka under Apache License 2.0 (see LICENSE.txt)"; the LICENSE.txt stored in the index is MIT (Copyright (c) 2023-2024 Sebastian Raschka). Permissive either way.
Copied: verbatim (the class only, character for character with the repository text as stored in the search index, read_file at the cited commit; not cross-checked against a fetched git history); `import torch` / `import torch.nn as nn` added above. No rotary embedding in this file (the GPT model around it uses learned absolute positions), so nothing was stripped.
Truth: correct causal grouped-query attention: W_query Linear(d_in, d_out, bias=qkv_bias), W_key/W_value Linear(d_in, num_kv_groups*dh, bias=qkv_bias), view(b, n, H|KV, dh).transpose(1, 2), keys/values repeat_interleave(group_size, dim=1) (query head h uses key/value head h // group_size), causal mask built in forward from positions (q_pos < k_pos), -inf fill, scores / sqrt(dh) after masking, softmax(-1), dropout on the weights, transpose(1, 2).contiguous().view(b, n, d_out), out_proj Linear(d_out, d_out, bias=False). Divisibility of d_out by num_heads and of num_heads by num_kv_groups is asserted. No context-length parameter. forward(x, use_cache=False): without the cache it is the plain layer (and resets a cache left over).
"""
import torch
import torch.nn as nn

TARGET = "GroupedQueryAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("no-out-proj-bias", "no-context-length")
FORWARD = "x, use_cache=False"
NOTES = "Constructor (d_in, d_out, dropout, num_heads, num_kv_groups, dtype=None, qkv_bias=False): num_kv_groups is the number of key/value heads. forward(x) without the cache is the layer; use_cache=True appends to cache_k/cache_v (non-persistent buffers) and advances ptr_current_pos."
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = 'correct grouped-query layer: num_kv_groups bound per configuration (4 heads/2, 3/1, and = heads); out-proj-bias does not apply to the grouped form'


class GroupedQueryAttention(nn.Module):
    def __init__(
            self, d_in, d_out, dropout, num_heads, num_kv_groups, dtype=None, qkv_bias=False
    ):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        assert num_heads % num_kv_groups == 0, "num_heads must be divisible by num_kv_groups"

        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads

        self.W_key = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=qkv_bias, dtype=dtype)
        self.W_value = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=qkv_bias, dtype=dtype)
        self.num_kv_groups = num_kv_groups
        self.group_size = num_heads // num_kv_groups

        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias, dtype=dtype)
        self.out_proj = nn.Linear(d_out, d_out, bias=False, dtype=dtype)
        self.dropout = nn.Dropout(dropout)

        self.register_buffer("cache_k", None, persistent=False)
        self.register_buffer("cache_v", None, persistent=False)
        self.ptr_current_pos = 0

    def forward(self, x, use_cache=False):
        b, num_tokens, _ = x.shape

        # Apply projections
        queries = self.W_query(x)  # (b, num_tokens, num_heads * head_dim)
        keys = self.W_key(x)       # (b, num_tokens, num_kv_groups * head_dim)
        values = self.W_value(x)   # (b, num_tokens, num_kv_groups * head_dim)

        # Reshape
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        keys_new = keys.view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)
        values_new = values.view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)

        if use_cache:
            if self.cache_k is None:
                self.cache_k, self.cache_v = keys_new, values_new
            else:
                self.cache_k = torch.cat([self.cache_k, keys_new], dim=2)
                self.cache_v = torch.cat([self.cache_v, values_new], dim=2)
            keys_base, values_base = self.cache_k, self.cache_v
        else:
            keys_base, values_base = keys_new, values_new
            if self.cache_k is not None or self.cache_v is not None:
                self.cache_k, self.cache_v = None, None
                self.ptr_current_pos = 0

        # Expand keys and values to match the number of heads
        # Shape: (b, num_heads, num_tokens, head_dim)
        keys = keys_base.repeat_interleave(self.group_size, dim=1)  # Shape: (b, num_heads, num_tokens, head_dim)
        values = values_base.repeat_interleave(self.group_size, dim=1)  # Shape: (b, num_heads, num_tokens, head_dim)
        # For example, before repeat_interleave along dim=1 (query groups):
        #   [K1, K2]
        # After repeat_interleave (each query group is repeated group_size times):
        #   [K1, K1, K2, K2]
        # If we used regular repeat instead of repeat_interleave, we'd get:
        #   [K1, K2, K1, K2]

        # Compute scaled dot-product attention (aka self-attention) with a causal mask
        # Shape: (b, num_heads, num_tokens, num_tokens)
        attn_scores = queries @ keys.transpose(2, 3)  # Dot product for each head

        ####################################################
        # causal mask
        num_tokens_Q = queries.shape[-2]
        num_tokens_K = keys.shape[-2]
        device = queries.device
        if use_cache:
            q_positions = torch.arange(
                self.ptr_current_pos,
                self.ptr_current_pos + num_tokens_Q,
                device=device,
                dtype=torch.long,
            )
            self.ptr_current_pos += num_tokens_Q
        else:
            q_positions = torch.arange(num_tokens_Q, device=device, dtype=torch.long)
            self.ptr_current_pos = 0
        k_positions = torch.arange(num_tokens_K, device=device, dtype=torch.long)
        mask = q_positions.unsqueeze(-1) < k_positions.unsqueeze(0)

        # Use the mask to fill attention scores
        attn_scores = attn_scores.masked_fill(mask, -torch.inf)

        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        assert keys.shape[-1] == self.head_dim
        attn_weights = self.dropout(attn_weights)

        # Shape: (b, num_tokens, num_heads, head_dim)
        context_vec = (attn_weights @ values).transpose(1, 2)

        # Combine heads, where self.d_out = self.num_heads * self.head_dim
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        context_vec = self.out_proj(context_vec)  # optional projection

        return context_vec

    def reset_cache(self):
        self.cache_k, self.cache_v = None, None
        self.ptr_current_pos = 0
