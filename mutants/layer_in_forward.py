"""Creates the output projection inside forward (`nn.Linear(d, d)` at every call) instead of once in __init__."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="layer-in-forward",
    task=("Two calls on the same input in eval() mode give different outputs, and the layer has fewer parameters "
          "than the formula."),
    topic="registering parameters and buffers",
    title="Output projection created inside forward: new random weights at every call, never registered",
    lesson=('Lesson LM3-T5: the layer\'s weights are made once, in __init__ (`self.out = nn.Linear(d, d)`), so that '
            'm.parameters() holds them: "same shape and 264 parameters every time"'),
    killed_by=("eval-determinism", "param-count"),
    symptom=("Every call builds a new nn.Linear with new random weights: the output changes from call to call even "
             "in eval() mode on the same input, the layer has no W_o among its parameters (the count is d² + d "
             "short), so the optimizer never trains it, and .to(device) does not move it."),
    remedy="Create the layer once in __init__ (self.out = nn.Linear(d_out, d_out)) and call it in forward.",
    trace=("layer-made-in-forward",),
    fix="self.out = nn.Linear(d_out, d_out)  # in __init__; forward returns self.out(ctx)",
    example=(
        "forward runs out = nn.Linear(8, 8) and returns out(ctx): W_o (8 × 8) and b_o (8) are drawn anew each call\n"
        "model.eval(); x (2, 3, 8): model(x) and model(x) differ in every one of their 48 values\n"
        "sum(p.numel() for p in model.parameters()) = 192, not 264: the 72 of the output projection are missing\n"
        "right: self.out = nn.Linear(8, 8) in __init__, and return self.out(ctx) in forward"
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
        out = nn.Linear(d, d)  # BUG: a new layer, with new random weights, at every call
        return out(ctx)
