"""MultiHeadAttention from graykode/nlp-tutorial (5-1.Transformer, Transformer-Torch.py) before "FIX transformer init": the output projection and the LayerNorm are CREATED INSIDE forward.

Source: https://github.com/graykode/nlp-tutorial/blob/6e171b914ed28eb04dc9176916a99e9a996a7951/5-1.Transformer/Transformer-Torch.py (lines 31-35: hyperparameter globals; lines 61-65: get_attn_subsequent_mask; lines 67-76: class ScaledDotProductAttention; lines 78-98: class MultiHeadAttention); commit "fix #30 vocab_size to seq_len" on refs/heads/master.
Licence: MIT (Copyright (c) 2019 TaeHwan Jung), LICENSE at the repository root.
Copied: verbatim (function get_attn_subsequent_mask, classes ScaledDotProductAttention and MultiHeadAttention); `import numpy as np`, `import torch`, `import torch.nn as nn` as in the original. The module-level hyperparameters the classes read (d_model, d_k, d_v, n_heads; originally 512, 64, 64, 8) are set ABOVE the copied block as a shim with small values, and a factory build(d, nheads) that sets them is added BELOW it.
Truth: BUG, output projection (and LayerNorm) created in forward: `output = nn.Linear(n_heads * d_v, d_model)(context)` and `nn.LayerNorm(d_model)(output + residual)` build NEW modules on every call, so W_o is freshly random at each forward (the output is non-deterministic even in eval mode and with a fixed input), it is not a registered parameter (model.parameters() has only W_Q/W_K/W_V), it never trains, and .to(device) cannot move it. The rest is a correct causal MHA when given the decoder mask (bool, True = masked, from get_attn_subsequent_mask): W_Q/W_K/W_V Linear(d_model, H*d_k) with bias, view(B, -1, H, d_k).transpose(1, 2), scores / sqrt(d_k), masked_fill_(mask, -1e9), softmax(-1), merge transpose(1, 2).contiguous().view(B, -1, H*d_v); the layer also adds the residual and a LayerNorm (post-LN sublayer), and returns (output, attn). Evidence: fix commit https://github.com/graykode/nlp-tutorial/commit/2c7969f28010d95b2901c98edb618998ac428dbd ("FIX transformer init": self.linear = nn.Linear(n_heads * d_v, d_model) and self.layer_norm = nn.LayerNorm(d_model) moved into __init__).
"""
import numpy as np
import torch
import torch.nn as nn

# --- shim: module-level hyperparameters read by the copied classes (original values 512, 64, 64, 8) ---
d_model = 12
d_k = d_v = 4
n_heads = 3
# --- end of shim; copied block follows ---

TARGET = "build"
TRUTH = "bug"
BUG = "out-proj-created-in-forward"
RULE_GAPS = ("module-globals", "residual-and-layernorm-inside", "tuple-output")
FORWARD = "Q, K, V, attn_mask"
NOTES = ("MultiHeadAttention() takes NO constructor arguments: it reads the module GLOBALS d_model, d_k, d_v, n_heads (and "
         "ScaledDotProductAttention reads d_k). TARGET is the added factory build(d, nheads) which sets d_model = d, d_k = d_v = d // nheads, "
         "n_heads = nheads and returns MultiHeadAttention(). forward(Q, K, V, attn_mask) with attn_mask REQUIRED: bool (B, n, n), True = "
         "masked (get_attn_subsequent_mask(x[..., 0]).bool() gives the causal one; the original's .byte() mask is rejected by torch >= 2 "
         "masked_fill_). Returns a TUPLE (LayerNorm(W_o(ctx) + Q), attn) where W_o and the LayerNorm are new random/default modules on "
         "every call. Registered parameters: W_Q, W_K, W_V only (3*(d*d + d)).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'cannot_tell'
DIAGNOSIS = None
EXPECTED_BECAUSE = 'the class reads d_model, d_k, n_heads from globals at forward time'


def get_attn_subsequent_mask(seq):
    attn_shape = [seq.size(0), seq.size(1), seq.size(1)]
    subsequent_mask = np.triu(np.ones(attn_shape), k=1)
    subsequent_mask = torch.from_numpy(subsequent_mask).byte()
    return subsequent_mask

class ScaledDotProductAttention(nn.Module):
    def __init__(self):
        super(ScaledDotProductAttention, self).__init__()

    def forward(self, Q, K, V, attn_mask):
        scores = torch.matmul(Q, K.transpose(-1, -2)) / np.sqrt(d_k) # scores : [batch_size x n_heads x len_q(=len_k) x len_k(=len_q)]
        scores.masked_fill_(attn_mask, -1e9) # Fills elements of self tensor with value where mask is one.
        attn = nn.Softmax(dim=-1)(scores)
        context = torch.matmul(attn, V)
        return context, attn

class MultiHeadAttention(nn.Module):
    def __init__(self):
        super(MultiHeadAttention, self).__init__()
        self.W_Q = nn.Linear(d_model, d_k * n_heads)
        self.W_K = nn.Linear(d_model, d_k * n_heads)
        self.W_V = nn.Linear(d_model, d_v * n_heads)
    def forward(self, Q, K, V, attn_mask):
        # q: [batch_size x len_q x d_model], k: [batch_size x len_k x d_model], v: [batch_size x len_k x d_model]
        residual, batch_size = Q, Q.size(0)
        # (B, S, D) -proj-> (B, S, D) -split-> (B, S, H, W) -trans-> (B, H, S, W)
        q_s = self.W_Q(Q).view(batch_size, -1, n_heads, d_k).transpose(1,2)  # q_s: [batch_size x n_heads x len_q x d_k]
        k_s = self.W_K(K).view(batch_size, -1, n_heads, d_k).transpose(1,2)  # k_s: [batch_size x n_heads x len_k x d_k]
        v_s = self.W_V(V).view(batch_size, -1, n_heads, d_v).transpose(1,2)  # v_s: [batch_size x n_heads x len_k x d_v]

        attn_mask = attn_mask.unsqueeze(1).repeat(1, n_heads, 1, 1) # attn_mask : [batch_size x n_heads x len_q x len_k]

        # context: [batch_size x n_heads x len_q x d_v], attn: [batch_size x n_heads x len_q(=len_k) x len_k(=len_q)]
        context, attn = ScaledDotProductAttention()(q_s, k_s, v_s, attn_mask)
        context = context.transpose(1, 2).contiguous().view(batch_size, -1, n_heads * d_v) # context: [batch_size x len_q x n_heads * d_v]
        output = nn.Linear(n_heads * d_v, d_model)(context)
        return nn.LayerNorm(d_model)(output + residual), attn # output: [batch_size x len_q x d_model]


# --- added factory (not part of the original): the class reads module globals ---
def build(d, nheads):
    global d_model, d_k, d_v, n_heads
    d_model, n_heads = d, nheads
    d_k = d_v = d // nheads
    return MultiHeadAttention()
