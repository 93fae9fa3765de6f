"""Single head: the softmax normalises over dim=1 (the queries) instead of the last axis (the keys)."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="single-softmax-wrong-axis",
    task="Early positions' outputs change when later tokens change.",
    topic="the softmax",
    title="Single head: softmax over dim=1 (the queries) instead of dim=-1 (the keys)",
    lesson=('Previous lesson (causal attention): "attn_weights = torch.softmax(attn_scores / ..., dim=-1)": each '
            'row, one query over all keys, sums to 1."'),
    killed_by=("causal-leakage", "reference-match", "gradient-match"),
    variant={"softmax_axis": -2},
    trace=("softmax-not-last-axis",),
    symptom=("Each column sums to 1 instead of each row: a query's weights are normalised with the scores of "
             "later queries, so the future leaks into every position."),
    remedy="Take the softmax over the last axis (dim=-1), the keys.",
    fix="attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)",
    rewrite="softmax",
    example=(
        "attn_scores (2, 3, 3) = (b, queries, keys); dim=1 is the queries' axis of the 3-D scores\n"
        "right: dim=-1: row 0 [1.0, 0, 0], row 1 [0.6, 0.4, 0]: each query's weights sum to 1\n"
        "wrong: dim=1: column 0 over the 3 queries sums to 1, so query 0's weight depends on queries 1 and 2: "
        "token 0's output changes when token 2 changes"
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
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=1)  # BUG: dim=1, not -1
        attn_weights = self.dropout(attn_weights)
        context_vec = attn_weights @ values
        return context_vec
