"""Keeps the Q, K, V projections in a plain Python list: nn.Module never registers them."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="plain-list-projections",
    task=("The outputs are right, but model.parameters() misses some of the layer's weights, so an optimiser "
          "would never train them."),
    topic="registering parameters and buffers",
    title="Q, K, V projections (or heads) kept in a plain Python list instead of nn.ModuleList",
    lesson=('"Each head has its own projections and its own weights": weights the model does not register are '
            "never trained, moved or saved."),
    killed_by=("registered", "param-count"),
    symptom=("The layer runs and even computes the right numbers, but model.parameters() misses the Q, K and V "
             "weights (the optimiser never trains them), .to(device) and .eval() do not reach them, and the "
             "state_dict does not save them."),
    remedy=("Keep the projections as submodules (attributes, or an nn.ModuleList), not in a plain Python list, so"
            " they are registered and trained."),
    fix="self.q, self.k, self.v = (nn.Linear(d, d_out, bias=qkv_bias) for _ in range(3))  # or nn.ModuleList([...])",
    rewrite="module-list",
    trace=("layer-in-plain-list",),
    example=(
        "self.qkv = [nn.Linear(8, 8) for _ in range(3)]: a plain list\n"
        "sum(p.numel() for p in model.parameters()) = 72 (out_proj only) instead of 3·8·8 + 72 = 264\n"
        "model.to('cuda'): the three projections stay on the CPU and forward fails on the GPU\n"
        "right: nn.ModuleList([nn.Linear(8, 8) for _ in range(3)]) registers them: 264 parameters"
    ),
)


class CausalMHA(nn.Module):
    def __init__(self, d, nheads, context_length, d_out=None, dropout=0.0, qkv_bias=False):
        super().__init__()
        d_out = d if d_out is None else d_out
        if d_out % nheads != 0:
            raise ValueError(f"d_out={d_out} is not divisible by nheads={nheads}")
        self.h, self.dh = nheads, d_out // nheads
        self.qkv = [nn.Linear(d, d_out, bias=qkv_bias) for _ in range(3)]  # BUG: a plain list, never registered
        self.out = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def forward(self, x):
        B, n, _ = x.shape
        d = self.h * self.dh
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)  # (B, H, n, dh)
        q, k, v = (split(proj(x)) for proj in self.qkv)  # BUG: the unregistered projections
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
