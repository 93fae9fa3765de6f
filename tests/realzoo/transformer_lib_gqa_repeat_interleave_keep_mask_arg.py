"""transformer-lib's GroupedQueryAttention: q_proj Linear(d, d), k_proj / v_proj Linear(d, num_kv_heads * head_dim), all
with biases, repeat_interleave over the heads (query head h reads kv head h // group), scores / sqrt(head_dim), a
forward `mask` argument filled where `mask == 0` with -inf (1 = keep; None: no mask at all, bidirectional), out_proj.

Source: https://pypi.org/project/transformer-lib/ 0.1.0 ("Attention mechanisms from Every_Thing_About_Transformer, as an
importable library"; the wheel names no repository), file transformer_lib/attention/grouped_q_attention.py as released
in transformer-lib 0.1.0 on PyPI.
Licence: MIT as declared in the wheel's dist-info (METADATA "License: MIT", "Author: Aniket Verma"); the dist-info
holds no LICENSE file and the package names no repository or home page, so there is no copyright line to quote beyond
the author the METADATA names (as the ng-video-lecture entries, whose repository declares MIT without a LICENSE file).
Copied: verbatim from the PyPI wheel transformer-lib==0.1.0 (pip download --no-deps): grouped_q_attention.py whole
(lines 1-64), compared by program with the unpacked wheel.  ADDED: this docstring and the constants at the end.
Truth: correct when given the causal keep-mask (in _truth.py): forward(x, tril(ones(n, n))) = gqa_forward for
KV = 2, 1, 4 with biases, exactly, no leak; with mask=None the future moves position 0 (causal only through the mask).
"""
import torch
import torch.nn as nn
import math

class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_query_heads, num_kv_heads):
        super().__init__()
        assert d_model % num_query_heads == 0, "d_model must be divisible by num_query_heads"
        assert num_query_heads % num_kv_heads == 0, "num_query_heads must be divisible by num_kv_heads"
        
        self.d_model = d_model
        self.num_query_heads = num_query_heads
        self.num_kv_heads = num_kv_heads
        self.num_queries_per_kv = num_query_heads // num_kv_heads
        self.head_dim = d_model // num_query_heads
        
        # Query projection: standard size
        self.q_proj = nn.Linear(d_model, d_model)
        
        # Key/Value projections: reduced size (num_kv_heads * head_dim)
        self.kv_dim = num_kv_heads * self.head_dim
        self.k_proj = nn.Linear(d_model, self.kv_dim)
        self.v_proj = nn.Linear(d_model, self.kv_dim)
        
        # Output projection
        self.out_proj = nn.Linear(d_model, d_model)
        
        # Scaling factor
        self.scale = math.sqrt(self.head_dim)

    def forward(self, x, mask=None):
        batch_size, seq_len, _ = x.shape
        
        # Projections
        Q = self.q_proj(x)  # (batch, seq, d_model)
        K = self.k_proj(x)  # (batch, seq, kv_dim)
        V = self.v_proj(x)  # (batch, seq, kv_dim)
        
        # Reshape for multi-head attention
        # Q: (batch, num_query_heads, seq, head_dim)
        Q = Q.view(batch_size, seq_len, self.num_query_heads, self.head_dim).transpose(1, 2)
        
        # K/V: (batch, num_kv_heads, seq, head_dim)
        K = K.view(batch_size, seq_len, self.num_kv_heads, self.head_dim).transpose(1, 2)
        V = V.view(batch_size, seq_len, self.num_kv_heads, self.head_dim).transpose(1, 2)
        
        # Expand K and V to match number of query heads
        # Each KV head is shared by num_queries_per_kv query heads
        K = K.repeat_interleave(self.num_queries_per_kv, dim=1)
        V = V.repeat_interleave(self.num_queries_per_kv, dim=1)
        
        # Attention scores
        scores = torch.matmul(Q, K.transpose(-2, -1)) / self.scale
        
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float('-inf'))
            
        attn_weights = torch.softmax(scores, dim=-1)
        attn_output = torch.matmul(attn_weights, V)
        
        # Concatenate heads
        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.view(batch_size, seq_len, self.d_model)
        
        return self.out_proj(attn_output)


# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "GroupedQueryAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("grouped-query", "repeat-interleave", "causal-only-with-mask-arg", "keep-mask-1-is-keep")
FORWARD = "x, mask=None"
NOTES = ("GroupedQueryAttention(d_model, num_query_heads, num_kv_heads); forward(x, mask=None) -> (B, n, d); the "
         "mask (n, n) with 1 = keep.")
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("the lesson's grouped-query layer when given the causal keep-mask (found from the call styles), "
                    "with the divisibility asserts")
