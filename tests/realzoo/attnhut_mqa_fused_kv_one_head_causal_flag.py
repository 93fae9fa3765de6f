"""attnhut's MultiQueryAttention (Shazeer 2019): a full-width query projection `q`, ONE fused `kv` projection of
2 * head_dim features chunked [K; V] (a single key/value head shared by every query head), `proj` for the output,
no biases by default, SDPA with enable_gqa=True (the one key/value head broadcast to the query heads), and causal
only with the constructor flag causal=True (default False), or through an attn_mask argument.

Source: https://github.com/egmaminta/attnhut (the PyPI project's repository), file attnhut/mqa.py as released in
attnhut 0.5.0 on PyPI.
Licence: MIT (Copyright (c) 2026 Emmanuel G. Maminta), LICENSE in the wheel's dist-info (licenses/LICENSE; METADATA
"License-Expression: MIT").
Copied: verbatim from the PyPI wheel attnhut==0.5.0 (pip download --no-deps): the whole of attnhut/mqa.py (lines 1-66).
ADDED: this entry's constants after the imports.
Truth: correct. MultiQueryAttention(dim, num_heads, causal=True) is gqa_forward with one key/value head: W_q = q,
W_k = kv rows [0, head_dim), W_v = kv rows [head_dim, 2 * head_dim), W_o = proj (and their biases with bias=True),
exactly; no leak. With the default causal=False the future moves the past. One `bias` flag for all four
projections: with bias=True the output projection has the lesson's bias.
"""
"""Multi-query attention (Shazeer, 2019)."""

import torch.nn.functional as F
from torch import Tensor, nn

TARGET = "MultiQueryAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("multi-query", "fused-kv-one-head", "causal-only-with-flag", "sdpa-enable-gqa", "no-context-length",
             "no-out-proj-bias")
FORWARD = "x, attn_mask=None"
NOTES = ("MultiQueryAttention(dim, num_heads, causal=False, dropout=0.0, bias=False). forward(x, attn_mask=None) -> "
         "(B, n, dim); k, v = kv(x).chunk(2), one head of dim // num_heads each.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("multi-query attention (one key/value head: the grouped reference with kv_heads = 1) built with "
                    "causal=True and bias=True (the flag gives the output projection its bias) is exact: pass")


class MultiQueryAttention(nn.Module):
    """All query heads share a single key/value head.

    This is the most aggressive KV cache shrink. The query projection stays full
    width while keys and values collapse to one head, broadcast to every query.

    Args:
        dim: Model dimension. Must be divisible by num_heads.
        num_heads: Number of query heads.
        causal: If True, a position only attends to itself and the past.
        dropout: Dropout probability on the attention weights, train time only.
        bias: Whether the linear projections carry a bias term.
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        causal: bool = False,
        dropout: float = 0.0,
        bias: bool = False,
    ) -> None:
        super().__init__()
        if dim % num_heads != 0:
            raise ValueError("dim must be divisible by num_heads")
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.causal = causal
        self.dropout = dropout
        self.q = nn.Linear(dim, dim, bias=bias)
        self.kv = nn.Linear(dim, 2 * self.head_dim, bias=bias)
        self.proj = nn.Linear(dim, dim, bias=bias)

    def forward(self, x: Tensor, attn_mask: Tensor | None = None) -> Tensor:
        """Run attention over the sequence.

        Args:
            x: Input of shape (batch, seq, dim).
            attn_mask: Optional additive or boolean mask broadcastable to
                (batch, num_heads, seq, seq).

        Returns:
            Output of shape (batch, seq, dim).
        """
        b, t, _ = x.shape
        q = self.q(x).view(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(x).chunk(2, dim=-1)
        k = k.view(b, t, 1, self.head_dim).transpose(1, 2)
        v = v.view(b, t, 1, self.head_dim).transpose(1, 2)
        out = F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=attn_mask,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=self.causal and attn_mask is None,
            enable_gqa=True,
        )
        out = out.transpose(1, 2).reshape(b, t, -1)
        return self.proj(out)
