"""Moves the 1/sqrt(dh) scaling onto the input with an in-place division, which changes the caller's tensor."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="input-modified-in-place",
    task=("After a forward pass the tensor x you passed in has changed, and the outputs differ from the "
          "lesson's layer."),
    topic="scaling the scores",
    title="Scaling done in place on the input (x /= sqrt(dh)) instead of on the scores",
    lesson=('Each head runs scaled dot-product attention: the scores are divided by sqrt(dh) ("Scale, mask, '
            'softmax"); the layer must not write into its input.'),
    killed_by=("input-untouched", "reference-match", "gradient-match"),
    trace=("input-changed-in-place",),
    symptom=("After a forward the caller's x has been divided by sqrt(dh) (a second call sees different data, and "
             "autograd refuses an in-place change of a leaf that requires grad); the scaling is also wrong, "
             "because Q, K and V are all scaled."),
    remedy=("Leave the caller's input untouched: compute new tensors (x = x / c) instead of changing x in place, "
            "and scale the scores instead."),
    fix="delete the `x /= ...` line and divide the scores: scores = q @ k.transpose(2, 3) / self.dh ** 0.5",
    example=(
        "x: (2, 3, 8), dh = 4; forward starts with x /= 2 (sqrt(dh)), in place on the caller's tensor\n"
        "x[0, 0, 0] = 1.0 becomes 0.5 after one call and 0.25 after a second: the caller's data changed\n"
        "q, k and v all come from x / 2, so (without Q/K biases) scores = q·k / 4: divided by dh, not sqrt(dh) = 2,\n"
        "  and v, hence the context, is halved as well\n"
        "with x.requires_grad=True (a leaf) forward raises: 'a leaf Variable that requires grad is being used in an\n"
        "  in-place operation.'"
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
        x /= self.dh ** 0.5  # BUG: in place on the caller's tensor
        d = self.h * self.dh
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)  # (B, H, n, dh)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(2, 3)  # BUG: scaling moved onto x above
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
