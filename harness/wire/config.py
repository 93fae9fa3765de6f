"""The configuration a check asks the target to be built with (plain data, shared by both processes)."""
from __future__ import annotations

import re
from dataclasses import dataclass, fields

FLOAT64, FLOAT32 = "float64", "float32"
DTYPES = (FLOAT64, FLOAT32)  # what a configuration's module and input may be made of in the child
ROTARY_FRACTION = re.compile(r"(rope|rotary)(_emb)?_(pct|percent|percentage|fraction|frac|ratio)$|partial_rotary")
MAX_BATCH = 64  # what a parameter sizing a preallocated cache by batch (Meta llama's max_batch_size) is bound to
# (harness.child.construct.is_max_batch): the largest batch a probe that decides sends (reference-match's float32
# probes, 8 to 16; 16 copies of a float64 batch of at most 3 where a draw is looked for, causal-leakage's 8 draws); at
# the class's default of 4, reference-match could not tell (fixes28)
# the share of each head's features a rotary embedding turns (GPT-NeoX's rotary_pct, labml-nn's rope_percentage,
# HF's partial_rotary_factor); not rope_scaling_factor, a scaling of the positions.  No reference of mha-check's
# computes a partial rotation, so the constructor gets 1.0 (every feature turned, key "rope_fraction") unless --arg
# says otherwise: the rest of the layer is checked, the share itself is not


@dataclass(frozen=True)
class Config:
    d_in: int
    d_out: int
    heads: int
    context_length: int
    batch: int = 2
    n: int = 3
    dropout: float = 0.0
    qkv_bias: bool = False
    kv_heads: int | None = None  # key/value heads of a grouped-query layer; None: as many as heads (plain MHA)
    dtype: str = FLOAT64  # what the module and its input are made of in the child: float64, or float32 as in
    # training (the float32 probe of reference-match); the trusted side computes in float64 either way

    def __repr__(self) -> str:
        """As the dataclass would write it, with kv_heads only when set and dtype only when not float64: the seeds
        of every draw are taken from this text (Context.rng), so plain configurations draw exactly what they drew
        before grouped-query and float32 existed."""
        shown = [f"{name}={getattr(self, name)!r}" for name in _FIELDS
                 if (name != "kv_heads" or self.kv_heads is not None) and (name != "dtype" or self.dtype != FLOAT64)]
        return f"Config({', '.join(shown)})"

    @property
    def head_width(self) -> int:
        return self.d_out // self.heads

    def value(self, key: str):
        """The value a constructor parameter gets for a configuration key: width, d_in, d_out, heads,
        context_length, dropout, qkv_bias, head_width (d_out / heads), kv_heads (the grouped layer's key/value
        heads, or heads), kv_group (query heads per key/value head), all_bias and causal (on), rope_theta (10000),
        rope_fraction (1.0)."""
        if key in ("width", "d"):
            return self.d_out
        if key in ("all_bias", "causal"):
            return True
        if key == "head_width":
            return self.d_out // self.heads
        if key == "kv_heads":
            return self.kv_heads or self.heads
        if key == "kv_group":
            return self.heads // (self.kv_heads or self.heads) if self.heads else 1
        if key == "device":  # a constructor that asks where to make its tensors (`device` without a default): the CPU
            return "cpu"
        if key == "norm_eps":  # the epsilon of a normalisation kept inside, where the constructor demands one
            return 1e-5  # torch's LayerNorm default
        if key == "rope_theta":  # a rotary embedding's base, where the constructor demands one: the usual 10000
            return 10000.0
        if key == "max_batch":  # the most sequences a preallocated cache holds: room for every probe's batch
            return MAX_BATCH
        if key == "rope_fraction":  # the share of each head a rotary embedding turns: all of it (ROTARY_FRACTION)
            return 1.0
        return getattr(self, key)

    def ctor_key(self) -> tuple:
        """What the constructor sees: configs equal here can share one built module."""
        return (self.d_in, self.d_out, self.heads, self.context_length, self.dropout, self.qkv_bias, self.kv_heads,
                self.dtype)

    def to_dict(self) -> dict:
        out = {name: getattr(self, name) for name in _FIELDS}  # asdict's deep copies cost more, for plain values
        if out["kv_heads"] is None:  # plain multi-head attention: said as before the grouped form existed
            del out["kv_heads"]
        if out["dtype"] == FLOAT64:  # float64, as every configuration was before the float32 probe
            del out["dtype"]
        return out

    def describe(self) -> str:
        width = f"d={self.d_out}" if self.d_in == self.d_out else f"d_in={self.d_in}, d_out={self.d_out}"
        extra = "".join(
            [", qkv_bias=True" if self.qkv_bias else "", f", dropout={self.dropout}" if self.dropout else ""]
        )
        kv = f", kv_heads={self.kv_heads}" if self.kv_heads is not None else ""
        dtype = f", module and input in {self.dtype}" if self.dtype != FLOAT64 else ""
        return (
            f"{width}, heads={self.heads}{kv} (head width {self.head_width if self.heads else '?'}), "
            f"context_length={self.context_length}, input (B={self.batch}, n={self.n}, {self.d_in}){extra}{dtype}"
        )


_FIELDS = tuple(f.name for f in fields(Config))
