"""transformer-lib's MultiQueryAttention: a multi-query layer in the lesson's vocabulary - W_q Linear(d, d), ONE key and
ONE value head (W_k, W_v Linear(d, d // H)), broadcast over the query heads by unsqueeze(1) (no repeat), no biases,
scores / sqrt(head_dim), softmax, W_o - and NO CAUSAL MASK (the package's CausalAttention is a separate class; this one
is a bidirectional multi-query layer, used here as a causal one would be).

Source: https://pypi.org/project/transformer-lib/ 0.1.0 ("Attention mechanisms from Every_Thing_About_Transformer, as an
importable library"; the wheel names no repository), file transformer_lib/attention/multi_q_attention.py as released in
transformer-lib 0.1.0 on PyPI.
Licence: MIT as declared in the wheel's dist-info (METADATA "License: MIT", "Author: Aniket Verma"); the dist-info
holds no LICENSE file and the package names no repository or home page, so there is no copyright line to quote beyond
the author the METADATA names (as the ng-video-lecture entries, whose repository declares MIT without a LICENSE file).
Copied: verbatim from the PyPI wheel transformer-lib==0.1.0 (pip download --no-deps): multi_q_attention.py whole
(lines 1-48), compared by program with the unpacked wheel.  ADDED: this docstring and the constants at the end.
Truth: bug under the lesson (in _truth.py): = gqa_forward with one key/value head (W_k, W_v of d // H rows) without the
causal mask, exactly; the future moves position 0; with the mask it would be the lesson's multi-query layer.
"""
import torch
import torch.nn as nn
import math

class MultiQueryAttention(nn.Module):
    def __init__(self, embedding_dim, num_heads):
        super().__init__()
        assert embedding_dim % num_heads == 0, "embedding_dim must be divisible by num_heads"
        
        self.embedding_dim = embedding_dim
        self.num_heads = num_heads
        self.head_dim = embedding_dim // num_heads
        
        # Each head has its own Query projection
        self.W_q = nn.Linear(embedding_dim, embedding_dim, bias=False)
        
        # Single shared Key and Value projections for all heads
        self.W_k = nn.Linear(embedding_dim, self.head_dim, bias=False)
        self.W_v = nn.Linear(embedding_dim, self.head_dim, bias=False)
        
        # Final output projection
        self.W_o = nn.Linear(embedding_dim, embedding_dim, bias=False)

    def forward(self, x):
        batch_size, seq_len, _ = x.size()
        
        # Compute Q, K, V
        Q = self.W_q(x)  # [B, S, E]
        K = self.W_k(x)  # [B, S, H]
        V = self.W_v(x)  # [B, S, H]
        
        # Split Q into multiple heads: [B, S, E] -> [B, H, S, H]
        Q = Q.view(batch_size, seq_len, self.num_heads, self.head_dim).transpose(1, 2)
        
        # Broadcast single K and V across all heads: [B, S, H] -> [B, 1, S, H]
        K = K.unsqueeze(1)
        V = V.unsqueeze(1)
        
        # Scaled Dot-Product Attention
        scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(self.head_dim)
        attn_weights = torch.softmax(scores, dim=-1)
        
        # Apply attention weights to V
        context = torch.matmul(attn_weights, V)  # [B, H, S, H]
        
        # Merge heads: [B, H, S, H] -> [B, S, E]
        context = context.transpose(1, 2).contiguous().view(batch_size, seq_len, self.embedding_dim)
        
        return self.W_o(context)


# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "MultiQueryAttention"
TRUTH = "bug"
BUG = "no-mask"
RULE_GAPS = ("multi-query-one-kv-head", "unsqueeze-broadcast-kv", "no-biases", "not-causal-by-design")
FORWARD = "x"
NOTES = "MultiQueryAttention(embedding_dim, num_heads); forward(x) -> (B, n, d); no mask argument, no context length."
OUTCOME = 'fail'
DIAGNOSIS = 'no-mask'
EXPECTED_BECAUSE = ("a multi-query layer (one key/value head broadcast to every query head) with no causal mask: the "
                    "future leaks, and no-mask is the mistake, at the softmax line")
