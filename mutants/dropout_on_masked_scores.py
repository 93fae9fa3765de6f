"""Applies dropout to the masked scores before the softmax instead of to the attention weights after it."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="dropout-on-masked-scores",
    task="In eval() mode, and with dropout 0, everything is right; in train() mode with dropout > 0 the outputs "
         "turn into NaN.",
    topic="dropout",
    title="Dropout applied to the masked scores before the softmax: in training, 0 · -inf gives NaN",
    lesson=('"Apply dropout to the attention weights during training": the weights are what the softmax returns; '
            "the masked scores still hold -inf, which dropout must never touch."),
    killed_by=("causal-leakage",),
    trace=("dropout-before-softmax",),
    symptom=("Evaluation looks right, but training with dropout > 0 breaks at once: dropout zeroes some masked "
             "scores, 0 · -inf is NaN, and every row of scores holding one becomes NaN after the softmax (the "
             "loss is NaN from the first step)."),
    remedy=("Apply dropout to the attention weights after the softmax, never to the scores or to the mask: the "
            "masked scores hold -inf, and dropout multiplies some of them by 0."),
    fix="w = self.dropout(torch.softmax(scores, dim=-1))  # dropout after the softmax",
    example=(
        "scores = scores.masked_fill(mask, -inf); scores = self.dropout(scores); w = softmax(scores)\n"
        "model.eval(), or dropout 0: dropout is the identity, the layer equals the reference\n"
        "model.train() with dropout 0.5: each masked score -inf is kept (times 2: still -inf) or zeroed,\n"
        "  and 0 · -inf = NaN: a row of scores with one NaN has NaN weights, and that token's context is NaN\n"
        "right: w = self.dropout(softmax(scores)): dropout zeroes weights, and a masked weight stays 0"
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
        scores = self.dropout(scores)  # BUG: dropout on the masked scores (0 * -inf = NaN in training)
        w = torch.softmax(scores, dim=-1)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
