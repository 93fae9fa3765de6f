"""lucidrains' Compressive Transformer: the SelfAttention of each layer, with an UNUSUAL constructor vocabulary
SelfAttention(dim, seq_len, mem_len, cmem_len, cmem_ratio=4, heads=8, attn_dropout=0., dropout=0.,
reconstruction_attn_dropout=0.) - the lengths of a Transformer-XL MEMORY of past inputs and of its COMPRESSED memory
(a ConvCompress Conv1d of kernel and stride cmem_ratio) are required; to_q Linear(dim, dim) and to_kv Linear(dim,
2 * dim) without bias, chunked [K; V], over the concatenated (compressed memory, memory, x); einsum scores scaled by
dim_head ** -0.5; an optional RELATIVE position term from the caller's pos_emb (heads, positions, dim_head), added
through the Transformer-XL `shift`; a PADDING mask argument input_mask (B, n) BESIDE its own causal mask (triu offset
by the memories, filled in place with -finfo.max); to_out with bias; forward(x, memories=None, pos_emb=None,
input_mask=None, calc_memory=True) returns a TUPLE (logits, Memory(mem, compressed_mem), aux_loss): the next segment's
memories (the inputs, not keys and values) and, in training once memories overflow, an auxiliary reconstruction loss
that trains the compressor (whose input is detached: the compressor never gets a gradient from this layer's output).

Source: https://github.com/lucidrains/compressive-transformer-pytorch (the wheel's METADATA Home-page), file
compressive_transformer_pytorch/compressive_transformer_pytorch.py as released in compressive-transformer-pytorch
0.4.0 on PyPI.  CompressiveTransformer builds it as SelfAttention(dim, seq_len, mem_len, cmem_len, cmem_ratio, heads,
...) with mem_len defaulting to seq_len and cmem_len to mem_len // cmem_ratio, wraps it in PreNorm and a GRU gate, and
passes its own pos_emb parameter (zeros at first) and memories.
Licence: MIT ("Copyright (c) 2020 Phil Wang", LICENSE in the wheel's dist-info; METADATA "License: MIT").
Copied: verbatim from the PyPI wheel compressive-transformer-pytorch==0.4.0 (pip download --no-deps), every copied
line compared by program with the unpacked wheel: lines 1-4 (torch imports), 7-63 (imports, the Memory namedtuple,
the helpers to ... shift), 70-79 (full_attn), 126-135 (class ConvCompress) and 169-287 (class SelfAttention, whole).
Left out: line 5 `from mogrifier import Mogrifier` and lines 64-69, 80-125, 136-168, 288-end (iterate_tensor,
Residual, GRUGating, PreNorm, FeedForward, the model: not reached by SelfAttention).  ADDED: the factory `build` at
the end (mem_len = seq_len = context_length, cmem_len = context_length // 4, as the model's defaults), this docstring
and the entry's constants.
Truth: correct attention, an extra trained-elsewhere module (in _truth.py): build(12, 3, 10) in eval() called as
m(x)[0] = mha_forward (to_q, to_kv's halves, to_out with its bias) and the per-head loop exactly, no leak; the
compressor's conv gets no gradient from the output (its weight's grad stays None) but forward uses it: a second
segment of 10 after a memory of 10 compresses the overflow (the returned compressed memory has 10 // 4 = 2 rows);
with segments of 4 (SelfAttention(12, 4, 4, 1, 4, 3)), two segments through the returned memory (pos_emb None) = the
whole forward on 8 tokens (a segment shorter than seq_len returns the memory it was given: only whole segments are
remembered, so it is no token-by-token KV cache); a non-zero pos_emb changes the output.
"""
import torch
from torch import nn
import torch.nn.functional as F

import math
from collections import namedtuple
from functools import partial
from inspect import isfunction

# structs

Memory = namedtuple('Memory', ['mem', 'compressed_mem'])

# helper functions

def to(t):
    return {'dtype': t.dtype, 'device': t.device}

def cast_tuple(el):
    return el if isinstance(el, tuple) else (el,)

def default(x, val):
    if x is not None:
        return x
    return val if not isfunction(val) else val()

def max_neg_value(tensor):
    return -torch.finfo(tensor.dtype).max

