"""Adds the layer's input to its output (x + attn(x)): the transformer block's residual connection inside the
attention layer."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="residual-inside",
    task="The layer's output is its input plus the lesson's output; nothing crashes.",
    topic="the output projection",
    title="The input added to the output (x + attn(x)): the block's residual connection inside the attention layer",
    lesson=('The multi-head attention layer ends with the output projection: "return self.out(ctx)". The residual '
            'connection, x + attn(x), belongs to the transformer block that uses the layer (with its layer '
            'normalisation), not to the layer itself.'),
    killed_by=("reference-match", "gradient-match"),
    trace=("residual-inside",),
    symptom=("Every output is the lesson's output plus the input token itself: the outputs and the input's gradient "
             "differ from the reference, and a block that adds its own residual counts the input twice; nothing "
             "crashes."),
    remedy=("Return the output projection's result alone; add the input back (x + attn(x)) in the transformer block "
            "that uses the layer."),
    rewrite="residual",
    fix="return self.out(ctx)",
    variant={"residual": True},
    example=(
        "x has shape (2, 3, 8); the lesson's layer returns out = self.out(ctx), also (2, 3, 8)\n"
        "wrong: return x + self.out(ctx): token 0's output [0.1, -0.3, ...] + its input [1.2, 0.4, ...]\n"
        "in a block that adds the residual itself, x + (x + attn(x)): the input counted twice"
    ),
)


class CausalMHA(nn.Module):
    def __init__(self, d, nheads, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        d_out = d  # one width, as a layer that adds its input to its output must have (nanoGPT's n_embd)
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
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return x + self.out(ctx)  # BUG: the block's residual connection, inside the attention layer
