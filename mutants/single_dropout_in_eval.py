"""Single head: dropout on the attention weights with F.dropout's default training=True, so it stays on in eval."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="single-dropout-in-eval",
    task="After model.eval(), two forward passes on the same input give different outputs.",
    topic="dropout",
    title="Single head: attention dropout always on (F.dropout(..., training=True)), also after model.eval()",
    lesson=('Previous lesson (causal attention): "self.dropout = nn.Dropout(dropout)" applied to the attention '
            'weights: an nn.Dropout follows model.train()/model.eval(), F.dropout only its training argument, '
            'which is True by default.'),
    killed_by=("eval-determinism",),
    symptom=("After model.eval() the head is still random: two forwards on the same input give different "
             "outputs, and evaluation scores are noisy."),
    remedy=("Let dropout follow the module's mode: use an nn.Dropout module, or pass training=self.training to "
            "F.dropout."),
    rewrite="dropout",
    trace=("dropout-always-on",),
    fix="attn_weights = self.dropout(attn_weights)",
    example=(
        "model = CausalAttention(8, 8, 16, dropout=0.5).eval(); x: (2, 3, 8); attn_weights: (2, 3, 3)\n"
        "right: self.dropout(attn_weights) is the identity in eval(): row 0 stays [1, 0, 0], the same each time\n"
        "wrong: F.dropout(attn_weights, 0.5) (training=True by default) zeroes each weight with probability 0.5\n"
        "  and doubles the others: row 0 becomes [2, 0, 0] or [0, 0, 0] at random, and model.eval() changes nothing"
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
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = nn.functional.dropout(attn_weights, self.dropout.p)  # BUG: training=True by default
        context_vec = attn_weights @ values
        return context_vec
