"""Buggy (fixes28b item 3): a KV cache handed in and returned as a dict (`cache={"k": ..., "v": ...}`, returned as
`new_cache`), the keys joined with the cached ones and then all rotated from position 0 (interleaved pairs, a `rope`
method): the cached keys went in rotated and are rotated again at every call. kv-cache fails by its numbers with no
catalogued mistake; the trace had marked nothing (it read only caches kept on the layer), and marks the rotation of
the joined keys now.

Style: Karpathy's `wei` and `tril`, a fused `qkv` split, `proj`, `forward(x, cache=None)`.
"""
import torch
import torch.nn as nn


class Attn(nn.Module):
    def __init__(self, d_model, n_head, block_size):
        super().__init__()
        self.n_head, self.hs = n_head, d_model // n_head
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        theta = 10000.0 ** (-torch.arange(0, self.hs, 2) / self.hs)
        self.register_buffer("theta", theta)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def rope(self, t, start):
        n = t.shape[2]
        ang = torch.arange(start, start + n, device=t.device)[:, None] * self.theta
        c, s = ang.cos(), ang.sin()
        a, b = t[..., 0::2], t[..., 1::2]
        return torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)

    def forward(self, x, cache=None):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, self.hs).transpose(1, 2)
        k = k.view(B, T, self.n_head, self.hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, self.hs).transpose(1, 2)
        P = 0 if cache is None else cache["k"].shape[2]
        q = self.rope(q, P)
        if cache is not None:
            k = torch.cat((cache["k"], k), dim=2)
            v = torch.cat((cache["v"], v), dim=2)
        k = self.rope(k, 0)
        new_cache = {"k": k, "v": v}
        wei = (q @ k.transpose(-2, -1)) * self.hs ** -0.5
        wei = wei.masked_fill(self.tril[P:P + T, :P + T] == 0, float("-inf")).softmax(-1)
        y = (wei @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y), new_cache


TARGET = "Attn"
EXPECT = ("kv-cache",)
DIAGNOSIS = None  # no catalogued mistake is this one: kv-cache fails, and the line is told
LINE = 41
MUST_PASS = ("reference-match", "gradient-match", "causal-leakage")