def reshape_dim(t, dim, split_dims):
    shape = list(t.shape)
    num_dims = len(shape)
    dim = (dim + num_dims) % num_dims
    shape[dim:dim+1] = split_dims
    return t.reshape(shape)

def split_at_index(dim, index, t):
    pre_slices = (slice(None),) * dim
    l = (*pre_slices, slice(None, index))
    r = (*pre_slices, slice(index, None))
    return t[l], t[r]

def queue_fifo(*args, length, dim=-2):
    queue = torch.cat(args, dim=dim)
    if length > 0:
        return split_at_index(dim, -length, queue)

    device = queue.device
    shape = list(queue.shape)
    shape[dim] = 0
    return queue, torch.empty(shape, device = device)

def shift(x):
    *_, i, j = x.shape
    zero_pad = torch.zeros((*_, i, i), **to(x))
    x = torch.cat([x, zero_pad], -1)
    l = i + j - 1
    x = x.view(*_, -1)
    zero_pad = torch.zeros(*_, -x.size(-1) % l, **to(x))
    shifted = torch.cat([x, zero_pad], -1).view(*_, -1, l)
    return shifted[..., :i, i - 1:]
# full attention for calculating auxiliary reconstruction loss

def full_attn(q, k, v, dropout_fn = None):
    *_, dim = q.shape
    dots = torch.einsum('bhid,bhjd->bhij', q, k) * (dim ** -0.5)
    attn = dots.softmax(dim=-1)
    if dropout_fn is not None:
        attn = dropout_fn(attn)
    return torch.einsum('bhij,bhjd->bhid', attn, v)

class ConvCompress(nn.Module):
    def __init__(self, dim, ratio = 4):
        super().__init__()
        self.conv = nn.Conv1d(dim, dim, ratio, stride = ratio)

    def forward(self, mem):
        mem = mem.transpose(1, 2)
        compressed_mem = self.conv(mem)
        return compressed_mem.transpose(1, 2)

