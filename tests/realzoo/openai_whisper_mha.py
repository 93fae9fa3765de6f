"""MultiHeadAttention from OpenAI Whisper (text decoder self-attention): key projection WITHOUT bias, additive mask argument, q and k each scaled by dh**-0.25, softmax in float32.

Source: https://github.com/openai/whisper/blob/9f70a352f9f8630ab3aa0d06af5cb9532bd8c21d/whisper/model.py (lines 34-38: class Linear; lines 57-100: class MultiHeadAttention); commit "Fix attention caching to make it actually work (#370)" on refs/heads/main of openai/whisper. The causal mask the decoder passes in is built in TextDecoder.__init__ (line 174: `mask = torch.empty(n_ctx, n_ctx).fill_(-np.inf).triu_(1)`, registered as a non-persistent buffer).
Licence: MIT (Copyright (c) 2022 OpenAI)
Copied: verbatim (class Linear, the nn.Linear subclass whisper uses for every projection, and class MultiHeadAttention); imports as in the original file (`from typing import Optional`, `import torch`, `import torch.nn.functional as F`, `from torch import Tensor`, `from torch import nn`; the file's other imports are not needed by these classes).
Truth: correct causal MHA when given the decoder's additive causal mask (0 on and below the diagonal, -inf above), sliced to [:n, :n] inside qkv_attention: query/value/out Linear(n_state, n_state) WITH bias, key Linear(n_state, n_state, bias=False); split view(B, n, H, -1).permute(0, 2, 1, 3) (keys permute(0, 2, 3, 1), i.e. pre-transposed); q and k are each multiplied by dh**-0.25 (product = 1/sqrt(dh)); qk + mask; softmax over the last axis computed in FLOAT32 (`qk.float()`) and cast back; merge permute(0, 2, 1, 3).flatten(start_dim=2); out projection. Without a mask it is not causal (the encoder and the cross-attention use it that way). Agreement with the float64 reference is therefore at float32 rounding (~1e-7), not 1e-10.
"""
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor
from torch import nn

TARGET = "MultiHeadAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("key-proj-no-bias", "float32-softmax", "no-divisibility-check")
FORWARD = "x, xa=None, mask=None, kv_cache=None"
NOTES = ("Constructor MultiHeadAttention(n_state, n_head): d_in = d_out = n_state, no context length, no dropout. Causal only with "
         "mask = torch.empty(n_ctx, n_ctx).fill_(-inf).triu_(1) (ADDITIVE float mask, n_ctx >= n; it is sliced to [:n, :n]). xa switches "
         "to cross-attention; kv_cache is whisper's hook dict (self.key/self.value modules as keys) for incremental decoding and is only "
         "used with xa. Param count 4*d*d + 3*d (query, value, out have bias; key has none): neither the with-bias nor the without-bias "
         "lesson formula. Softmax in float32 even for float64 inputs (tolerance ~1e-7). Projections are whisper's Linear subclass "
         "(casts weight/bias to x.dtype), parameters still named weight/bias. No divisibility check (view(..., n_head, -1) raises at "
         "forward when n_head does not divide n_state).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = 'no-divisibility-check'
EXPECTED_BECAUSE = 'correct math; no divisibility check'


class Linear(nn.Linear):
    def forward(self, x: Tensor) -> Tensor:
        return F.linear(
            x, self.weight.to(x.dtype), None if self.bias is None else self.bias.to(x.dtype)
        )


class MultiHeadAttention(nn.Module):
    def __init__(self, n_state: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.query = Linear(n_state, n_state)
        self.key = Linear(n_state, n_state, bias=False)
        self.value = Linear(n_state, n_state)
        self.out = Linear(n_state, n_state)

    def forward(
        self,
        x: Tensor,
        xa: Optional[Tensor] = None,
        mask: Optional[Tensor] = None,
        kv_cache: Optional[dict] = None,
    ):
        q = self.query(x)

        if kv_cache is None or xa is None or self.key not in kv_cache:
            # hooks, if installed (i.e. kv_cache is not None), will prepend the cached kv tensors;
            # otherwise, perform key/value projections for self- or cross-attention as usual.
            k = self.key(x if xa is None else xa)
            v = self.value(x if xa is None else xa)
        else:
            # for cross-attention, calculate keys and values once and reuse in subsequent calls.
            k = kv_cache[self.key]
            v = kv_cache[self.value]

        wv = self.qkv_attention(q, k, v, mask)
        return self.out(wv)

    def qkv_attention(self, q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor] = None):
        n_batch, n_ctx, n_state = q.shape
        scale = (n_state // self.n_head) ** -0.25
        q = q.view(*q.shape[:2], self.n_head, -1).permute(0, 2, 1, 3) * scale
        k = k.view(*k.shape[:2], self.n_head, -1).permute(0, 2, 3, 1) * scale
        v = v.view(*v.shape[:2], self.n_head, -1).permute(0, 2, 1, 3)

        qk = q @ k
        if mask is not None:
            qk = qk + mask[:n_ctx, :n_ctx]

        w = F.softmax(qk.float(), dim=-1).to(q.dtype)
        return (w @ v).permute(0, 2, 1, 3).flatten(start_dim=2)
