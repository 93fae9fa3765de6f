"""Passes the lesson's boolean mask (True = masked) to scaled_dot_product_attention, where True means attend."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="sdpa-bool-mask",
    task=("The last token's output is the same whatever the input, and each token's output depends on later "
          "tokens."),
    topic="the causal mask",
    title="The triu mask (True = masked) passed to scaled_dot_product_attention as attn_mask, where True means attend",
    lesson=('Engineering implications: fused kernels "that never store" the scores; the causal mask M (lesson '
            'LM3-T4, causal masking) hides '
            "the future: a boolean attn_mask of scaled_dot_product_attention says which positions to KEEP."),
    killed_by=("causal-leakage", "reference-match", "gradient-match"),
    trace=("sdpa-mask-keeps-future",),
    symptom=("Every token attends only to the tokens after it: the mask is read the other way round. The last token "
             "attends to nothing: its attention output is zeros, so its output is the output projection's bias alone, "
             "whatever the input; no NaN shows, so nothing crashes."),
    rewrite="invert",
    remedy="A boolean attn_mask says which positions to keep: pass is_causal=True, or the inverted mask (~mask).",
    fix="w = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # or attn_mask=~self.mask[:n, :n]",
    variant={"mask": "inverted", "empty_rows": "zero"},
    example=(
        "mask = triu(ones(3, 3), 1).bool() = [[F, T, T], [F, F, T], [F, F, F]]  (True = a future position)\n"
        "scaled_dot_product_attention reads True as 'may attend': row 0 attends to tokens 1 and 2 only,\n"
        "  row 1 to token 2 only, row 2 to nothing (its attention output is 0)\n"
        "so y[:, 0] depends on x[:, 1] and x[:, 2], and on x[:, 0] through its query (which weighs tokens 1 and 2);\n"
        "  y[:, 1] only on x[:, 2] (one key left: weight 1 whatever the query), and y[:, 2] on none\n"
        "right: is_causal=True, or attn_mask=~mask (True on and below the diagonal)"
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
        p = self.dropout.p if self.training else 0.0
        w = F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask[:n, :n], dropout_p=p)  # BUG: True = attend
        ctx = w.transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