class SelfAttention(nn.Module):
    def __init__(self, dim, seq_len, mem_len, cmem_len, cmem_ratio = 4, heads = 8, attn_dropout = 0., dropout = 0., reconstruction_attn_dropout = 0.):
        super().__init__()
        assert (dim % heads) == 0, 'dimension must be divisible by the number of heads'

        self.heads = heads
        self.dim_head = dim // heads
        self.seq_len = seq_len
        self.mem_len = mem_len
        self.cmem_len = cmem_len
        self.cmem_ratio = cmem_ratio
        self.scale = self.dim_head ** (-0.5)

        self.compress_mem_fn = ConvCompress(dim, cmem_ratio)

        self.to_q = nn.Linear(dim, dim, bias = False)
        self.to_kv = nn.Linear(dim, dim * 2, bias = False)
        self.to_out = nn.Linear(dim, dim)

        self.attn_dropout = nn.Dropout(attn_dropout)
        self.dropout = nn.Dropout(dropout)

        self.reconstruction_attn_dropout = nn.Dropout(reconstruction_attn_dropout)

    def forward(self, x, memories = None, pos_emb = None, input_mask = None, calc_memory = True, **kwargs):
        b, t, e, h, dim_h = *x.shape, self.heads, self.dim_head

        memories = default(memories, (None, None))
        mem, cmem = memories

        init_empty_mem = lambda: torch.empty(b, 0, e, **to(x))
        mem = default(mem, init_empty_mem)
        cmem = default(cmem, init_empty_mem)

        mem_len = mem.shape[1]
        cmem_len = cmem.shape[1]

        q = self.to_q(x)

        kv_input = torch.cat((cmem, mem, x), dim=1)
        kv_len = kv_input.shape[1]
        k, v = self.to_kv(kv_input).chunk(2, dim=-1)

        merge_heads = lambda x: reshape_dim(x, -1, (-1, dim_h)).transpose(1, 2)
        q, k, v = map(merge_heads, (q, k, v))

        k, v = map(lambda x: x.expand(-1, h, -1, -1), (k, v))

        dots = torch.einsum('bhid,bhjd->bhij', q, k) * self.scale
        mask_value = max_neg_value(dots)

        if pos_emb is not None:
            pos_emb = pos_emb[:, -kv_len:].type(q.dtype)
            pos_dots = torch.einsum('bhid,hjd->bhij', q, pos_emb) * self.scale
            pos_dots = shift(pos_dots)
            dots = dots + pos_dots

        if input_mask is not None:
            mask = input_mask[:, None, :, None] * input_mask[:, None, None, :]
            mask = F.pad(mask, (mem_len + cmem_len, 0), value = True)
            dots.masked_fill_(~mask, mask_value)

        total_mem_len = mem_len + cmem_len
        mask = torch.ones(t, t + total_mem_len, **to(x)).triu_(diagonal = 1 + total_mem_len).bool()
        dots.masked_fill_(mask[None, None, ...], mask_value)

        attn = dots.softmax(dim=-1)
        attn = self.attn_dropout(attn)

        out = torch.einsum('bhij,bhjd->bhid', attn, v)
        out = out.transpose(1, 2).reshape(b, t, -1)
        logits = self.to_out(out)
        logits = self.dropout(logits)

        new_mem = mem
        new_cmem = cmem
        aux_loss = torch.zeros(1, requires_grad = True, **to(q))

        if self.seq_len > t or not calc_memory:
            return logits, Memory(new_mem, new_cmem), aux_loss

        # calculate memory and compressed memory

        old_mem, new_mem = queue_fifo(mem, x, length = self.mem_len, dim = 1)
        old_mem_padding = old_mem.shape[1] % self.cmem_ratio

        if old_mem_padding != 0:
            old_mem = F.pad(old_mem, (0, 0, old_mem_padding, 0), value = 0.)

        if old_mem.shape[1] == 0 or self.cmem_len <= 0:
            return logits, Memory(new_mem, new_cmem), aux_loss

        compressed_mem = self.compress_mem_fn(old_mem.detach())
        old_cmem, new_cmem = split_at_index(1, -self.cmem_len, torch.cat((cmem, compressed_mem), dim=1))

        if not self.training:
            return logits, Memory(new_mem, new_cmem), aux_loss

        # calculate compressed memory auxiliary loss if training

        self.to_kv.weight.detach_()

        cmem_k, cmem_v = self.to_kv(compressed_mem).chunk(2, dim=-1)
        cmem_k, cmem_v = map(merge_heads, (cmem_k, cmem_v))
        cmem_k, cmem_v = map(lambda x: x.expand(-1, h, -1, -1), (cmem_k, cmem_v))

        old_mem_range = slice(- min(mem_len, self.mem_len) - self.seq_len, -self.seq_len)
        old_mem_k, old_mem_v = map(lambda x: x[:, :, old_mem_range].clone(), (k, v))

        q, old_mem_k, old_mem_v = map(torch.detach, (q, old_mem_k, old_mem_v))

        attn_fn = partial(full_attn, dropout_fn = self.reconstruction_attn_dropout)

        aux_loss = F.mse_loss(
            attn_fn(q, old_mem_k, old_mem_v),
            attn_fn(q, cmem_k, cmem_v)
        )

        return logits, Memory(new_mem, new_cmem), aux_loss


def build(d_model, num_heads, context_length):  # added for the zoo: as CompressiveTransformer's defaults
    return SelfAttention(d_model, context_length, context_length, context_length // 4, 4, num_heads)


# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "build"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("memory-lengths-required", "padding-mask-beside-own-causal-mask", "relative-position-argument",
             "fused-kv-over-memories", "compressor-trained-by-aux-loss", "tuple-output-memory-aux-loss")
FORWARD = "x, memories=None, pos_emb=None, input_mask=None, calc_memory=True, **kwargs"
NOTES = ("build(d_model, num_heads, context_length) = SelfAttention(d_model, context_length, context_length, "
         "context_length // 4, 4, num_heads); forward(x) -> (logits, Memory(mem, compressed_mem), aux_loss).")
OUTCOME = 'fail'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("the attention is the lesson's layer (reference-match passes), but the layer also carries "
                    "compress_mem_fn.conv, which gets no gradient from the output (its input is detached; an "
                    "auxiliary loss trains it): parameters-used and param-count fail under the lesson's contract; "
                    "no catalogued mistake fits - the conv is used in forward once the memory overflows")
