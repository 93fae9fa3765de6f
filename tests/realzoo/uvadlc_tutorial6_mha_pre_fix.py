"""MultiheadAttention from the UvA Deep Learning tutorials (Tutorial 6) BEFORE the "Fixing MHA embed_dim" commit: merge reshape uses the INPUT width.

Source: https://github.com/phlippe/uvadlc_notebooks/blob/04fd08a3b8b299823f1747483479c7ff521c0bc2/docs/tutorial_notebooks/tutorial6/Transformers_and_MHAttention.ipynb (code cells defining scaled_dot_product and class MultiheadAttention); commit "Update Tutorial 6 and 7" on refs/heads/master. The class text is unchanged until the fix.
Licence: MIT (Copyright (c) 2020 Phillip Lippe), LICENSE.md at the repository root.
Copied: verbatim (the two code cells: function scaled_dot_product and class MultiheadAttention); `import math`, `import torch`, `import torch.nn as nn`, `import torch.nn.functional as F` added above (the notebook imports them in its setup cell).
Truth: BUG, merge with the input width: forward unpacks `batch_size, seq_length, embed_dim = x.size()`, so `embed_dim` is the INPUT width d_in, and the heads are merged with values.reshape(batch_size, seq_length, embed_dim). The constructor accepts input_dim != embed_dim (qkv_proj is Linear(input_dim, 3*embed_dim)), but forward then fails with a shape error; with input_dim == embed_dim it is a correct per-head-interleaved MHA (see uvadlc_tutorial6_mha_per_head_qkv.py). Evidence: fix commit https://github.com/phlippe/uvadlc_notebooks/commit/6c563d4555c2e09146d06a31f38b121f25859689 ("Tutorial 6: Fixing MHA embed_dim": `batch_size, seq_length, _ = x.size()` and `reshape(batch_size, seq_length, self.embed_dim)`).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "MultiheadAttention"
TRUTH = "bug"
BUG = "merge-view-d-in"
RULE_GAPS = ("qkv-per-head-interleaved",)
FORWARD = "x, mask=None, return_attention=False"
NOTES = ("Constructor MultiheadAttention(input_dim, embed_dim, num_heads) = (d_in, d_out, H). The bug shows only when d_in != d_out "
         "(RuntimeError in the merge reshape); with d_in == d_out the layer equals the fixed version. Causal only through the mask "
         "argument (1/True = keep; no expand_mask in this version, so the mask must broadcast against (B, H, n, n): shape (n, n) works). "
         "Fused qkv_proj weight in PER-HEAD interleaved layout [q_h; k_h; v_h].")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'merge-view-d-in'


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
        batch_size, seq_length, embed_dim = x.size()
        qkv = self.qkv_proj(x)
        
        # Separate Q, K, V from linear output
        qkv = qkv.reshape(batch_size, seq_length, self.num_heads, 3*self.head_dim)
        qkv = qkv.permute(0, 2, 1, 3) # [Batch, Head, SeqLen, Dims]
        q, k, v = qkv.chunk(3, dim=-1)
        
        # Determine value outputs
        values, attention = scaled_dot_product(q, k, v, mask=mask)
        values = values.permute(0, 2, 1, 3) # [Batch, SeqLen, Head, Dims]
        values = values.reshape(batch_size, seq_length, embed_dim)
        o = self.o_proj(values)
        
        if return_attention:
            return o, attention
        else:
            return o
