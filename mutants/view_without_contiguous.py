"""Calls `view` on the transposed head outputs without `.contiguous()`, which raises at runtime."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="view-without-contiguous",
    task=("forward raises 'view size is not compatible with input tensor's size and stride' as soon as there "
          "are several heads and tokens."),
    topic="merging the heads",
    title="view(B, n, d) directly after transpose(1, 2), without .contiguous()",
    lesson=('Engineering implications: "contiguous() before view. After transpose the tensor is no longer laid '
            'out contiguously, and view then raises an error. Either call .contiguous() first or use reshape."'),
    killed_by=("contiguity",),
    trace=("view-on-transposed", "view-on-transposed-in-training"),
    symptom=("forward raises \"view size is not compatible with input tensor's size and stride\" as soon as there "
             "is more than one head and more than one token."),
    remedy="Call .contiguous() between the transpose and the .view (or use .reshape).",
    rewrite="contiguous",
    fix="ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  (or .reshape(B, n, d))",
    example=(
        "w @ v: (2, 2, 3, 4); .transpose(1, 2) -> (2, 3, 2, 4) with strides (24, 4, 12, 1): not contiguous\n"
        "view(2, 3, 8) must merge the head axis (stride 12) and dh (stride 1) into one axis of stride 1,\n"
        "  but a token's 8 features sit at offsets 0-3 and 12-15:\n"
        "  RuntimeError: view size is not compatible with input tensor's size and stride ... Use .reshape(...)\n"
        "with H = 1 or n = 1 the same view works, so a one-head or one-token test passes\n"
        "right: .transpose(1, 2).contiguous().view(2, 3, 8) or .reshape(2, 3, 8)"
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
        ctx = (w @ v).transpose(1, 2).view(B, n, d)  # BUG: no .contiguous() before view
        return self.out(ctx)
