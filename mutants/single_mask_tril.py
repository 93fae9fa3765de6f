"""Single head: the mask buffer is made with torch.tril instead of torch.triu: the past is hidden, not the future."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="single-mask-tril",
    task="The output has NaN at the last position, and early positions see later tokens.",
    topic="the causal mask",
    title="Single head: mask made with torch.tril (hides the past and the diagonal) instead of torch.triu(diagonal=1)",
    lesson=('Previous lesson (causal attention): "mask = torch.triu(torch.ones(context_length, context_length), '
            'diagonal=1)": ones above the diagonal mark the future, which masked_fill_ sets to -inf."'),
    killed_by=("output-shape", "causal-leakage", "reference-match", "gradient-match"),
    variant={"mask": "inverted"},
    trace=("mask-keeps-future",),
    symptom=("Every token sees only the future; the last token sees nothing at all, so its softmax row is all -inf "
             "and gives NaN."),
    rewrite="invert",
    remedy="Hide the future, not the past: build the mask with torch.triu(..., diagonal=1).",
    fix='self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))',
    example=(
        "n = 3: torch.triu(ones, diagonal=1) = [[0, 1, 1], [0, 0, 1], [0, 0, 0]]: 1 marks the future\n"
        "wrong: torch.tril(ones) = [[1, 0, 0], [1, 1, 0], [1, 1, 1]]: row 0 sees tokens 1 and 2, row 2 sees "
        "nothing\n"
        "softmax([-inf, -inf, -inf]) = [nan, nan, nan]: the last token's output is NaN"
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
        self.register_buffer("mask", torch.tril(torch.ones(context_length, context_length), diagonal=0))  # BUG: tril

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)  # (b, num_tokens, num_tokens)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context_vec = attn_weights @ values
        return context_vec
