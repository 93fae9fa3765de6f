"""Takes the queries from the key projection and the keys from the query projection."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="swapped-q-k",
    task=("Every shape is right and nothing leaks, but the outputs differ from the lesson's layer with the "
          "same weights."),
    topic="the projections",
    title=("Queries and keys swapped: q from W_k and k from W_q (a fused projection unpacked as k, q, v), or the "
           "scores written k @ qᵀ"),
    lesson='"Head h has its own projection matrices W_Q, W_K, W_V": each must play its own role',
    killed_by=("reference-match", "gradient-match"),
    symptom=("The score matrix is transposed (token s asks token t instead of t asking s): the outputs differ from "
             "the reference although every shape is right."),
    remedy=("Use each projection in its own role: the query projection for the queries and the key projection for"
            " the keys."),
    fix="q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))  # each projection in its own role",
    trace=("queries-and-keys-swapped",),
    variant={"keys": "swap"},
    example=(
        "q = split(W_k(x)), k = split(W_q(x)): both (2, 2, 3, 4), so every shape is right\n"
        "raw scores become k_t·q_s: the reference's scores S transposed before the mask, S[t, s] -> S[s, t]\n"
        "e.g. S = [[1, 2, 3], [4, 5, 6], [7, 8, 9]] becomes [[1, 4, 7], [2, 5, 8], [3, 6, 9]], then masked:\n"
        "  token 1 weighs tokens 0, 1 with scores [2, 5] instead of [4, 5]\n"
        "unpacking a fused projection as k, q, v = qkv(x).chunk(3, dim=-1) makes the same swap"
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
        q, k, v = split(self.k(x)), split(self.q(x)), split(self.v(x))  # BUG: q and k swapped
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)

