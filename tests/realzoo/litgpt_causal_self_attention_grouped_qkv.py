"""litgpt's (lit-gpt, January 2024) CausalSelfAttention(config): ONE fused `attn` projection laid out per query GROUP - for each key/value group, its q_per_kv query heads, then its key head, then its value head - viewed as (B, T, n_query_groups, q_per_kv + 2, head_size), split (q_per_kv, 1, 1) and expanded for MHA, GQA and MQA alike; rotate-half RoPE on the first rope_n_elem features (cos, sin passed in); SDPA with is_causal=True when no mask is given; a config dataclass.

Source: https://github.com/lightning-AI/litgpt (the homepage the wheel's METADATA names), files litgpt/model.py (class CausalSelfAttention, functions build_rope_cache, apply_rope, class KVCache, function build_mask_cache), litgpt/config.py (the Config dataclass) and litgpt/utils.py (find_multiple) as released in litgpt 0.2.0 on PyPI. GPT.forward passes cos = self.cos[:T], sin = self.sin[:T] (from build_rope_cache(block_size, rope_n_elem, ...)) and mask=None when no KV cache is set.
Licence: Apache-2.0 (the wheel's METADATA "License: Apache License" and the Apache License 2.0 text in its dist-info LICENSE; each file's first line: "Copyright Lightning AI. Licensed under the Apache License 2.0, see LICENSE file.").
Copied: verbatim from the PyPI wheel litgpt==0.2.0 (pip download --no-deps), cut by line range: model.py's line 1 (copyright) and lines 9-14 (imports; line 16, `from litgpt.config import Config`, is left out: the class is copied here), utils.py's lines 29-33 (find_multiple), config.py's lines 16-92 (the Config dataclass up to, not including, its first @classmethod: from_name, from_file, from_checkpoint and the mlp_class/norm_class properties need the file's model tables and are left out; so are config.py's other imports), model.py's lines 173-268 (CausalSelfAttention) and 334-392 (build_rope_cache to build_mask_cache). ADDED: config.py's lines 4 and 6 (`from dataclasses import dataclass, field`, `from typing import Any, Literal, Optional, Type, Union`, the imports the dataclass needs), this entry's constants, and below the copied block a wrapper that passes cos, sin and mask=None as GPT.forward does, with the factory make_gqa_rope(d, heads, n_query_groups, context_length) (TARGET), which sets rotary_percentage=1.0 (the Llama-family configs' value; the default 0.25 gives a single rotary feature for heads of width 4, and build_rope_cache then returns tables twice that wide, which do not broadcast).
Truth: correct causal grouped-query attention with rotate-half RoPE: for group g, the fused rows [g * (q_per_kv + 2) * hs, ...) hold the q_per_kv query heads of that group, then its key head, then its value head; query head h = g * q_per_kv + i uses key/value head g (the lesson's grouping, h // q_per_kv); RoPE on q and k (float32 tables, rotate-half); SDPA is_causal=True with scale 1/sqrt(head_size); merge reshape(B, T, n_embd) after transpose(1, 2); proj Linear(n_embd, n_embd) with bias. bias=True by default on both projections. Divisibility asserted in Config.__post_init__.
"""
# Copyright Lightning AI. Licensed under the Apache License 2.0, see LICENSE file.

import math
from typing import Any, Optional, Tuple

import torch
import torch.nn as nn
from typing_extensions import Self
from dataclasses import dataclass, field  # added: config.py's imports the Config dataclass needs
from typing import Any, Literal, Optional, Type, Union  # added: config.py's (the same line)

