"""Buggy (student style, weights-under-no-grad): a fused `to_qkv` projection chunked in three, heads as
`num_heads`/`dim_head`, torch.einsum for the scores and the mixing, a boolean `future` buffer; the attention weights
are computed under torch.no_grad() "to save memory", so no gradient reaches the query and key projections."""
import torch
from torch import nn


class NoGradWeightsAttention(nn.Module):
    def __init__(self, dim, num_heads, max_len):
        super().__init__()
        if dim % num_heads != 0:
            raise ValueError(f"{dim} is not divisible by {num_heads}")
        self.num_heads, self.dim_head = num_heads, dim // num_heads
        self.to_qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.to_out = nn.Linear(dim, dim)
        self.register_buffer("future", torch.ones(max_len, max_len, dtype=torch.bool).triu(1))

    def forward(self, x):
        b, n, dim = x.shape
        q, k, v = self.to_qkv(x).view(b, n, 3, self.num_heads, self.dim_head).permute(2, 0, 3, 1, 4)
        logits = torch.einsum("bhid,bhjd->bhij", q, k) / self.dim_head ** 0.5
        logits = logits.masked_fill(self.future[:n, :n], float("-inf"))
        with torch.no_grad():
            attn = logits.softmax(dim=-1)
        out = torch.einsum("bhij,bhjd->bhid", attn, v)
        return self.to_out(out.transpose(1, 2).reshape(b, n, dim))


TARGET = "NoGradWeightsAttention"
EXPECT = ("gradient-match",)  # (parameters-used passes: the values' rows of the fused to_qkv get a gradient)
DIAGNOSIS = "weights-under-no-grad"
LINE = 24
