"""Single head: masks with the whole (context_length, context_length) buffer instead of slicing it to n."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="single-mask-not-sliced",
    task="Inputs of exactly context_length tokens work; any shorter input crashes.",
    topic="the causal mask",
    title="Single head: the full context_length mask used unsliced, so only n == context_length works",
    lesson=('Previous lesson (causal attention): "attn_scores.masked_fill_(self.mask.bool()[:num_tokens, '
            ':num_tokens], -torch.inf)": the buffer is made once for context_length and cut to the number of tokens."'),
    killed_by=("output-shape",),
    trace=("mask-size-not-n",),
    symptom=("Sequences of exactly context_length tokens work; any shorter input crashes in masked_fill_ with a "
             "shape (broadcast) error."),
    remedy=("Cut the context-length mask to the sequence before using it: its first n rows and n columns, n the "
            "number of tokens."),
    rewrite="slice",
    fix="attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)",
    example=(
        "context_length = 6: self.mask is (6, 6); x: (2, 3, 4) gives attn_scores (2, 3, 3)\n"
        "right: self.mask.bool()[:3, :3] -> (3, 3), broadcast over the batch: (2, 3, 3)\n"
        "wrong: masked_fill_(self.mask.bool(), ...) with the (6, 6) mask:\n"
        "  RuntimeError: The size of tensor a (3) must match the size of tensor b (6) at non-singleton dimension 2\n"
        "only an input of exactly 6 tokens, x: (2, 6, 4), runs"
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
        attn_scores.masked_fill_(self.mask.bool(), -torch.inf)  # BUG: not sliced to num_tokens
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context_vec = attn_weights @ values
        return context_vec
