"""gpt-fast's Attention (Llama/Mistral style: one fused wqkv for grouped-query attention, rotary embedding on pairs, SDPA with a boolean mask), driven by an added wrapper that passes what gpt-fast's Transformer passes.

Source: https://github.com/pytorch-labs/gpt-fast/blob/03e10bc23f31487a0353f22da7f506f0841ed720/model.py (function find_multiple, dataclass ModelArgs, class Attention, functions precompute_freqs_cis and apply_rotary_emb). In the model, Transformer.setup_caches builds freqs_cis = precompute_freqs_cis(block_size, dim // n_head, rope_base, dtype) and causal_mask = tril(ones(max_seq_length, max_seq_length), bool), and Transformer.forward passes freqs_cis[input_pos] and causal_mask[None, None, input_pos] to every layer.
Licence: BSD-3-Clause ("Copyright 2023 Meta", LICENSE at the repository root; the file header says "Copyright (c) Meta Platforms, Inc. and affiliates. All rights reserved. This source code is licensed under the license found in the LICENSE file in the root directory of this source tree.").
Copied: verbatim (find_multiple and ModelArgs without its from_name classmethod and the transformer_configs table that follows it; class Attention; precompute_freqs_cis and apply_rotary_emb), character for character with the index's copy at the cited commit (read_file) and with `git show 03e10bc:model.py` in the fetched history (mirror HEAD 32971d3, 2024-09-15; later commits add rope_scaling to ModelArgs and precompute_freqs_cis, Attention is unchanged). Imports reduced to the ones the copied code uses. KVCache is not copied: Attention.kv_cache stays None (gpt-fast's setup_caches would install one). ADDED below the copied block: class _WithRopeAndMask and the factory make_gqa_rope(d, heads, n_kv_heads, context_length) (TARGET), which pass freqs_cis[:n] (precompute_freqs_cis(..., dtype=torch.float32)) and the causal mask causal_mask[None, None, :n, :n] as Transformer.forward does without a KV cache; make_gqa_identity_rope passes cos = 1, sin = 0 instead (for _truth.py).
Truth: correct causal grouped-query attention with rotary position embedding: wqkv Linear(dim, (H + 2 KV) dh, bias=False) split [dim, KV dh, KV dh] = [Q; K; V], view(B, n, H|KV, dh), RoPE on q and k turning the pairs (x0, x1), (x2, x3), ... by t * base**(-2i/dh) (computed in float32: x.float(), then type_as(x)), transpose(1, 2), repeat_interleave(H // KV, dim=1) (query head h uses key/value head h // (H // KV)), SDPA with a boolean keep-mask (scale 1/sqrt(dh)), transpose(1, 2).contiguous().view(B, n, dim), wo Linear(dim, dim, bias=False). dim % n_head is asserted; odd head widths are refused by the rotary reshape; H % KV is not asserted (repeat_interleave then fails).
"""
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn
from torch import Tensor
from torch.nn import functional as F

TARGET = "make_gqa_rope"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("needs-rope-and-mask-args", "fused-gqa-qkv", "float32-rope", "no-out-proj-bias")
FORWARD = "x"
NOTES = ("Attention(config: ModelArgs) reads dim, n_head, n_local_heads (key/value heads), head_dim (= dim // n_head); "
         "forward(x, freqs_cis, mask, input_pos=None). TARGET is the added factory make_gqa_rope(d, heads, n_kv_heads, "
         "context_length): a wrapper whose forward(x) passes real RoPE tables and the tril keep-mask. Needs heads % "
         "n_kv_heads == 0 and an even head width.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ('correct grouped-query attention with interleaved-pair RoPE (n_kv_heads bound per configuration); '
                    'divisibility asserted; out-proj-bias does not apply to the grouped form')


def find_multiple(n: int, k: int) -> int:
    if n % k == 0:
        return n
    return n + k - (n % k)

@dataclass
class ModelArgs:
    block_size: int = 2048
    vocab_size: int = 32000
    n_layer: int = 32
    n_head: int = 32
    dim: int = 4096
    intermediate_size: int = None
    n_local_heads: int = -1
    head_dim: int = 64
    rope_base: float = 10000
    norm_eps: float = 1e-5

    def __post_init__(self):
        if self.n_local_heads == -1:
            self.n_local_heads = self.n_head
        if self.intermediate_size is None:
            hidden_dim = 4 * self.dim
            n_hidden = int(2 * hidden_dim / 3)
            self.intermediate_size = find_multiple(n_hidden, 256)
        self.head_dim = self.dim // self.n_head


