"""personal-chat-slm's MultiHeadAttention: Karpathy's lecture layer (per-head `Head` modules with key/query/value
Linear(n_embd, head_size, bias=False), a registered tril buffer, masked_fill(tril == 0, -inf), softmax, dropout,
heads concatenated, then proj and dropout), with every hyperparameter passed to the constructor instead of read from
module globals - and each head scaled by C**-0.5 where C is the INPUT width n_embd, the lecture's first text (fixed
there by ng-video-lecture PR #6 to head_size**-0.5).

Source: https://github.com/Imprayas12/personal-chat-slm (the PyPI project's homepage), file
personal_chat_slm/model.py as released in personal-chat-slm 0.1.2 on PyPI.
Licence: MIT (the wheel's METADATA: "License: MIT License" and the classifier "License :: OSI Approved :: MIT
License"; the README says "This project is licensed under the MIT License"; the wheel carries no LICENSE file and no
copyright line).
Copied: verbatim from the PyPI wheel personal_chat_slm==0.1.2 (pip download --no-deps): lines 1-40 of
personal_chat_slm/model.py (the imports, the comment, Head and MultiHeadAttention); FeedForward, TransformerBlock and
NanoLLM are left out. ADDED: this entry's constants after the imports.
Truth: bug. MultiHeadAttention(n_embd, num_heads, block_size, dropout=0) is mha_forward with W_q, W_k, W_v the heads'
query/key/value weights stacked, W_o = proj, b_o = proj.bias and no Q/K/V biases, EXCEPT that every head's scores are
multiplied by n_embd**-0.5 instead of head_size**-0.5: exactly the lesson's function with scores / sqrt(d) (shown in
_truth.py, 1e-15), and off the lesson's layer by far more. No leak. With one head the two scales agree.
"""
import torch
import torch.nn as nn
from torch.nn import functional as F

TARGET = "MultiHeadAttention"
TRUTH = "bug"
BUG = "scale-sqrt-d-model"
RULE_GAPS = ("per-head-modules", "no-divisibility-check", "constructor-args-not-globals")
FORWARD = "x"
NOTES = ("MultiHeadAttention(n_embd, num_heads, block_size, dropout). forward(x) -> (B, T, n_embd); head_size = "
         "n_embd // num_heads (no check), each Head scaled by C**-0.5 with C = n_embd.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'scale-by-sqrt-d'
EXPECTED_BECAUSE = ("each head scales its scores by n_embd**-0.5 (the model width) instead of head_size**-0.5: the "
                    "lesson's layer with scores / sqrt(d), which reproduces it number for number")

# This file contains the definition of the model architecture.
# We pass hyperparameters as arguments to the model's constructor.

class Head(nn.Module):
    """ One head of self-attention """
    def __init__(self, n_embd, head_size, block_size, dropout):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer('tril', torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(dropout)
    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x)
        q = self.query(x)
        wei = q @ k.transpose(-2, -1) * C**-0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float('-inf'))
        wei = F.softmax(wei, dim=-1)
        wei = self.dropout(wei)
        v = self.value(x)
        out = wei @ v
        return out

class MultiHeadAttention(nn.Module):
    """ Multiple heads of self-attention in parallel """
    def __init__(self, n_embd, num_heads, block_size, dropout):
        super().__init__()
        head_size = n_embd // num_heads
        self.heads = nn.ModuleList([Head(n_embd, head_size, block_size, dropout) for _ in range(num_heads)])
        self.proj = nn.Linear(n_embd, n_embd)
        self.dropout = nn.Dropout(dropout)
    def forward(self, x):
        out = torch.cat([h(x) for h in self.heads], dim=-1)
        out = self.dropout(self.proj(out))
        return out
