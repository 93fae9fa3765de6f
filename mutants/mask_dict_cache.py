"""Caches one mask per length in a plain dict of CPU tensors instead of a registered buffer."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="mask-dict-cache",
    task=("Works on the CPU, but after model.to('cuda') forward fails with a device mismatch, and "
          "state_dict() misses part of the layer."),
    topic="registering parameters and buffers",
    title="Masks cached in a plain dict of CPU tensors (one per length) instead of one registered buffer",
    lesson=("The causal mask M (lesson LM3-T4, causal masking) is part of the module: register it as a buffer so "
            "that .to(device) moves "
            "it and the state_dict keeps it."),
    killed_by=("mask-buffer", "registered"),
    symptom=("Works on the CPU; after model.to('cuda') (or any device) the cached masks stay on the CPU and "
             "forward fails with a device mismatch. The dict is invisible to the state_dict."),
    remedy=("Register the mask as a buffer in __init__ (self.register_buffer), not in a dict, so it moves with "
            "the module."),
    fix='self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())',
    trace=("mask-kept-in-container",),
    example=(
        "self.masks = {n: triu(ones(n, n), 1).bool() for n in 1..L}: a dict of L CPU tensors\n"
        "model.to('meta'): parameters and buffers move, the dict does not\n"
        "forward: scores (meta) masked_fill with self.masks[n] (cpu) -> RuntimeError about devices\n"
        "right: one buffer (L, L), sliced mask[:n, :n]"
    ),
)


class CausalMHA(nn.Module):
    def __init__(self, d, nheads, context_length, d_out=None, dropout=0.0, qkv_bias=False):
        super().__init__()
        d_out = d if d_out is None else d_out
        if d_out % nheads != 0:
            raise ValueError(f"d_out={d_out} is not divisible by nheads={nheads}")
        self.h, self.dh = nheads, d_out // nheads
        self.q, self.k, self.v = (nn.Linear(d, d_out, bias=qkv_bias) for _ in range(3))
        self.out = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.masks = {m: torch.triu(torch.ones(m, m), 1).bool() for m in range(1, context_length + 1)}  # BUG: a dict

    def forward(self, x):
        B, n, _ = x.shape
        d = self.h * self.dh
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)  # (B, H, n, dh)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.masks[n], float("-inf"))  # BUG: a CPU tensor from the plain dict
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
