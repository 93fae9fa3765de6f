"""Buggy (student style, mask-hides-past): the mask is made with `.tril(-1)` and filled as if it marked the future
("1 = blocked"): it marks the tokens before each one, so each token sees itself and every later token, never an
earlier one.

Style: heads folded into the batch for torch.bmm, one fused `W_qkv` chunked in three, `att`, a boolean buffer
`blocked` made by the tensor's own .tril method, a constructor of `width, n_heads, window`.  The line to change is
the one that made the buffer (LINE), not the masked_fill in forward that uses it (issue 28, item 6).
"""
import torch
import torch.nn as nn


class BlockedAttention(nn.Module):
    def __init__(self, width, n_heads, window):
        super().__init__()
        assert width % n_heads == 0
        self.n_heads, self.head_width = n_heads, width // n_heads
        self.W_qkv = nn.Linear(width, 3 * width)
        self.W_out = nn.Linear(width, width)
        self.register_buffer("blocked", torch.ones(window, window).tril(-1).bool())  # 1 = blocked

    def forward(self, x):
        B, T, W = x.shape
        q, k, v = self.W_qkv(x).chunk(3, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, self.head_width).transpose(1, 2).reshape(B * self.n_heads, T, -1)
                   for t in (q, k, v))
        att = torch.bmm(q, k.transpose(1, 2)) / self.head_width ** 0.5
        att = att.masked_fill(self.blocked[:T, :T], float("-inf"))
        att = torch.softmax(att, dim=-1)
        out = torch.bmm(att, v).view(B, self.n_heads, T, self.head_width).transpose(1, 2)
        return self.W_out(out.reshape(B, T, W))


TARGET = "BlockedAttention"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = "mask-hides-past"
LINE = 20  # the .tril(-1) that made the buffer, not the masked_fill (28) that uses it
