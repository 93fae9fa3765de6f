"""Child side: find a layer's KV cache and decode a sequence with it, chunk by chunk.

Four ways of writing a cache are recognised from the forward's parameters and the module's methods (never from
the student's intent, which is unknowable):

- internal (rasbt's LLMs-from-scratch ch04): `forward(x, use_cache=False)` keeps `cache_k`/`cache_v` (and a position
  pointer) on the module, `reset_cache()` empties them;
- argument (Hugging Face, nanoGPT forks, bark, rasbt's package): `forward(x, past_key_value=None, use_cache=True)`
  or `forward(x, kv_cache=None)` returns `(out, new_cache)`; the cache handed back is passed in on the next call, and
  a new sequence starts from None, or from an empty tuple where None means no cache at all (MosaicML's MPT layers:
  `past_key_value=()` starts one, tried only when None gives none back);
- positions (Meta's llama): `forward(x, start_pos)` writes into a cache of its own at that position; `reset_cache()`
  (or `clear_cache()`) if the module has one.

What is found here is only a way to call forward; whether it is right is decided by the trusted side from the
numbers (the first call on an empty cache must reproduce the layer's reference, the returned cache must grow with the
tokens fed).  A forward that takes a cache argument and returns nothing that holds the tokens fed so far has no cache
mha-check can see (whisper's self-attention ignores its `kv_cache`, which only hooks installed by the model fill).
"""
from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass

import torch

CACHE_ARGS = ("past_key_value", "past_key_values", "layer_past", "past_kv", "past", "kv_cache", "cache",
              "past_key_values_tuple", "layer_cache", "kv", "block_kv_cache")  # nanoVLM: a {'key', 'value'} dict
FLAGS = ("use_cache", "use_kv_cache", "cache_enabled")
POSITIONS = ("start_pos", "input_pos", "cache_position", "pos", "position_offset")  # FlexiTransformers: tokens cached
RESETS = ("reset_cache", "clear_cache", "reset_kv_cache", "clear_kv_cache", "reset_caches")


@dataclass(frozen=True)
class Api:
    """How forward is driven with a cache (see the module docstring)."""

    kind: str  # internal | argument | positions
    cache_arg: str | None = None
    flag: str | None = None
    position: str | None = None
    reset: str | None = None
    empty: tuple | dict | None = None  # what starts a new sequence: None, or () where None means "no cache" (MPT's
    # layers), or {} for a dict the layer fills in place and does not return (FlexiTransformers' kv_cache)

    def describe(self) -> str:
        args = ["x"]
        if self.flag:
            args.append(f"{self.flag}=True")
        if self.cache_arg:
            args.append(f"{self.cache_arg}=<the cache it returned, {self.empty!r} for a new sequence>")
        if self.position:
            args.append(f"{self.position}=<tokens seen so far>")
        reset = f"; {self.reset}() between sequences" if self.reset else ""
        return f"forward({', '.join(args)}){reset}"


