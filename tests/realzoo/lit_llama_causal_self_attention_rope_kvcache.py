"""lit-llama CausalSelfAttention (Lightning AI, May 2023): fused c_attn, RoPE applied from a rope-cache ARGUMENT, mask ARGUMENT for SDPA, optional KV cache tuple; returns (y, kv_cache).

Source: https://github.com/Lightning-AI/lit-llama/blob/26f33a3b951cfec008ceb274132b4f6ad00a1788/lit_llama/model.py (lines 18-20: MaskCache/RoPECache/KVCache aliases; lines 23-38: class LLaMAConfig; lines 169-235: class CausalSelfAttention; lines 278-321: build_rope_cache and apply_rope); commit "Reset all caches on xla devices (#317)" on refs/heads/main. The class is unchanged in 33185d4 (next commit, comment fix) and at HEAD except for the licence header added in a55c9b1.
Licence: Apache-2.0 ("Copyright [2023] Lightning AI" in the LICENSE appendix; files later carry "# Copyright Lightning AI. Licensed under the Apache License 2.0, see LICENSE file.")
Copied: verbatim (the three type aliases, class LLaMAConfig, class CausalSelfAttention, functions build_rope_cache and apply_rope); imports as in the original (`from dataclasses import dataclass`, `from typing import List, Optional, Tuple, Union`, `import torch`, `import torch.nn as nn`, `from torch.nn import functional as F`, `from typing_extensions import Self`, with a fallback to typing.Self when typing_extensions is missing). Shim ABOVE the copied block: find_multiple (same definition as lit_llama/utils.py, imported there with `from lit_llama.utils import find_multiple`). Added BELOW: build(d, nheads, context_length) and causal_inputs(layer, T) that build the rope cache and the causal mask the way LLaMA.forward does (LLaMA.build_rope_cache / build_mask_cache, not copied).
Truth: correct causal MHA (up to RoPE) but NOT drivable as m(x): forward(x, rope, mask, max_seq_length, input_pos=None, kv_cache=None) needs the RoPE cache (T, hs/2, 2) and a boolean keep-mask (1, 1, T, T) (tril, True = attend) from the caller, and returns a TUPLE (y, kv_cache). c_attn Linear(n_embd, 3*n_embd, bias=False) split into [Q; K; V], view(B, T, H, hs), RoPE on q and k (computed in FLOAT32: x.float(), then type_as), transpose(1, 2), optional KV-cache write with index_copy at input_pos (rolling the cache when full), F.scaled_dot_product_attention(q, k, v, attn_mask=mask) (default 1/sqrt(hs) scale), merge transpose(1, 2).contiguous().view(B, T, C), c_proj Linear(n_embd, n_embd, bias=False). With an identity rope cache (cos = 1, sin = 0) it equals the lesson's layer with no biases, to float32 rounding.
"""
from dataclasses import dataclass
from typing import List, Optional, Tuple, Union

import torch
import torch.nn as nn
from torch.nn import functional as F

try:
    from typing_extensions import Self
except ImportError:  # pragma: no cover - typing_extensions not installed
    from typing import Self


# --- shim: lit_llama.utils.find_multiple (same definition) ---
def find_multiple(n: int, k: int) -> int:
    if n % k == 0:
        return n
    return n + k - (n % k)
# --- end of shim; copied block follows ---