TARGET = "make_gqa_rope"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("config-object", "qkv-per-query-group-interleaved", "needs-rope-args", "float32-rope", "partial-rotary-by-default")
FORWARD = "x (via the factory)"
NOTES = ("CausalSelfAttention(config): config.n_embd, n_head, n_query_groups, head_size, rope_n_elem, bias. forward(x, cos, "
         "sin, mask=None, input_pos=None). One fused attn.weight ((n_head + 2 * n_query_groups) * head_size, n_embd) laid "
         "out per group [q_1 .. q_g; k; v]; proj Linear(n_embd, n_embd). make_gqa_rope(d, heads, n_query_groups, "
         "context_length) passes cos/sin like GPT.forward, rotary_percentage=1.0.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = 'correct causal GQA with rotate-half RoPE; the fused projection is laid out per query group'


# ------------------------------------------------------------------------------- copied from litgpt/utils.py
def find_multiple(n: int, k: int) -> int:
    assert k > 0
    if n % k == 0:
        return n
    return n + k - (n % k)


# ------------------------------------------------------------------------------ copied from litgpt/config.py
@dataclass
class Config:
    name: str = ""
    hf_config: dict = field(default_factory=dict)
    scale_embeddings: bool = False
    block_size: int = 4096
    vocab_size: int = 50254
    padding_multiple: int = 512
    padded_vocab_size: Optional[int] = None
    n_layer: int = 16
    n_head: int = 32
    head_size: Optional[int] = None
    n_embd: int = 4096
    rotary_percentage: float = 0.25
    parallel_residual: bool = True
    bias: bool = True
    lm_head_bias: bool = False
    # to use multi-head attention (MHA), set this to `n_head` (default)
    # to use multi-query attention (MQA), set this to 1
    # to use grouped-query attention (GQA), set this to a value in between
    # Example with `n_head=4`
    # ┌───┐┌───┐┌───┐┌───┐     ┌───┐    ┌───┐             ┌───┐
    # │ v ││ v ││ v ││ v │     │ v │    │ v │             │ v │
    # └───┘└───┘└───┘└───┘     └───┘    └───┘             └───┘
    #   │    │    │    │         │        │                 │
    # ┌───┐┌───┐┌───┐┌───┐     ┌───┐    ┌───┐             ┌───┐
    # │ k ││ k ││ k ││ k │     │ k │    │ k │             │ k │
    # └───┘└───┘└───┘└───┘     └───┘    └───┘             └───┘
    #   │    │    │    │      ┌──┴──┐  ┌──┴──┐      ┌────┬──┴─┬────┐
    # ┌───┐┌───┐┌───┐┌───┐  ┌───┐┌───┐┌───┐┌───┐  ┌───┐┌───┐┌───┐┌───┐
    # │ q ││ q ││ q ││ q │  │ q ││ q ││ q ││ q │  │ q ││ q ││ q ││ q │
    # └───┘└───┘└───┘└───┘  └───┘└───┘└───┘└───┘  └───┘└───┘└───┘└───┘
    # ◀──────────────────▶  ◀──────────────────▶  ◀──────────────────▶
    #         MHA                    GQA                   MQA
    #   n_query_groups=4       n_query_groups=2      n_query_groups=1
    #
    # credit https://arxiv.org/pdf/2305.13245.pdf
    n_query_groups: Optional[int] = None
    shared_attention_norm: bool = False
    norm_class_name: Literal["LayerNorm", "RMSNorm"] = "LayerNorm"
    norm_eps: float = 1e-5
    mlp_class_name: Literal["GptNeoxMLP", "LLaMAMLP", "GemmaMLP", "LLaMAMoE"] = "GptNeoxMLP"
    gelu_approximate: str = "none"
    intermediate_size: Optional[int] = None
    rope_condense_ratio: int = 1
    rope_base: int = 10000
    n_expert: int = 0
    n_expert_per_token: int = 0

    def __post_init__(self):
        if not self.name:
            self.name = self.hf_config.get("name", self.name)

        if self.head_size is None:
            assert self.n_embd % self.n_head == 0
            self.head_size = self.n_embd // self.n_head

        # vocab size should be a power of 2 to be optimal on hardware. compute the closest value
        if self.padded_vocab_size is None:
            self.padded_vocab_size = find_multiple(self.vocab_size, self.padding_multiple)
        else:
            # vocab size shouldn't be larger than padded vocab size
            self.vocab_size = min(self.vocab_size, self.padded_vocab_size)

        # compute the number of query groups
        if self.n_query_groups is not None:
            assert self.n_head % self.n_query_groups == 0
        else:
            self.n_query_groups = self.n_head

        # compute the intermediate size for MLP if not set
        if self.intermediate_size is None:
            if self.mlp_class_name == "LLaMAMLP":
                raise ValueError(f"The config {self.name!r}, needs to set the `intermediate_size`")
            self.intermediate_size = 4 * self.n_embd

        self.rope_n_elem = int(self.rotary_percentage * self.head_size)


# ------------------------------------------------------------------------------- copied from litgpt/model.py
class CausalSelfAttention(nn.Module):
    def __init__(self, config: Config) -> None:
        super().__init__()
        shape = (config.n_head + 2 * config.n_query_groups) * config.head_size
        # key, query, value projections for all heads, but in a batch
        self.attn = nn.Linear(config.n_embd, shape, bias=config.bias)
        # output projection
        # if `head_size` is explicitly specified in the config, `n_emd` might not be equal to `head_size * n_head`
        self.proj = nn.Linear(config.head_size * config.n_head, config.n_embd, bias=config.bias)
        # disabled by default
        self.kv_cache: Optional[KVCache] = None

        self.config = config

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        mask: Optional[torch.Tensor] = None,
        input_pos: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        B, T, C = x.size()  # batch size, sequence length, embedding dimensionality (n_embd)

        qkv = self.attn(x)

        # assemble into a number of query groups to support MHA, MQA and GQA together (see `config.n_query_groups`)
        q_per_kv = self.config.n_head // self.config.n_query_groups
        total_qkv = q_per_kv + 2  # each group has 1+ queries, 1 key, and 1 value
        qkv = qkv.view(B, T, self.config.n_query_groups, total_qkv, self.config.head_size)
        qkv = qkv.permute(0, 2, 3, 1, 4)  # (B, n_query_groups, total_qkv, T, hs)

        # split batched computation into three
        q, k, v = qkv.split((q_per_kv, 1, 1), dim=2)

        # maybe repeat k and v if for the non multi-head attention cases
        # training: flash attention requires it
        # inference: multi-query would require a full kv cache so avoid it to limit its memory usage
        if self.config.n_query_groups != self.config.n_head and (input_pos is None or self.config.n_query_groups != 1):
            k = k.expand(B, self.config.n_query_groups, q_per_kv, T, self.config.head_size)
            v = v.expand(B, self.config.n_query_groups, q_per_kv, T, self.config.head_size)

        q = q.reshape(B, -1, T, self.config.head_size)  # (B, nh_q, T, hs)
        k = k.reshape(B, -1, T, self.config.head_size)  # (B, nh_k, T, hs)
        v = v.reshape(B, -1, T, self.config.head_size)  # (B, nh_v, T, hs)

        q_roped = apply_rope(q[..., : self.config.rope_n_elem], cos, sin)
        k_roped = apply_rope(k[..., : self.config.rope_n_elem], cos, sin)
        q = torch.cat((q_roped, q[..., self.config.rope_n_elem :]), dim=-1)
        k = torch.cat((k_roped, k[..., self.config.rope_n_elem :]), dim=-1)

        if input_pos is not None:
            if not isinstance(self.kv_cache, KVCache):
                raise TypeError("You need to call `gpt.set_kv_cache()`")
            k, v = self.kv_cache(input_pos, k, v)

        y = self.scaled_dot_product_attention(q, k, v, mask)

        y = y.reshape(B, T, self.config.head_size * self.config.n_head)  # re-assemble all head outputs side by side

        # output projection
        return self.proj(y)

    def scaled_dot_product_attention(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor] = None
    ) -> torch.Tensor:
        scale = 1.0 / math.sqrt(self.config.head_size)
        y = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=0.0, scale=scale, is_causal=mask is None
        )
        return y.transpose(1, 2)

    def build_kv_cache(
        self,
        batch_size: int,
        max_seq_length: int,
        rope_cache_length: Optional[int] = None,
        device: Optional[torch.device] = None,
        dtype: Optional[torch.dtype] = None,
    ) -> "KVCache":
        heads = 1 if self.config.n_query_groups == 1 else self.config.n_head
        v_shape = (batch_size, heads, max_seq_length, self.config.head_size)
        if rope_cache_length is None:
            if self.config.rotary_percentage != 1.0:
                raise TypeError("Please pass the `rope_cache_length=gpt.cos.size(-1)` value")
            k_shape = v_shape
        else:
            k_shape = (
                batch_size,
                heads,
                max_seq_length,
                rope_cache_length + self.config.head_size - self.config.rope_n_elem,
            )
        return KVCache(k_shape, v_shape, device=device, dtype=dtype)


