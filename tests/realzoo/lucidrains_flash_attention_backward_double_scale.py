"""lucidrains/memory-efficient-attention-pytorch's first plain-PyTorch FlashAttention: a custom torch.autograd.Function that computes attention block by block with an online softmax (running row maxima and sums) and its own hand-written backward; FlashAttention(*, dim, heads=8, dim_head=64, causal=False, q_bucket_size=512, k_bucket_size=1024) with keyword-only arguments, to_q and a fused to_kv chunked [K; V], causal only with causal=True.

Source: https://github.com/lucidrains/memory-efficient-attention-pytorch (the repository the wheel's METADATA names), file memory_efficient_attention_pytorch/flash_attention.py as released in memory-efficient-attention-pytorch 0.0.19 on PyPI (0.0.20 and 0.0.21 hold the same classes). The project later stopped saving the pre-scaled q (the scale applied to the scores instead) and compared the running maximum with row_maxes, not row_sums.
Licence: MIT (the wheel's METADATA "License: MIT" and LICENSE in its dist-info, "Copyright (c) 2022 Phil Wang").
Copied: verbatim from the PyPI wheel memory-efficient-attention-pytorch==0.0.19 (pip download --no-deps): the whole of memory_efficient_attention_pytorch/flash_attention.py (lines 1-5 and 9-226) except line 7, `from einops import rearrange`, replaced by a shim (the two patterns the file uses; real einops when installed); every copied line compared by program with the unpacked wheel. ADDED: that shim and this entry's constants after it.
Truth: forward is right: with causal=True and every n up to a bucket (one block), out = to_out(causal MHA) with W_q = to_q, [W_k; W_v] = to_kv, scores * dim_head**-0.5, exact (all_row_sums and all_row_maxes are made in the default dtype: float32 unless it is changed). The second bug fixed by 33fb78a, `new_row_maxes = torch.maximum(block_row_maxes, row_sums)`, shifts the online softmax by max(row maximum, 0) instead of the row maximum: it cancels for ordinary scores, but a row whose scores all lie below about -745 (float64) underflows to 0 / 0 = nan; the reference stays finite (shown in _truth.py with W_k = -300 W_q). The hand-written backward is WRONG: forward saves q already multiplied by the scale, and backward scales it again (qc_scaled = qc * scale) and uses the scaled q for dk, so the recomputed probabilities are those of scores * dim_head**-1 renormalised with the true row statistics: the gradients of W_q, W_k, W_v and of x differ from autograd through the reference (shown in _truth.py), while W_o's and the output agree. Not a leak: position t never depends on a later token, in values or gradients.
"""
import math
import torch
from functools import partial
from torch import nn, einsum
from torch.autograd.function import Function

# --- added for the zoo: a shim for `from einops import rearrange` (the real einops when installed) ---
try:
    from einops import rearrange
