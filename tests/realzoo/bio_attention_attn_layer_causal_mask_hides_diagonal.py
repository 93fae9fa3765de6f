"""bio-attention's AttnLayer around its Attention operator (biological sequence models; Gaetan De Waele): one fused
`lin` = Linear(dim, 3 * dim) split [Q; K; V], einops heads, a positional PLUGIN that may modify q, k, v and the mask
(positional.Base: the identity), an inner Attention module that calls F.scaled_dot_product_attention (optionally
inside an sdpa_kernel context), `to_out`; forward(x, pos=None, mask=None, causal=False). A mask may be a (B, L)
key-padding bool mask, a (B, L, L) or (B, NH, L, L) bool keep-mask (made additive: 0 / -inf) or an additive float
mask; `causal` is a FORWARD flag (its TransformerDecoder passes causal=True to every layer, with the caller's mask).
"Unlike default pytorch implementation, both a mask and causal can be used jointly": then Attention.forward adds the
causal part itself with `torch.ones(L1, L2).triu(diagonal=0)` filled with -inf.

Source: https://github.com/gdewael/bio-attention (bio-attention 0.1.15 on PyPI, the distribution's Home-page), files
bio_attention/attention.py and bio_attention/positional.py as released in bio-attention 0.1.15.
Licence: MIT (the wheel's dist-info/licenses/LICENSE, "Copyright (c) 2022 Gaetan De Waele").
Copied: verbatim from the PyPI wheel bio-attention==0.1.15 (pip download --no-deps): lines 1-8 of
bio_attention/attention.py (imports) but lines 3 (`from einops import rearrange, repeat`) and 6 (`from bio_attention
import positional`), which the declared shims below replace; lines 33-145 (Attention) and 504-613 (AttnLayer); from
bio_attention/positional.py lines 9-37 (class Base, the default plugin; positional.py imports math, torch and nn as
attention.py does).
ADDED: `from __future__ import annotations` (AttnLayer's annotations name RandomAttention and WindowAttention,
which are not copied), a shim for einops' rearrange/repeat (the six patterns the copied blocks use; the real einops when installed),
`positional` as a namespace holding the copied Base, this entry's constants and the factory
`attn_layer(dim, nh)` = AttnLayer(dim, Attention(), nh=nh), the vanilla attention TransformerDecoder builds with its
default plugin ("none": positional.Base()).
Truth: bug. With causal=True and no mask (SDPA is_causal) it is the lesson's layer exactly (mha_forward with lin's
thirds and to_out); with causal=False it leaks. With causal=True AND a mask (what TransformerDecoder does whenever
its caller passes one, even an all-True padding mask) the causal part hides the DIAGONAL too (triu(diagonal=0) where
diagonal=1 was meant): every token loses itself and token 0 sees no key at all (its row is all -inf, which this
torch's SDPA turns into zero weights: position 0 is to_out's bias alone, whatever the input); every other row is the
lesson's softmax over the strictly earlier tokens only (proven in _truth.py against the lesson's function with the
diagonal hidden too). Evidence: the independent reference and the docstring's own promise ("both a mask and
causal can be used jointly"); no upstream report was found.
"""
from __future__ import annotations  # ADDED: the copied annotations name RandomAttention and WindowAttention, not copied

import torch
from torch import nn, einsum
import torch.nn.functional as F
import math
from typing import Optional, Literal, Union, List
from torch.nn.attention import sdpa_kernel, SDPBackend
# --- added for the zoo: a shim for `from einops import rearrange, repeat` (the six patterns the copied blocks use;
# the real einops when installed) ---
try:
    from einops import rearrange, repeat
