"""MultiHeadAttention from "Dive into Deep Learning" (d2l.ai, PyTorch tab): transpose_qkv / transpose_output helpers, masked_softmax with valid_lens.

Source: https://github.com/d2l-ai/d2l-en/blob/04488e8cf7d1b2b6812136e3172d8db57cf4406c/chapter_attention-mechanisms-and-transformers/multihead-attention.md (the `%%tab pytorch` cells: class MultiHeadAttention and the two `@d2l.add_to_class(MultiHeadAttention)` methods transpose_qkv, transpose_output) and https://github.com/d2l-ai/d2l-en/blob/003f46d8d6bbe6311a235ca107b93f1b4e897953/chapter_attention-mechanisms-and-transformers/attention-scoring-functions.md (the `%%tab pytorch` cells: function masked_softmax and class DotProductAttention). These are the cells marked `#@save` that d2l exports into d2l/torch.py.
Licence: MIT-0 for the book's sample code (LICENSE-SAMPLECODE: "Copyright 2019 Amazon.com, Inc. or its affiliates. All Rights Reserved." followed by the MIT No Attribution grant); the book text is CC BY-SA 4.0 and is not copied.
Copied: verbatim (the five code cells named above, in dependency order); added ABOVE them: `import math`, `import torch`, `from torch import nn` (as in the chapter's import cell), `import types` (for the shim) and a shim namespace `d2l` standing in for `from d2l import torch as d2l`: `d2l.Module` = nn.Module (the real d2l.Module is an nn.Module subclass whose extra features - hyper-parameter saving, plotting, training loops - are not used here), `d2l.add_to_class` (same definition as in d2l: setattr(Class, obj.__name__, obj)), and `d2l.DotProductAttention` bound to the copied class after its definition. Both commits are on refs/heads/master; the copied cells were checked character by character against the git history and are unchanged at the mirror's HEAD (23d7a5a).
Truth: correct causal MHA when causality is supplied through valid_lens the way d2l's TransformerDecoder does in training (valid_lens[b, i] = i + 1, a 2-D (B, n) tensor): four LazyLinear(num_hiddens) W_q/W_k/W_v/W_o, split with reshape(B, n, H, -1).permute(0, 2, 1, 3).reshape(B*H, n, dh) (heads folded into the batch), bmm(q, k^T) / sqrt(dh), masked_softmax that overwrites masked scores with -1e6 (FINITE fill; exp underflows to exactly 0 in float32/float64 for ordinary scores) and softmax(-1), dropout, bmm with values, merge reshape(-1, H, n, dh).permute(0, 2, 1, 3).reshape(B, n, -1), W_o. W_o has a bias only when bias=True (default bias=False, so by default the output projection has NO bias).
"""
import math
import types

import torch
from torch import nn


# --- shim: the `d2l` namespace used by the copied cells (from d2l import torch as d2l) ---
def _add_to_class(Class):
    """Register functions as methods in created class (same as d2l.add_to_class)."""
    def wrapper(obj):
        setattr(Class, obj.__name__, obj)
    return wrapper


d2l = types.SimpleNamespace(Module=nn.Module, add_to_class=_add_to_class)
# --- end of shim; copied block follows ---

