"""Stores the causal mask as a plain tensor attribute instead of registering it as a buffer."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="mask-plain-attribute",
    task="model.to(device) leaves part of the layer behind (forward then fails on a GPU), and state_dict() misses it.",
    topic="registering parameters and buffers",
    title="Causal mask kept as a plain attribute (self.mask = ...) instead of register_buffer",
    lesson=('Worked code: self.register_buffer("mask", ...) makes the mask part of the module, so .to(device), '
            ".double() and state_dict() handle it with the parameters."),
    killed_by=("mask-buffer", "registered"),
    symptom=("The mask is not moved by model.to(device) (forward then fails on GPU or meta tensors) and is "
             "missing from state_dict."),
    remedy="Register the mask with self.register_buffer in __init__, so that .to(device) moves it with the module.",
    fix='self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())',
    trace=("mask-kept-as-attribute",),
    rewrite="buffer",
    example=(
        "self.mask = torch.triu(torch.ones(16, 16), 1).bool() is a plain attribute, not a buffer\n"
        "state_dict keys: q.weight, k.weight, v.weight, out.weight, out.bias (with register_buffer: 'mask' too)\n"
        "model.to('meta') (or .cuda()) moves the weights, but self.mask stays on the CPU:\n"
        "  forward on x (2, 3, 8): RuntimeError: Tensor on device meta is not on the expected device cpu!\n"
        "right: self.register_buffer('mask', ...) is moved and saved with the parameters"
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
        self.mask = torch.triu(torch.ones(context_length, context_length), 1).bool()  # BUG: not a buffer

    def forward(self, x):
        B, n, _ = x.shape
        d = self.h * self.dh
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)  # (B, H, n, dh)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
