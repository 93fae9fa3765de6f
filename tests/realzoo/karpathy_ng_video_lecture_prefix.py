"""Head + MultiHeadAttention from Karpathy's "Let's build GPT" lecture code BEFORE the "scale by head size" fix.

Source: https://github.com/karpathy/ng-video-lecture/blob/3fdc1ea02f3849fd4b3c093430bc49c6fd6a4feb/gpt.py (lines 64-102: classes Head and MultiHeadAttention). The text was read from the index copy at commit 0ceb0055aad7a7b255730be650dd667d6daffd9f (refs/pull/3 of the same repository), whose Head/MultiHeadAttention lines are identical to 3fdc1ea (checked with git diff: the two commits differ only in the data-download lines).
Licence: MIT, as declared in the repository README ("### License" / "MIT"); the repository has no LICENSE file, so there is no copyright line to quote.
Copied: verbatim with these additions: module-level globals n_embd, block_size, dropout defined ABOVE the copied block as a shim; imports as in the original.
Truth: BUG, wrong scale: wei = q @ k.T * C**-0.5 where C = x.shape[-1] = n_embd, i.e. scores / sqrt(d_model) instead of / sqrt(head_size). Everything else as in the fixed version (causal, ModuleList heads, proj Linear(n_embd, n_embd) with bias). Evidence: PR https://github.com/karpathy/ng-video-lecture/pull/6 ("We should scale attention by head size ... We are scaling it by number of channels in input at present", karpathy: "you're right :( ty"), merged as commit 988848a5f7613d33a6f7f12eed96c2d093759866.
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
TRUTH = "bug"
BUG = "scale-sqrt-d-model"
RULE_GAPS = ("no-divisibility-check",)
FORWARD = "x"
NOTES = "Reads module GLOBALS n_embd, block_size, dropout. TARGET is the added factory build(d, nheads, context_length) that sets the globals and returns MultiHeadAttention(nheads, d // nheads). proj here is Linear(n_embd, n_embd) (not head_size*num_heads). With nheads=1 the bug vanishes (head_size == n_embd)."
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'cannot_tell'
DIAGNOSIS = None
EXPECTED_BECAUSE = 'reads its sizes from module-level globals'


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
        B,T,C = x.shape
        k = self.key(x)   # (B,T,C)
        q = self.query(x) # (B,T,C)
        # compute attention scores ("affinities")
        wei = q @ k.transpose(-2,-1) * C**-0.5 # (B, T, C) @ (B, C, T) -> (B, T, T)
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float('-inf')) # (B, T, T)
        wei = F.softmax(wei, dim=-1) # (B, T, T)
        wei = self.dropout(wei)
        # perform the weighted aggregation of the values
        v = self.value(x) # (B,T,C)
        out = wei @ v # (B, T, T) @ (B, T, C) -> (B, T, C)
        return out

class MultiHeadAttention(nn.Module):
    """ multiple heads of self-attention in parallel """

    def __init__(self, num_heads, head_size):
        super().__init__()
        self.heads = nn.ModuleList([Head(head_size) for _ in range(num_heads)])
        self.proj = nn.Linear(n_embd, n_embd)
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
