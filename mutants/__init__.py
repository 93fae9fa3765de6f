"""Mutants of the reference `CausalMHA`: one module per classic mistake, each with exactly one deliberate bug.

Every mutant module `mutants/<id>.py` holds `INFO` (a `MutantInfo`) and `class CausalMHA`, a copy of
`reference.causal_mha.CausalMHA` whose body differs only on the line(s) marked `# BUG:`, so that
`diff reference/causal_mha.py mutants/<id>.py` shows the bug.  `INFO.killed_by` names the harness checks that
must fail on it.  Modules are discovered, not listed: adding a file adds a mutant.

The trusted side never imports the mutant modules (they import torch): it reads `catalogue()`, derived from them.
"""
from __future__ import annotations

import difflib
import importlib
import pathlib
import pkgutil
import types

from mutants._catalogue import CatalogueMissing, fitted, measuring, named_by_trace, variants
from mutants._catalogue import load as catalogue
from mutants._catalogue import load_or_empty as catalogue_or_empty
from mutants._info import MutantInfo

__all__ = ["MutantInfo", "all_mutants", "get", "ids", "source_path", "catalogue", "catalogue_or_empty",
           "variants", "fitted", "named_by_trace", "measuring",
           "CatalogueMissing", "form", "class_name", "reference_path"]

_DIR = pathlib.Path(__file__).resolve().parent
_REFERENCES = _DIR.parent / "reference"
# Members of the lesson's family other than the multi-head layer: a mutant id's prefix -> the form it has
# (harness.wire.form), the reference file it copies (in reference/) and its class's name.  A mutant of the
# single-head CausalAttention is `mutants/single_<mistake>.py`, class CausalAttention; a rotary layer's
# (`rope_<mistake>.py`) is a multi-head layer, a copy of reference/rotary_mha.py, whose class is CausalMHA too;
# likewise a KV cache's (`kvcache_<mistake>.py`, reference/cached_mha.py; a rotary layer's KV cache's,
# `kvcache_rope_<mistake>.py`, reference/cached_rotary_mha.py) and a grouped-query layer's
# (`gqa_`/`mqa_<mistake>.py`, reference/grouped_mha.py).
FAMILY = {"single-": ("single-head", "causal_attention.py", "CausalAttention"),
          "rope-": ("multi-head", "rotary_mha.py", "CausalMHA"),
          "kvcache-rope-": ("multi-head", "cached_rotary_mha.py", "CausalMHA"),  # before "kvcache-": the first
          # prefix that matches wins
          "kvcache-": ("multi-head", "cached_mha.py", "CausalMHA"),
          "gqa-": ("multi-head", "grouped_mha.py", "CausalMHA"),
          "mqa-": ("multi-head", "grouped_mha.py", "CausalMHA")}
MULTI_HEAD = ("multi-head", "causal_mha.py", "CausalMHA")


def _member(mutant_id: str) -> tuple[str, str, str]:
    key = str(mutant_id).replace("_", "-")
    return next((v for prefix, v in FAMILY.items() if key.startswith(prefix)), MULTI_HEAD)


def form(mutant_id: str) -> str:
    """The form of the layer a mutant is a copy of: "multi-head", or "single-head" for `single-*`."""
    return _member(mutant_id)[0]


def class_name(mutant_id: str) -> str:
    """The class a mutant's file defines: CausalMHA, or its family member's (CausalAttention for `single-*`)."""
    return _member(mutant_id)[2]


def reference_path(mutant_id: str) -> pathlib.Path:
    """The reference file a mutant is a copy of (to diff it against)."""
    return _REFERENCES / _member(mutant_id)[1]


def _module_names() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def ids() -> list[str]:
    """Every mutant id, sorted (derived from the module names, without importing them)."""
    return sorted(name.replace("_", "-") for name in _module_names())


def _name_for(mutant_id: str) -> str:
    """Module name for an id (kebab-case; the module name itself is accepted too); KeyError if unknown."""
    name = str(mutant_id).replace("-", "_")
    if name.startswith("_") or name not in _module_names():
        known = ids()
        close = difflib.get_close_matches(str(mutant_id).replace("_", "-"), known, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(known)}"
        raise KeyError(f"unknown mutant {mutant_id!r}{hint}")
    return name


def get(mutant_id: str) -> types.ModuleType:
    """Import and return one mutant module (it has `INFO` and `CausalMHA`, or its family member's class)."""
    module = importlib.import_module(f"{__name__}.{_name_for(mutant_id)}")
    info = getattr(module, "INFO", None)
    cls = class_name(module.__name__.rsplit(".", 1)[1])
    if not isinstance(info, MutantInfo) or not hasattr(module, cls):
        raise TypeError(f"{module.__name__} must define INFO = MutantInfo(...) and class {cls}")
    if info.module_name != module.__name__.rsplit(".", 1)[1]:
        raise ValueError(f"{module.__name__}: INFO.id {info.id!r} does not match the module name")
    return module


def all_mutants() -> list[types.ModuleType]:
    """Every mutant module, sorted by id."""
    return sorted((get(name) for name in _module_names()), key=lambda m: m.INFO.id)


def source_path(mutant_id: str) -> pathlib.Path:
    """The mutant's source file, e.g. to diff it against reference/causal_mha.py."""
    return _DIR / f"{_name_for(mutant_id)}.py"

