"""ray 2.9.0's RLlib MultiHeadAttention (rllib/models/torch/modules/multi_head_attention.py, the torch twin of the
attention layer of RLlib's attention nets for reinforcement learning): MultiHeadAttention(in_dim, out_dim, num_heads,
head_dim) - the input width, the OUTPUT width and the head width all separate (inner width num_heads * head_dim, no
check against in_dim); one fused _qkv_layer and a _linear_layer, both SlimFC (RLlib's nn.Linear inside an
nn.Sequential, xavier-initialised) WITHOUT biases; the heads kept LAST through einsum ("bihd,bjhd->bijh", scores
(B, L, L, H)), scaled by head_dim ** 0.5, ALWAYS causal: a lower-triangular keep mask from sequence_mask(arange(1,
L + 1)) applied as `score * mask + 1e30 * (mask - 1.0)` (a FINITE -1e30 where the mask is 0, the score multiplied
away), the softmax over dim=2 (the keys' axis of the heads-last layout); forward(inputs) only.

Source: https://github.com/ray-project/ray (the wheel's METADATA Home-page), files
python/ray/rllib/models/torch/modules/multi_head_attention.py, rllib/models/torch/misc.py (SlimFC) and
rllib/utils/torch_utils.py (sequence_mask) as released in ray 2.9.0 on PyPI (the wheel
ray-2.9.0-cp311-cp311-manylinux2014_x86_64.whl).
Licence: Apache-2.0 (the wheel's METADATA "License: Apache 2.0"; its dist-info holds no LICENSE file).
Copied: verbatim from the PyPI wheel ray==2.9.0 (pip download --no-deps), every copied line compared by program with
the unpacked wheel: ray/rllib/models/torch/modules/multi_head_attention.py lines 14-68 (class MultiHeadAttention,
whole); ray/rllib/models/torch/misc.py lines 256-297 (class SlimFC, whole); ray/rllib/utils/torch_utils.py lines
625-662 (sequence_mask, whole).  Left out: the module docstring and imports (lines 1-11: RLlib's try_import_torch,
TensorType, the @DeveloperAPI / @PublicAPI decorators, get_activation_fn) and the rest of misc.py and torch_utils.py.
ADDED: this docstring, the stand-ins for the left-out imports (torch and nn imported directly, TensorType = Any,
get_activation_fn raising: SlimFC calls it only for an activation given by name, never here), the entry's constants.
Truth: bug (in _truth.py): the math is right - MultiHeadAttention(12, 12, 3, 4) in float64 = mha_forward (W_q, W_k,
W_v = the three row blocks of _qkv_layer's weight, no biases; the output projection _linear_layer without bias) and
the per-head loop to 1.8e-15, no leak; the -1e30 fill does not leak with W_k = -W_q and the tokens x1e6 - but the
causal mask is made in forward on the CPU (`torch.arange(1, L + 1)` without device=, then sequence_mask's
torch.ones(...).to(lengths.device), the CPU again): moved to another device the layer raises at `score * mask`
("Tensor on device cpu is not on the expected device meta!" on PyTorch's meta device; on a GPU, "Expected all
tensors to be on the same device").  The catalogued mistake mask-no-device.
"""
from typing import Any, Optional

import torch
from torch import nn

# --- added for the zoo: stand-ins for RLlib's imports (ray.rllib.utils.framework, ray.rllib.models.utils) ---
TensorType = Any


def get_activation_fn(name, framework="tf"):  # only reached for an activation given by name; none is here
    raise NotImplementedError("ray.rllib.models.utils.get_activation_fn is not part of this entry")
# --- end of the added stand-ins ---


def sequence_mask(
    lengths: TensorType,
    maxlen: Optional[int] = None,
    dtype=None,
    time_major: bool = False,
) -> TensorType:
    """Offers same behavior as tf.sequence_mask for torch.

    Thanks to Dimitris Papatheodorou
    (https://discuss.pytorch.org/t/pytorch-equivalent-for-tf-sequence-mask/
    39036).

    Args:
        lengths: The tensor of individual lengths to mask by.
        maxlen: The maximum length to use for the time axis. If None, use
            the max of `lengths`.
        dtype: The torch dtype to use for the resulting mask.
        time_major: Whether to return the mask as [B, T] (False; default) or
            as [T, B] (True).

    Returns:
         The sequence mask resulting from the given input and parameters.
    """
    # If maxlen not given, use the longest lengths in the `lengths` tensor.
    if maxlen is None:
        maxlen = lengths.max()

    mask = torch.ones(tuple(lengths.shape) + (int(maxlen),))

    mask = ~(mask.to(lengths.device).cumsum(dim=1).t() > lengths)
    # Time major transformation.
    if not time_major:
        mask = mask.t()

    # By default, set the mask to be boolean.
    mask.type(dtype or torch.bool)

    return mask