TARGET = "build"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("needs-rope-and-mask-args", "kv-cache-tuple", "tuple-output", "no-out-proj-bias", "float32-rope")
FORWARD = "x, rope, mask, max_seq_length, input_pos=None, kv_cache=None"
NOTES = ("CANNOT BE DRIVEN AS m(x). Config-object constructor CausalSelfAttention(LLaMAConfig(block_size, vocab_size, padded_vocab_size, "
         "n_layer, n_head, n_embd)); TARGET build(d, nheads, context_length) returns it. forward needs: rope = build_rope_cache(seq_len, "
         "n_elem=hs, dtype, device)[:T] (cos/sin pairs, shape (T, hs/2, 2)), mask = torch.tril(ones(T, T, bool))[None, None] (True = "
         "attend; the layer itself has no mask and no is_causal), max_seq_length (only used with the KV cache), and optionally input_pos "
         "(LongTensor of positions) plus kv_cache = (cache_k, cache_v) zeros of shape (B, H, max_seq_length, hs) for incremental "
         "decoding (then mask = tril_mask.index_select(2, input_pos)[..., :max_seq_length]). causal_inputs(layer, T) below returns "
         "(rope, mask). Returns (y, kv_cache). No biases anywhere (param count 4*d*d). RoPE is computed in float32 even for float64 "
         "inputs. A checker can compare it with the lesson's layer only after neutralising RoPE (cos = 1, sin = 0).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'cannot_tell'
DIAGNOSIS = None
EXPECTED_BECAUSE = 'forward needs rope, mask, max_seq_length'


MaskCache = torch.Tensor
RoPECache = torch.Tensor
KVCache = Tuple[torch.Tensor, torch.Tensor]


@dataclass
class LLaMAConfig:
    block_size: int = 2048
    vocab_size: int = 32000
    padded_vocab_size: Optional[int] = None
    n_layer: int = 32
    n_head: int = 32
    n_embd: int = 4096

    def __post_init__(self):
        if self.padded_vocab_size is None:
            self.padded_vocab_size = find_multiple(self.vocab_size, 64)

    @classmethod
    def from_name(cls, name: str) -> Self:
        return cls(**llama_configs[name])


class CausalSelfAttention(nn.Module):
    def __init__(self, config: LLaMAConfig) -> None:
        super().__init__()
        assert config.n_embd % config.n_head == 0

        # key, query, value projections for all heads, but in a batch
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=False)
        # output projection
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=False)

        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.block_size = config.block_size

    def forward(
        self,
        x: torch.Tensor,
        rope: RoPECache,
        mask: MaskCache,
        max_seq_length: int,
        input_pos: Optional[torch.Tensor] = None,
        kv_cache: Optional[KVCache] = None,
    ) -> Tuple[torch.Tensor, Optional[KVCache]]:
        B, T, C = x.size()  # batch size, sequence length, embedding dimensionality (n_embd)

        # calculate query, key, values for all heads in batch and move head forward to be the batch dim
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)

        head_size = C // self.n_head
        k = k.view(B, T, self.n_head, head_size)
        q = q.view(B, T, self.n_head, head_size)
        v = v.view(B, T, self.n_head, head_size)

        q = apply_rope(q, rope)
        k = apply_rope(k, rope)

        k = k.transpose(1, 2)  # (B, nh, T, hs)
        q = q.transpose(1, 2)  # (B, nh, T, hs)
        v = v.transpose(1, 2)  # (B, nh, T, hs)

        if kv_cache is not None:
            cache_k, cache_v = kv_cache
            # check if reached token limit
            if input_pos[-1] >= max_seq_length:
                input_pos = torch.tensor(max_seq_length - 1, device=input_pos.device)
                # shift 1 position to the left
                cache_k = torch.roll(cache_k, -1, dims=2)
                cache_v = torch.roll(cache_v, -1, dims=2)
            k = cache_k.index_copy(2, input_pos, k)
            v = cache_v.index_copy(2, input_pos, v)
            kv_cache = k, v

        # causal self-attention; Self-attend: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
        #  att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        #  att = att.masked_fill(self.bias[:,:,:T,:T] == 0, float('-inf'))
        #  att = F.softmax(att, dim=-1)
        #  y = att @ v # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)

        # efficient attention using Flash Attention CUDA kernels
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0)

        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs side by side

        # output projection
        y = self.c_proj(y)

        return y, kv_cache


def build_rope_cache(
    seq_len: int, n_elem: int, dtype: torch.dtype, device: torch.device, base: int = 10000
) -> RoPECache:
    """Enhanced Transformer with Rotary Position Embedding.

    Derived from: https://github.com/labmlai/annotated_deep_learning_paper_implementations/blob/master/labml_nn/
    transformers/rope/__init__.py. MIT License:
    https://github.com/labmlai/annotated_deep_learning_paper_implementations/blob/master/license.
    """
    # $\Theta = {\theta_i = 10000^{\frac{2(i-1)}{d}}, i \in [1, 2, ..., \frac{d}{2}]}$
    theta = 1.0 / (base ** (torch.arange(0, n_elem, 2, dtype=dtype, device=device) / n_elem))

    # Create position indexes `[0, 1, ..., seq_len - 1]`
    seq_idx = torch.arange(seq_len, dtype=dtype, device=device)

    # Calculate the product of position index and $\theta_i$
    idx_theta = torch.outer(seq_idx, theta).float()

    cache = torch.stack([torch.cos(idx_theta), torch.sin(idx_theta)], dim=-1)

    # this is to mimic the behaviour of complex32, else we will get different results
    if dtype in (torch.float16, torch.bfloat16, torch.int8):
        cache = cache.half()
    return cache


def apply_rope(x: torch.Tensor, rope_cache: RoPECache) -> torch.Tensor:
    # truncate to support variable sizes
    T = x.size(1)
    rope_cache = rope_cache[:T]

    # cast because the reference does
    xshaped = x.float().reshape(*x.shape[:-1], -1, 2)
    rope_cache = rope_cache.view(1, xshaped.size(1), 1, xshaped.size(3), 2)
    x_out2 = torch.stack(
        [
            xshaped[..., 0] * rope_cache[..., 0] - xshaped[..., 1] * rope_cache[..., 1],
            xshaped[..., 1] * rope_cache[..., 0] + xshaped[..., 0] * rope_cache[..., 1],
        ],
        -1,
    )

    x_out2 = x_out2.flatten(3)
    return x_out2.type_as(x)


# --- added helpers (not part of the original): construction and the inputs LLaMA.forward would pass ---
def build(d, nheads, context_length):
    return CausalSelfAttention(LLaMAConfig(block_size=context_length, vocab_size=64, n_layer=1, n_head=nheads, n_embd=d))


def causal_inputs(layer, T, dtype=torch.float32, device=None):
    rope = build_rope_cache(seq_len=layer.block_size, n_elem=layer.n_embd // layer.n_head, dtype=dtype, device=device)
    ones = torch.ones((layer.block_size, layer.block_size), device=device, dtype=torch.bool)
    mask = torch.tril(ones).unsqueeze(0).unsqueeze(0)
    return rope[:T], mask[:, :, :T, :T]
