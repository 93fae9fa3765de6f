"""Buggy: the masked scores are filled with 0 before the softmax, so a future score counts as much as a neutral past
one and the future leaks openly.

Style: a compact GPT block with a lower-triangular `tril` buffer and `masked_fill(tril == 0, 0.0)`, as some
export-to-ONNX examples write it (a zero is "simpler" than -inf for their tools). From a real-code trial: it was
told as the catalogue's "-10.0" mistake with a "small" leak; the right report names the finite-fill mistake with
the value 0 and says the leak is large.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ZeroFillAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.key, self.query, self.value = (nn.Linear(n_embd, n_embd) for _ in range(3))
        self.proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        k = self.key(x).view(B, T, self.n_head, hs).transpose(1, 2)
        q = self.query(x).view(B, T, self.n_head, hs).transpose(1, 2)
        v = self.value(x).view(B, T, self.n_head, hs).transpose(1, 2)
        wei = q @ k.transpose(-2, -1) * hs ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, 0.0)
        y = F.softmax(wei, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


TARGET = "ZeroFillAttention"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = "finite-fill"  # the mutant this mistake should be diagnosed as, told with the value 0
