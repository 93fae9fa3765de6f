"""Single head: masked_fill (not in place) is called and its result thrown away, so nothing is masked."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="single-masked-fill-discarded",
    task="Each position's output changes when a later token changes.",
    topic="the causal mask",
    title="Single head: masked_fill without the underscore, its result discarded: no mask at all",
    lesson=('Previous lesson (causal attention): "attn_scores.masked_fill_(mask, -torch.inf)": the trailing '
            'underscore makes it in place; masked_fill (no underscore) returns a new tensor that must be kept."'),
    killed_by=("causal-leakage", "reference-match", "gradient-match"),
    variant={"mask": "none"},
    trace=("mask-result-unused",),
    symptom=("The scores are never masked: every token attends to the future, and the layer cheats at next-token "
             "prediction."),
    remedy="Use the masked scores: masked_fill is not in place, so assign its result (or call masked_fill_).",
    fix="attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)",
    example=(
        "attn_scores (2, 3, 3); attn_scores.masked_fill(mask, -inf) returns a new (2, 3, 3) tensor that nobody keeps\n"
        "right: masked_fill_ (in place), or attn_scores = attn_scores.masked_fill(...): row 0 -> [s00, -inf, -inf]\n"
        "wrong: row 0 stays [s00, s01, s02]: token 0's output mixes the values of tokens 1 and 2"
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
        attn_scores.masked_fill(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)  # BUG: result discarded
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context_vec = attn_weights @ values
        return context_vec
