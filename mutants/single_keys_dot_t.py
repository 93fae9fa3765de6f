"""Single head: keys.T (every axis reversed) instead of keys.transpose(1, 2), as in the unbatched example."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="single-keys-dot-t",
    task="forward crashes in the score computation for batched inputs.",
    topic="the scores",
    title="Single head: queries @ keys.T on a batch (every axis reversed) instead of keys.transpose(1, 2)",
    lesson=('Previous lesson (causal attention): "attn_scores = queries @ keys.transpose(1, 2)": with a batch '
            'dimension, the transpose of the unbatched example (keys.T) must swap only the last two axes."'),
    killed_by=("output-shape",),
    trace=("keys-transposed-wrong",),
    symptom=("keys.T turns (b, n, d_out) into (d_out, n, b): the matmul's batch axes do not broadcast and forward "
             "crashes (with lucky sizes it runs and mixes sequences and features)."),
    rewrite="keys",
    remedy=("Transpose only the keys' last two axes (transpose(1, 2) or transpose(-2, -1)); .T reverses every "
            "axis of a batch."),
    fix="attn_scores = queries @ keys.transpose(1, 2)",
    example=(
        "x: (2, 3, 8), d_out = 4: queries, keys (2, 3, 4) = (b, n, d_out)\n"
        "right: keys.transpose(1, 2) -> (2, 4, 3); queries @ it -> (2, 3, 3), one 3 × 3 matrix per sequence\n"
        "wrong: keys.T -> (4, 3, 2): queries (2, 3, 4) @ (4, 3, 2): batch axes 2 and 4 do not broadcast:\n"
        "  RuntimeError: The size of tensor a (2) must match the size of tensor b (4) at non-singleton dimension 0\n"
        "unbatched keys (n, d_out), where the lesson first wrote keys.T, are right: the batch is what breaks it"
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
        attn_scores = queries @ keys.T  # BUG: .T reverses all three axes of (b, n, d_out)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context_vec = attn_weights @ values
        return context_vec
