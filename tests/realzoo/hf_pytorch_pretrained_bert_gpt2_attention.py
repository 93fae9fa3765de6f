"""GPT-2 Attention from HuggingFace's pytorch-pretrained-BERT era (OpenAI Conv1D layout, x @ W, masked with w*b - 1e4*(1-b)).

Source: https://github.com/huggingface/transformers/blob/007ab6f5b2d472c848094d87ffe47ed5aa624301/pytorch_pretrained_bert/modeling_gpt2.py (class Attention, between class GPT2Config and class MLP). Commit as stored in the search index; NOT cross-checked against the upstream history (repository too large to fetch here) - the class text matches the pytorch-pretrained-BERT 0.6.x/0.7-dev GPT-2 Attention.
Licence: Apache-2.0 (file header: "Copyright 2018 The OpenAI Team Authors and HuggingFace Inc. team. Copyright (c) 2018, NVIDIA CORPORATION.")
Copied: verbatim with these additions: the original imports Conv1D from .model_utils; a self-contained Conv1D shim with the same semantics (weight (nx, nf), bias zeros(nf), y = x @ W + b via torch.addmm) and a minimal config object are added ABOVE the class, and a factory build() below it. prune_heads refers to prune_conv1d_layer, which is not provided (prune_heads is not used by forward).
Truth: BUG (finite mask fill, real report): masked scores are replaced by exactly -1e4 (w * b - 1e4 * (1 - b)), not -inf. With ordinary scores the masked weights underflow to 0 and the output equals the reference, but once the real scores of a row fall below about -1e4 (large activations/learning rates), masked future positions get weight and the layer leaks the future. Evidence: https://github.com/huggingface/transformers/issues/17121 and https://github.com/karpathy/minGPT/issues/75 ("Perfect training and evaluation loss, but terrible test-time performance": masked_bias -1e4 too small, the network learns to push scores below it). Also: the constructor default is scale=False, i.e. NO 1/sqrt(dh) scaling unless the caller passes scale=True (GPT2Model does).
"""
import math
import torch
import torch.nn as nn
from torch.nn.parameter import Parameter


# --- shim: Conv1D as in pytorch_pretrained_bert.model_utils (x @ W with W of shape (nx, nf)) ---
class Conv1D(nn.Module):
    def __init__(self, nf, nx):
        super(Conv1D, self).__init__()
        self.nf = nf
        w = torch.empty(nx, nf)
        nn.init.normal_(w, std=0.02)
        self.weight = Parameter(w)
        self.bias = Parameter(torch.zeros(nf))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        x = x.view(*size_out)
        return x


class _Config:
    def __init__(self, n_head, attn_pdrop=0.0, resid_pdrop=0.0):
        self.n_head, self.attn_pdrop, self.resid_pdrop = n_head, attn_pdrop, resid_pdrop
# --- end of shim; copied block follows ---

TARGET = "build"
TRUTH = "bug"
BUG = "finite-fill-1e4"
RULE_GAPS = ()
FORWARD = "x, layer_past=None, head_mask=None"
NOTES = "Constructor Attention(nx, n_ctx, config, scale=False, ...) with config.n_head/attn_pdrop/resid_pdrop; TARGET is the added factory build(d, nheads, context_length, scale=True). forward returns a TUPLE (a, present). Conv1D weights are (in, out): c_attn.weight (d, 3d) with columns [Q | K | V], so the lesson's Linear weight W_q = c_attn.weight[:, :d].T; c_proj.weight (d, d) likewise transposed. Mask buffer named 'bias' (tril, 1 = keep). Keys are split with permute(0, 2, 3, 1) (pre-transposed). Leak needs score magnitudes > ~1e4 to show; with scale=False the scores are not divided by sqrt(dh)."
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'finite-fill-100'
EXPECTED_BECAUSE = 'fills with -1e4: a leak once real scores reach -1e4'


