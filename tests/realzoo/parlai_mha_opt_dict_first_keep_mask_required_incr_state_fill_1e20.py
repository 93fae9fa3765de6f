"""parlai 1.7.2's MultiHeadAttention (ParlAI's Transformer: the self- and cross-attention of its encoders and
decoders, BlenderBot's among them): MultiHeadAttention(opt, n_heads=None, dim=None, dropout=0) - a REQUIRED options
dict FIRST (n_heads and dim read from opt['n_heads'] / opt['embedding_size'] when not given), q_lin / k_lin / v_lin /
out_lin with biases, heads folded into the batch (B * H, n, dh) by view + transpose, q divided IN PLACE by
sqrt(dh), forward(query, key=None, value=None, mask=None, incr_state=None, static_kv=False) with the mask REQUIRED in
fact (`assert mask is not None`): True = attend, (B, key_len) for padding or (B, query_len, key_len) for the decoder
(causal only through it), filled with a FINITE -1e20 (neginf), the softmax in FLOAT32 whatever the input
(`dtype=torch.float`, then `.type_as(query)`), an incremental-decoding dict incr_state of prev_key / prev_value /
prev_mask; returns (output, new_incr_state, scores).

Source: https://github.com/facebookresearch/ParlAI (the project of the wheel's METADATA Home-page http://parl.ai/),
files parlai/agents/transformer/modules/attention.py (MultiHeadAttention), parlai/core/params.py (default) and
parlai/utils/torch.py (NEAR_INF, NEAR_INF_FP16, neginf) as released in parlai 1.7.2 on PyPI; the decoder layer builds
it as MultiHeadAttention(opt=self.opt, n_heads=n_heads, dim=dim, dropout=dropout) (decoder.py lines 333-335) and
calls self_attention(query=x, mask=decoder_mask, incr_state=..., static_kv=False) with decoder_mask =
torch.tril(...) expanded to (B, T, T) (lines 374-380, 412-420).
Licence: MIT (LICENSE in the wheel's dist-info, "Copyright (c) Facebook, Inc. and its affiliates."; the files'
headers say the same).
Copied: verbatim from the PyPI wheel parlai==1.7.2 (pip download --no-deps), every copied line compared by program
with the unpacked wheel: attention.py lines 10-15 (imports) and 90-278 (class MultiHeadAttention, whole);
params.py lines 1404-1408 (default); torch.py lines 26-27 and 37-44 (NEAR_INF, NEAR_INF_FP16, neginf).  Left out:
attention.py lines 17-19 (the imports replaced below) and 22-87 (BasicAttention), the rest of params.py and torch.py.
ADDED: this docstring, the stand-in `Opt = dict` for parlai.core.opt.Opt (a dict subclass that also records its
history: only opt[...] look-ups are made here) and the entry's constants.
Truth: correct (in _truth.py): MultiHeadAttention(opt) with opt = {'n_heads': 3, 'embedding_size': 12}, in eval(),
given the decoder's tril(ones(n, n)) expanded to (B, n, n) = mha_forward (all four Linears with their biases) and
the per-head loop at relative 1e-5 (the float32 softmax), no leak; a mask of ones leaks; one token at a time through
incr_state (the new key's mask (B, 1, 1) of ones) gives the whole forward's rows at the same tolerance.  The options
dict must hold both keys even when n_heads and dim are given: `default(n_heads, opt['n_heads'])` reads opt first
(MultiHeadAttention({}, 3, 12) raises KeyError).
"""
import math
from typing import Dict, Tuple, Optional, Union

import torch
import torch.nn as nn
import torch.nn.functional as F

# --- added for the zoo: a stand-in for `from parlai.core.opt import Opt` (only opt[...] look-ups are made) ---
Opt = dict
# --- end of the added stand-in ---


def default(val, default):
    """
    shorthand for explicit None check for optional arguments.
    """
    return val if val is not None else default


NEAR_INF = 1e20
NEAR_INF_FP16 = 65504


def neginf(dtype: torch.dtype) -> float:
    """
    Return a representable finite number near -inf for a dtype.
    """
    if dtype is torch.float16:
        return -NEAR_INF_FP16
    else:
        return -NEAR_INF


