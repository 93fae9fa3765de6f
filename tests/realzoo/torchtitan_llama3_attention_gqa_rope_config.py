"""torchtitan's Llama 3 Attention(model_args): a dataclass config (TransformerModelArgs), separate wq/wk/wv/wo without bias, grouped-query heads (n_kv_heads) repeated by repeat_kv, rotary embedding through complex numbers (freqs_cis, interleaved pairs, float32), F.scaled_dot_product_attention(is_causal=True) behind a module built by build_attention.

Source: https://github.com/pytorch/torchtitan (the repository the wheel's METADATA names), files torchtitan/models/llama3/model/model.py (functions precompute_freqs_cis, reshape_for_broadcast, apply_rotary_emb, repeat_kv, class Attention), torchtitan/models/llama3/model/args.py (the dataclass TransformerModelArgs), torchtitan/models/attention.py (class ScaledDotProductAttention, function build_attention) and torchtitan/tools/utils.py (has_cuda_capability) as released in torchtitan 0.1.0 on PyPI. The file's Transformer registers freqs_cis = precompute_freqs_cis(dim // n_heads, max_seq_len * 2, rope_theta) as a buffer and passes the WHOLE table to every layer; reshape_for_broadcast slices its first seqlen rows.
Licence: BSD-3-Clause (the wheel's METADATA "License: BSD 3-Clause License" and its dist-info licenses/LICENSE, "(c) Meta Platforms, Inc. and affiliates."; each file's header: "Copyright (c) Meta Platforms, Inc. and affiliates. All rights reserved. This source code is licensed under the BSD-style license found in the LICENSE file in the root directory of this source tree.").
Copied: verbatim from the PyPI wheel torchtitan==0.1.0 (pip download --no-deps), cut by line range: model.py's lines 1-7 (header) and 10-12 (imports; its torchtitan and relative imports are left out), args.py's line 10 (`from dataclasses import dataclass`), attention.py's lines 9 and 13 (imports; lines 11-12 repeat model.py's torch imports, and the flex_attention imports of lines 14-19 and line 21, `from torchtitan.tools.utils import has_cuda_capability`, are left out), tools/utils.py's lines 19-23 (has_cuda_capability), args.py's lines 19-79 (TransformerModelArgs), attention.py's lines 183-231 (ScaledDotProductAttention, build_attention) and model.py's lines 20-198 (precompute_freqs_cis through Attention). FeedForward, TransformerBlock, Transformer and FlexAttention are left out. ADDED: stand-ins for the package's own names the copied code refers to (BaseModelArgs, JobConfig and Tokenizer, used as a base class and in annotations only; FlexAttention, reached only with use_flex_attn=True), this entry's constants after the imports, and below the copied block a wrapper that passes the rotary table as the file's Transformer does, and the factory make_gqa_rope(d, heads, n_kv_heads, context_length) (TARGET).
Truth: correct causal grouped-query attention with rotary position embedding: q = x W_q^T, k = x W_k^T, v = x W_v^T (no biases), heads of width dim // n_heads, RoPE on q and k by complex multiplication of consecutive pairs (the interleaved convention, theta 10000, tables in float32), key/value head j serves query heads j*n_rep .. (j+1)*n_rep - 1 (repeat_kv = repeat_interleave), SDPA with is_causal=True, merge transpose(1, 2).contiguous().view, wo without bias. No divisibility check; n_kv_heads must divide n_heads (not checked either).
"""
# Copyright (c) Meta Platforms, Inc. and affiliates.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.
#
# Copyright (c) Meta Platforms, Inc. All Rights Reserved.


import torch
import torch.nn.functional as F
from torch import nn
from dataclasses import dataclass
from typing import Callable, ClassVar
from torch.nn.attention import sdpa_kernel, SDPBackend


# --- added for the zoo: stand-ins for the package's own imports the copied code names (the real ones when installed) ---
try:
    from torchtitan.components.tokenizer import Tokenizer
    from torchtitan.config_manager import JobConfig
    from torchtitan.models.attention import FlexAttention
    from torchtitan.protocols.train_spec import BaseModelArgs
