"""Buggy: OpenAI-GPT-style attention whose causal mask is cut from its buffer by an INDEX where a slice was meant,
and whose scaling is a constructor flag that defaults to off.

Stands for a real-code pattern (the first version of an early PyTorch port of OpenAI's first GPT to crop its mask to
the sequence, fixed by a later commit; removed from tests/realzoo/ with the provenance clean-up): the layer of
conv1d_weights_scale_flag_off.py (Attention(nx, n_ctx, cfg, scale=False), (in, out) matrices applied as x @ W + b,
keys split transposed, w * b - 1e9 * (1 - b)) with the crop written keep[:, :, n, n]: one element, 1 for every
n < n_ctx, so nothing is masked, and an IndexError at n == n_ctx.  Written here from that description, in its own
names.

Mistakes: no causal mask for any sequence shorter than the context (and none at all at n == n_ctx: forward raises);
with its default scale=False the scores are not divided by sqrt(dh) either.
"""
import math

import torch
import torch.nn as nn


class InOutDense(nn.Module):
    """y = x @ W + b with W stored (in, out)."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.w = nn.Parameter(torch.empty(n_in, n_out).normal_(std=0.02))
        self.b = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        return torch.addmm(self.b, x.reshape(-1, x.size(-1)), self.w).view(*x.shape[:-1], self.w.size(1))


class GPTOneAttentionIndexedMask(nn.Module):
    def __init__(self, nx, n_ctx, cfg, scale=False):
        super().__init__()
        assert nx % cfg.n_head == 0
        self.register_buffer("keep", torch.tril(torch.ones(n_ctx, n_ctx)).view(1, 1, n_ctx, n_ctx))
        self.n_head = cfg.n_head
        self.scale = scale
        self.qkv = InOutDense(nx, 3 * nx)
        self.out = InOutDense(nx, nx)
        self.attn_drop = nn.Dropout(cfg.attn_pdrop)
        self.resid_drop = nn.Dropout(cfg.resid_pdrop)

    def _heads(self, t, as_keys=False):
        b, n, c = t.shape
        t = t.view(b, n, self.n_head, c // self.n_head)
        return t.permute(0, 2, 3, 1) if as_keys else t.permute(0, 2, 1, 3)

    def forward(self, x):
        q, k, v = self.qkv(x).split(x.size(-1), dim=2)
        q, k, v = self._heads(q), self._heads(k, as_keys=True), self._heads(v)
        w = torch.matmul(q, k)
        if self.scale:
            w = w / math.sqrt(v.size(-1))
        b = self.keep[:, :, w.size(-2), w.size(-1)]
        w = w * b - 1e9 * (1 - b)
        w = self.attn_drop(torch.softmax(w, dim=-1))
        y = torch.matmul(w, v).permute(0, 2, 1, 3).contiguous()
        y = y.view(*y.shape[:-2], -1)
        return self.resid_drop(self.out(y))


TARGET = "GPTOneAttentionIndexedMask"
EXPECT = ("output-shape",)  # IndexError at n == context_length; the leak below it is named from the numbers
DIAGNOSIS = ("no-scaling", "no-mask")
