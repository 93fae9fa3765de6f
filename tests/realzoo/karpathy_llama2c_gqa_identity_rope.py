"""llama2.c Attention run as grouped-query attention (n_kv_heads < n_heads), RoPE made the identity by an added factory.

Source: https://github.com/karpathy/llama2.c/blob/c05b45a5917130e090263fc222573d5251cbe0af/model.py (dataclass ModelArgs; functions precompute_freqs_cis, reshape_for_broadcast, apply_rotary_emb, repeat_kv; class Attention). The copied block is the same text as tests/realzoo/karpathy_llama2c_attention_identity_rope.py (see its docstring for how it was placed in history: read_file at that commit in the search index, not cross-checked against a fetched git history).
Licence: MIT (Copyright (c) 2023 Andrej), LICENSE at the repository root (index commit 7316578).
Copied: verbatim (ModelArgs, and the contiguous block from precompute_freqs_cis to the end of Attention.forward, character for character; RMSNorm, which sits between them upstream, is left out). Imports reduced to the ones the copied code uses. Rotary embedding NOT stripped from the code: the added wrapper _WithRope passes cos = 1, sin = 0 (rotation by angle 0), which makes it the identity; the factory make_identity_rope_gqa(d, heads, n_kv_heads, context_length, dropout=0.0) is added below the copied block (also make_identity_rope, make_real_rope as in the other entry).
Truth: correct causal grouped-query attention when RoPE is the identity: wq Linear(dim, H*dh, bias=False), wk/wv Linear(dim, n_kv_heads*dh, bias=False), view(B, T, H|KV, dh), repeat_kv(n_rep) = repeat_interleave on the heads (query head h uses key/value head h // n_rep), transpose(1, 2), F.scaled_dot_product_attention(is_causal=True, dropout_p only in training), merge transpose(1, 2).contiguous().view(B, T, -1), wo Linear(H*dh, dim, bias=False) - NO output-projection bias, and NO divisibility check of dim by n_heads (only n_heads % n_kv_heads is asserted).
"""
import math
from dataclasses import dataclass
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

TARGET = "make_identity_rope_gqa"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("no-out-proj-bias", "no-divisibility-check", "needs-rope-args", "float32-rope")
FORWARD = "x, freqs_cos, freqs_sin"
NOTES = "Attention(args: ModelArgs) reads dim, n_heads, n_kv_heads, max_seq_len, dropout; TARGET is the added factory make_identity_rope_gqa(d, heads, n_kv_heads, context_length, dropout=0.0), a _WithRope wrapper whose forward(x) passes cos = 1, sin = 0. n_kv_heads is the number of key/value heads; the layer asserts n_heads % n_kv_heads == 0 but not dim % n_heads."
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = 'no-divisibility-check'
EXPECTED_BECAUSE = 'math correct as grouped-query attention (identity RoPE, n_kv_heads bound per configuration); dim % n_heads is never checked (divisibility); out-proj-bias does not apply to the grouped form'


@dataclass
class ModelArgs:
    # default hyperparameters for the Llama 7B model
    dim: int = 4096
    n_layers: int = 32
    n_heads: int = 32
    n_kv_heads: Optional[int] = None
    vocab_size: int = 32000
    hidden_dim: Optional[int] = None
    multiple_of: int = 256  # MLP hidden layer size will be multiple of
    norm_eps: float = 1e-5
    max_seq_len: int = 2048
    dropout: float = 0.0


def precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)  # type: ignore
    freqs = torch.outer(t, freqs).float()  # type: ignore
    freqs_cos = torch.cos(freqs)  # real part
    freqs_sin = torch.sin(freqs)  # imaginary part
    return freqs_cos, freqs_sin

def reshape_for_broadcast(freqs_cis: torch.Tensor, x: torch.Tensor):
    ndim = x.ndim
    assert 0 <= 1 < ndim
    assert freqs_cis.shape == (x.shape[1], x.shape[-1])
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(shape)

def apply_rotary_emb(
    xq: torch.Tensor,
    xk: torch.Tensor,
    freqs_cos: torch.Tensor,
    freqs_sin: torch.Tensor
) -> Tuple[torch.Tensor, torch.Tensor]:

    # reshape xq and xk to match the complex representation
    xq_r, xq_i = xq.float().reshape(xq.shape[:-1] + (-1, 2)).unbind(-1)
    xk_r, xk_i = xk.float().reshape(xk.shape[:-1] + (-1, 2)).unbind(-1)

    # reshape freqs_cos and freqs_sin for broadcasting
    freqs_cos = reshape_for_broadcast(freqs_cos, xq_r)
    freqs_sin = reshape_for_broadcast(freqs_sin, xq_r)

    # apply rotation using real numbers
    xq_out_r = xq_r * freqs_cos - xq_i * freqs_sin
    xq_out_i = xq_r * freqs_sin + xq_i * freqs_cos
    xk_out_r = xk_r * freqs_cos - xk_i * freqs_sin
    xk_out_i = xk_r * freqs_sin + xk_i * freqs_cos

    # flatten last two dimensions
    xq_out = torch.stack([xq_out_r, xq_out_i], dim=-1).flatten(3)
    xk_out = torch.stack([xk_out_r, xk_out_i], dim=-1).flatten(3)

    return xq_out.type_as(xq), xk_out.type_as(xk)