except ImportError:  # pragma: no cover - depends on the environment
    class Tokenizer:  # an annotation of update_from_config only
        pass

    class JobConfig:  # an annotation of update_from_config only
        pass

    class BaseModelArgs:  # torchtitan's base class only types its model arguments
        pass

    class FlexAttention(torch.nn.Module):  # reached only with use_flex_attn=True
        def __init__(self, *args, **kwargs):
            raise NotImplementedError("FlexAttention is not part of this entry (stand-in)")
# --- end of stand-ins ---

TARGET = "make_gqa_rope"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("no-out-proj-bias", "no-divisibility-check", "needs-rope-table-argument", "float32-rope", "config-object")
FORWARD = "x (via the factory)"
NOTES = ("Attention(model_args): model_args.dim, n_heads, n_kv_heads (None = n_heads). forward(x, freqs_cis): the "
         "complex rotary table (at least seqlen rows, width head_dim // 2). make_gqa_rope(d, heads, n_kv_heads, "
         "context_length) wraps it with the table the file's Transformer builds (max_seq_len * 2 rows). Weights wq, wk, "
         "wv, wo, no biases.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = 'no-divisibility-check'
EXPECTED_BECAUSE = 'correct and causal GQA with interleaved RoPE (float32 tables); one lesson rule broken: no divisibility check (named, truly absent: dim 8 with 3 heads builds heads of width 2)'


def has_cuda_capability(major: int, minor: int) -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() >= (
        major,
        minor,
    )


@dataclass
class TransformerModelArgs(BaseModelArgs):
    dim: int = 4096
    n_layers: int = 32
    n_heads: int = 32
    n_kv_heads: int | None = None
    vocab_size: int = -1  # defined later by tokenizer
    multiple_of: int = 256  # make SwiGLU hidden layer size multiple of large power of 2
    ffn_dim_multiplier: float | None = None
    norm_eps: float = 1e-5
    rope_theta: float = 10000

    max_seq_len: int = 2048
    # If `True`, then each transformer block init uses its layer ID, and if
    # `False`, each uses the total number of transformer blocks
    depth_init: bool = True

    use_flex_attn: bool = False
    attn_mask_type: str = "causal"
    eos_id: int = 0

    def update_from_config(self, job_config: JobConfig, tokenizer: Tokenizer) -> None:
        self.vocab_size = tokenizer.n_words
        self.max_seq_len = job_config.training.seq_len
        self.eos_id = tokenizer.eos_id

        if job_config.activation_checkpoint.mode == "selective" and self.use_flex_attn:
            raise ValueError(
                "FlexAttention is not compatible with selective AC yet. "
                "See https://github.com/pytorch/pytorch/issues/147879"
            )

        if job_config.parallelism.context_parallel_degree > 1 and self.use_flex_attn:
            raise ValueError(
                "FlexAttention is not compatible with CP yet. "
                "We are still working on this."
            )

    def get_nparams_and_flops(self, model: nn.Module, seq_len: int) -> tuple[int, int]:
        nparams = sum(p.numel() for p in model.parameters())
        nparams_embedding = sum(
            sum(p.numel() for p in m.parameters())
            for m in model.children()
            if isinstance(m, nn.Embedding)
        )

        l, h, q, t = (
            self.n_layers,
            self.n_heads,
            self.dim // self.n_heads,
            seq_len,
        )
        # Reasoning behind the factor of 12 for the self-attention part of the formula:
        # 1. each self-attention has 2 matmul in the forward and 4 in the backward (6)
        # 2. the flash attention does 1 more matmul recomputation in the backward
        #    but recomputation should not be counted in calculating MFU           (+0)
        # 3. each matmul performs 1 multiplication and 1 addition                 (*2)
        # 4. we follow the convention and do not account for sparsity in causal attention
        num_flops_per_token = 6 * (nparams - nparams_embedding) + 12 * l * h * q * t

        return nparams, num_flops_per_token


class ScaledDotProductAttention(torch.nn.Module):
    backends: ClassVar[list[SDPBackend]] = []

    def __init__(self, attn_mask_type: str) -> None:
        super().__init__()
        if attn_mask_type != "causal":
            raise ValueError(
                "TorchTitan with SDPA currently only supports causal mask."
            )

        ScaledDotProductAttention._init_backend()

    @classmethod
    def _init_backend(cls) -> None:
        if cls.backends:
            return

        # Add CuDNN on B200 w/ highest priority
        cls.backends = [
            SDPBackend.FLASH_ATTENTION,
            SDPBackend.EFFICIENT_ATTENTION,
            SDPBackend.MATH,
        ]
        if has_cuda_capability(10, 0):
            cls.backends.insert(0, SDPBackend.CUDNN_ATTENTION)

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> torch.Tensor:
        assert self.backends, "SDPA Backends should not be empty."
        with sdpa_kernel(self.backends, set_priority=True):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def build_attention(
    use_flex_attn: bool, attn_mask_type: str, fixed_block_size: int | None = None
):
    if use_flex_attn:
        return FlexAttention(attn_mask_type, fixed_block_size)
    else:
        if fixed_block_size is not None:
            raise ValueError(
                "TorchTitan with SDPA currently does not support fixed_block_size."
            )
        if attn_mask_type != "causal":
            raise ValueError(
                "TorchTitan with SDPA currently only supports causal mask."
            )
        return ScaledDotProductAttention(attn_mask_type)


def precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0) -> torch.Tensor:
    """
    Precompute the frequency tensor for complex exponentials (cis) with given dimensions.

    This function calculates a frequency tensor with complex exponentials using the given dimension 'dim'
    and the end index 'end'. The 'theta' parameter scales the frequencies.
    The returned tensor contains complex values in complex64 data type.

    Args:
        dim (int): Dimension of the frequency tensor.
        end (int): End index for precomputing frequencies.
        theta (float | None): Scaling factor for frequency computation. Defaults to 10000.0.

    Returns:
        torch.Tensor: Precomputed frequency tensor with complex exponentials.
    """
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)  # complex64
    return freqs_cis