except ImportError:  # pragma: no cover - depends on the environment
    def rearrange(t, pattern, **axes):
        if pattern == "b ... x n h -> (b ...) x n h":
            return t.reshape(-1, *t.shape[-3:])
        if pattern == "b ... n q k -> (b ...) n q k":
            return t.reshape(-1, *t.shape[-3:])
        if pattern == "... (n h) -> ... n h":
            return t.reshape(*t.shape[:-1], axes["n"], t.shape[-1] // axes["n"])
        if pattern == "... n h -> ... (n h)":
            return t.reshape(*t.shape[:-2], t.shape[-2] * t.shape[-1])
        raise NotImplementedError(f"rearrange shim: pattern {pattern!r} not supported")

    def repeat(t, pattern, **axes):
        if pattern == "... l -> ... (l2) l":
            return t.unsqueeze(-2).expand(*t.shape[:-1], axes["l2"], t.shape[-1])
        if pattern == "... l1 l2 -> ... nh l1 l2":
            return t.unsqueeze(-3).expand(*t.shape[:-2], axes["nh"], *t.shape[-2:])
        raise NotImplementedError(f"repeat shim: pattern {pattern!r} not supported")
# --- end of shim ---

TARGET = "attn_layer"
TRUTH = "bug"
BUG = "causal-with-mask-hides-diagonal"
RULE_GAPS = ("causal-only-with-forward-flag", "positional-plugin", "injected-attention-operator", "no-context-length",
             "mask-shapes-b-l-or-b-l-l")
FORWARD = "x, pos=None, mask=None, causal=False, **mod_kwargs"
NOTES = ("AttnLayer(dim, attn, nh=4, plugin=None); forward(x, pos=None, mask=None, causal=False) -> (B, n, dim). "
         "causal=True alone is right; causal=True with any mask hides the diagonal (row 0 gets no key).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("called with causal=True and no mask it is the lesson's layer; called as its TransformerDecoder calls it, "
                    "causal=True WITH a mask hiding nothing (a padding mask without padding), every token loses its own "
                    "key and token 0 sees no key at all: causal-leakage fails there (output 0 on input 0, output 1 on "
                    "input 1), a mistake of the math no catalogued mistake describes")


class Base(nn.Module):
    def __init__(self, divide=1.0, learned=False):
        super().__init__()
        self.learned = learned
        if not learned:
            self.div = divide
        else:
            self.div = nn.Parameter(torch.tensor(math.log(divide)))

        self.forward = self.mod_x

    def mod_x(self, x, pos=None, **kwargs):
        return x

    def mod_qkv(self, q, k, v, pos=None, **kwargs):
        return q, k, v

    def mod_mask(self, mask, q, k, v, pos=None, **kwargs):
        return mask

    def apply_pos_division(self, x):
        if not self.learned:
            return x / self.div
        else:
            return x / self.div.exp().clamp(min=1e-8)

    @staticmethod
    def default_pos_x(x):
        return torch.arange(x.size(-2), device=x.device).expand(*x.shape[:-1])


class Attention(nn.Module):
    """Scaled-dot product attention operator.
    For more information on kernels: see https://pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html

    Parameters
    ----------
    dropout : float, optional
        dropout rate in self attention matrix, by default 0.0
    enable_math : bool, optional
        allow PyTorch C++ implementation, by default True
    enable_flash : bool, optional
        allow FlashAttention implementation, by default True
    enable_mem_efficient : bool, optional
        allow Memory-Efficient implementation, by default True
    """

    def __init__(
        self,
        dropout: float = 0.0,
        enable_math: bool = True,
        enable_flash: bool = True,
        enable_mem_efficient: bool = True,
        **kwargs,
    ):
        super().__init__()
        self.dropout = dropout
        self.context_manager = []
        if enable_math:
            self.context_manager.append(SDPBackend.MATH)
        if enable_flash:
            self.context_manager.append(SDPBackend.FLASH_ATTENTION)
        if enable_mem_efficient:
            self.context_manager.append(SDPBackend.EFFICIENT_ATTENTION)

        self.use_context_manager = not all(
            [enable_math, enable_flash, enable_mem_efficient]
        )

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: Optional[torch.Tensor] = None,
        causal: bool = False,
    ) -> torch.Tensor:
        """Forward pass

        Parameters
        ----------
        q : torch.Tensor
            (B, *, L1, NH, H)
        k : torch.Tensor
            (B, *, L2, NH, H)
        v : torch.Tensor
            (B, *, L2, NH, H)
        mask : Optional[torch.Tensor], optional
            (B, *, NH, L1, L2), by default None
        causal : bool, optional
            Perform causal attention. Unlike default pytorch implementation, both a mask and causal can be used jointly, by default False

        Returns
        -------
        torch.Tensor
            (B, *, L1, NH, H)
        """
        q_shape = q.shape
        q, k, v = map(
            lambda t: rearrange(t, "b ... x n h -> (b ...) x n h").permute(0, 2, 1, 3),
            (q, k, v),
        )  # (B...), NH, L, H
        if mask is not None:
            mask = rearrange(mask, "b ... n q k -> (b ...) n q k")  # (B...), NH, L1, L2

        is_causal = False
        if causal and (mask is not None):
            causal_mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device)
            causal_mask = causal_mask.triu(diagonal=0).expand(
                q.shape[0], q.shape[1], -1, -1
            )
            mask = mask.masked_fill(
                causal_mask, -float("inf")
            )
        elif causal:
            is_causal = True

        if self.use_context_manager:
            with sdpa_kernel(self.context_manager):
                return (
                    F.scaled_dot_product_attention(
                        q,
                        k,
                        v,
                        dropout_p=(self.dropout if self.training else 0),
                        attn_mask=mask,
                        is_causal=is_causal,
                    )
                    .permute(0, 2, 1, 3)
                    .view(*q_shape)
                )
        else:
            return (
                F.scaled_dot_product_attention(
                    q,
                    k,
                    v,
                    dropout_p=(self.dropout if self.training else 0),
                    attn_mask=mask,
                    is_causal=is_causal,
                )
                .permute(0, 2, 1, 3)
                .view(*q_shape)
            )


