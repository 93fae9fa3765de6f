"""pytorch-pretrained-bert's OpenAI GPT (GPT-1) Attention: Conv1D projections (weight (in, out), x @ W through
torch.addmm), ONE fused c_attn split by width into [Q; K; V], keys split pre-transposed (permute(0, 2, 3, 1)), a tril
buffer named "bias" of ones (1 = keep), the mask applied the TensorFlow way as an ADDITIVE finite penalty
`w = w * b + -1e9 * (1 - b)` (masked scores are replaced by exactly -1e9), scaling only with the `scale` flag
(default False; OpenAIGPTModel builds every Block with scale=True), softmax, c_proj, residual dropout.

Source: https://github.com/huggingface/pytorch-pretrained-BERT (the wheel's Home-page; today huggingface/transformers),
file pytorch_pretrained_bert/modeling_openai.py as released in pytorch-pretrained-bert 0.6.2 on PyPI.
Licence: Apache-2.0 (the file's header: "Copyright 2018 The OpenAI Team Authors and HuggingFace Inc. team. /
Copyright (c) 2018, NVIDIA CORPORATION." under the Apache License, Version 2.0; the wheel's METADATA "License:
Apache", classifier "License :: OSI Approved :: Apache Software License"; the dist-info holds no LICENSE file).
Copied: verbatim from the PyPI wheel pytorch-pretrained-bert==0.6.2 (pip download --no-deps): modeling_openai.py
lines 18, 24, 32-33 and 35 (imports) and 232-306 (class Conv1D and class Attention, whole); every copied line
compared by program with the unpacked wheel.  Left out: the config class (JSON loading), the model classes, MLP,
Block, and the imports only they use.  ADDED: this docstring, the factory build(d_model, num_heads, context_length)
at the end - Attention(nx, n_ctx, config, scale=True) as OpenAIGPTModel's Block builds it, with a SimpleNamespace
holding the three config fields the class reads (n_head, attn_pdrop, resid_pdrop) - and this entry's constants.
Truth: correct (in _truth.py): build(12, 3, 10) = mha_forward with W_q, W_k, W_v = c_attn.weight's column blocks
transposed, c_attn.bias's thirds, W_o = c_proj.weight transposed (exact to 1e-15) and an independent per-head loop;
no leak.  The -1e9 is a finite penalty that replaces the masked scores (not added to them): exact in float64 for any
ordinary scores, but scores near -1e9 would let the future in (the lesson's mask-fill rule).
"""
from __future__ import absolute_import, division, print_function, unicode_literals

import math

import torch
import torch.nn as nn
from torch.nn.parameter import Parameter


class Conv1D(nn.Module):
    def __init__(self, nf, rf, nx):
        super(Conv1D, self).__init__()
        self.rf = rf
        self.nf = nf
        if rf == 1:  # faster 1x1 conv
            w = torch.empty(nx, nf)
            nn.init.normal_(w, std=0.02)
            self.weight = Parameter(w)
            self.bias = Parameter(torch.zeros(nf))
        else:  # was used to train LM
            raise NotImplementedError

    def forward(self, x):
        if self.rf == 1:
            size_out = x.size()[:-1] + (self.nf,)
            x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
            x = x.view(*size_out)
        else:
            raise NotImplementedError
        return x


class Attention(nn.Module):
    def __init__(self, nx, n_ctx, config, scale=False):
        super(Attention, self).__init__()
        n_state = nx  # in Attention: n_state=768 (nx=n_embd)
        # [switch nx => n_state from Block to Attention to keep identical to TF implem]
        assert n_state % config.n_head == 0
        self.register_buffer("bias", torch.tril(torch.ones(n_ctx, n_ctx)).view(1, 1, n_ctx, n_ctx))
        self.n_head = config.n_head
        self.split_size = n_state
        self.scale = scale
        self.c_attn = Conv1D(n_state * 3, 1, nx)
        self.c_proj = Conv1D(n_state, 1, nx)
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)

    def _attn(self, q, k, v):
        w = torch.matmul(q, k)
        if self.scale:
            w = w / math.sqrt(v.size(-1))
        # w = w * self.bias + -1e9 * (1 - self.bias)  # TF implem method: mask_attn_weights
        # XD: self.b may be larger than w, so we need to crop it
        b = self.bias[:, :, : w.size(-2), : w.size(-1)]
        w = w * b + -1e9 * (1 - b)

        w = nn.Softmax(dim=-1)(w)
        w = self.attn_dropout(w)
        return torch.matmul(w, v)

    def merge_heads(self, x):
        x = x.permute(0, 2, 1, 3).contiguous()
        new_x_shape = x.size()[:-2] + (x.size(-2) * x.size(-1),)
        return x.view(*new_x_shape)  # in Tensorflow implem: fct merge_states

    def split_heads(self, x, k=False):
        new_x_shape = x.size()[:-1] + (self.n_head, x.size(-1) // self.n_head)
        x = x.view(*new_x_shape)  # in Tensorflow implem: fct split_states
        if k:
            return x.permute(0, 2, 3, 1)
        else:
            return x.permute(0, 2, 1, 3)

    def forward(self, x):
        x = self.c_attn(x)
        query, key, value = x.split(self.split_size, dim=2)
        query = self.split_heads(query)
        key = self.split_heads(key, k=True)
        value = self.split_heads(value)
        a = self._attn(query, key, value)
        a = self.merge_heads(a)
        a = self.c_proj(a)
        a = self.resid_dropout(a)
        return a

# --- added (not in the package) ---
def build(d_model, num_heads, context_length=16):
    """Attention as OpenAIGPTModel's Block builds it (scale=True), dropout 0."""
    from types import SimpleNamespace
    config = SimpleNamespace(n_head=num_heads, attn_pdrop=0.0, resid_pdrop=0.0)
    return Attention(d_model, context_length, config, scale=True)
# --- end of the added part ---
# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "build"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("conv1d-weights-in-out", "fused-qkv-split-by-width", "keys-pre-transposed", "mask-buffer-named-bias",
             "additive-finite-penalty-1e9", "scale-flag")
FORWARD = "x"
NOTES = ("Attention(nx, n_ctx, config, scale=True) with config.n_head, attn_pdrop, resid_pdrop; forward(x) -> (B, n, nx); "
         "TARGET is the added factory build(d_model, num_heads, context_length=16).")
OUTCOME = 'fail'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("the math matches the lesson's layer, but Conv1D's x.view(-1, x.size(-1)) raises on a "
                    "non-contiguous input (contiguity fails: a real limit of the layer, kept by transformers' Conv1D "
                    "since), and the -1e9 penalty lets the future in for scores below it (the mask-fill rule); no one "
                    "known mistake explains both, so none is named (the trace marks additive-mask-1e9 at the penalty)")
