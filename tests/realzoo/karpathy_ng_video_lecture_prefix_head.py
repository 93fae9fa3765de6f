"""Head (one head of self-attention) from Karpathy's "Let's build GPT" lecture code BEFORE the "scale by head size" fix, checked as a single-head layer.

Source: https://github.com/karpathy/ng-video-lecture/blob/3fdc1ea02f3849fd4b3c093430bc49c6fd6a4feb/gpt.py (lines 64-102: classes Head and MultiHeadAttention). The same copied block as karpathy_ng_video_lecture_prefix.py (see its docstring for how the text was placed in history: read from the index copy at commit 0ceb0055aad7a7b255730be650dd667d6daffd9f, refs/pull/3 of the same repository, identical lines).
Licence: MIT, as declared in the repository README ("### License" / "MIT"); the repository has no LICENSE file, so there is no copyright line to quote.
Copied: verbatim with these additions: module-level globals n_embd, block_size, dropout defined ABOVE the copied block as a shim; an added factory build_head(d_in, d_out, context_length) BELOW it that sets the globals and returns one Head(d_out); imports as in the original.
Truth: BUG, wrong scale for a single head: wei = q @ k.T * C**-0.5 where C = x.shape[-1] = n_embd = d_in, i.e. scores / sqrt(d_in) instead of / sqrt(head_size) = sqrt(d_out): the previous lesson's single-head layer with the scale of the input width (mha-check's mutant single-scale-by-d-in). No output projection (Head alone). Evidence: PR https://github.com/karpathy/ng-video-lecture/pull/6 ("We should scale attention by head size ... We are scaling it by number of channels in input at present", karpathy: "you're right :( ty"), merged as commit 988848a5f7613d33a6f7f12eed96c2d093759866.
"""
import torch
import torch.nn as nn
from torch.nn import functional as F

# --- shim: module-level globals read by the copied classes (original values 384, 256, 0.2) ---
n_embd = 32
block_size = 16
dropout = 0.0
# --- end of shim; copied block follows ---

TARGET = "build_head"
TRUTH = "bug"
BUG = "scale-sqrt-d-in"
RULE_GAPS = ()
FORWARD = "x"
NOTES = "Reads module GLOBALS n_embd, block_size, dropout. TARGET is the added factory build_head(d_in, d_out, context_length): one Head(d_out) on inputs of width d_in, no number of heads, so mha-check checks it as the single-head form. With d_in == d_out the bug vanishes."
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'cannot_tell'
DIAGNOSIS = None
EXPECTED_BECAUSE = ('reads its sizes from module-level globals (as karpathy_ng_video_lecture_prefix.py); its bug is '
                    'the single-head mutant single-scale-by-d-in, which mha-check finds once the sizes are arguments')


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


# --- added factory (not part of the original): one head, sized through the module globals ---
def build_head(d_in, d_out, context_length):
    global n_embd, block_size
    n_embd, block_size = d_in, context_length
    return Head(d_out)
