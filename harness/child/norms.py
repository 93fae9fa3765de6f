"""Child side: the normalisation layers a module keeps inside itself, and switching them off.

The lesson's layer has no normalisation, but real layers often keep one inside: a pre-norm (PaLM's
`attn(LayerNorm(x))`), or a whole sublayer with the residual (`x + attn(LayerNorm(x))`, the post-LN
`LayerNorm(x + attn(x))` of "Attention is all you need" implementations).  No reading of the parameters makes such a
module the lesson's layer, so nothing could be proven about its attention, and its norm's parameters made the count
look wrong.  A submodule is taken for a normalisation only on evidence: torch's own nn.LayerNorm or nn.RMSNorm over
the last axis, or a module holding only vectors of one width which, run on a probe, acts on each token alone and
gives the same output for the token scaled by 3 (what a LayerNorm or an RMSNorm does; a BatchNorm, a gate or a
learned scale does not).  Such a norm cannot move one token's output by another token's input, so switching it off
(the module returns its input) hides no leak; the trusted side asks for it only where the lesson's reference, or a
known mistake, then reproduces the module's output (harness.engine.mapping), and says so in the report.
"""
from __future__ import annotations

import contextlib
import copy
import math
from dataclasses import dataclass

import torch
import torch.nn as nn

TORCH_NORMS = tuple(c for c in (nn.LayerNorm, getattr(nn, "RMSNorm", None)) if c is not None)
PROBE_SIZE = 100.0  # the probe's tokens are this large, so that a norm's eps (under the square root, beside
# the variance) moves nothing measurable, even over two features
PROBE_SCALE = 3.0  # a normalisation gives the same output for a token and for the token times this
PROBE_TOLERANCE = 1e-4  # relative to the output's largest value
ORDINARY_TOLERANCE = 1e-2  # the same scale test on tokens of ordinary size (each token's features of mean 0 and
# standard deviation 1): a norm's eps moves its output by about eps there (1e-5 for torch's), while a gate of the
# input (sigmoid(x * w), rela's GatedRMSNorm), saturated on the large probe, moves it by tenths


@dataclass
class Norm:
    """One normalisation inside the layer: where it is, what class, and the parameters it holds."""

    path: str  # its name in the layer (named_modules): "norm", "layer_norm", "attn.ln"
    kind: str  # its class name: LayerNorm, RMSNorm, ...
    params: list[str]  # the layer's names of its parameters: "norm.gamma"
    module: nn.Module


def find(module: nn.Module) -> list[Norm]:
    """The normalisations `module` keeps inside itself (never the module itself, nor one inside another)."""
    found: list[Norm] = []
    for path, sub in module.named_modules():
        if sub is module or any(path.startswith(n.path + ".") for n in found):
            continue
        width = _width(sub)
        if width is None or not _acts_as_norm(sub, width):
            continue
        params = [f"{path}.{name}" for name, _ in sub.named_parameters()]
        found.append(Norm(path, type(sub).__name__, params, sub))
    return found


def _width(sub: nn.Module) -> int | None:
    """The width a candidate normalises, or None when it is no candidate: torch's LayerNorm and RMSNorm over one
    (the last) axis, or a module whose tensors are all vectors of one length, whatever its class is called (a
    student's `MyRMS` was not taken for one, and its gain failed param-count: a student trial)."""
    if isinstance(sub, TORCH_NORMS):
        shape = tuple(sub.normalized_shape)
        return shape[0] if len(shape) == 1 else None
    tensors = [t for t in (*sub.parameters(), *sub.buffers()) if t.dim() > 0]
    widths = {t.shape[0] for t in tensors}
    if not tensors or any(t.dim() != 1 for t in tensors) or len(widths) != 1:
        return None
    return widths.pop()


def _acts_as_norm(sub: nn.Module, width: int) -> bool:
    """On a probe (2, 3, width) of tokens about PROBE_SIZE large: the output has the probe's shape, each token's
    output is that token's alone, and scaling every token by PROBE_SCALE changes nothing (to PROBE_TOLERANCE).
    Any exception: no norm."""
    if isinstance(sub, TORCH_NORMS):
        return True
    try:  # a copy: a candidate that keeps state (a BatchNorm's running statistics) must not learn from the probe
        sub = copy.deepcopy(sub)
    except Exception:  # noqa: BLE001 - what cannot be copied is not probed, and not taken for a norm
        return False
    reference = next((t for t in (*sub.parameters(), *sub.buffers()) if t.is_floating_point()), None)
    dtype = reference.dtype if reference is not None else torch.get_default_dtype()
    gen = torch.Generator().manual_seed(0)
    probe = (PROBE_SIZE * torch.randn((2, 3, width), generator=gen, dtype=torch.float64)).to(dtype)
    try:
        with torch.no_grad():
            whole = sub(probe)
            scaled = sub(probe * PROBE_SCALE)
            alone = torch.cat([sub(probe[b:b + 1, t:t + 1]) for b in range(2) for t in range(3)]).reshape(2, 3, width)
    except Exception:  # noqa: BLE001 - a module that cannot run on a probe is not taken for a norm
        return False
    if not all(isinstance(y, torch.Tensor) and tuple(y.shape) == (2, 3, width) for y in (whole, scaled, alone)):
        return False
    scale = max(float(whole.abs().max()), math.ulp(1.0))
    if not (bool(torch.all(torch.isfinite(whole))) and float((whole - alone).abs().max()) <= PROBE_TOLERANCE * scale
            and float((whole - scaled).abs().max()) <= PROBE_TOLERANCE * scale):
        return False
    return _ignores_ordinary_scale(sub, probe / PROBE_SIZE, width, dtype)


def _ignores_ordinary_scale(sub: nn.Module, probe: torch.Tensor, width: int, dtype: torch.dtype) -> bool:
    """The scale test once more on tokens of ordinary size: the large probe saturates a gate of the input
    (sigmoid(x * w) is 0 or 1 there), which then seemed to ignore the scale at some widths and not at others."""
    if width < 2:
        return True  # one feature cannot be standardised: the large probe alone decides
    ordinary = probe.double()
    ordinary = (ordinary - ordinary.mean(-1, keepdim=True)) / ordinary.std(-1, keepdim=True, unbiased=False)
    ordinary = ordinary.to(dtype)
    try:
        with torch.no_grad():
            once, thrice = sub(ordinary), sub(ordinary * PROBE_SCALE)
    except Exception:  # noqa: BLE001 - ran on the large probe, not on this one: no norm
        return False
    if not all(isinstance(y, torch.Tensor) and tuple(y.shape) == (2, 3, width) for y in (once, thrice)):
        return False
    scale = max(float(once.abs().max()), math.ulp(1.0))
    return float((once - thrice).abs().max()) <= ORDINARY_TOLERANCE * scale


def _unchanged(x, *args, **kwargs):
    """A normalisation switched off: it returns its input."""
    return x


@contextlib.contextmanager
def switched_off(norms: list[Norm]):
    """While inside, every one of `norms` returns its input (its forward replaced on the instance, then put back)."""
    saved = [(n.module, n.module.__dict__.get("forward")) for n in norms]
    for n in norms:
        n.module.forward = _unchanged
    try:
        yield
    finally:
        for sub, own in saved:
            if own is None:
                sub.__dict__.pop("forward", None)
            else:
                sub.forward = own