def build_rope_cache(
    seq_len: int, n_elem: int, device: Optional[torch.device] = None, base: int = 10000, condense_ratio: int = 1
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Enhanced Transformer with Rotary Position Embedding.

    Derived from: https://github.com/labmlai/annotated_deep_learning_paper_implementations/blob/master/labml_nn/
    transformers/rope/__init__.py. MIT License:
    https://github.com/labmlai/annotated_deep_learning_paper_implementations/blob/master/license.
    """
    # $\Theta = {\theta_i = 10000^{\frac{2(i-1)}{d}}, i \in [1, 2, ..., \frac{d}{2}]}$
    theta = 1.0 / (base ** (torch.arange(0, n_elem, 2, device=device).float() / n_elem))

    # Create position indexes `[0, 1, ..., seq_len - 1]`
    seq_idx = torch.arange(seq_len, device=device) / condense_ratio

    # Calculate the product of position index and $\theta_i$
    idx_theta = torch.outer(seq_idx, theta).repeat(1, 2)

    return torch.cos(idx_theta), torch.sin(idx_theta)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    head_size = x.size(-1)
    x1 = x[..., : head_size // 2]  # (B, nh, T, hs/2)
    x2 = x[..., head_size // 2 :]  # (B, nh, T, hs/2)
    rotated = torch.cat((-x2, x1), dim=-1)  # (B, nh, T, hs)
    roped = (x * cos) + (rotated * sin)
    return roped.to(dtype=x.dtype)


class KVCache(nn.Module):
    def __init__(
        self,
        k_shape: Tuple[int, int, int, int],
        v_shape: Tuple[int, int, int, int],
        device: Optional[torch.device] = None,
        dtype: Optional[torch.dtype] = None,
    ) -> None:
        super().__init__()
        self.register_buffer("k", torch.zeros(k_shape, device=device, dtype=dtype), persistent=False)
        self.register_buffer("v", torch.zeros(v_shape, device=device, dtype=dtype), persistent=False)

    def forward(self, input_pos: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        # move the buffer to the activation dtype for when AMP is used
        self.k = self.k.to(k.dtype)
        self.v = self.v.to(v.dtype)
        # update the cache
        k = self.k.index_copy_(2, input_pos, k)
        v = self.v.index_copy_(2, input_pos, v)
        return k, v

    def reset_parameters(self) -> None:
        torch.nn.init.zeros_(self.k)
        torch.nn.init.zeros_(self.v)


def build_mask_cache(max_seq_length: int, device: Optional[torch.device] = None) -> torch.Tensor:
    ones = torch.ones((max_seq_length, max_seq_length), device=device, dtype=torch.bool)
    return torch.tril(ones).unsqueeze(0).unsqueeze(0)


# ---------------------------------------------------------------------------------------------- added for the zoo
class _WithRope(nn.Module):
    """What litgpt's GPT.forward passes to each layer without a KV cache: cos[:T], sin[:T] and mask=None."""

    def __init__(self, attention, config):
        super().__init__()
        self.attention = attention
        cos, sin = build_rope_cache(seq_len=config.block_size, n_elem=config.rope_n_elem,
                                    condense_ratio=config.rope_condense_ratio, base=config.rope_base)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, x):
        T = x.size(1)
        return self.attention(x, self.cos[:T], self.sin[:T], None)


def make_gqa_rope(d, heads, n_query_groups, context_length):
    config = Config(n_embd=d, n_head=heads, n_query_groups=n_query_groups, block_size=context_length,
                    rotary_percentage=1.0)
    return _WithRope(CausalSelfAttention(config), config)