class AttnLayer(nn.Module):
    """Self-attention layer performing
    (1) projection to q, k and v.
    (2) attention.
    (3) collapsing heads back to same shape as x.
    (4) Final linear project to z.

    Parameters
    ----------
    dim : int
        input and output hidden dimension of x
    attn : Union[Attention, RandomAttention, WindowAttention]
        attention operator. Default, random and windowed attention are implemented.
    nh : int, optional
        number of heads, dim should be divisible by this number, by default 4
    plugin : Optional[positional.Base], optional
        positional bias plugin, for options see the list of implemented biases, by default None
    """

    def __init__(
        self,
        dim: int,
        attn: Union[Attention, RandomAttention, WindowAttention],
        nh: int = 4,
        plugin: Optional[positional.Base] = None,
    ):
        super().__init__()
        assert dim % nh == 0, "dim should be divisible by number of heads"

        self.lin = nn.Linear(dim, 3 * dim)
        self.attn = attn
        self.nh = nh
        self.to_out = nn.Linear(dim, dim)

        self.plugin = plugin if plugin is not None else nn.ModuleList([positional.Base()])

    def forward(
        self,
        x: torch.Tensor,
        pos: Optional[torch.Tensor] = None,
        mask: Optional[torch.Tensor] = None,
        causal: bool = False,
        **mod_kwargs,
    ) -> torch.Tensor:
        """Forward pass

        Parameters
        ----------
        x : torch.Tensor
            (B, *, L, H)
        pos : Optional[torch.Tensor], optional
            (B, *, L) or (B, *, L-x), by default None
            If pos has a smaller sequence length than x, it is assumed x has extra tokens added in the beginning of its sequence such as CLS tokens.
            In this case, there is no position for these tokens. Positional biases will make sure those tokens do not partake in positional encoding.
        mask : Optional[torch.Tensor], optional
            By default None, but can be either:
            (1) (B, * L) or (B, * L-x). In this case, expects a boolean mask.
            This type of mask will be copied to (B, * NH, L, L) in a way such that no tokens can attend to positions indicated by False.
            This type of mask will extrapolate CLS tokens to not attend on positions indicated with False.
            (2) (B, * L, L) or (B, * L-x, L-x). In this case, can either be floating point or boolean mask.
            This type of mask will extrapolate CLS token to attend on all tokens.
            For this type of mask, the same mask is applied over all heads
            (3) (B, * NH, L, L) or (B, * NH, L-x, L-x)
            Ditto as previous case, but for this type of mask, different biases/masks can be applied per head.
        causal : bool, optional
            Perform causal attention, by default False

        Returns
        -------
        torch.Tensor
            (B, *, L, H)
        """
        q, k, v = torch.split(self.lin(x), x.size(-1), dim=-1)
        q, k, v = map(
            lambda t: rearrange(t, "... (n h) -> ... n h", n=self.nh), (q, k, v)
        )  # B, *, L, NH, H

        if mask is not None:
            if q.ndim - mask.ndim == 2:  # B, *, L -> B, *, L, L
                mask = repeat(mask, "... l -> ... (l2) l", l2=mask.shape[-1])
            if q.ndim - mask.ndim == 1:  # B, *, L, L  -> B, *, NH, L, L
                mask = repeat(mask, "... l1 l2 -> ... nh l1 l2", nh=q.shape[-2])

            assert mask.shape[:-3] == q.shape[:-3]
            if mask.dtype == torch.bool:
                mask = (~mask).to(q).masked_fill(~mask, -float("inf"))

            diff_k = k.shape[-3] - mask.shape[-1]
            diff_q = q.shape[-3] - mask.shape[-2]
            diff_k = (0 if diff_k < 0 else diff_k)
            diff_q = (0 if diff_q < 0 else diff_q)
            mask = F.pad(
                mask,
                (diff_k, 0, diff_q, 0),
                value=0,
            )

        mod_kwargs |= {"pos_q_k": pos}

        for plug in self.plugin:
            q, k, v = plug.mod_qkv(q, k, v, **mod_kwargs)
            mask = plug.mod_mask(mask, q, k, v, **mod_kwargs)

        return self.to_out(
            rearrange(
                self.attn(q, k, v, mask=mask, causal=causal),
                "... n h -> ... (n h)",
                n=self.nh,
            )
        )


# ---------------------------------------------------------------------------------------------------- ADDED
class positional:  # noqa: N801 - the copied AttnLayer reads `positional.Base`
    Base = Base


def attn_layer(dim, nh):
    """The vanilla self-attention layer of bio-attention's Transformer (attentiontype="vanilla", plugintype="none")."""
    return AttnLayer(dim, Attention(), nh=nh)
