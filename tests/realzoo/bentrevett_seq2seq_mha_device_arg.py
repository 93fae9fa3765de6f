"""MultiHeadAttentionLayer from Ben Trevett's pytorch-seq2seq tutorial 6 ("Attention is All You Need"): hid_dim / n_heads, a REQUIRED `device` argument, a float32 scale tensor, -1e10 fill and a (x, attention) tuple.

Source: https://github.com/bentrevett/pytorch-seq2seq/blob/041994c351cc1d743fc589756dd888d146336cc2/6%20-%20Attention%20is%20All%20You%20Need.ipynb (code cell 12, class MultiHeadAttentionLayer; commit "fixed unsqueeze (#96)", 2020-04-12). The decoder's self-attention mask is Seq2Seq.make_trg_mask: (trg != pad)[:, None, None, :] & tril(ones(n, n)).bool(), a (B, 1, n, n) boolean keep-mask.
Licence: MIT (Copyright (c) 2018 Ben Trevett), LICENSE at the repository root.
Copied: verbatim (the code cell, character for character with the index's copy at the cited commit (read_file) and with the notebook at 041994c in the fetched git history (mirror HEAD b3cd54c, 2024-01-20)); `import torch` and `import torch.nn as nn` from the notebook's first code cell.
Truth: BUG (the lesson's "every tensor the forward uses travels with the module"), math otherwise correct: called as m(x, x, x, mask)[0] with a keep-mask (1 = keep) broadcastable to (B, H, n, n) it equals the lesson's layer - fc_q/fc_k/fc_v/fc_o Linear(hid_dim, hid_dim) WITH bias, view(B, -1, H, dh).permute(0, 2, 1, 3), energy = Q K^T / scale, masked_fill(mask == 0, -1e10) (a replacement fill far beyond real scores), softmax(-1), dropout, permute(0, 2, 1, 3).contiguous().view(B, -1, hid_dim), fc_o; divisibility asserted; returns (x, attention). But scale = torch.sqrt(torch.FloatTensor([head_dim])).to(device) is a plain tensor attribute made on the constructor's `device`: module.to(another device) leaves it behind and forward then raises (shown in _truth.py with the meta device; the same layer with scale registered as a buffer runs there), and it stays float32 (for head widths that are not perfect squares the scale is sqrt(dh) rounded to float32, relative ~1e-8). Not fixed upstream (the notebook is kept, unchanged, under legacy/). The constructor REQUIRES `device`; not causal without the mask argument.
"""
import torch
import torch.nn as nn

TARGET = "MultiHeadAttentionLayer"
TRUTH = "bug"
BUG = "scale-tensor-plain-attribute"
RULE_GAPS = ("required-device-argument", "causal-only-with-mask-argument", "float32-scale", "tuple-output")
FORWARD = "query, key, value, mask = None"
NOTES = ("Constructor MultiHeadAttentionLayer(hid_dim, n_heads, dropout, device) - all required, `device` a torch device "
         "or string. forward(query, key, value, mask=None): mask 1/True = keep, (B, 1, n, n). Returns (x, attention). "
         "Weights fc_q, fc_k, fc_v, fc_o, all with bias.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = None
EXPECTED_BECAUSE = ('math correct with a keep-mask, but the scale tensor is a plain attribute on the constructor\'s device: '
                    'mask-buffer and registered fail; no catalogued mistake (they are about the mask) matches')


class MultiHeadAttentionLayer(nn.Module):
    def __init__(self, hid_dim, n_heads, dropout, device):
        super().__init__()
        
        assert hid_dim % n_heads == 0
        
        self.hid_dim = hid_dim
        self.n_heads = n_heads
        self.head_dim = hid_dim // n_heads
        
        self.fc_q = nn.Linear(hid_dim, hid_dim)
        self.fc_k = nn.Linear(hid_dim, hid_dim)
        self.fc_v = nn.Linear(hid_dim, hid_dim)
        
        self.fc_o = nn.Linear(hid_dim, hid_dim)
        
        self.dropout = nn.Dropout(dropout)
        
        self.scale = torch.sqrt(torch.FloatTensor([self.head_dim])).to(device)
        
    def forward(self, query, key, value, mask = None):
        
        batch_size = query.shape[0]
        
        #query = [batch size, query len, hid dim]
        #key = [batch size, key len, hid dim]
        #value = [batch size, value len, hid dim]
                
        Q = self.fc_q(query)
        K = self.fc_k(key)
        V = self.fc_v(value)
        
        #Q = [batch size, query len, hid dim]
        #K = [batch size, key len, hid dim]
        #V = [batch size, value len, hid dim]
                
        Q = Q.view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        K = K.view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        V = V.view(batch_size, -1, self.n_heads, self.head_dim).permute(0, 2, 1, 3)
        
        #Q = [batch size, n heads, query len, head dim]
        #K = [batch size, n heads, key len, head dim]
        #V = [batch size, n heads, value len, head dim]
                
        energy = torch.matmul(Q, K.permute(0, 1, 3, 2)) / self.scale
        
        #energy = [batch size, n heads, query len, key len]
        
        if mask is not None:
            energy = energy.masked_fill(mask == 0, -1e10)
        
        attention = torch.softmax(energy, dim = -1)
                
        #attention = [batch size, n heads, query len, key len]
                
        x = torch.matmul(self.dropout(attention), V)
        
        #x = [batch size, n heads, query len, head dim]
        
        x = x.permute(0, 2, 1, 3).contiguous()
        
        #x = [batch size, query len, n heads, head dim]
        
        x = x.view(batch_size, -1, self.hid_dim)
        
        #x = [batch size, query len, hid dim]
        
        x = self.fc_o(x)
        
        #x = [batch size, query len, hid dim]
        
        return x, attention
