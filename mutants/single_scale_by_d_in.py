"""Single head: the scores are divided by sqrt(d_in), the input width, not by sqrt(d_out), the keys' width."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="single-scale-by-d-in",
    task="With equal input and output widths it is right; with d_in != d_out the output differs slightly.",
    topic="scaling the scores",
    title="Single head: scores divided by sqrt(d_in) (the input width) instead of sqrt(d_out) (the keys' width)",
    lesson=('Previous lesson (causal attention): "attn_scores / keys.shape[-1]**0.5": the scale is the width of '
            'the keys (d_out), which the dot product sums over, not the width of the input."'),
    killed_by=("reference-match", "gradient-match"),
    trace=("single-scaled-by-input-width",),
    rewrite="scale",
    variant={"scale": "sqrt-d-in"},
    symptom=("Right only when d_in == d_out (the lesson's first example, d_in = 3, d_out = 2, already differs): the "
             "softmax is too flat when d_in > d_out and too peaked when d_in < d_out."),
    remedy="Divide the scores by the square root of the keys' width (the output width), not of the input width.",
    fix="attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)",
    example=(
        "d_in = 3, d_out = 2 (the lesson's example): keys (2, 6, 2); a row of attn_scores [1.4, 0.0]\n"
        "right: softmax([1.4, 0.0] / sqrt(2)) = softmax([0.99, 0.0]) = [0.73, 0.27]\n"
        "wrong: softmax([1.4, 0.0] / sqrt(3)) = softmax([0.81, 0.0]) = [0.69, 0.31]\n"
        "with d_in = d_out the two agree: a test with equal widths never sees it"
    ),
)


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)  # (b, num_tokens, num_tokens)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / d_in ** 0.5, dim=-1)  # BUG: d_in, not keys.shape[-1]
        attn_weights = self.dropout(attn_weights)
        context_vec = attn_weights @ values
        return context_vec
