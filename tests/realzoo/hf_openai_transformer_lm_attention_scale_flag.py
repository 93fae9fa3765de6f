"""huggingface/pytorch-openai-transformer-lm's Attention (the OpenAI GPT-1 port): Attention(nx, n_ctx, cfg, scale=False) with a config object for the heads and dropouts, Conv1D projections used as x @ W (weight (nx, nf)), keys split pre-transposed, the mask applied as w * b + -1e9 * (1 - b), and the scores scaled ONLY when scale=True.

Source: https://github.com/huggingface/pytorch-openai-transformer-lm/blob/bfd8e0989c684b79b800a49f8d9b74e559298ec2/model_pytorch.py (class Conv1D and class Attention; HEAD, 2019-02-07). In the same file TransformerModel builds Block(n_ctx, cfg, scale=True), and Block passes scale on to Attention: the model scales, the class by default does not.
Licence: MIT (Copyright (c) 2018 OpenAI), LICENSE at the repository root.
Copied: verbatim, the imports the copied code uses (math, torch, nn, Parameter) and the classes Conv1D and Attention, taken from `git show bfd8e09:model_pytorch.py` in the fetched history; the index holds model_pytorch.py of this repository (read_file) but not the repository's LICENSE file. The rest of the file (LayerNorm, MLP, Block, the models, weight loading) is left out; this entry's constants are placed after the imports.
Truth: with its DEFAULT scale=False the layer computes causal multi-head attention WITHOUT the 1/sqrt(dh) scaling (the catalogued no-scaling); with scale=True, as the repository's model builds it, it is the lesson's layer except the mask: w * b + -1e9 * (1 - b) sets every future score to exactly -1e9 (a finite fill, the lesson's mask-fill rule) - exact at every realistic magnitude. Layout: c_attn Conv1D(3 nx, 1, nx), weight w (nx, 3 nx) used as addmm(b, x, w), so W_q = w[:, :nx].T (and K, V the next column blocks), biases b; split_heads view(B, n, H, dh).permute(0, 2, 1, 3) (keys permute(0, 2, 3, 1): already transposed); merge permute(0, 2, 1, 3).view(B, n, nx); c_proj Conv1D(nx, 1, nx); attention and residual dropouts from cfg. The mask buffer b (1, 1, n_ctx, n_ctx) is cropped to the sequence. Divisibility asserted.
"""
import math

import torch
import torch.nn as nn
from torch.nn.parameter import Parameter

TARGET = "Attention"
TRUTH = "bug"
BUG = "no-scaling (scale=False by default; the repository's model passes scale=True)"
RULE_GAPS = ("config-object-for-heads-and-dropout", "width-named-nx", "conv1d-x-at-w-layout", "keys-pre-transposed",
             "mask-fill (w * b - 1e9 * (1 - b))", "scale-flag-off-by-default")
FORWARD = "x"
NOTES = ("Attention(nx, n_ctx, cfg, scale=False): nx is the width, n_ctx the context length, cfg.n_head, "
         "cfg.attn_pdrop, cfg.resid_pdrop. Weights c_attn.w (nx, 3 nx), c_attn.b, c_proj.w (nx, nx), c_proj.b; buffer "
         "b (1, 1, n_ctx, n_ctx).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'no-scaling'
EXPECTED_BECAUSE = ('built with its defaults (scale=False) the scores are not divided by sqrt(dh): no-scaling reproduces it '
                    'number for number once nx is read as the width and cfg answered; contiguity fails too (Conv1D views a '
                    'non-contiguous input) and the -1e9 fill breaks the mask-fill rule')


class Conv1D(nn.Module):
    def __init__(self, nf, rf, nx):
        super(Conv1D, self).__init__()
        self.rf = rf
        self.nf = nf
        if rf == 1:  # faster 1x1 conv
            w = torch.empty(nx, nf)
            nn.init.normal_(w, std=0.02)
            self.w = Parameter(w)
            self.b = Parameter(torch.zeros(nf))
        else:  # was used to train LM
            raise NotImplementedError

    def forward(self, x):
        if self.rf == 1:
            size_out = x.size()[:-1] + (self.nf,)
            x = torch.addmm(self.b, x.view(-1, x.size(-1)), self.w)
            x = x.view(*size_out)
        else:
            raise NotImplementedError
        return x


class Attention(nn.Module):
    def __init__(self, nx, n_ctx, cfg, scale=False):
        super(Attention, self).__init__()
        n_state = nx  # in Attention: n_state=768 (nx=n_embd)
        # [switch nx => n_state from Block to Attention to keep identical to TF implem]
        assert n_state % cfg.n_head == 0
        self.register_buffer('b', torch.tril(torch.ones(n_ctx, n_ctx)).view(1, 1, n_ctx, n_ctx))
        self.n_head = cfg.n_head
        self.split_size = n_state
        self.scale = scale
        self.c_attn = Conv1D(n_state * 3, 1, nx)
        self.c_proj = Conv1D(n_state, 1, nx)
        self.attn_dropout = nn.Dropout(cfg.attn_pdrop)
        self.resid_dropout = nn.Dropout(cfg.resid_pdrop)

    def _attn(self, q, k, v):
        w = torch.matmul(q, k)
        if self.scale:
            w = w / math.sqrt(v.size(-1))
        # w = w * self.b + -1e9 * (1 - self.b)  # TF implem method: mask_attn_weights
        # XD: self.b may be larger than w, so we need to crop it
        b = self.b[:, :, :w.size(-2), :w.size(-1)]
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
