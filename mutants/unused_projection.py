"""Creates a second output projection that forward never uses."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="unused-projection",
    task="The outputs are right, but the parameter count is too high and some parameters never receive a gradient.",
    topic="the projections",
    title="A projection created in __init__ and never used in forward",
    lesson=('"Count parameters with the setting you actually use": a parameter forward never touches is counted, '
            "saved and moved, but never trained."),
    killed_by=("parameters-used", "param-count"),
    symptom=("The outputs are right, but the layer carries d_out² + d_out parameters that get no gradient: the "
             "count is off and the optimiser updates nothing there."),
    remedy="Delete the layer that forward never uses, or use it where it was meant to be used.",
    fix="delete self.proj (or use it where it was meant to be used)",
    trace=("layer-never-used",),
    example=(
        "self.proj = nn.Linear(8, 8) next to self.out = nn.Linear(8, 8); forward returns self.out(ctx)\n"
        "parameters: 264 + 72 = 336 instead of 264\n"
        "after (y * g).sum().backward(): proj.weight.grad is None, proj.bias.grad is None\n"
        "right: one output projection, used"
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
        self.proj = nn.Linear(d_out, d_out)  # BUG: created, never used in forward
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

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
