"""eztransformer's CausalSelfAttention ("faster, simpler, more interpretable nanoGPT", for decision-transformer style
(return, state, action) sequences): nanoGPT's layer - fused c_attn [Q; K; V], c_proj, SDPA with a bool keep-mask -
whose mask buffer "bias" is built by local_causal_attention(block_size, recent_context): a causal window of the last
3 * recent_context keys, and, for recent_context=None, torch.ones(...): every key kept, no causal mask at all. An
attn_mask argument replaces the buffer.

Source: https://github.com/ezhang7423/eztransformer (the PyPI project's repository), files eztransformer/gpt.py
(GPTConfig) and eztransformer/gpt_utils.py (local_causal_attention, CausalSelfAttention) as released in
eztransformer 0.1.2 on PyPI.
Licence: MIT (Copyright (c) 2023 ezhang7423), LICENSE in the wheel's dist-info.
Copied: verbatim from the PyPI wheel eztransformer==0.1.2 (pip download --no-deps): lines 2, 4-5 and 7 of
eztransformer/gpt_utils.py (imports), line 12 of eztransformer/gpt.py (`from dataclasses import dataclass`), lines
21-31 of gpt.py (GPTConfig) and lines 38-120 of gpt_utils.py (local_causal_attention, CausalSelfAttention). The
other imports serve the classes left out. ADDED: this entry's constants and the factory build_no_window (the layer
as GPT(GPTConfig(recent_context=None, ...)) builds it).
Truth: depends on the configuration, as the class has no plain causal setting. GPTConfig's default recent_context=20
needs block_size >= 59 (3 * 20 - 1 rows of ones are stacked on the triu part: torch.ones with a negative size raises
below that) and then keeps keys t - 59 .. t: exactly the lesson's layer (c_attn rows [Q; K; V], c_proj, biases) for
sequences of up to 60 tokens, a sliding window beyond. recent_context=None: no mask, the future moves the past
(the name "CausalSelfAttention" and the comment "causal mask to ensure that attention is only applied to the left"
promise otherwise). TARGET is build_no_window: the bug. GPT.forward passes attention_mask=None to every block, so the
buffer is the layer's mask in the package's own model.
"""
import math

import torch
import torch.nn as nn
from torch.nn import functional as F
from dataclasses import dataclass

TARGET = "build_no_window"
TRUTH = "bug"
BUG = "all-true-mask-buffer-for-recent-context-none"
RULE_GAPS = ("config-dataclass", "fused-qkv", "mask-buffer-named-bias", "sdpa-bool-keep-mask", "sliding-window",
             "no-mask-for-recent-context-none")
FORWARD = "x, attn_mask=None"
NOTES = ("CausalSelfAttention(GPTConfig(block_size=1024, recent_context=20, n_head=1, n_embd=64, dropout=0.0, "
         "bias=True)). forward(x, attn_mask=None) -> (B, T, n_embd); mask buffer 'bias' (1, 1, block_size, "
         "block_size) bool, True = attend.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'no-mask'
EXPECTED_BECAUSE = ("built with recent_context=None its mask buffer is all True and the plain call, the one GPT makes, "
                    "lets every position see the future: the lesson's layer without its mask")


@dataclass
class GPTConfig:
    block_size: int = 1024
    recent_context: int = 20
    add_prompt: int = True
    n_layer: int = 3
    n_head: int = 1
    n_embd: int = 64
    dropout: float = 0.0
    bias: bool = True  # True: bias in Linears and LayerNorms, like GPT-2. False: a bit better and faster



def local_causal_attention(n_ctx, recent_context):
    if recent_context is None:
        return torch.ones((n_ctx, n_ctx)).bool().view(1, 1, n_ctx, n_ctx)

    rc = recent_context * 3 - 1  # multiply by 3 because r, s, a
    causal_attention = torch.tril(torch.ones(n_ctx, n_ctx))
    mask = torch.cat((torch.ones(rc, n_ctx), torch.triu(torch.ones(n_ctx - rc, n_ctx))))
    causal_attention *= mask
    return causal_attention.bool().view(1, 1, n_ctx, n_ctx)


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        # key, query, value projections for all heads, but in a batch
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        # output projection
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        # regularization
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        self.recent_context = config.recent_context
        # flash attention make GPU go brrrrr but support is only in PyTorch >= 2.0
        self.flash = hasattr(torch.nn.functional, "scaled_dot_product_attention")
        if not self.flash:
            print(
                "WARNING: using slow attention. Flash Attention requires PyTorch >= 2.0"
            )
        # causal mask to ensure that attention is only applied to the left in the input sequence
        self.register_buffer(
            "bias", local_causal_attention(config.block_size, config.recent_context)
        )

    def forward(self, x, attn_mask=None):
        (
            B,
            T,
            C,
        ) = x.shape  # batch size, sequence length, embedding dimensionality (n_embd)

        # calculate query, key, values for all heads in batch and move head forward to be the batch dim
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(
            1, 2
        )  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(
            1, 2
        )  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(
            1, 2
        )  # (B, nh, T, hs)

        if attn_mask is None:
            attn_mask = self.bias[:, :, :T, :T]

        # causal self-attention; Self-attend: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
        if self.flash:
            # efficient attention using Flash Attention CUDA kernels
            y = torch.nn.functional.scaled_dot_product_attention(
                q,
                k,
                v,
                attn_mask=attn_mask,
                dropout_p=self.dropout if self.training else 0,
            )
        else:
            # manual implementation of attention
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(~attn_mask, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = (
            y.transpose(1, 2).contiguous().view(B, T, C)
        )  # re-assemble all head outputs side by side

        # output projection
        y = self.resid_dropout(self.c_proj(y))
        return y


# --- added for the zoo: the layer as GPT builds it with recent_context=None (the value local_causal_attention reads
# as "no window"); GPT.forward passes attention_mask=None to every block by default, so the buffer is the mask ---
def build_no_window(d, heads, context_length):
    return CausalSelfAttention(GPTConfig(block_size=context_length, recent_context=None, n_layer=1, n_head=heads,
                                         n_embd=d, dropout=0.0, bias=True))
