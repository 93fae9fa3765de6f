"""lyeoni/gpt-pytorch's MultiHeadAttention: projections named WQ/WK/WV and `linear`, a REQUIRED attn_pdrop, a REQUIRED boolean (B, n, n) attn_mask (True = masked) repeated over the heads, and masked_fill_(attn_mask, -1e9).

Source: https://github.com/lyeoni/gpt-pytorch/blob/ebb6464fb6b017c7570ce61a83360437fbe09bf2/model.py (classes ScaledDotProductAttention and MultiHeadAttention; HEAD, "feat: update main.py, model.py, trainer.py", 2020-03-17). In the same file GPT.forward builds the mask as torch.gt(pad_mask + torch.ones(B, n, n).triu(diagonal=1), 0): (B, n, n), True = padding or future.
Licence: MIT (Copyright (c) 2020 Allen Lee), LICENSE at the repository root.
Copied: verbatim, the file's imports and the two classes, taken from `git show ebb6464:model.py` in the fetched history; the index holds model.py at the same commit (read_file). The decoder layers and the GPT model are left out; this entry's constants are placed after the imports.
Truth: correct causal multi-head attention when called as m(x, x, x, mask) with a boolean (B or 1, n, n) mask, True above the diagonal: WQ/WK/WV Linear(d_model, d_model) with bias, view(B, -1, H, dk).transpose(1, 2), attn_mask.unsqueeze(1).repeat(1, H, 1, 1), scores / sqrt(dk), masked_fill_(mask, -1e9) (a FINITE fill: exact for any realistic score, it lets the future in only when real scores fall below about -1e9), softmax(-1), dropout(attn_pdrop), transpose(1, 2).contiguous().view(B, -1, H * dv), linear Linear(H * dv, d_model) with bias. Returns (outputs, attn_weights). No divisibility check (d_k = d_model // n_heads). Not causal by itself: only with the mask argument.
"""
import torch
import torch.nn as nn

TARGET = "MultiHeadAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("mask-fill (a -1e9 fill)", "no-divisibility-check", "causal-only-with-mask-argument", "mask-true-is-masked",
             "required-dropout-argument", "tuple-output", "no-context-length")
FORWARD = "Q, K, V, attn_mask"
NOTES = ("MultiHeadAttention(d_model, n_heads, attn_pdrop) - all three required. forward(Q, K, V, attn_mask): attn_mask "
         "bool (B or 1, n, n), True = masked (a 2-D mask is repeated wrongly by unsqueeze(1).repeat). Returns "
         "(outputs, attn_weights). Weights WQ, WK, WV, linear (W_o), all with bias.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = 'fill-minus-1e9'  # of its two rules broken, the fill is named (its own pattern); divisibility is listed
EXPECTED_BECAUSE = 'correct and causal once called with a (1 or B, n, n) True-is-masked mask; two lesson rules broken: no divisibility check (named, truly absent) and the -1e9 fill (mask-fill)'

class ScaledDotProductAttention(nn.Module):
    def __init__(self, d_k, attn_pdrop):
        super(ScaledDotProductAttention, self).__init__()
        self.d_k = d_k

        self.dropout = nn.Dropout(attn_pdrop)
    
    def forward(self, q, k, v, attn_mask):
        # |q| : (batch_size, n_heads, q_len, d_k)
        # |k| : (batch_size, n_heads, k_len, d_k)
        # |v| : (batch_size, n_heads, v_len, d_v)
        # |attn_mask| : (batch_size, n_heads, q_len, k_len)
        
        attn_score = torch.matmul(q, k.transpose(-1, -2)) / (self.d_k ** 0.5)
        attn_score.masked_fill_(attn_mask, -1e9)
        # |attn_scroe| : (batch_size, n_heads, q_len, k_len)
        
        attn_weights = nn.Softmax(dim=-1)(attn_score)
        attn_weights = self.dropout(attn_weights)
        # |attn_weights| : (batch_size, n_heads, q_len, k_len)
        
        output = torch.matmul(attn_weights, v)
        # |output| : (batch_size, n_heads, q_len, d_v)

        return output, attn_weights

class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, attn_pdrop):
        super(MultiHeadAttention, self).__init__()
        self.n_heads = n_heads
        self.d_k = self.d_v = d_model//n_heads
        
        self.WQ = nn.Linear(d_model, d_model)
        self.WK = nn.Linear(d_model, d_model)
        self.WV = nn.Linear(d_model, d_model)
        self.scaled_dot_product_attn = ScaledDotProductAttention(self.d_k, attn_pdrop)
        self.linear = nn.Linear(n_heads * self.d_v, d_model)

    def forward(self, Q, K, V, attn_mask):
        # |Q| : (batch_size, q_len(=seq_len), d_model)
        # |K| : (batch_size, k_len(=seq_len), d_model)
        # |V| : (batch_size, v_len(=seq_len), d_model)
        # |attn_mask| : (batch_size, q_len, k_len)
        batch_size = Q.size(0)

        q_heads = self.WQ(Q).view(batch_size, -1, self.n_heads, self.d_k).transpose(1, 2)
        k_heads = self.WK(K).view(batch_size, -1, self.n_heads, self.d_k).transpose(1, 2)
        v_heads = self.WV(V).view(batch_size, -1, self.n_heads, self.d_v).transpose(1, 2)
        # |q_heads| : (batch_size, n_heads, q_len, d_k), |k_heads| : (batch_size, n_heads, k_len, d_k), |v_heads| : (batch_size, n_heads, v_len, d_v)

        attn_mask = attn_mask.unsqueeze(1).repeat(1, self.n_heads, 1, 1)
        # |attn_mask| : (batch_size, n_heads, q_len, k_len)
        attn, attn_weights = self.scaled_dot_product_attn(q_heads, k_heads, v_heads, attn_mask)
        # |attn| : (batch_size, n_heads, q_len, d_v)
        # |attn_weights| : (batch_size, n_heads, q_len, k_len)
        
        attn = attn.transpose(1, 2).contiguous().view(batch_size, -1, self.n_heads * self.d_v)
        # |attn| : (batch_size, q_len, n_heads * d_v)
        outputs = self.linear(attn)
        # |outputs| : (batch_size, q_len, d_model)

        return outputs, attn_weights
