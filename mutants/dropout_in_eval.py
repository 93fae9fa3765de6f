"""Applies dropout to the attention weights with training=True, so it stays on in eval mode."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="dropout-in-eval",
    task="After model.eval(), two forward passes on the same input give different outputs.",
    topic="dropout",
    title="Attention dropout always on (F.dropout(..., training=True)), also after model.eval()",
    lesson=('Engineering implications: "Apply dropout to the attention weights during training (and set it to 0 '
            'for evaluation)"; nn.Dropout follows model.train()/model.eval().'),
    killed_by=("eval-determinism",),
    symptom=("After model.eval() the layer is still random: two forwards on the same input give different "
             "outputs, and evaluation scores are noisy."),
    remedy=("Let dropout follow the module's mode: use an nn.Dropout module, pass training=self.training to "
            "F.dropout, or give scaled_dot_product_attention dropout_p=p if self.training else 0.0."),
    rewrite="dropout",
    trace=("dropout-always-on",),
    fix="w = self.dropout(w)",
    example=(
        "model = CausalMHA(8, 2, 16, dropout=0.5).eval(); x: (2, 3, 8); attention weights w: (2, 2, 3, 3)\n"
        "right: self.dropout(w) is the identity in eval(): row 0 of each head stays [1, 0, 0], y the same each time\n"
        "wrong: F.dropout(w, 0.5, training=True) zeroes each weight with probability 0.5 and doubles the others:\n"
        "  row 0 becomes [2, 0, 0] or [0, 0, 0] at random, so a head's context for token 0 is 2·v[0] or 0\n"
        "  two calls on the same x give different y (and model.eval() changes nothing)"
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
        w = nn.functional.dropout(w, self.dropout.p, training=True)  # BUG: ignores eval()
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