except ImportError:  # pragma: no cover - depends on the environment
    def rearrange(t, pattern, **axes):
        if pattern == "b n (h d) -> b h n d":
            b, n, hd = t.shape
            h = axes["h"]
            return t.reshape(b, n, h, hd // h).permute(0, 2, 1, 3)
        if pattern == "b h n d -> b n (h d)":
            b, h, n, d = t.shape
            return t.permute(0, 2, 1, 3).reshape(b, n, h * d)
        raise NotImplementedError(f"rearrange shim: pattern {pattern!r} not supported")
# --- end of shim; copied blocks follow ---

TARGET = "FlashAttention"
TRUTH = "bug"
BUG = "hand-written backward scales q twice (fixed upstream in 33fb78a)"
RULE_GAPS = ("keyword-only-constructor", "causal-only-with-flag", "head-dim-argument", "custom-autograd-backward",
             "online-softmax-blocks", "no-qkv-bias", "no-divisibility-check", "no-context-length")
FORWARD = "x"
NOTES = ("FlashAttention(*, dim, heads=8, dim_head=64, causal=False, q_bucket_size=512, k_bucket_size=1024). "
         "forward(x, context=None, mask=None, q_bucket_size=None, k_bucket_size=None). Weights to_q (heads * "
         "dim_head, dim), to_kv (2 * heads * dim_head, dim) = [W_k; W_v], no biases; to_out (dim, heads * dim_head) "
         "with bias. The attention itself is FlashAttentionFunction.apply (custom backward).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = None
EXPECTED_BECAUSE = ('the forward is right for ordinary scores and the hand-written backward is wrong (q scaled twice): '
                    'gradient-match fails; with real scores near -5e4 the output turns nan (the running maximum '
                    'compared with row_sums): causal-leakage fails saying so, not as a leak; two bugs no catalogued '
                    'mistake describes, so none is named')


# constants

EPSILON = 1e-6

# helper functions

def exists(val):
    return val is not None

def default(val, d):
    return val if exists(val) else d

# flash attention forwards and backwards

class FlashAttentionFunction(Function):
    @staticmethod
    @torch.no_grad()
    def forward(ctx, q, k, v, mask, causal, q_bucket_size, k_bucket_size):
        device = q.device
        max_neg_value = -torch.finfo(q.dtype).max
        qk_len_diff = max(k.shape[-2] - q.shape[-2], 0)

        o = torch.zeros_like(q)
        all_row_sums = torch.zeros((*q.shape[:-1], 1), device = device)
        all_row_maxes = torch.full((*q.shape[:-1], 1), max_neg_value, device = device)

        scale = (q.shape[-1] ** -0.5)
        q = q * scale

        if not exists(mask):
            mask = (None,) * math.ceil(q.shape[-2] / q_bucket_size)
        else:
            mask = mask.split(q_bucket_size, dim = -2)

        row_splits = zip(
            q.split(q_bucket_size, dim = -2),
            o.split(q_bucket_size, dim = -2),
            mask,
            all_row_sums.split(q_bucket_size, dim = -2),
            all_row_maxes.split(q_bucket_size, dim = -2),
        )

        for ind, (qc, oc, row_mask, row_sums, row_maxes) in enumerate(row_splits):
            q_start_index = ind * q_bucket_size - qk_len_diff

            col_splits = zip(
                k.split(k_bucket_size, dim = -2),
                v.split(k_bucket_size, dim = -2),
            )

            for k_ind, (kc, vc) in enumerate(col_splits):
                k_start_index = k_ind * k_bucket_size

                attn_weights = einsum('... i d, ... j d -> ... i j', qc, kc)

                if exists(row_mask):
                    attn_weights.masked_fill_(~row_mask, max_neg_value)

                if causal and q_start_index < (k_start_index + k_bucket_size - 1):
                    causal_mask = torch.ones((qc.shape[-2], kc.shape[-2]), dtype = torch.bool, device = device).triu(q_start_index - k_start_index + 1)
                    attn_weights.masked_fill_(causal_mask, max_neg_value)

                block_row_maxes = attn_weights.amax(dim = -1, keepdims = True)

                attn_weights -= block_row_maxes
                exp_weights = torch.exp(attn_weights)

                if exists(row_mask):
                    exp_weights.masked_fill_(~row_mask, 0.)

                block_row_sums = exp_weights.sum(dim = -1, keepdims = True).clamp(min = EPSILON)

                new_row_maxes = torch.maximum(block_row_maxes, row_sums)

                exp_values = einsum('... i j, ... j d -> ... i d', exp_weights, vc)

                exp_row_max_diff = torch.exp(row_maxes - new_row_maxes)
                exp_block_row_max_diff = torch.exp(block_row_maxes - new_row_maxes)

                new_row_sums = exp_row_max_diff * row_sums + exp_block_row_max_diff * block_row_sums

                out = (row_sums / new_row_sums) * exp_row_max_diff * oc + \
                      (exp_block_row_max_diff / new_row_sums) * exp_values

                oc.copy_(out)
                row_maxes.copy_(new_row_maxes)
                row_sums.copy_(new_row_sums)

        ctx.args = (causal, mask, q_bucket_size, k_bucket_size)
        ctx.save_for_backward(q, k, v, o, all_row_sums, all_row_maxes)

        return o

    @staticmethod
    @torch.no_grad()
    def backward(ctx, do):
        causal, mask, q_bucket_size, k_bucket_size = ctx.args
        q, k, v, o, l, m = ctx.saved_tensors

        device = q.device

        max_neg_value = -torch.finfo(q.dtype).max
        qk_len_diff = max(k.shape[-2] - q.shape[-2], 0)

        dq = torch.zeros_like(q)
        dk = torch.zeros_like(k)
        dv = torch.zeros_like(v)

        scale = q.shape[-1] ** -0.5

        row_splits = zip(
            q.split(q_bucket_size, dim = -2),
            o.split(q_bucket_size, dim = -2),
            do.split(q_bucket_size, dim = -2),
            mask,
            l.split(q_bucket_size, dim = -2),
            m.split(q_bucket_size, dim = -2),
            dq.split(q_bucket_size, dim = -2)
        )

        for ind, (qc, oc, doc, row_mask, lc, mc, dqc) in enumerate(row_splits):
            q_start_index = ind * q_bucket_size - qk_len_diff

            col_splits = zip(
                k.split(k_bucket_size, dim = -2),
                v.split(k_bucket_size, dim = -2),
                dk.split(k_bucket_size, dim = -2),
                dv.split(k_bucket_size, dim = -2),
            )

            for k_ind, (kc, vc, dkc, dvc) in enumerate(col_splits):
                k_start_index = k_ind * k_bucket_size

                qc_scaled = qc * scale
                attn_weights = einsum('... i d, ... j d -> ... i j', qc_scaled, kc)

                if causal and q_start_index < (k_start_index + k_bucket_size - 1):
                    causal_mask = torch.ones((qc.shape[-2], kc.shape[-2]), dtype = torch.bool, device = device).triu(q_start_index - k_start_index + 1)
                    attn_weights.masked_fill_(causal_mask, max_neg_value)

                exp_attn_weights = torch.exp(attn_weights - mc)

                if exists(row_mask):
                    exp_attn_weights.masked_fill_(~row_mask, 0.)

                p = exp_attn_weights / lc

                dv_chunk = einsum('... i j, ... i d -> ... j d', p, doc)
                dp = einsum('... i d, ... j d -> ... i j', doc, vc)

                D = (doc * oc).sum(dim = -1, keepdims = True)
                ds = p * scale * (dp - D)

                dq_chunk = einsum('... i j, ... j d -> ... i d', ds, kc)
                dk_chunk = einsum('... i j, ... i d -> ... j d', ds, qc)

                dqc.add_(dq_chunk)
                dkc.add_(dk_chunk)
                dvc.add_(dv_chunk)

        return dq, dk, dv, None, None, None, None

# main class

# just flash attention in plain pytorch
# it will be way slower than implementing it in CUDA
# for tinkering and educational purposes

class FlashAttention(nn.Module):
    def __init__(
        self,
        *,
        dim,
        heads = 8,
        dim_head = 64,
        causal = False,
        q_bucket_size = 512,
        k_bucket_size = 1024
    ):
        super().__init__()
        self.heads = heads

        self.causal = causal

        inner_dim = heads * dim_head

        self.to_q = nn.Linear(dim, inner_dim, bias = False)
        self.to_kv = nn.Linear(dim, inner_dim * 2, bias = False)
        self.to_out = nn.Linear(inner_dim, dim)

        # memory efficient attention related parameters
        # can be overriden on forward
        self.q_bucket_size = q_bucket_size
        self.k_bucket_size = k_bucket_size

    def forward(
        self,
        x,
        context = None,
        mask = None,
        q_bucket_size = None,
        k_bucket_size = None,
    ):
        q_bucket_size = default(q_bucket_size, self.q_bucket_size)
        k_bucket_size = default(k_bucket_size, self.k_bucket_size)

        h = self.heads
        context = default(context, x)

        q = self.to_q(x)
        k, v = self.to_kv(context).chunk(2, dim = -1)

        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h = h), (q, k, v))

        out = FlashAttentionFunction.apply(q, k, v, mask, self.causal, q_bucket_size, k_bucket_size)

        out = rearrange(out, 'b h n d -> b n (h d)')
        return self.to_out(out)
