"""Head + MultiHeadAttention from Karpathy's "Let's build GPT" lecture code (gpt.py, current version).

Source: https://github.com/karpathy/ng-video-lecture/blob/4c8e9028cc4fe417100e1e27db077fca0e0477f2/gpt.py (lines 64-104: classes Head and MultiHeadAttention)
Licence: MIT, as declared in the repository README ("### License" / "MIT"); the repository has no LICENSE file, so there is no copyright line to quote.
Copied: verbatim with these additions: the module-level hyperparameters the classes read (n_embd, block_size, dropout) are defined ABOVE the copied block as a shim (small values instead of 384/256/0.2), plus `import torch`, `import torch.nn as nn`, `from torch.nn import functional as F` as in the original file.
Truth: correct causal MHA with per-head modules: each Head has key/query/value Linear(n_embd, head_size, bias=False), registered tril buffer, scale k.shape[-1]**-0.5 (= 1/sqrt(head_size)), masked_fill(tril == 0, -inf), softmax(-1), dropout; heads in nn.ModuleList, concatenated, proj Linear(head_size*num_heads, n_embd) WITH bias, then dropout. Equals the lesson with d_in = n_embd, d_out = num_heads*head_size, but the OUTPUT width is n_embd (proj maps H*hs -> n_embd), so it matches the lesson only when H*hs == n_embd.
"""
import torch
import torch.nn as nn
from torch.nn import functional as F

# --- shim: module-level globals read by the copied classes (original values 384, 256, 0.2) ---
n_embd = 32
block_size = 16
dropout = 0.0
# --- end of shim; copied block follows ---

TARGET = "build"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("no-divisibility-check",)
FORWARD = "x"
NOTES = "Reads module GLOBALS n_embd, block_size, dropout (not constructor args): MultiHeadAttention(num_heads, head_size). TARGET is the factory build(d, nheads, context_length) added below the copied block, which sets the globals and returns MultiHeadAttention(nheads, d // nheads). Per-head weights: heads[h].query/key/value.weight (head_size, n_embd); lesson W_q = cat over heads along dim 0. proj = Linear(head_size*num_heads, n_embd) with bias. Dropout is applied after proj as well. No divisibility check (d // nheads silently truncates; proj then expects H*hs inputs)."
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'cannot_tell'
DIAGNOSIS = None
EXPECTED_BECAUSE = 'reads n_embd, block_size from module-level globals'


class Head(nn.Module):
    """ one head of self-attention """

    def __init__(self, head_size):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer('tril', torch.tril(torch.ones(block_size, block_size)))

        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        # input of size (batch, time-step, channels)
        # output of size (batch, time-step, head size)
        B,T,C = x.shape
        k = self.key(x)   # (B,T,hs)
        q = self.query(x) # (B,T,hs)
        # compute attention scores ("affinities")
        wei = q @ k.transpose(-2,-1) * k.shape[-1]**-0.5 # (B, T, hs) @ (B, hs, T) -> (B, T, T)
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float('-inf')) # (B, T, T)
        wei = F.softmax(wei, dim=-1) # (B, T, T)
        wei = self.dropout(wei)
        # perform the weighted aggregation of the values
        v = self.value(x) # (B,T,hs)
        out = wei @ v # (B, T, T) @ (B, T, hs) -> (B, T, hs)
        return out

class MultiHeadAttention(nn.Module):
    """ multiple heads of self-attention in parallel """

    def __init__(self, num_heads, head_size):
        super().__init__()
        self.heads = nn.ModuleList([Head(head_size) for _ in range(num_heads)])
        self.proj = nn.Linear(head_size * num_heads, n_embd)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        out = torch.cat([h(x) for h in self.heads], dim=-1)
        out = self.dropout(self.proj(out))
        return out


# --- added factory (not part of the original): the class can only be sized through module globals ---
def build(d, nheads, context_length, p_drop=0.0):
    global n_embd, block_size, dropout
    n_embd, block_size, dropout = d, context_length, p_drop
    return MultiHeadAttention(nheads, d // nheads)