def reshape_for_broadcast(freqs_cis: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """
    Reshape frequency tensor for broadcasting it with another tensor.

    This function reshapes the frequency tensor to have the same shape as the target tensor 'x'
    for the purpose of broadcasting the frequency tensor during element-wise operations.

    The input freqs_cis tensor is assumed to be of shape (max_seqlen, dim),
    and the first seqlen elements will be sliced, but dim must match x.

    Args:
        freqs_cis (torch.Tensor): Frequency tensor to be reshaped.
        x (torch.Tensor): Target tensor for broadcasting compatibility.

    Returns:
        torch.Tensor: Reshaped frequency tensor.
    """
    ndim = x.ndim
    assert ndim > 1
    seqlen = x.shape[1]
    freqs_cis = freqs_cis[0:seqlen]
    assert freqs_cis.shape == (seqlen, x.shape[-1])
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)


def apply_rotary_emb(
    xq: torch.Tensor,
    xk: torch.Tensor,
    freqs_cis: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """
    Apply rotary embeddings to input tensors using the given frequency tensor.

    This function applies rotary embeddings to the given query 'xq' and key 'xk' tensors using the provided
    frequency tensor 'freqs_cis'. The input tensors are reshaped as complex numbers, and the frequency tensor
    is reshaped for broadcasting compatibility. The resulting tensors contain rotary embeddings and are
    returned as real tensors.

    Args:
        xq (torch.Tensor): Query tensor to apply rotary embeddings.
        xk (torch.Tensor): Key tensor to apply rotary embeddings.
        freqs_cis (torch.Tensor): Precomputed frequency tensor for complex exponentials.

    Returns:
        tuple[torch.Tensor, torch.Tensor]: Tuple of modified query tensor and key tensor with rotary embeddings.
    """
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """torch.repeat_interleave(x, dim=2, repeats=n_rep)"""
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return (
        torch.unsqueeze(x, dim=3)
        .expand(bs, slen, n_kv_heads, n_rep, head_dim)
        .reshape(bs, slen, n_kv_heads * n_rep, head_dim)
    )


class Attention(nn.Module):
    """
    Multi-head attention module.

    Args:
        model_args (TransformerModelArgs): Model configuration arguments.

    Attributes:
        n_kv_heads (int): Number of key and value heads.
        n_heads (int): Number of query heads.
        n_rep (int): Number of repetitions for local heads.
        head_dim (int): Dimension size of each attention head.
        wq (Linear): Linear transformation for queries.
        wk (Linear): Linear transformation for keys.
        wv (Linear): Linear transformation for values.
        wo (Linear): Linear transformation for output.

    """

    def __init__(self, model_args: TransformerModelArgs):
        super().__init__()
        self.n_heads = model_args.n_heads
        self.n_kv_heads = (
            model_args.n_heads
            if model_args.n_kv_heads is None
            else model_args.n_kv_heads
        )
        self.n_rep = self.n_heads // self.n_kv_heads
        self.head_dim = model_args.dim // model_args.n_heads

        self.wq = nn.Linear(
            model_args.dim, model_args.n_heads * self.head_dim, bias=False
        )
        self.wk = nn.Linear(model_args.dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(model_args.dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(
            model_args.n_heads * self.head_dim, model_args.dim, bias=False
        )
        self.sdpa = build_attention(model_args.use_flex_attn, model_args.attn_mask_type)

    def init_weights(self, init_std: float):
        for linear in (self.wq, self.wk, self.wv):
            nn.init.trunc_normal_(linear.weight, mean=0.0, std=0.02)
        nn.init.trunc_normal_(self.wo.weight, mean=0.0, std=init_std)

    def forward(
        self,
        x: torch.Tensor,
        freqs_cis: torch.Tensor,
    ):
        """
        Forward pass of the attention module.

        Args:
            x (torch.Tensor): Input tensor.
            freqs_cis (torch.Tensor): Precomputed frequency tensor.

        Returns:
            torch.Tensor: Output tensor after attention.

        """

        bs, seqlen, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)

        # Use -1 instead of `n_heads` (or `n_kv_heads`) to infer the actual
        # local heads from sizes of xq, xk, and xv as TP may have sharded them
        # after the above linear ops.
        xq = xq.view(bs, seqlen, -1, self.head_dim)
        xk = xk.view(bs, seqlen, -1, self.head_dim)
        xv = xv.view(bs, seqlen, -1, self.head_dim)

        xq, xk = apply_rotary_emb(xq, xk, freqs_cis=freqs_cis)

        # repeat k/v heads if n_kv_heads < n_heads
        keys = repeat_kv(xk, self.n_rep)  # (bs, seqlen, n_local_heads, head_dim)
        values = repeat_kv(xv, self.n_rep)  # (bs, seqlen, n_local_heads, head_dim)

        xq = xq.transpose(1, 2)  # (bs, n_local_heads, seqlen, head_dim)
        xk = keys.transpose(1, 2)  # (bs, n_local_heads, seqlen, head_dim)
        xv = values.transpose(1, 2)  # (bs, n_local_heads, seqlen, head_dim)

        output = self.sdpa(xq, xk, xv)

        output = output.transpose(
            1, 2
        ).contiguous()  # (bs, seqlen, n_local_heads, head_dim)
        output = output.view(bs, seqlen, -1)
        return self.wo(output)


# ---------------------------------------------------------------------------------------------- added for the zoo
class _WithFreqsCis(nn.Module):
    """What torchtitan's Transformer passes to each Attention: its whole freqs_cis buffer (max_seq_len * 2 rows)."""

    def __init__(self, attention, model_args):
        super().__init__()
        self.attention = attention
        self.register_buffer("freqs_cis", precompute_freqs_cis(model_args.dim // model_args.n_heads,
                                                               model_args.max_seq_len * 2, model_args.rope_theta),
                             persistent=True)

    def forward(self, x):
        return self.attention(x, self.freqs_cis)


def make_gqa_rope(d, heads, n_kv_heads, context_length):
    model_args = TransformerModelArgs(dim=d, n_heads=heads, n_kv_heads=n_kv_heads, max_seq_len=context_length)
    return _WithFreqsCis(Attention(model_args), model_args)
