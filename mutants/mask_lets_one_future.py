"""Builds the causal mask with `torch.triu(..., 2)`, which lets every token see the next one."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="mask-lets-one-future",
    task="Each token's output changes when the next token changes: the layer sees one step into the future.",
    topic="the causal mask",
    title=("Causal mask one diagonal off (triu(ones, 2) to hide, or tril(ones, 1) to keep): each token can see one "
           "future token"),
    lesson=("The causal mask (lesson LM3-T4, causal masking) must hide every future position s > t; "
            "torch.triu(..., 1) is True strictly "
            "above the diagonal."),
    killed_by=("causal-leakage", "reference-match", "gradient-match"),
    rewrite="diagonal",
    trace=("mask-one-token-late",),
    symptom=("Each token also attends to the token right after it, so the model can read the answer it is "
             "supposed to predict; outputs differ from the reference."),
    remedy=("Build the mask so that the very next token is hidden too: torch.triu(..., diagonal=1) where True means "
            "masked, or torch.tril(...) with diagonal=0 where 1 means keep (a tril mask used with == 0)."),
    fix='self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())',
    variant={"mask": "one-future"},
    example=(
        "wrong: triu(ones(3, 3), 2) = [[0, 0, 1], [0, 0, 0], [0, 0, 0]]: only (t=0, s=2) is masked\n"
        "right: triu(ones(3, 3), 1) = [[0, 1, 1], [0, 0, 1], [0, 0, 0]]\n"
        "with all scores 0: row 0 = [0.5, 0.5, 0] instead of [1, 0, 0]\n"
        "  row 1 = [1/3, 1/3, 1/3] instead of [0.5, 0.5, 0]\n"
        "so y[:, 0] depends on x[:, 1] and y[:, 1] on x[:, 2]: each token reads the token it should predict"
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
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 2).bool())  # BUG: offset 2

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
