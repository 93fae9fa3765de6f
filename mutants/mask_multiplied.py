"""Multiplies the scores by the 0/1 mask instead of filling them with -inf: a hidden score becomes 0, and e^0 gives
the future a real weight after the softmax (CS224n-style course code: `att * mask`)."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="mask-multiplied",
    task="An early token's output changes when a later token changes, though the layer does use its mask.",
    topic="the causal mask",
    rewrite="multiply",
    title="Scores multiplied by the mask: the future's scores become 0 instead of -inf",
    lesson=("Masked positions must get weight exactly 0 after the softmax (lesson LM3-T4, causal masking): only a -inf "
            "score does that. Multiplying by a mask of 0s and 1s sets the hidden scores to 0, and e^0 = 1 is as "
            "large as an ordinary score's weight."),
    killed_by=("causal-leakage", "reference-match", "gradient-match"),
    trace=("mask-multiplied",),
    symptom=("Every future token gets the weight of a score of 0, about as much as a past token's: the outputs "
             "differ from the reference and each position reads the tokens after it."),
    remedy=("Do not multiply the scores by the mask: fill the hidden scores with float(\"-inf\") (masked_fill where "
            "the mask hides a position) before the softmax."),
    fix='scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))',
    variant={"fill": 0.0},
    example=(
        "scores: (2, 2, 3, 3); mask (3, 3), True above the diagonal; ~mask is 1 on and below it, 0 above\n"
        "row 0 of one head: scores [1.2, -0.4, 0.7] * [1, 0, 0] = [1.2, 0, 0]\n"
        "wrong: softmax([1.2, 0, 0]) = [0.62, 0.19, 0.19]: tokens 1 and 2 keep a weight of 0.19 each\n"
        "right: masked_fill(mask, -inf) gives [1.2, -inf, -inf] and softmax [1, 0, 0]"
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
        scores = scores * ~self.mask[:n, :n]  # BUG: multiplied by the mask: the future's scores become 0, not -inf
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
