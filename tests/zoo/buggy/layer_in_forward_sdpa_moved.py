"""Buggy (the output projection made in forward, on the input's device): `out_proj = nn.Linear(C, C).to(x.device,
x.dtype)` at every call, after a fused qkv and scaled_dot_product_attention(is_causal=True).

Style: nanoGPT's names (n_embd, n_head, block_size, qkv split on dim 2), written by a student trial of mha-check
(issue 28). Every call draws new weights for the projection, so two calls on one input differ. causal-leakage and
mask-fill compared a call on the perturbed input with a call on the plain one and read the difference as the future
leaking ("mask the scores before the softmax") and as a finite fill, in a layer masked by is_causal=True; they now
ask the plain input once more first, and a forward that does not answer it again is no evidence of either
(batch-independence and eval-determinism say what is wrong). mask-buffer read the projection moved with
`.to(x.device, x.dtype)` as weights left on the CPU (Module.to parses the device anew, and hands back the tensor
itself when it is already there); it now follows the move. Named layer-in-forward at the line that makes the layer
(before: "no known mistake matches", with five failing checks, three of them wrong).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class FlashAttn(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout=0.0):
        super().__init__()
        self.n_head = n_head
        self.n_embd = n_embd
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.dropout = dropout

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(self.n_embd, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        out_proj = nn.Linear(C, C).to(x.device, x.dtype)
        return out_proj(y)


TARGET = "FlashAttn"
EXPECT = ("eval-determinism", "batch-independence")
MUST_PASS = ("causal-leakage", "mask-buffer", "output-shape")
DIAGNOSIS = "layer-in-forward"
