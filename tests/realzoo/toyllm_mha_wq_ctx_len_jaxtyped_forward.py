"""toyllm's MultiHeadAttention: the book's layer (rasbt/LLMs-from-scratch ch03, "Copyright 2023-2024 Sebastian
Raschka" in its header) renamed into its own vocabulary - Wq/Wk/Wv (keys computed first), `ctx_len`, `dropout_rate`,
`n_heads` after the dropout - with a jaxtyping/typeguard-checked forward whose input AND output are both annotated
Float[Tensor, "batch_size num_tokens emb_dim"], and the scale applied after the in-place -inf fill.

Source: https://pypi.org/project/toyllm/ (toyllm 0.1.0; the wheel's METADATA names no repository of its own), file
toyllm/model/gpt.py as released in toyllm 0.1.0 on PyPI.
Licence: Apache-2.0 (the wheel's METADATA "License: Apache-2.0", LICENSE in its dist-info with "Copyright 2024
Xiangzhuang Shen"; the file's header: "Copyright 2024 Xiangzhuang Shen", "Copyright 2023-2024 Sebastian Raschka",
"SPDX-License-Identifier: Apache-2.0").
Copied: verbatim from the PyPI wheel toyllm==0.1.0 (pip download --no-deps): lines 1-7, 9-10 and 16 of
toyllm/model/gpt.py (header, imports, the GPTInnerType alias) and lines 18-85 (MultiHeadAttention). Line 8
(`import jaxtyping`) and line 11 (`from typeguard import typechecked as typechecker`) are replaced by the shim below
(the real packages when installed); line 13 (the package's config import) and the Int/output aliases serve the classes
left out. ADDED: the shim and this entry's constants.
Truth: correct. MultiHeadAttention(d_in, d_out, ctx_len, dropout_rate=0, n_heads, qkv_bias) is mha_forward with
Wq, Wk, Wv (+ biases with qkv_bias), W_o = out_proj with its bias, exactly; no leak (softmax of (scores masked with
-inf) / sqrt(head_dim) = the lesson's order). With the real jaxtyping and typeguard the annotations bind emb_dim to
the input's width and check the output against it, so d_in != d_out raises there (the shim checks nothing).
"""
# Copyright 2024 Xiangzhuang Shen
# Copyright 2023-2024 Sebastian Raschka
# SPDX-License-Identifier: Apache-2.0


from typing import TypeAlias

# --- added for the zoo: a shim for `import jaxtyping` and typeguard's typechecked (the real ones when installed) ---
try:
    import jaxtyping
    from typeguard import typechecked as typechecker
except ImportError:  # pragma: no cover - depends on the environment
    import types

    class _Annotation:
        """Float[torch.Tensor, "b n d"] -> torch.Tensor: annotations only."""

        def __class_getitem__(cls, item):
            return item[0]

    def _jaxtyped(typechecker=None):
        return lambda f: f

    jaxtyping = types.SimpleNamespace(Float=_Annotation, Int=_Annotation, jaxtyped=_jaxtyped)
    typechecker = None
# --- end of shim; copied blocks follow ---
import torch
import torch.nn as nn

GPTInnerType: TypeAlias = jaxtyping.Float[torch.Tensor, "batch_size num_tokens emb_dim"]

TARGET = "MultiHeadAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("own-vocabulary-wq-ctx-len-n-heads-last", "keys-computed-first", "jaxtyped-forward", "scale-after-fill")
FORWARD = "x"
NOTES = ("MultiHeadAttention(d_in, d_out, ctx_len, dropout_rate, n_heads, qkv_bias=False). forward(x) -> "
         "(B, n, d_out); mask buffer triu(ones(ctx_len, ctx_len), 1), filled with -inf, then / sqrt(head_dim).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("the book's layer under other names (Wq/Wk/Wv, ctx_len, dropout_rate before n_heads), with the "
                    "divisibility check and the output bias: every check must pass")



class MultiHeadAttention(nn.Module):
    def __init__(
        self,
        d_in: int,
        d_out: int,
        ctx_len: int,
        dropout_rate: float,
        n_heads: int,
        qkv_bias: bool = False,
    ):
        super().__init__()
        assert d_out % n_heads == 0, "d_out must be divisible by num_heads"

        self.d_out = d_out
        self.n_heads = n_heads
        self.head_dim = d_out // n_heads  # Reduce the projection dim to match desired output dim

        self.Wq = nn.Linear(d_in, d_out, bias=qkv_bias)  # Query Weight
        self.Wk = nn.Linear(d_in, d_out, bias=qkv_bias)  # Key Weight
        self.Wv = nn.Linear(d_in, d_out, bias=qkv_bias)  # Value Weight
        self.out_proj = nn.Linear(d_out, d_out)  # Linear layer to combine head outputs
        self.dropout = nn.Dropout(dropout_rate)
        self.register_buffer("mask", torch.triu(torch.ones(ctx_len, ctx_len), diagonal=1))

    @jaxtyping.jaxtyped(typechecker=typechecker)
    def forward(self, x: GPTInnerType) -> GPTInnerType:
        batch_size, num_tokens, _d_in = x.shape

        # (batch_size, num_tokens, d_in) -> (batch_size, num_tokens, d_out)
        keys = self.Wk(x)
        queries = self.Wq(x)
        values = self.Wv(x)

        # We implicitly split the matrix by adding a `num_heads` dimension
        # Unroll last dim: (batch_size, num_tokens, d_out) -> (batch_size, num_tokens, num_heads, head_dim)
        keys = keys.view(batch_size, num_tokens, self.n_heads, self.head_dim)
        values = values.view(batch_size, num_tokens, self.n_heads, self.head_dim)
        queries = queries.view(batch_size, num_tokens, self.n_heads, self.head_dim)

        # Transpose: (batch_size, num_tokens, num_heads, head_dim) -> (batch_size, num_heads, num_tokens, head_dim)
        keys = keys.transpose(1, 2)
        queries = queries.transpose(1, 2)
        values = values.transpose(1, 2)

        # Compute scaled dot-product attention (aka self-attention) with a causal mask
        # attn_scores shape: (batch_size, num_heads, num_tokens, num_tokens)
        attn_scores = queries @ keys.transpose(2, 3)  # Dot product for each head

        # Original mask truncated to the number of tokens and converted to boolean
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]

        # Use the mask to fill attention scores
        attn_scores.masked_fill_(mask_bool, -torch.inf)

        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        # TODO: explain why dropout here
        attn_weights = self.dropout(attn_weights)

        # Shape: (b, num_tokens, num_heads, head_dim)
        context_vec = (attn_weights @ values).transpose(1, 2)

        # Combine heads, where self.d_out = self.num_heads * self.head_dim
        context_vec = context_vec.contiguous().view(batch_size, num_tokens, self.d_out)
        context_vec = self.out_proj(context_vec)  # optional projection

        return context_vec
