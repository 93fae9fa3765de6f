"""SelfAttentionGPT2 from Peter Bloem's `former` ("Transformers from scratch" blog/lectures): fused c_attn split, keys pre-transposed by permute(0, 2, 3, 1), causal by a constructor flag.

Source: https://github.com/pbloem/former/blob/557e7679e2491c25989df1e4c1c67565ce4f17a8/former/modules.py (lines 218-293: class SelfAttentionGPT2) and https://github.com/pbloem/former/blob/557e7679e2491c25989df1e4c1c67565ce4f17a8/former/util/util.py (lines 117-131: function mask_); commit "Fixing various import issues." on refs/heads/master.
Licence: MIT (Copyright (c) 2019 Peter Bloem), LICENSE at the repository root.
Copied: verbatim (function mask_ from former/util/util.py and class SelfAttentionGPT2 from former/modules.py); `import torch`, `from torch import nn`, `import torch.nn.functional as F` as in the original modules.py (whose `from .util import mask_, d, slice_diag` is replaced by the copied mask_).
Truth: correct causal MHA when constructed with mask=True: c_attn Linear(emb, 3*emb) WITH bias split(e, dim=2) into [Q; K; V] row blocks, split_heads view(b, t, H, e/H) then permute(0, 2, 1, 3) (keys permute(0, 2, 3, 1), already transposed), dot / sqrt(dh) with dh = v.size(-1), mask_ writes -inf strictly above the diagonal (triu_indices offset 1) IN PLACE, softmax(-1), merge permute(0, 2, 1, 3).contiguous().view(b, t, e), c_proj Linear(emb, emb) with bias. With the default mask=False it is not causal.
"""
import torch
from torch import nn
import torch.nn.functional as F

TARGET = "SelfAttentionGPT2"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("causal-only-with-flag", "no-divisibility-check", "no-context-length")
FORWARD = "input_sequence"
NOTES = ("Constructor SelfAttentionGPT2(emb, heads, mask=False): d_in = d_out = emb; CAUSAL ONLY WITH mask=True (default False = "
         "bidirectional). No context length, no mask buffer: mask_ builds triu_indices(t, t, offset=1) (on the default device, not x's) and "
         "writes -inf into the scores in place. No dropout, no divisibility check "
         "(x.size(-1) // nheads truncates and the view then fails). Fused c_attn.weight (3*emb, emb) = [W_q; W_k; W_v]; c_proj with bias.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = 'no-divisibility-check'
EXPECTED_BECAUSE = 'correct math (causal with mask=True); no divisibility check'


def mask_(matrices, maskval=0.0, mask_diagonal=True):
    """
    Masks out all values in the given batch of matrices where i <= j holds,
    i < j if mask_diagonal is false

    In place operation

    :param tns:
    :return:
    """

    h, w = matrices.size(-2), matrices.size(-1)

    indices = torch.triu_indices(h, w, offset=0 if mask_diagonal else 1)
    matrices[..., indices[0], indices[1]] = maskval


class SelfAttentionGPT2(nn.Module):
    """
    This is the self-attention operation as implemented in the Huggingface port of GPT2. The code has been
    simplified to remove several features not used here but otherwise it should do exactly the same as GPT2 when run with
    normal parameters.

    It is very similar to the default SelfAttention below, with the exception of the way it's initialized and some
    small speed improvements in the custom implementation of the linear layer (the Conv1D defined above).

    We include this primarily for comparison with our own canonical implementation to check for performance differences.
    """
    def __init__(self, emb, heads, mask=False):
        super().__init__()

        self.nheads = heads
        self.emb = emb
        self.mask = mask

        #self.c_attn = Conv1D(3 * emb, emb)
        # -- (out_channels, in_channels):
        #    This is a very slight modification of a linear layer

        self.c_attn = nn.Linear(emb, 3*emb)

        #self.c_proj = Conv1D(emb, emb)
        self.c_proj = nn.Linear(emb, emb)

    def _attn(self, q, k, v):

        dot = torch.matmul(q, k) # raw attention weights

        dot = dot / (float(v.size(-1)) ** 0.5) # scaled attention weights

        if self.mask: # Apply the attention mask
            mask_(dot, maskval=float('-inf'), mask_diagonal=False)
        # -- This is implemented differently in the Huggingface version, but the effect should be the same.

        dot = nn.Softmax(dim=-1)(dot) # normalized attention weights

        return torch.matmul(dot, v) # attention over values

    def merge_heads(self, x):

        x = x.permute(0, 2, 1, 3).contiguous()

        new_x_shape = x.size()[:-2] + (x.size(-2) * x.size(-1),)

        return x.view(*new_x_shape)

    def split_heads(self, x, is_key=False):

        new_x_shape = x.size()[:-1] + (self.nheads, x.size(-1) // self.nheads)

        x = x.view(*new_x_shape)

        if is_key:
            return x.permute(0, 2, 3, 1)  # (batch, head, head_features, seq_length)
        else:
            return x.permute(0, 2, 1, 3)  # (batch, head, seq_length, head_features)

    def forward(self, input_sequence):

        b, t, e = input_sequence.size()

        query, key, value = self.c_attn(input_sequence).split(e, dim=2)

        query = self.split_heads(query)
        key = self.split_heads(key, is_key=True)
        value = self.split_heads(value)

        a = self._attn(query, key, value)

        a = self.merge_heads(a)
        a = self.c_proj(a)

        return a