def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """torch.repeat_interleave(x, dim=2, repeats=n_rep)"""
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return (
        x[:, :, :, None, :]
        .expand(bs, slen, n_kv_heads, n_rep, head_dim)
        .reshape(bs, slen, n_kv_heads * n_rep, head_dim)
    )

class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_kv_heads = args.n_heads if args.n_kv_heads is None else args.n_kv_heads
        assert args.n_heads % self.n_kv_heads == 0
        model_parallel_size = 1
        self.n_local_heads = args.n_heads // model_parallel_size
        self.n_local_kv_heads = self.n_kv_heads // model_parallel_size
        self.n_rep = self.n_local_heads // self.n_local_kv_heads
        self.head_dim = args.dim // args.n_heads
        self.wq = nn.Linear(args.dim, args.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(args.n_heads * self.head_dim, args.dim, bias=False)
        self.attn_dropout = nn.Dropout(args.dropout)
        self.resid_dropout = nn.Dropout(args.dropout)
        self.dropout = args.dropout

        # use flash attention or a manual implementation?
        self.flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention')
        if not self.flash:
            print("WARNING: using slow attention. Flash Attention requires PyTorch >= 2.0")
            mask = torch.full((1, 1, args.max_seq_len, args.max_seq_len), float("-inf"))
            mask = torch.triu(mask, diagonal=1)
            self.register_buffer("mask", mask)

    def forward(
        self,
        x: torch.Tensor,
        freqs_cos: torch.Tensor,
        freqs_sin: torch.Tensor,
    ):
        bsz, seqlen, _ = x.shape

        # QKV
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        xq = xq.view(bsz, seqlen, self.n_local_heads, self.head_dim)
        xk = xk.view(bsz, seqlen, self.n_local_kv_heads, self.head_dim)
        xv = xv.view(bsz, seqlen, self.n_local_kv_heads, self.head_dim)

        # RoPE relative positional embeddings
        xq, xk = apply_rotary_emb(xq, xk, freqs_cos, freqs_sin)

        # grouped multiquery attention: expand out keys and values
        xk = repeat_kv(xk, self.n_rep)  # (bs, seqlen, n_local_heads, head_dim)
        xv = repeat_kv(xv, self.n_rep)  # (bs, seqlen, n_local_heads, head_dim)

        # make heads into a batch dimension
        xq = xq.transpose(1, 2)  # (bs, n_local_heads, seqlen, head_dim)
        xk = xk.transpose(1, 2)
        xv = xv.transpose(1, 2)

        # flash implementation
        if self.flash:
            output = torch.nn.functional.scaled_dot_product_attention(xq, xk, xv, attn_mask=None, dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        else:
            # manual implementation
            scores = torch.matmul(xq, xk.transpose(2, 3)) / math.sqrt(self.head_dim)
            assert hasattr(self, 'mask')
            scores = scores + self.mask[:, :, :seqlen, :seqlen]   # (bs, n_local_heads, seqlen, cache_len + seqlen)
            scores = F.softmax(scores.float(), dim=-1).type_as(xq)
            scores = self.attn_dropout(scores)
            output = torch.matmul(scores, xv)  # (bs, n_local_heads, seqlen, head_dim)

        # restore time as batch dimension and concat heads
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)

        # final projection into the residual stream
        output = self.wo(output)
        output = self.resid_dropout(output)
        return output


# --- added wrapper and factories (not part of the original): forward(x) only, RoPE tables made per call ---
class _WithRope(nn.Module):
    def __init__(self, attn, identity):
        super().__init__()
        self.attn = attn
        self.identity = identity

    def forward(self, x):
        T = x.shape[1]
        hd = self.attn.head_dim
        if self.identity:  # RoPE turned off: rotation by angle 0
            cos = torch.ones(T, hd // 2, dtype=x.dtype, device=x.device)
            sin = torch.zeros(T, hd // 2, dtype=x.dtype, device=x.device)
        else:
            cos, sin = precompute_freqs_cis(hd, T)
            cos, sin = cos.to(x), sin.to(x)
        return self.attn(x, cos, sin)


def make_identity_rope(d, heads, context_length, dropout=0.0):
    return _WithRope(Attention(ModelArgs(dim=d, n_heads=heads, max_seq_len=context_length, dropout=dropout)), True)


def make_real_rope(d, heads, context_length, dropout=0.0):
    return _WithRope(Attention(ModelArgs(dim=d, n_heads=heads, max_seq_len=context_length, dropout=dropout)), False)


def make_identity_rope_gqa(d, heads, n_kv_heads, context_length, dropout=0.0):
    return _WithRope(Attention(ModelArgs(dim=d, n_heads=heads, n_kv_heads=n_kv_heads, max_seq_len=context_length,
                                         dropout=dropout)), True)
