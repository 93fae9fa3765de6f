"""transformer-components-michaelkosmider 0.1.1's MultiHeadAttention (the components of Michael Kosmider's
Transformer tutorial, published on PyPI): MultiHeadAttention(num_heads, hidden_size, key_size, value_size) - heads
FIRST, key_size and value_size the width of ONE head, the projections RAW nn.Parameters in the (in, out) layout
(`X_Q @ self.W_Q`), no biases anywhere, xavier_normal_ on every parameter; forward(X_Q, X_KV, tgt_mask=None,
key_padding_mask=None, kv_cache=None): the queries' and the keys' inputs apart, a bool tgt_mask (T, T) True = do not
attend (get_causal_mask), a PADDING key_padding_mask (N, S) True = do not attend BESIDE it, both filled with -inf IN
PLACE on the raw scores, the scale 1 / sqrt(key_size) applied AFTER the masks (`softmax(E / sqrt(d_k))`), heads
sliced by unflatten + transpose (slice_vertically); a caller's dict kv_cache, {"mode": "self_attn", "K", "V"
preallocated, "cache_len"} filled one token at a time (only the first new token of a call is cached) or
{"mode": "cross_attn"}.

Source: https://github.com/michaelkosmider/transformer_tutorial_code (the repository the wheel's METADATA
description links), files transformer_components_michaelkosmider/multi_head_attention.py and functions.py as
released in transformer-components-michaelkosmider 0.1.1 on PyPI; AttentionSubLayer (sublayers.py) builds it as
MultiHeadAttention(num_heads, hidden_size, key_size, value_size) and calls it as multihead_attention(X_Q, X_KV,
tgt_mask=tgt_mask, key_padding_mask=key_padding_mask, kv_cache=kv_cache), X_KV = X_Q for self-attention; beam
search (transformer_encoder_decoder.py) feeds the decoder one token per call with the "self_attn" cache.
Licence: MIT (METADATA "License-Expression: MIT"; licenses/LICENSE in the wheel's dist-info, the MIT text with the
packaging tutorial's template line "Copyright (c) 2018 The Python Packaging Authority" left in; author Michael
Kosmider).
Copied: verbatim from the PyPI wheel transformer-components-michaelkosmider==0.1.1 (pip download --no-deps), every
copied line compared by program with the unpacked wheel: multi_head_attention.py lines 1-2 (imports) and 6-77
(class MultiHeadAttention, whole); functions.py lines 25-36 (compute_attention_matrix), 57-58 (slice_vertically),
80-81 (unslice_vertically) and 91-92 (get_causal_mask).  Left out: multi_head_attention.py line 3 (the relative
import of those functions, now defined here) and functions.py's descriptions between the functions.
ADDED: this docstring, the factory `build` (MultiHeadAttention(num_heads, d_model, d_model // num_heads,
d_model // num_heads), the head widths as the tutorial's models choose them) and the entry's constants.
Truth: correct (in _truth.py): build(12, 3) called as m(x, x, tgt_mask=get_causal_mask(n)) = mha_forward with W_q =
W_Q.T, W_k = W_K.T, W_v = W_V.T, W_o = W_O.T, no biases, and the per-head loop to 1e-15, no leak; tgt_mask None
leaks; key_padding_mask hiding key 0 = the layer on steps 1..; one token per call through a "self_attn" cache = the
whole forward's rows.
"""
import torch
import torch.nn as nn


def compute_attention_matrix(Q, K, tgt_mask=None, key_padding_mask=None):

    E = Q @ K.transpose(-1, -2)

    if tgt_mask is not None:
        E.masked_fill_(tgt_mask, -torch.inf)

    if key_padding_mask is not None:
        E.masked_fill_(key_padding_mask[:, None, None, :], -torch.inf)

    A = torch.softmax(E / (Q.shape[-1] ** 0.5), -1)
    return A


def slice_vertically(X, slice_size):
    return X.unflatten(dim=-1, sizes=(-1, slice_size)).transpose(-2, -3)


