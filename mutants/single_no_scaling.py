"""Single head: the scores are not divided by sqrt(d_out) before the softmax."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="single-no-scaling",
    task="The output is close to the reference's but not equal, more so for wide layers.",
    topic="scaling the scores",
    title="Single head: scores not divided by sqrt(d_out) before the softmax",
    lesson=('Previous lesson (causal attention): "attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, '
            'dim=-1)": the scaled dot product keeps the scores\' variance near 1 whatever the width."'),
    killed_by=("reference-match", "gradient-match"),
    variant={"scale": "none"},
    trace=("scores-not-scaled",),
    symptom=("The softmax gets scores sqrt(d_out) times too large: its weights are too peaked (near one-hot for "
             "wide layers) and its gradients vanish."),
    remedy="Divide the scores by the square root of the keys' width before the softmax.",
    rewrite="scale",
    fix="attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)",
    example=(
        "d_out = 4: one row of attn_scores [2.0, 0.0] (after the mask)\n"
        "right: softmax([2.0, 0.0] / sqrt(4)) = softmax([1.0, 0.0]) = [0.73, 0.27]\n"
        "wrong: softmax([2.0, 0.0]) = [0.88, 0.12]: too peaked; with d_out = 768 the row is one-hot"
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
        attn_weights = torch.softmax(attn_scores, dim=-1)  # BUG: not scaled by keys.shape[-1] ** 0.5
        attn_weights = self.dropout(attn_weights)
        context_vec = attn_weights @ values
        return context_vec
