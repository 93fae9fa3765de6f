"""MultiheadAttention from the UvA Deep Learning tutorials (Tutorial 6, "Transformers and Multi-Head Attention", Phillip Lippe): fused qkv laid out PER HEAD.

Source: https://github.com/phlippe/uvadlc_notebooks/blob/e8bb899039e43a87ca3790545ac1387be6184f92/docs/tutorial_notebooks/tutorial6/Transformers_and_MHAttention.ipynb (code cells defining scaled_dot_product, expand_mask and class MultiheadAttention); commit "On tutorial 6 - correct assert condition in function expand_mask(mask) (#132)" on refs/heads/master.
Licence: MIT (Copyright (c) 2020 Phillip Lippe), LICENSE.md at the repository root.
Copied: verbatim (the three code cells: function scaled_dot_product, function expand_mask with its comment lines, class MultiheadAttention); `import math`, `import torch`, `import torch.nn as nn`, `import torch.nn.functional as F` added above (the notebook imports them in its setup cell).
Truth: correct causal MHA when given a causal keep-mask (tril, 1/True = keep): qkv_proj Linear(input_dim, 3*embed_dim) WITH bias whose output is reshaped to (B, n, H, 3*dh) and chunked on the last axis, i.e. the fused weight is laid out PER HEAD as [q_h; k_h; v_h] blocks (Megatron / GPT-NeoX layout, NOT [Q; K; V]); permute(0, 2, 1, 3); scores / sqrt(dh); masked_fill(mask == 0, -9e15) (finite fill, exp underflows to exactly 0); softmax(-1); merge permute(0, 2, 1, 3).reshape(B, n, embed_dim); o_proj Linear(embed_dim, embed_dim) with bias. Not causal without a mask (the tutorial uses it as an encoder).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "MultiheadAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("qkv-per-head-interleaved",)
FORWARD = "x, mask=None, return_attention=False"
NOTES = ("Constructor MultiheadAttention(input_dim, embed_dim, num_heads) = (d_in, d_out, H); no context length, no dropout, Q/K/V "
         "always have bias. Divisibility asserted. Causal ONLY through the mask argument: mask (n, n), (B, n, n) or (B, H, n, n) with "
         "1/True = keep, e.g. torch.tril(torch.ones(n, n)); expand_mask broadcasts it. Fused weight qkv_proj.weight (3*d_out, d_in) in "
         "PER-HEAD interleaved layout: rows [h*3*dh : h*3*dh+dh] = W_q head h, next dh rows W_k head h, next dh rows W_v head h (same "
         "for the bias). A checker that splits qkv as [Q; K; V] will find a mapping that does not reproduce the output. Masked logits are "
         "-9e15, not -inf. return_attention=True returns (o, attention).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = 'fused q/k/v laid out per head, found by reproduction'


# Helper function to support different mask shapes.
# Output shape supports (batch_size, number of heads, seq length, seq length)
# If 2D: broadcasted over batch size and number of heads
# If 3D: broadcasted over number of heads
# If 4D: leave as is
def expand_mask(mask):
    assert mask.ndim >= 2, "Mask must be at least 2-dimensional with seq_length x seq_length"
    if mask.ndim == 3:
        mask = mask.unsqueeze(1)
    while mask.ndim < 4:
        mask = mask.unsqueeze(0)
    return mask


def scaled_dot_product(q, k, v, mask=None):
    d_k = q.size()[-1]
    attn_logits = torch.matmul(q, k.transpose(-2, -1))
    attn_logits = attn_logits / math.sqrt(d_k)
    if mask is not None:
        attn_logits = attn_logits.masked_fill(mask == 0, -9e15)
    attention = F.softmax(attn_logits, dim=-1)
    values = torch.matmul(attention, v)
    return values, attention


class MultiheadAttention(nn.Module):
    
    def __init__(self, input_dim, embed_dim, num_heads):
        super().__init__()
        assert embed_dim % num_heads == 0, "Embedding dimension must be 0 modulo number of heads."
        
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        
        # Stack all weight matrices 1...h together for efficiency
        # Note that in many implementations you see "bias=False" which is optional
        self.qkv_proj = nn.Linear(input_dim, 3*embed_dim)
        self.o_proj = nn.Linear(embed_dim, embed_dim)
        
        self._reset_parameters()

    def _reset_parameters(self):
        # Original Transformer initialization, see PyTorch documentation
        nn.init.xavier_uniform_(self.qkv_proj.weight)
        self.qkv_proj.bias.data.fill_(0)
        nn.init.xavier_uniform_(self.o_proj.weight)
        self.o_proj.bias.data.fill_(0)

    def forward(self, x, mask=None, return_attention=False):
        batch_size, seq_length, _ = x.size()
        if mask is not None:
            mask = expand_mask(mask)
        qkv = self.qkv_proj(x)
        
        # Separate Q, K, V from linear output
        qkv = qkv.reshape(batch_size, seq_length, self.num_heads, 3*self.head_dim)
        qkv = qkv.permute(0, 2, 1, 3) # [Batch, Head, SeqLen, Dims]
        q, k, v = qkv.chunk(3, dim=-1)
        
        # Determine value outputs
        values, attention = scaled_dot_product(q, k, v, mask=mask)
        values = values.permute(0, 2, 1, 3) # [Batch, SeqLen, Head, Dims]
        values = values.reshape(batch_size, seq_length, self.embed_dim)
        o = self.o_proj(values)
        
        if return_attention:
            return o, attention
        else:
            return o
