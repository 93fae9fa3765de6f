"""anyGPT's CausalSelfAttention: nanoGPT's layer with the config's names spelled out - `embedding_size`,
`num_heads`, `block_size`, `dropout` (0.2 by default), `bias` (True by default) - in a dataclass ModelConfig that
subclasses a yaml-dict SimpleConfig; fused c_attn split [Q; K; V], SDPA with is_causal=True (the tril buffer "bias"
is registered only when SDPA is missing), dropout gated by self.training, resid_dropout after c_proj.

Source: https://pypi.org/project/anyGPT/ (anyGPT 0.1.0; the wheel's METADATA names no repository), files
anyGPT/models/modules.py and anyGPT/config/settings.py as released in anyGPT 0.1.0 on PyPI.
Licence: MIT (the wheel's METADATA "License: MIT" and LICENSE in its dist-info, "Copyright (c) 2023 Miguel Alonso
Jr.").
Copied: verbatim from the PyPI wheel anyGPT==0.1.0 (pip download --no-deps anygpt): lines 1-5 of
anyGPT/models/modules.py (imports) and lines 23-89 (CausalSelfAttention); lines 1-2 and 5-42 of
anyGPT/config/settings.py (imports, SimpleConfig, ModelConfig). modules.py's lines 7-8 (the package's config import
and its new_gelu, used by the MLP left out) are replaced by the copied config classes.
ADDED: this entry's constants.
Truth: correct. With dropout 0 or in eval(), the output is mha_forward with c_attn's rows [0, d), [d, 2d), [2d, 3d)
as W_q, W_k, W_v (and the bias's thirds with bias=True) and W_o = c_proj, exactly; no leak. Without SDPA (PyTorch
< 2.0) the same through the tril buffer.
"""
import math

import torch
from torch import nn
from torch.nn import functional as F
from dataclasses import dataclass
from typing import Union

TARGET = "CausalSelfAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("config-dataclass-spelled-out-embedding-size-num-heads",)
FORWARD = "x"
NOTES = ("CausalSelfAttention(ModelConfig(embedding_size, num_heads, block_size, dropout=0.2, bias=True)). "
         "forward(x) -> (B, n, embedding_size); SDPA is_causal=True.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("nanoGPT's layer with the config's names spelled out (embedding_size, num_heads): biases, an "
                    "output projection and a divisibility assert, every check must pass")


class SimpleConfig:
    """
    SimpleConfig - base class for config dataclass objects
    """

    def __init__(self, **kwargs):
        """
        Initializes dataclass based on keys in the yaml dict.
        :param kwargs: a dictionary sourced from a yaml config file.
        """
        kwarg_keys = kwargs.keys()
        for key in self.__annotations__.keys():
            if key in kwarg_keys:
                self.__dict__[key] = kwargs[key]

    def update(self, kwargs):
        """
        Updates the values in the dataclass.
        :param kwargs: dictionary of key/value pairs to update.
        """
        for key, value in kwargs.items():
            if hasattr(self, key):
                setattr(self, key, value)


@dataclass
class ModelConfig(SimpleConfig):
    name: str = "gpt-2-124M"
    block_size: int = 1024
    vocab_size: int = 50257
    num_layers: int = 12
    num_heads: int = 12
    embedding_size: int = 768
    dropout: float = 0.2
    bias: bool = True
    move_layer_norm: bool = True
    adapter_bottleneck_factor: int = 48
    fine_tune: bool = False


class CausalSelfAttention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        assert config.embedding_size % config.num_heads == 0

        # query, key, value projections for all heads, in a batch
        self.c_attn = nn.Linear(
            config.embedding_size, 3 * config.embedding_size, bias=config.bias
        )

        # output projection
        self.c_proj = nn.Linear(
            config.embedding_size, config.embedding_size, bias=config.bias
        )

        # regularization
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.num_heads = config.num_heads
        self.embedding_size = config.embedding_size
        self.dropout = config.dropout

        # use flash attention!!! yay
        self.flash = hasattr(torch.nn.functional, "scaled_dot_product_attention")
        if not self.flash:
            print(
                "Yo yo! anyGPT will use slow attention. Flash attention requires PyTorch >= 2.0"
            )
            self.register_buffer(
                "bias",
                torch.tril(torch.ones(config.block_size, config.block_size)).view(
                    1, 1, config.block_size, config.block_size
                ),
            )

    def forward(self, x):
        # B: batch size, T: sequence length, C: embedding size
        B, T, C = x.size()

        # compute query, key, values for all heads in batch and move head forward to be the batch dim
        q, k, v = self.c_attn(x).split(self.embedding_size, dim=2)

        k = k.view(B, T, self.num_heads, C // self.num_heads).transpose(1, 2)
        q = q.view(B, T, self.num_heads, C // self.num_heads).transpose(1, 2)
        v = v.view(B, T, self.num_heads, C // self.num_heads).transpose(1, 2)

        if self.flash:
            y = F.scaled_dot_product_attention(
                q,
                k,
                v,
                attn_mask=None,
                dropout_p=self.dropout if self.training else 0,
                is_causal=True,
            )
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)

        y = y.transpose(1, 2).contiguous().view(B, T, C)

        y = self.resid_dropout(self.c_proj(y))

        return y