class SlimFC(nn.Module):
    """Simple PyTorch version of `linear` function"""

    def __init__(
        self,
        in_size: int,
        out_size: int,
        initializer: Any = None,
        activation_fn: Any = None,
        use_bias: bool = True,
        bias_init: float = 0.0,
    ):
        """Creates a standard FC layer, similar to torch.nn.Linear

        Args:
            in_size: Input size for FC Layer
            out_size: Output size for FC Layer
            initializer: Initializer function for FC layer weights
            activation_fn: Activation function at the end of layer
            use_bias: Whether to add bias weights or not
            bias_init: Initalize bias weights to bias_init const
        """
        super(SlimFC, self).__init__()
        layers = []
        # Actual nn.Linear layer (including correct initialization logic).
        linear = nn.Linear(in_size, out_size, bias=use_bias)
        if initializer is None:
            initializer = nn.init.xavier_uniform_
        initializer(linear.weight)
        if use_bias is True:
            nn.init.constant_(linear.bias, bias_init)
        layers.append(linear)
        # Activation function (if any; default=None (linear)).
        if isinstance(activation_fn, str):
            activation_fn = get_activation_fn(activation_fn, "torch")
        if activation_fn is not None:
            layers.append(activation_fn())
        # Put everything in sequence.
        self._model = nn.Sequential(*layers)

    def forward(self, x: TensorType) -> TensorType:
        return self._model(x)


class MultiHeadAttention(nn.Module):
    """A multi-head attention layer described in [1]."""

    def __init__(
        self, in_dim: int, out_dim: int, num_heads: int, head_dim: int, **kwargs
    ):
        """
        in_dim: Dimension of input
        out_dim: Dimension of output
        num_heads: Number of attention heads
        head_dim: Output dimension of each attention head
        """
        super().__init__(**kwargs)

        # No bias or non-linearity.
        self._num_heads = num_heads
        self._head_dim = head_dim
        self._qkv_layer = SlimFC(
            in_size=in_dim, out_size=3 * num_heads * head_dim, use_bias=False
        )

        self._linear_layer = SlimFC(
            in_size=num_heads * head_dim, out_size=out_dim, use_bias=False
        )

    def forward(self, inputs: TensorType) -> TensorType:
        L = list(inputs.size())[1]  # length of segment
        H = self._num_heads  # number of attention heads
        D = self._head_dim  # attention head dimension

        qkv = self._qkv_layer(inputs)

        queries, keys, values = torch.chunk(input=qkv, chunks=3, dim=-1)
        queries = queries[:, -L:]  # only query based on the segment

        queries = torch.reshape(queries, [-1, L, H, D])
        keys = torch.reshape(keys, [-1, L, H, D])
        values = torch.reshape(values, [-1, L, H, D])

        score = torch.einsum("bihd,bjhd->bijh", queries, keys)
        score = score / D**0.5

        # causal mask of the same length as the sequence
        mask = sequence_mask(torch.arange(1, L + 1), dtype=score.dtype)
        mask = mask[None, :, :, None]
        mask = mask.float()

        masked_score = score * mask + 1e30 * (mask - 1.0)
        wmat = nn.functional.softmax(masked_score, dim=2)

        out = torch.einsum("bijh,bjhd->bihd", wmat, values)
        shape = list(out.size())[:2] + [H * D]
        #        temp = torch.cat(temp2, [H * D], dim=0)
        out = torch.reshape(out, shape)
        return self._linear_layer(out)


# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "MultiHeadAttention"
TRUTH = "bug"
BUG = "mask-no-device"
RULE_GAPS = ("out-dim-argument", "head-dim-argument", "heads-last-einsum", "no-biases", "always-causal",
             "finite-fill-1e30", "no-divisibility-check", "no-context-length")
FORWARD = "inputs"
NOTES = ("MultiHeadAttention(in_dim, out_dim, num_heads, head_dim): always causal (sequence_mask); the masked "
         "scores are score * 0 - 1e30.")
OUTCOME = 'fail'
DIAGNOSIS = 'mask-no-device'
EXPECTED_BECAUSE = ("the math is the lesson's (no biases, heads last, always causal), but the mask is made in forward "
                    "by torch.arange(1, L + 1) without device=: mask-buffer fails on the meta device, the catalogued "
                    "mistake mask-no-device; out-proj-bias and divisibility are lesson rules not followed besides")
KNOWN_WRONG = ("Realzoo24 open 1: mask-buffer fails as it should, but the report says 'no known mistake matches': the "
               "diagnosis names mask-no-device only with the trace's mark, and the trace reads no scores in the "
               "heads-last layout (B, n, n, H) (harness/engine/trace/vocabulary.py SCORES_LIKE), so it sees no mask "
               "and marks 'MISTAKE [no-mask]' on a causal layer instead")
