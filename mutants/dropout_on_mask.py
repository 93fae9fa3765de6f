"""Applies dropout to the causal mask itself: in training it zeroes some of its entries, unmasking the future."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="dropout-on-mask",
    task="In eval() mode, and with dropout 0, everything is right; in train() mode with dropout > 0 early outputs "
         "depend on later tokens.",
    topic="dropout",
    title="Dropout applied to the causal mask: in training it unmasks some future positions",
    lesson=('"Apply dropout to the attention weights during training": to the weights the softmax returns, never '
            "to the mask, which must hide every future position in every mode."),
    killed_by=("causal-leakage",),
    trace=("mask-dropped-out",),
    rewrite="undrop",
    symptom=("Evaluation looks right, but training cheats: with dropout > 0 in train() mode, dropout zeroes some "
             "entries of the mask, so those future positions are no longer hidden and each token's output depends "
             "on some later tokens."),
    remedy=("Apply dropout to the attention weights after the softmax, never to the mask: the mask must hide every "
            "future position in training as in evaluation."),
    fix='scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))  # the mask itself, without dropout',
    example=(
        "mask = self.dropout(self.mask)[:n, :n].bool(), with a 0/1 mask that is 1 above the diagonal\n"
        "model.eval(), or dropout 0: dropout is the identity, the mask hides the future, the layer is right\n"
        "model.train() with dropout 0.5: each 1 of the mask is zeroed with probability 0.5 (the others become 2),\n"
        "  a zeroed entry (t, s) with s > t reads as False: token t attends to the later token s\n"
        "right: mask the scores with the mask itself; dropout goes on the weights: w = self.dropout(softmax(...))"
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
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1))  # 1 = hidden

    def forward(self, x):
        B, n, _ = x.shape
        d = self.h * self.dh
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)  # (B, H, n, dh)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        mask = self.dropout(self.mask)[:n, :n].bool()  # BUG: dropout zeroes some mask entries in training
        scores = scores.masked_fill(mask, float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
