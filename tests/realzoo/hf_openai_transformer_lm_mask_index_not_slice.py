"""huggingface/pytorch-openai-transformer-lm's Attention at 8833a83, when the mask was first cropped to the sequence: `self.b[:, :, w.size(-2), w.size(-1)]` INDEXES one element where a slice `[:, :, :n, :n]` was meant, so for every sequence shorter than n_ctx the "mask" is the single entry tril[n, n] = 1 and nothing is masked; at n == n_ctx it raises IndexError.

Source: https://github.com/huggingface/pytorch-openai-transformer-lm/blob/8833a83645144d727cd672dc60048d315fd6e982/model_pytorch.py (class Conv1D and class Attention; commit "Generation from pretrained LM model" by xiaoda99, 2018-08-23, an ancestor of master). Fixed by https://github.com/huggingface/pytorch-openai-transformer-lm/commit/2eb381c54e647d6febbab59d14fd10a0d6959803 ("fix mssking bias bug in Attention._attn", 2018-10-22): `self.b[:, :, :w.size(-2), :w.size(-1)]`, the text of hf_openai_transformer_lm_attention_scale_flag.py.
Licence: MIT (Copyright (c) 2018 OpenAI), LICENSE at the repository root.
Copied: verbatim, the imports the copied code uses (math, torch, nn, Parameter) and the classes Conv1D and Attention, taken from `git show 8833a83:model_pytorch.py` in the fetched history (not compared with the search index). The classes differ from the later entry's text in that one line only. This entry's constants are placed after the imports.
Truth: BUG, no causal mask for n < n_ctx: b = self.b[:, :, n, n] has shape (1, 1) and value 1, so w * b + -1e9 * (1 - b) = w; every position attends to the whole sequence (_truth.py: equal to the lesson's function without its mask, unscaled as the class's default scale=False, and with scale=True the scaled one without its mask). At n == n_ctx the index is out of range (IndexError). Otherwise as the later entry: Conv1D x @ W layout, config object for the heads and dropouts, keys pre-transposed, divisibility asserted.
"""
import math

import torch
import torch.nn as nn
from torch.nn.parameter import Parameter

TARGET = "Attention"
TRUTH = "bug"
BUG = "no-mask for every n < n_ctx (an index where a slice was meant); no-scaling by default as the later version"
RULE_GAPS = ("config-object-for-heads-and-dropout", "width-named-nx", "conv1d-x-at-w-layout", "keys-pre-transposed",
             "scale-flag-off-by-default")
FORWARD = "x"
NOTES = ("Attention(nx, n_ctx, cfg, scale=False): nx is the width, n_ctx the context length, cfg.n_head, "
         "cfg.attn_pdrop, cfg.resid_pdrop. Weights c_attn.w (nx, 3 nx), c_attn.b, c_proj.w (nx, nx), c_proj.b; buffer "
         "b (1, 1, n_ctx, n_ctx).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'no-scaling'
EXPECTED_BECAUSE = ('a real bug: at n == context_length forward raises IndexError (output-shape fails); for every shorter sequence '
                    'nothing is masked and nothing scaled (scale=False by default): its outputs are those of no-scaling and '
                    'no-mask together, both named from the numbers; causal-leakage itself waits for output-shape')


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
        b = self.b[:, :, w.size(-2), w.size(-1)]
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
