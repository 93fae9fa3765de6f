"""Grouped-query and multi-query attention on the trusted side: which form a class has, and the configurations
that check its grouping.

The form is read from the evidence the child sends: a constructor parameter for the number of key/value heads
(`num_kv_groups`, `n_kv_heads`, `num_key_value_heads`, ...) or for the group size (`n_rep`) makes the layer
grouped (the child's Signature lists it among the derived parameters).  Such a layer is built with kv_heads below
the heads (grouped: 4 heads, 2 key/value heads; multi-query: 1) and equal to them: binding kv_heads = heads, as
mha-check did before, removes the grouping it should check.  A class with one shared key/value head and no
parameter for it is recognised by its K/V shapes instead (harness.child.layouts.kv_widths): the reference reads
the number of key/value heads off W_k, so every check follows it without being told.  A class built from a config
object (Hugging Face's `LlamaAttention(config)`) shows its form by what it reads: a probe built with the grouped
configuration (its `config_reads`, harness.child.construct) that read `config.num_key_value_heads` makes it grouped.
"""
from __future__ import annotations

from dataclasses import replace

from harness.wire.config import Config

GROUPED_KEYS = ("kv_heads", "kv_group")


def kv_params(signature, config_reads: dict | None = None) -> dict[str, str]:
    """The constructor's parameters (and the settings it read off its config object, `config_reads`) that carry
    the number of key/value heads or the group size: name -> kv_heads or kv_group."""
    named = {**signature.derived, **(config_reads or {})}
    return {name: key for name, key in named.items() if key in GROUPED_KEYS}


def is_grouped(signature, config_reads: dict | None = None) -> bool:
    return bool(kv_params(signature, config_reads))


def preferred_kv(signature, overrides: dict, config_reads: dict | None = None) -> int | None:
    """The number of key/value heads given with --arg (num_kv_groups=2): used where it divides the heads."""
    for name, key in kv_params(signature, config_reads).items():
        value = overrides.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value if key == "kv_heads" else None
    return None


def probe(separate: bool) -> Config:
    """The configuration a class built from a config object is first built with to see what it reads: the grouped
    one (4 heads, 2 key/value heads), which a grouped layer is then checked with (the build is reused)."""
    return configs(separate)[0]


def configs(separate: bool, preferred: int | None = None) -> list[Config]:
    """The required configurations of a grouped layer (the plain ones' sizes and sequence lengths): grouped (4 heads,
    2 key/value heads: query heads 0 and 1 share key/value head 0, and `.repeat` pairs them differently), multi-query
    (3 heads, 1 key/value head) and plain (kv_heads = heads) on the long sequence.  With --arg, its number where it
    divides the heads, as many as the heads elsewhere."""
    out = [Config(d_in=12 if separate else 16, d_out=16, heads=4, context_length=7, batch=2, n=5, kv_heads=2),
           Config(d_in=9 if separate else 6, d_out=6, heads=3, context_length=4, batch=2, n=4, kv_heads=1),
           Config(d_in=12 if separate else 8, d_out=8, heads=4, context_length=64, batch=1, n=64)]
    if preferred is not None:
        out = [replace(cfg, kv_heads=preferred if cfg.heads % preferred == 0 and preferred < cfg.heads else None)
               for cfg in out]
    return out