def unslice_vertically(X):
    return X.transpose(-2, -3).flatten(-2, -1)


def get_causal_mask(T, device):
    return torch.triu(torch.ones((T, T), device=device, dtype=torch.bool), diagonal=1)


class MultiHeadAttention(nn.Module):
    def __init__(self, num_heads, hidden_size, key_size, value_size):
        super().__init__()

        self.key_size = key_size
        self.value_size = value_size

        self.W_Q = nn.Parameter(torch.empty(hidden_size, key_size * num_heads))
        self.W_K = nn.Parameter(torch.empty(hidden_size, key_size * num_heads))
        self.W_V = nn.Parameter(torch.empty(hidden_size, value_size * num_heads))
        self.W_O = nn.Parameter(torch.empty(value_size * num_heads, hidden_size))

        for param in self.parameters():
            nn.init.xavier_normal_(param)

    def forward(
        self,
        X_Q,
        X_KV,
        tgt_mask=None,
        key_padding_mask=None,
        kv_cache=None,
    ):

        if kv_cache is None:
            Q = X_Q @ self.W_Q
            K = X_KV @ self.W_K
            V = X_KV @ self.W_V

        elif kv_cache["mode"] == "cross_attn":
            Q = X_Q @ self.W_Q

            if (
                "K" not in kv_cache
            ):  # Could also check for V, doesn't matter. Happens once, the first time the src KVs are computed.
                kv_cache["K"] = X_KV @ self.W_K
                kv_cache["V"] = X_KV @ self.W_V

            K = kv_cache["K"]
            V = kv_cache["V"]

        elif kv_cache["mode"] == "self_attn":

            # Compute new Query, Key, and Value (for just one token).
            Q = X_Q @ self.W_Q
            K_new = X_KV @ self.W_K
            V_new = X_KV @ self.W_V

            # Retrieve the cache.
            K = kv_cache["K"]
            V = kv_cache["V"]

            # Update the cache with new token Key and Value.
            K[:, kv_cache["cache_len"], :] = K_new[:, 0, :]
            V[:, kv_cache["cache_len"], :] = V_new[:, 0, :]
            kv_cache["cache_len"] += 1

            # Select the valid portion of the cache.
            K = K[:, : kv_cache["cache_len"], :]
            V = V[:, : kv_cache["cache_len"], :]

        Q = slice_vertically(Q, self.key_size)
        K = slice_vertically(K, self.key_size)
        V = slice_vertically(V, self.value_size)

        A = compute_attention_matrix(Q, K, tgt_mask, key_padding_mask)

        Y_prime = A @ V

        Y = unslice_vertically(Y_prime) @ self.W_O

        return Y


# --- added for the zoo: the head widths as the tutorial's models choose them ---
def build(d_model, num_heads, context_length):
    return MultiHeadAttention(num_heads, d_model, d_model // num_heads, d_model // num_heads)
# --- end of the added factory ---


# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "build"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("heads-first", "head-widths-in-constructor", "raw-parameters-in-out-layout", "no-biases",
             "queries-and-keys-inputs-apart", "padding-mask-beside-causal", "scale-after-mask", "dict-kv-cache",
             "no-context-length")
FORWARD = "X_Q, X_KV, tgt_mask=None, key_padding_mask=None, kv_cache=None"
NOTES = ("MultiHeadAttention(num_heads, hidden_size, key_size, value_size): causal only through tgt_mask (True = "
         "masked); key_padding_mask (N, S) beside it.")
OUTCOME = 'rules'
DIAGNOSIS = 'no-divisibility-check'
EXPECTED_BECAUSE = ("the lesson's math with raw (in, out) parameters, called as forward(x, x, tgt_mask=causal mask); "
                    "no biases (the output projection's is a rule) and nothing refuses a width the heads do not "
                    "divide (the factory's d_model // num_heads; the class takes the head widths themselves).  Until "
                    "Realzoo24's fix the second input X_KV was not given x: CANNOT TELL, 'forward needs X_KV'")
