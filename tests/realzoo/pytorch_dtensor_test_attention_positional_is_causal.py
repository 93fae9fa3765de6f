"""PyTorch's own test-model Attention (torch.testing._internal.distributed._tensor.common_dtensor, used by the
DTensor and FSDP tests): a ModelArgs dataclass (dim, n_heads, max_seq_len, dropout_p=0.1, use_attn_mask=True, ...),
wq/wk/wv/wo Linear(dim, dim, bias=False), a divisibility check that raises AssertionError, and
F.scaled_dot_product_attention called with ALL ITS ARGUMENTS POSITIONAL: (queries, keys, values, None,
dropout_p if training else 0, self.use_attn_mask) - is_causal is the sixth positional argument, True through
use_attn_mask; residual dropout on the output.

Source: https://github.com/pytorch/pytorch/blob/v2.13.0/torch/testing/_internal/distributed/_tensor/common_dtensor.py
(as shipped in the torch 2.13.0+cpu wheel this project installs).
Licence: BSD-3-Clause (PyTorch's LICENSE, "Copyright (c) 2016- Facebook, Inc (Adam Paszke)" and the others listed
there; the file's header: "Copyright (c) Meta Platforms, Inc. and affiliates").
Copied: verbatim from the installed torch package (site-packages/torch/testing/_internal/distributed/_tensor/
common_dtensor.py): the ModelArgs dataclass and class Attention, with the file's imports they use (`from dataclasses
import dataclass`, `import torch`, `import torch.nn as nn`, `import torch.nn.functional as F`). ADDED: this entry's
constants after the imports, and below the copied block a factory build(dim, n_heads, max_seq_len, dropout_p=0.0)
that fills ModelArgs.
Truth: correct: mha_forward with wq, wk, wv, wo and no biases, exactly (1e-10); eval() with dropout_p=0.1 is exact too;
with use_attn_mask=False the future moves the past. Lesson rule not followed: the output projection has no bias.
"""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "build"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("sdpa-positional-is-causal", "config-dataclass", "no-biases", "out-proj-no-bias")
FORWARD = "x"
NOTES = ("build(dim, n_heads, max_seq_len, dropout_p=0.0) -> Attention(ModelArgs(...)) (factory ADDED). wq/wk/wv/wo "
         "without bias; SDPA(q, k, v, None, dropout_p if training else 0, use_attn_mask) positional.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = 'out-proj-no-bias'
EXPECTED_BECAUSE = "the lesson's math with is_causal given positionally; only the output projection's bias is missing"

@dataclass
class ModelArgs:
    n_layers: int = 2
    vocab_size: int = 8
    max_seq_len: int = 16
    dim: int = 16
    n_heads: int = 4
    dropout_p: float = 0.1
    use_attn_mask: bool = True
    weight_tying: bool = True
    checkpoint_activations: bool = False
    num_experts: int = 0


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        if args.dim % args.n_heads != 0:
            raise AssertionError(
                f"Expected args.dim % args.n_heads == 0, got {args.dim} % {args.n_heads}"
            )
        self.head_dim = args.dim // args.n_heads
        self.n_heads = args.n_heads
        self.dropout_p = args.dropout_p
        self.resid_dropout = nn.Dropout(args.dropout_p)
        self.use_attn_mask = args.use_attn_mask

        self.wq = nn.Linear(args.dim, args.dim, bias=False)
        self.wk = nn.Linear(args.dim, args.dim, bias=False)
        self.wv = nn.Linear(args.dim, args.dim, bias=False)
        self.wo = nn.Linear(args.dim, args.dim, bias=False)

    def forward(self, x):
        bsz, seq_len, _ = x.size()
        queries, keys, values = self.wq(x), self.wk(x), self.wv(x)
        queries = queries.view(bsz, seq_len, self.n_heads, self.head_dim)
        keys = keys.view(bsz, seq_len, self.n_heads, self.head_dim)
        values = values.view(bsz, seq_len, self.n_heads, self.head_dim)

        queries = queries.transpose(1, 2)  # (bsz, n_heads, seq_len, head_dim)
        keys = keys.transpose(1, 2)  # (bsz, n_heads, seq_len, head_dim)
        values = values.transpose(1, 2)  # (bsz, n_heads, seq_len, head_dim)

        output = F.scaled_dot_product_attention(
            queries,
            keys,
            values,
            None,
            self.dropout_p if self.training else 0,
            self.use_attn_mask,
        )
        output = output.transpose(1, 2).reshape(bsz, seq_len, -1)
        return self.resid_dropout(self.wo(output))


# ---- ADDED (not in PyTorch): a factory that fills ModelArgs, as the tests build Transformer(ModelArgs(...)).
def build(dim, n_heads, max_seq_len, dropout_p=0.0):
    return Attention(ModelArgs(dim=dim, n_heads=n_heads, max_seq_len=max_seq_len, dropout_p=dropout_p))
