"""nano_gpt's CausalSelfAttention (build-nanogpt style): a frozen keyword-only GPTConfig dataclass, fused c_attn
Linear(n_embd, 3 * n_embd) split [Q; K; V], SDPA with is_causal=True, c_proj with bias (c_proj.SCALE_INIT set as a
marker), a tril buffer registered under the name "bias" that forward never reads, no divisibility check.

Source: https://github.com/allenporter/nano_gpt (the PyPI project's homepage), files nano_gpt/model.py and
nano_gpt/config.py as released in nano-gpt 0.1.0 on PyPI.
Licence: MIT (Copyright (c) 2025 Allen Porter), LICENSE in the wheel's dist-info.
Copied: verbatim from the PyPI wheel nano_gpt==0.1.0 (pip download --no-deps): model.py's torch imports and class
CausalSelfAttention; config.py's constants VOCAB_SIZE, NICE_VOCAB_SIZE, BLOCK_SIZE and its GPTConfig dataclass (with
`from dataclasses import dataclass`). model.py's imports of transformers and of the package itself are left out.
ADDED: this entry's constants after the imports, and below the copied block a factory build(n_embd, n_head,
block_size) that fills GPTConfig.
Truth: correct: mha_forward with the [Q; K; V] rows of c_attn and c_proj, exactly (1e-10), no leak.
"""
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F

TARGET = "build"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("no-divisibility-check", "config-object", "unused-mask-buffer")
FORWARD = "x"
NOTES = ("build(n_embd, n_head, block_size) -> CausalSelfAttention(GPTConfig(...)) (factory ADDED). Fused c_attn "
         "[Q; K; V] with bias, SDPA is_causal=True, c_proj with bias.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = 'no-divisibility-check'
EXPECTED_BECAUSE = "the lesson's math in nanoGPT's fused layout; only the divisibility check is missing"

VOCAB_SIZE = 50257  # Fixed size for GPT model checkpoints
NICE_VOCAB_SIZE = 50304  # Vocab size with nice power of 2, for training
BLOCK_SIZE = 1024  # Fixed size for GPT model checkpoints


@dataclass(frozen=True, kw_only=True)
class GPTConfig:
    """This class defines the configuration for the GPT model.

    This configuration is used for inference.
    """

    block_size: int = BLOCK_SIZE
    """The maximum context length."""

    vocab_size: int = NICE_VOCAB_SIZE
    """The size of the vocabulary."""

    n_layer: int = 12
    """The number of transformer blocks."""

    n_head: int = 12
    """The number of attention heads."""

    n_embd: int = 768
    """The size of the embedding vector."""


class CausalSelfAttention(nn.Module):
    """Attention module."""

    def __init__(self, config: GPTConfig) -> None:
        """Initialize MLP."""
        super().__init__()
        # Batch of key/query/value projects for all heads
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        # Output projection
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.c_proj.SCALE_INIT = 1  # type: ignore[assignment]
        # Regularization
        self.n_head = config.n_head
        self.n_embed = config.n_embd
        self.register_buffer(
            "bias",
            torch.tril(torch.ones(config.block_size, config.block_size)).view(
                1, 1, config.block_size, config.block_size
            ),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Perform inference."""
        B, T, C = x.size()
        # Compute the query, key, value for all heads in the batch.
        qkv = self.c_attn(x)
        q, k, v = qkv.split(self.n_embed, dim=2)
        # Each are (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)

        # Compute attention with a fused kernel of fast attention
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)

        # Reassemble and concat everything
        y = y.transpose(1, 2).contiguous().view(B, T, C)

        # Output projection
        y = self.c_proj(y)
        return y


# ---- ADDED (not in nano_gpt): a factory that fills the frozen keyword-only GPTConfig.
def build(n_embd, n_head, block_size):
    return CausalSelfAttention(GPTConfig(n_embd=n_embd, n_head=n_head, block_size=block_size))
