"""Adds the 0/1 mask to the scores instead of filling them with -inf: the future's scores grow by 1 and nothing is
hidden (CS224n-style course code: `att + (1 - mask)`, or `att + mask`, +1 on the past)."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="mask-added",
    task="An early token's output changes when a later token changes, though the layer does use its mask.",
    topic="the causal mask",
    title="A mask of 0s and 1s added to the scores (+1 on the future, or on the past) instead of a -inf fill",
    lesson=("Masked positions must get weight exactly 0 after the softmax (lesson LM3-T4, causal masking): only a -inf "
            "score does that. An additive mask works only when it holds -inf (or a number far below every score) "
            "where a position is hidden; a mask of 0s and 1s shifts some scores by 1 and hides nothing."),
    killed_by=("causal-leakage", "reference-match", "gradient-match"),
    trace=("mask-added",),
    symptom=("Every future token keeps its weight, e times larger (a +1 on the future) or e times smaller (a +1 on "
             "the past): the outputs differ from the reference and each position reads the tokens after it."),
    rewrite="added",
    remedy=("Do not add a mask of 0s and 1s to the scores: fill the hidden scores with float(\"-inf\") (masked_fill "
            "where the mask hides a position, given a boolean mask: a float one of 0s and 1s made .bool() or == 0 "
            "first), or add a mask that is -inf there and 0 elsewhere."),
    fix='scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))',
    variant={"mask_op": "add", "fill": 1.0},
    fitted=("fill",),  # +1 on the future, or +1 on the past (-1 on the future), or another finite shift
    example=(
        "scores: (2, 2, 3, 3); mask (3, 3), True (1) above the diagonal\n"
        "row 0 of one head: scores [1.2, -0.4, 0.7] + [0, 1, 1] = [1.2, 0.6, 1.7]\n"
        "wrong: softmax([1.2, 0.6, 1.7]) = [0.31, 0.17, 0.52]: token 0 now reads mostly the future\n"
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
        scores = scores + self.mask[:n, :n]  # BUG: the 0/1 mask added: +1 on the future's scores, not -inf
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