class MultiHeadAttention(nn.Module):
    """
    Implements MultiHeadAttention; this is the core workhorse of the Transformer.

    See Vaswani (2017) for an extensive description.
    """

    def __init__(
        self, opt: Opt, n_heads: int = None, dim: int = None, dropout: float = 0
    ):
        super(MultiHeadAttention, self).__init__()

        n_heads = default(n_heads, opt['n_heads'])
        dim = default(dim, opt['embedding_size'])

        self.n_heads = n_heads
        self.dim = dim

        self.attn_dropout = nn.Dropout(p=dropout)  # --attention-dropout
        self.q_lin = nn.Linear(dim, dim)
        self.k_lin = nn.Linear(dim, dim)
        self.v_lin = nn.Linear(dim, dim)
        # TODO: merge for the initialization step
        nn.init.xavier_normal_(self.q_lin.weight)
        nn.init.xavier_normal_(self.k_lin.weight)
        nn.init.xavier_normal_(self.v_lin.weight)
        # and set biases to 0
        self.out_lin = nn.Linear(dim, dim)

        nn.init.xavier_normal_(self.out_lin.weight)

    def forward(  # type: ignore
        # TODO: remove type ignore with pytorch 1.5:
        # https://github.com/pytorch/pytorch/pull/31057
        self,
        query: torch.Tensor,
        key: Optional[torch.Tensor] = None,
        value: Optional[torch.Tensor] = None,
        mask: torch.Tensor = None,
        incr_state: Optional[Dict[str, torch.Tensor]] = None,
        static_kv: bool = False,
        **kwargs,
    ) -> Tuple[torch.Tensor, Dict[str, torch.Tensor], torch.Tensor]:
        """
        Forward pass.

        :param query: attention query
        :param key: attention key
        :param value: attention value
        :param mask: tensor in which True means that we are allowing attention and False
          means we are blocking it. Mask is:
          - [B, key_len] (encoder self-attn and decoder enc/dec attn)
          - [B, query_len, key_len] (decoder self-attn)
          - [B, 1, key_len] (decoder self-attn with incr_state caching)
        :param incr_state: dictionary with values representing the previous states of
          the key, value, and mask
        :param static_kv: True if the key and value are held constant during decoding
          (as in encoder/decoder attention)
        :return: (
          final attended tensor,
          new incremental state,
          key/value-multiplied tensor before softmax,
        )
        """

        batch_size, query_len, dim = query.size()
        assert (
            dim == self.dim
        ), 'Dimensions do not match: {} query vs {} configured'.format(dim, self.dim)
        assert mask is not None, 'Mask is None, please specify a mask'
        n_heads = self.n_heads
        dim_per_head = dim // n_heads
        scale = math.sqrt(dim_per_head)

        def prepare_head(tensor):
            # input is [batch_size, seq_len, n_heads * dim_per_head]
            # output is [batch_size * n_heads, seq_len, dim_per_head]
            bsz, seq_len, _ = tensor.size()
            tensor = tensor.view(batch_size, tensor.size(1), n_heads, dim_per_head)
            tensor = (
                tensor.transpose(1, 2)
                .contiguous()
                .view(batch_size * n_heads, seq_len, dim_per_head)
            )
            return tensor

        # q, k, v are the transformed values
        if key is None and value is None:
            # self attention
            key = value = query
            _, _key_len, dim = query.size()
        elif value is None:
            # key and value are the same, but query differs
            # self attention
            value = key

        assert key is not None  # let mypy know we sorted this
        _, _key_len, dim = key.size()

        q = prepare_head(self.q_lin(query))

        # Prepend incremental states. For each of the key, value, and mask, see if
        # a previous incremental state exists, and if so, reshape it to match the shape
        # of the new state. Concatenate the previous and new states to match what the
        # full state would have been if we had not cached. (If we are using static_kv,
        # these three states are unchanging, so just re-use the cached states.)
        if incr_state is None:
            incr_state = {}
        if 'prev_key' in incr_state:
            prev_key = incr_state['prev_key'].view(
                batch_size * n_heads, -1, dim_per_head
            )
            if static_kv:
                k = prev_key
            else:
                k = torch.cat([prev_key, prepare_head(self.k_lin(key))], dim=1)
        else:
            k = prepare_head(self.k_lin(key))
        if 'prev_value' in incr_state:
            prev_value = incr_state['prev_value'].view(
                batch_size * n_heads, -1, dim_per_head
            )
            if static_kv:
                v = prev_value
            else:
                v = torch.cat([prev_value, prepare_head(self.v_lin(value))], dim=1)
        else:
            v = prepare_head(self.v_lin(value))
        if 'prev_mask' in incr_state:
            if static_kv:
                mask = incr_state['prev_mask']
            else:
                # Mask will be of size (B x query_len x key_len)
                # During incremental decoding the query will only represent the next token,
                # whereas the key/value will represent the entire sequence thus far.
                # In such a case, we only want to look at the last element of the mask in the query dimension.
                prev_mask = incr_state['prev_mask'][:, -query_len:, :]
                mask = torch.cat([prev_mask, mask], dim=2)
                # Prepend along the key_len dimension (analogous to incr_state['prev_key'])

        # Save new incremental states. We reshape to allow for reordering along batch
        # dimension.
        new_incr_state = {
            'prev_key': k.view(batch_size, n_heads, -1, dim_per_head),
            'prev_value': v.view(batch_size, n_heads, -1, dim_per_head),
            'prev_mask': mask,
        }

        full_key_len = k.size(1)
        dot_prod = q.div_(scale).bmm(k.transpose(1, 2))
        # [B * n_heads, query_len, key_len]
        attn_mask = (
            (mask == 0)
            .view(batch_size, 1, -1, full_key_len)
            .repeat(1, n_heads, 1, 1)
            .expand(batch_size, n_heads, query_len, full_key_len)
            .view(batch_size * n_heads, query_len, full_key_len)
        )
        assert attn_mask.shape == dot_prod.shape
        dot_prod.masked_fill_(attn_mask, neginf(dot_prod.dtype))

        attn_weights = F.softmax(
            dot_prod, dim=-1, dtype=torch.float  # type: ignore
        ).type_as(query)
        attn_weights = self.attn_dropout(attn_weights)  # --attention-dropout

        attentioned = attn_weights.bmm(v)
        attentioned = (
            attentioned.type_as(query)
            .view(batch_size, n_heads, query_len, dim_per_head)
            .transpose(1, 2)
            .contiguous()
            .view(batch_size, query_len, dim)
        )

        out = self.out_lin(attentioned)

        return out, new_incr_state, dot_prod

    def reorder_incremental_state(
        self, incremental_state: Dict[str, torch.Tensor], inds: torch.Tensor
    ) -> Dict[str, torch.Tensor]:
        """
        Reorder the input incremental-state tensors.
        """
        return {
            key: torch.index_select(val, 0, inds.to(val.device)).contiguous()
            for key, val in incremental_state.items()
        }


# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "MultiHeadAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("options-dict-first", "required-keep-mask", "mask-from-caller", "finite-fill-1e20", "float32-softmax",
             "in-place-query-scale", "incremental-state-dict", "tuple-output", "no-context-length")
FORWARD = "query, key=None, value=None, mask=None, incr_state=None, static_kv=False, **kwargs"
NOTES = ("MultiHeadAttention(opt, n_heads=None, dim=None, dropout=0): causal only through the caller's (B, T, T) "
         "keep mask, which forward asserts is given.")
OUTCOME = 'rules'
DIAGNOSIS = 'no-divisibility-check'
EXPECTED_BECAUSE = ("correct given the decoder's keep mask (B, n, n), the softmax in float32; dim // n_heads with no "
                    "check (d=8 with 3 heads builds, its forward's view raises); built with opt as a config object "
                    "holding n_heads and embedding_size (until Realzoo24's fix a parameter named opt was unfillable: "
                    "CANNOT TELL, advice --arg opt=@context_length, and that advice followed FAILED construct)")