class Attention(nn.Module):
    def __init__(self, nx, n_ctx, config, scale=False, output_attentions=False, keep_multihead_output=False):
        super(Attention, self).__init__()
        n_state = nx  # in Attention: n_state=768 (nx=n_embd)
        # [switch nx => n_state from Block to Attention to keep identical to TF implem]
        assert n_state % config.n_head == 0
        self.register_buffer("bias", torch.tril(torch.ones(n_ctx, n_ctx)).view(1, 1, n_ctx, n_ctx))
        self.n_head = config.n_head
        self.split_size = n_state
        self.scale = scale

        self.output_attentions = output_attentions
        self.keep_multihead_output = keep_multihead_output
        self.multihead_output = None

        self.c_attn = Conv1D(n_state * 3, nx)
        self.c_proj = Conv1D(n_state, nx)
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)

    def prune_heads(self, heads):
        if len(heads) == 0:
            return
        mask = torch.ones(self.n_head, self.split_size // self.n_head)
        for head in heads:
            mask[head] = 0
        mask = mask.view(-1).contiguous().eq(1)
        index = torch.arange(len(mask))[mask].long()
        index_attn = torch.cat([index, index + self.split_size, index + (2*self.split_size)])
        # Prune conv1d layers
        self.c_attn = prune_conv1d_layer(self.c_attn, index_attn, dim=1)
        self.c_proj = prune_conv1d_layer(self.c_proj, index, dim=0)
        # Update hyper params
        self.split_size = (self.split_size // self.n_head) * (self.n_head - len(heads))
        self.n_head = self.n_head - len(heads)

    def _attn(self, q, k, v, head_mask=None):
        w = torch.matmul(q, k)
        if self.scale:
            w = w / math.sqrt(v.size(-1))
        nd, ns = w.size(-2), w.size(-1)
        b = self.bias[:, :, ns-nd:ns, :ns]
        w = w * b - 1e4 * (1 - b)

        w = nn.Softmax(dim=-1)(w)
        w = self.attn_dropout(w)

        # Mask heads if we want to
        if head_mask is not None:
            w = w * head_mask

        if self.output_attentions:
            return w, torch.matmul(w, v)
        return torch.matmul(w, v)

    def merge_heads(self, x):
        x = x.permute(0, 2, 1, 3).contiguous()
        new_x_shape = x.size()[:-2] + (x.size(-2) * x.size(-1),)
        return x.view(*new_x_shape)  # in Tensorflow implem: fct merge_states

    def split_heads(self, x, k=False):
        new_x_shape = x.size()[:-1] + (self.n_head, x.size(-1) // self.n_head)
        x = x.view(*new_x_shape)  # in Tensorflow implem: fct split_states
        if k:
            return x.permute(0, 2, 3, 1)  # (batch, head, head_features, seq_length)
        else:
            return x.permute(0, 2, 1, 3)  # (batch, head, seq_length, head_features)

    def forward(self, x, layer_past=None, head_mask=None):
        x = self.c_attn(x)
        query, key, value = x.split(self.split_size, dim=2)
        query = self.split_heads(query)
        key = self.split_heads(key, k=True)
        value = self.split_heads(value)
        if layer_past is not None:
            past_key, past_value = layer_past[0].transpose(-2, -1), layer_past[1]  # transpose back cf below
            key = torch.cat((past_key, key), dim=-1)
            value = torch.cat((past_value, value), dim=-2)
        present = torch.stack((key.transpose(-2, -1), value))  # transpose to have same shapes for stacking

        a = self._attn(query, key, value, head_mask)
        if self.keep_multihead_output:
            self.multihead_output = a
            self.multihead_output.retain_grad()

        if self.output_attentions:
            attentions, a = a
        a = self.merge_heads(a)
        a = self.c_proj(a)
        a = self.resid_dropout(a)
        if self.output_attentions:
            return attentions, a, present
        return a, present


# --- added factory (not part of the original): the class needs a config object ---
def build(d, nheads, context_length, scale=True):
    return Attention(d, context_length, _Config(nheads), scale=scale)
