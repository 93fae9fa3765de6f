"""The lesson's causal multi-head attention, as taught, plus functional forms and its arithmetic.

`CausalMHA` is the torch module students are compared against, `mha_forward` the same computation from explicit
weight tensors (torch); `reference.numpy_ref` repeats it with its gradients in numpy: the trusted side of the
harness computes every expected value with numpy and never imports torch.  The torch names are loaded lazily, so
that importing `reference` (or `reference.arithmetic`) costs no torch import.
"""
from reference.arithmetic import param_count_formula, score_entries

__all__ = ["CausalMHA", "mha_forward", "param_count_formula", "score_entries"]


def __getattr__(name):
    if name in ("CausalMHA", "mha_forward"):
        from reference import causal_mha  # noqa: PLC0415 - start-up: torch only for whoever asks for it

        return getattr(causal_mha, name)
    raise AttributeError(f"module 'reference' has no attribute {name!r}")