def find_api(module: torch.nn.Module) -> tuple[Api | None, str]:
    """(the way to drive the cache, "") or (None, why not): "" there means the layer shows no cache at all."""
    call = module.__call__ if type(module).__call__ is not torch.nn.Module.__call__ else module.forward
    try:
        params = inspect.signature(call).parameters
    except (TypeError, ValueError):
        return None, ""
    named = {p.name: p for p in params.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    optional = {name for name, p in named.items() if p.default is not p.empty}
    cache_arg = next((n for n in CACHE_ARGS if n in named), None)
    flag = next((n for n in FLAGS if n in optional), None)
    position = next((n for n in POSITIONS if n in named), None)
    reset = next((n for n in RESETS if callable(getattr(module, n, None))), None)
    if cache_arg is not None and cache_arg not in optional:
        return None, (f"forward needs its {cache_arg} argument: mha-check cannot make a cache of the layer's own "
                      "type; check a factory that wraps your class with an empty cache")
    if position is not None and cache_arg is None and flag is None:
        if reset is None and not internal_tensors(module):  # a position without a cache (rotary offsets): none here
            return None, ""
        return Api("positions", position=position, reset=reset), ""
    if cache_arg is not None:
        return Api("argument", cache_arg=cache_arg, flag=flag, position=position if position in optional else None,
                   reset=reset), ""
    if flag is not None:
        return Api("internal", flag=flag, position=position if position in optional else None, reset=reset), ""
    if reset is not None:
        return None, (f"the layer has {reset}() but its forward takes no {FLAGS[0]}, cache or {POSITIONS[0]} "
                      "argument: mha-check cannot tell how to decode with it; check a factory whose module's "
                      "forward takes use_cache=True")
    return None, ""


def cached_tensors(value, found: list | None = None, depth: int = 0) -> list[torch.Tensor]:
    """The tensors in a returned cache: a tensor, or (nested) tuples, lists and dicts of them, or a plain object
    holding them in its attributes (a cache class of the layer's own: qsa-attention's ComplexKVCache keeps k_r, v_r
    ...).  A module is no cache (a layer returning itself or a submodule holds its weights, not the tokens fed), and
    the walk stops four levels down (objects that refer to each other)."""
    found = [] if found is None else found
    if depth > 4:
        return found
    if isinstance(value, torch.Tensor):
        found.append(value)
    elif isinstance(value, (tuple, list)):
        for v in value[:16]:
            cached_tensors(v, found, depth + 1)
    elif isinstance(value, dict):
        for v in list(value.values())[:16]:
            cached_tensors(v, found, depth + 1)
    elif not isinstance(value, (torch.nn.Module, type)) and isinstance(getattr(value, "__dict__", None), dict):
        for v in list(vars(value).values())[:16]:
            if v is not value:
                cached_tensors(v, found, depth + 1)
    return found


def internal_tensors(module: torch.nn.Module) -> list[torch.Tensor]:
    """The tensors a module keeps under a name with "cache" or "past" in it (attributes and buffers)."""
    found = []
    for mod in module.modules():
        items = list(vars(mod).items()) + list(mod._buffers.items())
        found += [v for k, v in items if isinstance(v, torch.Tensor) and ("cache" in k.lower() or "past" in k.lower())]
    return found


def holds(tensors: list[torch.Tensor], tokens: int) -> bool:
    """Some tensor has an axis of exactly `tokens` positions (the keys or values of every token fed so far)."""
    return any(tokens in tuple(t.shape)[1:] for t in tensors)


def _attention_weights(value, queries: int, keys: int) -> bool:
    """One tensor whose last two axes are (this call's queries, every key so far): the attention weights a layer
    returns beside its output (CTRL, whisper), not a cache, which holds keys and values along a feature axis.  Handed
    back as the cache it makes a correct layer raise (CTRL's layer_past.update)."""
    if not (isinstance(value, torch.Tensor) and value.dim() >= 2 and tuple(value.shape[-2:]) == (queries, keys)):
        return False
    # and rows that sum to 1, as a softmax's do: keys and values stacked as (.., tokens, dh) have those sizes too
    # where dh happens to equal the tokens (GPT-2's `present` with heads of width 2, decoded two tokens at first)
    sums = value.detach().to(torch.float64).sum(-1)
    return bool(value.is_floating_point() and torch.allclose(sums, torch.ones_like(sums), atol=1e-4))


@dataclass
class Decoded:
    outputs: list[torch.Tensor]  # one per chunk
    grows: bool  # after every call the cache held every token fed so far
    raised_at: int = -1  # the chunk whose call raised (-1: none)
    error: BaseException | None = None  # what it raised


def decode(module: torch.nn.Module, api: Api, arguments, x: torch.Tensor, chunks: list[int], reset: bool,
           call, output, around=None) -> Decoded:
    """Feed x in chunks (lengths summing to x's length) with the cache on; `call(fn, *args, **kwargs)` runs the
    student's code (raising StudentError), `output(result)` picks the output tensor.  `arguments(chunk)`: the
    forward's arguments as the proven call style gives them (harness.child.calling.Style.arguments): the input, and
    a causal mask of the chunk's size where the layer takes one, which for a prompt on an empty cache is the mask it
    needs and for one new token is a single "keep", broadcast over every cached key: right in every convention.
    `around(stage)`: a context manager entered around the reset ("reset") and the last chunk's call ("last"), where a
    trace records them (harness.child.worker.trace)."""
    around = around or (lambda stage: contextlib.nullcontext())
    if reset and api.reset:
        try:
            with around("reset"):
                call(getattr(module, api.reset))
        except Exception as e:  # noqa: BLE001 - as below
            return Decoded([], True, 0, e)
    cache, fed, grows, outputs = (dict(api.empty) if isinstance(api.empty, dict) else api.empty), 0, True, []
    for i, size in enumerate(chunks):
        piece = x[:, fed:fed + size].contiguous()  # a slice of the tokens is not; contiguity is its own check
        args, kwargs = arguments(piece)
        if api.flag:
            kwargs[api.flag] = True
        if api.kind == "argument":
            kwargs[api.cache_arg] = cache
        if api.position:
            kwargs[api.position] = fed
        try:
            with around("last") if i == len(chunks) - 1 else contextlib.nullcontext():
                result = call(module, *args, **kwargs)
            out = output(result)
            if out.dim() != 3 or tuple(out.shape[:2]) != (x.shape[0], size):
                raise ValueError(f"forward returned shape {tuple(out.shape)} for an input of {tuple(piece.shape)}")
        except Exception as e:  # noqa: BLE001 - the caller reports it (StudentError) or re-raises it (ours)
            return Decoded(outputs, grows, i, e)
        outputs.append(out)
        fed += size
        if api.kind == "argument":
            rest = result[1:] if isinstance(result, (tuple, list)) else ()
            given = cache
            cache = next((r for r in rest if cached_tensors(r) and not _attention_weights(r, size, fed)), None)
            if cache is None and isinstance(given, dict) and cached_tensors(given):  # filled in place, not returned
                cache = given
            grows = grows and cache is not None and holds(cached_tensors(cache), fed)
        elif api.kind == "internal":
            grows = grows and holds(internal_tensors(module), fed)
    return Decoded(outputs, grows)

