"""Builds the causal mask with `torch.triu(..., 0)`, which also hides each token from itself."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="mask-hides-diagonal",
    task="The output of the first token is NaN.",
    topic="the causal mask",
    title="Causal mask hides the diagonal: a token cannot attend to itself (triu(ones) at offset 0, tril at -1)",
    lesson=("The causal mask (lesson LM3-T4, causal masking) hides only future positions s > t; torch.triu(..., "
            "1) is True strictly "
            "above the diagonal, so a token may attend to itself."),
    killed_by=("output-shape", "causal-leakage", "reference-match", "gradient-match"),
    rewrite="diagonal",
    trace=("mask-includes-diagonal",),
    symptom=("A token cannot attend to itself, and the first token has nothing left to attend to: its softmax row "
             "is all -inf and its output is NaN."),
    remedy=("Build the mask so that a token sees itself and only the strictly later tokens are hidden: "
            "torch.triu(..., diagonal=1) where True means masked, or torch.tril(...) with diagonal=0 where 1 means "
            "keep (a tril mask used with == 0)."),
    fix='self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())',
    variant={"mask": "hide-diagonal"},
    example=(
        "wrong: torch.triu(torch.ones(3, 3)) = [[1, 1, 1], [0, 1, 1], [0, 0, 1]]: the diagonal is masked too\n"
        "right: torch.triu(torch.ones(3, 3), 1) = [[0, 1, 1], [0, 0, 1], [0, 0, 0]]\n"
        "with all scores 0: row 0 = softmax([-inf, -inf, -inf]) = [nan, nan, nan]\n"
        "  row 1 = [1, 0, 0] (token 1 sees only token 0), row 2 = [0.5, 0.5, 0] (token 2 not itself)\n"
        "so y: (2, 3, 8) has 16 NaN values: all 8 features of token 0 in both sequences"
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
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length)).bool())  # BUG: offset 0

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
