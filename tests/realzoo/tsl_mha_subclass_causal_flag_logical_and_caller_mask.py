"""torch-spatiotemporal (tsl) 0.9.5's MultiHeadAttention: a SUBCLASS of torch.nn.MultiheadAttention for
spatiotemporal data (batch, time, nodes, features), MultiHeadAttention(embed_dim, heads, qdim=None, kdim=None,
vdim=None, axis='time', add_bias_kv=False, add_zero_attn=False, causal=False, dropout=0., bias=True, ...): the input
rearranged with einops to (time, batch * nodes, features) for the parent's sequence-first layout
(batch_first=False), a causal FLAG in the constructor that builds triu(ones(n, n), 1) (bool, True = masked) in
forward, and a caller's attn_mask combined with it by torch.logical_and; forward(query, key=None, value=None,
key_padding_mask=None, need_weights=True, attn_mask=None) returns (output, weights).

Source: https://github.com/TorchSpatiotemporal/tsl (the wheel's METADATA Home-page), file
tsl/nn/layers/base/attention.py as released in torch-spatiotemporal 0.9.5 on PyPI.  Its caller:
tsl/nn/blocks/encoders/transformer.py, TransformerLayer(input_size, hidden_size, ff_size, n_heads, axis='time',
causal=True, ...), whose forward(x, mask=None) calls `self.att(self.norm1(x), attn_mask=mask)[0]`.
Licence: MIT (LICENSE in the wheel's dist-info, "Copyright (c) 2022 Andrea Cini, Ivan Marisca"; METADATA "License:
MIT").
Copied: verbatim from the PyPI wheel torch-spatiotemporal==0.9.5 (pip download --no-deps), every copied line compared
by program with the unpacked wheel: lines 1-2 and 4 and 6 (imports), 53-59 (_get_causal_mask) and 108-231 (class
MultiHeadAttention, whole).  Left out: line 5 (einops), 7-8 (torch_geometric's Linear and OptTensor), 10
(tsl's activation helper), 13-52 (PositionalEncoding), 62-107 (AttentionEncoder) and 232-end.
ADDED: this docstring, the stand-ins for einops' rearrange (three patterns; the real einops when installed),
torch_geometric's OptTensor (Optional[Tensor]) and Linear (torch's nn.Linear: a LazyLinear-capable Linear in
torch_geometric, reached only with a qdim other than embed_dim, never here), the factory `build` with its wrapper
`OneNode` (the input (B, n, d) given as (B, n, 1, d): one node; attn_mask passed through as TransformerLayer passes
its `mask`) and the entry's constants.
Truth: correct as the lesson's layer (in _truth.py): build(12, 3) in eval() called as m(x) = mha_forward
(in_proj_weight's row blocks, out_proj, with biases) and the per-head loop to 1e-15, no leak.  A defect outside the
lesson's contract (as deepsuite's mask that replaces the causal one, deepsuite_gpt_attention_additive_mask_replaces_
causal.py): a caller's mask is combined with the causal one by logical_and (both bool, True = masked), which keeps
only the positions BOTH hide, so the caller's mask is never honoured beyond the future: a padding-style mask hiding
nothing (all False) turns causality off (the future moves the past); the causal mask plus key 0 hidden from the
later queries leaves key 0 counting (= the layer without that mask); the causal mask alone gives the causal layer.
logical_or is what combines masks that say True = masked.
"""
import math
from typing import Optional, Union
import torch
from torch import Tensor, nn

# --- added for the zoo: stand-ins for `from einops import rearrange` (the real einops when installed) and
# torch_geometric's Linear and OptTensor ---
try:
    from einops import rearrange