TARGET = "MultiHeadAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("no-out-proj-bias", "no-divisibility-check", "lazy-linear")
FORWARD = "queries, keys, values, valid_lens"
NOTES = ("Constructor MultiHeadAttention(num_hiddens, num_heads, dropout, bias=False): num_hiddens = d_out, dropout is REQUIRED "
         "(positional), bias applies to all four projections (default False: no Q/K/V bias and no out-proj bias). Projections are "
         "nn.LazyLinear: d_in is inferred at the FIRST forward, so parameters have no shape (and parameter counting fails) until one "
         "forward has run. forward(queries, keys, values, valid_lens) - valid_lens is REQUIRED positionally; None = no masking (not "
         "causal). Causal only with valid_lens = torch.arange(1, n + 1).repeat(B, 1) (2-D, per query row), as d2l's TransformerDecoder "
         "builds dec_valid_lens during training. masked_softmax writes -1e6 into the masked scores in place (on a reshaped copy). "
         "Divisibility is not checked at construction (reshape(..., num_heads, -1) silently works only when num_heads divides num_hiddens, "
         "otherwise forward raises). The attention weights are stored in self.attention.attention_weights.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'cannot_tell'
DIAGNOSIS = None
EXPECTED_BECAUSE = 'forward needs valid_lens, which mha-check cannot supply'


def masked_softmax(X, valid_lens):  #@save
    """Perform softmax operation by masking elements on the last axis."""
    # X: 3D tensor, valid_lens: 1D or 2D tensor 
    def _sequence_mask(X, valid_len, value=0):
        maxlen = X.size(1)
        mask = torch.arange((maxlen), dtype=torch.float32,
                            device=X.device)[None, :] < valid_len[:, None]
        X[~mask] = value
        return X
    
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    else:
        shape = X.shape
        if valid_lens.dim() == 1:
            valid_lens = torch.repeat_interleave(valid_lens, shape[1])
        else:
            valid_lens = valid_lens.reshape(-1)
        # On the last axis, replace masked elements with a very large negative
        # value, whose exponentiation outputs 0
        X = _sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
        return nn.functional.softmax(X.reshape(shape), dim=-1)


class DotProductAttention(nn.Module):  #@save
    """Scaled dot product attention."""
    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    # Shape of queries: (batch_size, no. of queries, d)
    # Shape of keys: (batch_size, no. of key-value pairs, d)
    # Shape of values: (batch_size, no. of key-value pairs, value dimension)
    # Shape of valid_lens: (batch_size,) or (batch_size, no. of queries)
    def forward(self, queries, keys, values, valid_lens=None):
        d = queries.shape[-1]
        # Swap the last two dimensions of keys with keys.transpose(1, 2)
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)


d2l.DotProductAttention = DotProductAttention  # shim (see docstring): what `d2l.DotProductAttention` resolves to


class MultiHeadAttention(d2l.Module):  #@save
    """Multi-head attention."""
    def __init__(self, num_hiddens, num_heads, dropout, bias=False, **kwargs):
        super().__init__()
        self.num_heads = num_heads
        self.attention = d2l.DotProductAttention(dropout)
        self.W_q = nn.LazyLinear(num_hiddens, bias=bias)
        self.W_k = nn.LazyLinear(num_hiddens, bias=bias)
        self.W_v = nn.LazyLinear(num_hiddens, bias=bias)
        self.W_o = nn.LazyLinear(num_hiddens, bias=bias)

    def forward(self, queries, keys, values, valid_lens):
        # Shape of queries, keys, or values:
        # (batch_size, no. of queries or key-value pairs, num_hiddens)
        # Shape of valid_lens: (batch_size,) or (batch_size, no. of queries)
        # After transposing, shape of output queries, keys, or values:
        # (batch_size * num_heads, no. of queries or key-value pairs,
        # num_hiddens / num_heads)
        queries = self.transpose_qkv(self.W_q(queries))
        keys = self.transpose_qkv(self.W_k(keys))
        values = self.transpose_qkv(self.W_v(values))

        if valid_lens is not None:
            # On axis 0, copy the first item (scalar or vector) for num_heads
            # times, then copy the next item, and so on
            valid_lens = torch.repeat_interleave(
                valid_lens, repeats=self.num_heads, dim=0)

        # Shape of output: (batch_size * num_heads, no. of queries,
        # num_hiddens / num_heads)
        output = self.attention(queries, keys, values, valid_lens)
        # Shape of output_concat: (batch_size, no. of queries, num_hiddens)
        output_concat = self.transpose_output(output)
        return self.W_o(output_concat)


@d2l.add_to_class(MultiHeadAttention)  #@save
def transpose_qkv(self, X):
    """Transposition for parallel computation of multiple attention heads."""
    # Shape of input X: (batch_size, no. of queries or key-value pairs,
    # num_hiddens). Shape of output X: (batch_size, no. of queries or
    # key-value pairs, num_heads, num_hiddens / num_heads)
    X = X.reshape(X.shape[0], X.shape[1], self.num_heads, -1)
    # Shape of output X: (batch_size, num_heads, no. of queries or key-value
    # pairs, num_hiddens / num_heads)
    X = X.permute(0, 2, 1, 3)
    # Shape of output: (batch_size * num_heads, no. of queries or key-value
    # pairs, num_hiddens / num_heads)
    return X.reshape(-1, X.shape[2], X.shape[3])

@d2l.add_to_class(MultiHeadAttention)  #@save
def transpose_output(self, X):
    """Reverse the operation of transpose_qkv."""
    X = X.reshape(-1, self.num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)