class Attention(nn.Module):
    def __init__(self, config: ModelArgs):
        super().__init__()
        assert config.dim % config.n_head == 0

        total_head_dim = (config.n_head + 2 * config.n_local_heads) * config.head_dim
        # key, query, value projections for all heads, but in a batch
        self.wqkv = nn.Linear(config.dim, total_head_dim, bias=False)
        self.wo = nn.Linear(config.dim, config.dim, bias=False)
        self.kv_cache = None

        self.n_head = config.n_head
        self.head_dim = config.head_dim
        self.n_local_heads = config.n_local_heads
        self.dim = config.dim
        self._register_load_state_dict_pre_hook(self.load_hook)

    def load_hook(self, state_dict, prefix, *args):
        if prefix + "wq.weight" in state_dict:
            wq = state_dict.pop(prefix + "wq.weight")
            wk = state_dict.pop(prefix + "wk.weight")
            wv = state_dict.pop(prefix + "wv.weight")
            state_dict[prefix + "wqkv.weight"] = torch.cat([wq, wk, wv])

    def forward(self, x: Tensor, freqs_cis: Tensor, mask: Tensor, input_pos: Optional[Tensor] = None) -> Tensor:
        bsz, seqlen, _ = x.shape

        kv_size = self.n_local_heads * self.head_dim
        q, k, v = self.wqkv(x).split([self.dim, kv_size, kv_size], dim=-1)

        q = q.view(bsz, seqlen, self.n_head, self.head_dim)
        k = k.view(bsz, seqlen, self.n_local_heads, self.head_dim)
        v = v.view(bsz, seqlen, self.n_local_heads, self.head_dim)

        q = apply_rotary_emb(q, freqs_cis)
        k = apply_rotary_emb(k, freqs_cis)

        q, k, v = map(lambda x: x.transpose(1, 2), (q, k, v))

        if self.kv_cache is not None:
            k, v = self.kv_cache.update(input_pos, k, v)

        k = k.repeat_interleave(self.n_head // self.n_local_heads, dim=1)
        v = v.repeat_interleave(self.n_head // self.n_local_heads, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0)

        y = y.transpose(1, 2).contiguous().view(bsz, seqlen, self.dim)

        y = self.wo(y)
        return y


def precompute_freqs_cis(
    seq_len: int, n_elem: int, base: int = 10000,
    dtype: torch.dtype = torch.bfloat16
) -> Tensor:
    freqs = 1.0 / (base ** (torch.arange(0, n_elem, 2)[: (n_elem // 2)].float() / n_elem))
    t = torch.arange(seq_len, device=freqs.device)
    freqs = torch.outer(t, freqs)
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
    cache = torch.stack([freqs_cis.real, freqs_cis.imag], dim=-1)
    return cache.to(dtype=dtype)


def apply_rotary_emb(x: Tensor, freqs_cis: Tensor) -> Tensor:
    xshaped = x.float().reshape(*x.shape[:-1], -1, 2)
    freqs_cis = freqs_cis.view(1, xshaped.size(1), 1, xshaped.size(3), 2)
    x_out2 = torch.stack(
        [
            xshaped[..., 0] * freqs_cis[..., 0] - xshaped[..., 1] * freqs_cis[..., 1],
            xshaped[..., 1] * freqs_cis[..., 0] + xshaped[..., 0] * freqs_cis[..., 1],
        ],
        -1,
    )

    x_out2 = x_out2.flatten(3)
    return x_out2.type_as(x)


# ---------------------------------------------------------------------------------------------- added for the zoo
class _WithRopeAndMask(nn.Module):
    """What gpt-fast's Transformer passes to each Attention (setup_caches / forward), without a KV cache."""

    def __init__(self, attention, config, identity=False):
        super().__init__()
        self.attention = attention
        freqs_cis = precompute_freqs_cis(config.block_size, config.dim // config.n_head, config.rope_base,
                                         dtype=torch.float32)
        if identity:  # cos = 1, sin = 0: the rotation by angle 0
            freqs_cis = torch.stack([torch.ones_like(freqs_cis[..., 0]), torch.zeros_like(freqs_cis[..., 1])], -1)
        self.register_buffer("freqs_cis", freqs_cis, persistent=False)
        self.register_buffer("causal_mask", torch.tril(torch.ones(config.block_size, config.block_size,
                                                                  dtype=torch.bool)), persistent=False)

    def forward(self, x):
        n = x.shape[1]
        return self.attention(x, self.freqs_cis[:n], self.causal_mask[None, None, :n, :n])


def make_gqa_rope(d, heads, n_kv_heads, context_length):
    config = ModelArgs(block_size=context_length, n_head=heads, dim=d, n_local_heads=n_kv_heads)
    return _WithRopeAndMask(Attention(config), config)


def make_gqa_identity_rope(d, heads, n_kv_heads, context_length):
    config = ModelArgs(block_size=context_length, n_head=heads, dim=d, n_local_heads=n_kv_heads)
    return _WithRopeAndMask(Attention(config), config, identity=True)