except ImportError:  # pragma: no cover - depends on the environment
    def rearrange(t, pattern, **axes):
        if pattern == 'b t n f -> t (b n) f':
            b, t_, n, f = t.shape
            return t.permute(1, 0, 2, 3).reshape(t_, b * n, f)
        if pattern == 't (b n) f -> b t n f':
            t_, bn, f = t.shape
            return t.reshape(t_, axes['b'], bn // axes['b'], f).permute(1, 0, 2, 3)
        if pattern == '(b d) l m -> b d l m':
            bd, l_, m = t.shape
            return t.reshape(axes['b'], bd // axes['b'], l_, m)
        raise NotImplementedError(f'rearrange shim: pattern {pattern!r} not supported')
OptTensor = Optional[Tensor]
Linear = nn.Linear
# --- end of the added stand-ins ---


def _get_causal_mask(seq_len: int,
                     diagonal: int = 0,
                     device: Optional[torch.device] = None):
    # mask keeping only previous steps
    ones = torch.ones((seq_len, seq_len), dtype=torch.bool, device=device)
    causal_mask = torch.triu(ones, diagonal)
    return causal_mask


class MultiHeadAttention(nn.MultiheadAttention):
    """The multi-head attention from the paper `"Attention Is All You Need"
    <https://arxiv.org/abs/1706.03762>`_ (Vaswani et al., NeurIPS 2017) for
    spatiotemporal data.

    Args:
        embed_dim (int): Size of the hidden dimension associated with each node
            at each time step.
        heads (int): Number of parallel attention heads.
        qdim (int, optional): Size of the query dimension. If :obj:`None`, then
            defaults to :attr:`embed_dim`.
            (default: :obj:`None`)
        kdim (int, optional): Size of the query dimension. If :obj:`None`, then
            defaults to :attr:`embed_dim`.
            (default: :obj:`None`)
        vdim (int, optional): Size of the query dimension. If :obj:`None`, then
            defaults to :attr:`embed_dim`.
            (default: :obj:`None`)
        axis (str): Dimension on which to apply attention to update
            the representations. Can be either, ``'time'`` or ``'nodes'``.
            (default: :obj:`'time'`)
        add_bias_kv (bool): If :obj:`True`, then adds bias to the key and value
            sequences.
            (default: :obj:`False`)
        add_zero_attn (bool): If :obj:`True`, then adds a new batch of zeros to
            the key and value sequences.
            (default: :obj:`False`)
        causal (bool): If :obj:`True`, then causally mask attention
            scores in temporal attention (has an effect only if :attr:`axis` is
            :obj:`'time'`).
            (default: :obj:`False`)
        dropout (float): Dropout probability.
            (default: :obj:`0.`)
        bias (bool): Whether to add a learnable bias.
            (default: :obj:`True`)
        device (optional): Device on which store the model.
            (default: :obj:`None`)
        dtype (optional): Data Type of the parameters.
            (default: :obj:`None`)
    """

    def __init__(self,
                 embed_dim: int,
                 heads: int,
                 qdim: Optional[int] = None,
                 kdim: Optional[int] = None,
                 vdim: Optional[int] = None,
                 axis: Union[str, int] = 'time',
                 add_bias_kv: bool = False,
                 add_zero_attn: bool = False,
                 causal: bool = False,
                 dropout: float = 0.,
                 bias: bool = True,
                 device=None,
                 dtype=None) -> None:
        if axis in ['time', 0]:
            shape = 't (b n) f'
        elif axis in ['nodes', 1]:
            if causal:
                raise ValueError(
                    'Cannot use causal attention for axis "nodes"')
            shape = 'n (b t) f'
        else:
            raise ValueError("Axis can either be 'time' (0) or 'nodes' (1), "
                             f"not '{axis}'.")
        self._in_pattern = f'b t n f -> {shape}'
        self._out_pattern = f'{shape} -> b t n f'
        self.causal = causal
        # Impose batch dimension as the second one
        super(MultiHeadAttention, self).__init__(embed_dim,
                                                 heads,
                                                 dropout=dropout,
                                                 bias=bias,
                                                 add_bias_kv=add_bias_kv,
                                                 add_zero_attn=add_zero_attn,
                                                 kdim=kdim,
                                                 vdim=vdim,
                                                 batch_first=False,
                                                 device=device,
                                                 dtype=dtype)
        # change projections
        if qdim is not None and qdim != embed_dim:
            self.qdim = qdim
            self.q_proj = Linear(self.qdim, embed_dim)
        else:
            self.qdim = embed_dim
            self.q_proj = nn.Identity()

    def forward(self,
                query: Tensor,
                key: OptTensor = None,
                value: OptTensor = None,
                key_padding_mask: OptTensor = None,
                need_weights: bool = True,
                attn_mask: OptTensor = None):
        """"""
        # inputs: [batches, time, nodes, features] -> [t (b n) f]
        if key is None:
            key = query
        if value is None:
            value = key
        batch = value.shape[0]
        query, key, value = [
            rearrange(x, self._in_pattern) for x in (query, key, value)
        ]

        if self.causal:
            causal_mask = _get_causal_mask(key.size(0),
                                           diagonal=1,
                                           device=query.device)
            if attn_mask is None:
                attn_mask = causal_mask
            else:
                attn_mask = torch.logical_and(attn_mask, causal_mask)
        attn_output, attn_weights = super(MultiHeadAttention, self).forward(
            self.q_proj(query), key, value, key_padding_mask, need_weights,
            attn_mask)
        attn_output = rearrange(attn_output, self._out_pattern, b=batch) \
            .contiguous()
        if attn_weights is not None:
            attn_weights = rearrange(attn_weights,
                                     '(b d) l m -> b d l m',
                                     b=batch).contiguous()
        return attn_output, attn_weights


# --- added for the zoo: the factory mha-check builds (the lesson's (B, n, d) input as one node) ---
class OneNode(nn.Module):
    """tsl's (batch, time, nodes, features) layout with one node: x (B, n, d) given as (B, n, 1, d), the output read
    back as (B, n, d); attn_mask passed through, as TransformerLayer.forward(x, mask) passes its mask."""

    def __init__(self, attention):
        super().__init__()
        self.attention = attention

    def forward(self, x, attn_mask=None):
        return self.attention(x.unsqueeze(2), attn_mask=attn_mask)[0].squeeze(2)


def build(d_model, num_heads, context_length=None):
    """MultiHeadAttention(d_model, num_heads, causal=True) on the time axis, as TransformerLayer builds it."""
    return OneNode(MultiHeadAttention(d_model, num_heads, causal=True))
# --- end of the added part ---


# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "build"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("caller-mask-and-ed-with-causal", "nn-multiheadattention-subclass", "four-d-input",
             "causal-only-with-flag", "einops-axes", "tuple-output", "no-context-length")
FORWARD = "x, attn_mask=None (the added OneNode; the class: query, key=None, value=None, key_padding_mask=None, ...)"
NOTES = ("MultiHeadAttention(embed_dim, heads, ..., causal=False, ...): causal only with the flag; a caller's attn_mask "
         "is AND-ed with the causal mask (True = masked), so a mask that hides nothing turns causality off.")
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("nn.MultiheadAttention's math with its own causal mask when called as forward(x) (the factory's "
                    "causal=True); the caller's attn_mask AND-ed with the causal mask is outside the lesson's "
                    "contract, as a mask that replaces the causal one")
