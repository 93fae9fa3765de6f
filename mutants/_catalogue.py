"""The catalogue of known mistakes, readable without torch: what the trusted side knows about every mutant.

`catalogue.json` is derived, never written by hand: for each mutant, what its own file declares (`INFO`: title,
lesson, symptom, fix, worked example, the checks that must catch it, its numeric variant, what trace marks), plus
the symptoms measured by running mha-check on it.  One command rewrites it (and the README tables):
`python -m harness.frontends.catalogue`; a test fails while it is stale.  It ships inside the package (package
data), so an installed mha-check reads it with importlib.resources, never from a path next to the source.
"""
from __future__ import annotations

import contextlib
import functools
import json
import math
from importlib import resources

FILE = "catalogue.json"


class CatalogueMissing(RuntimeError):
    """The catalogue is not where the package should have it (a broken installation)."""


_measuring: dict | None = None  # the entries in use while the catalogue itself is measured (`measuring`)


def load() -> dict[str, dict]:
    """mutant id -> entry (see the module docstring); the same dict on every call (treat it as read-only)."""
    return _measuring if _measuring is not None else _stored()


@contextlib.contextmanager
def measuring(entries: dict[str, dict]):
    """The catalogue is measured by running mha-check, which reads the catalogue (each mistake's variant, its trace
    marks): read from what the mutants declare now, so that a new mutant, or a changed variant, is measured with
    its own declaration instead of the stored one (a new mutant once measured as killing nothing)."""
    global _measuring
    previous, _measuring = _measuring, entries
    try:
        yield
    finally:
        _measuring = previous


@functools.lru_cache(maxsize=1)
def _stored() -> dict[str, dict]:
    try:
        text = resources.files(__package__).joinpath(FILE).read_text(encoding="utf-8")
    except (FileNotFoundError, OSError) as e:
        raise CatalogueMissing(f"mha-check's catalogue of mistakes ({__package__}/{FILE}) is missing from this "
                               f"installation ({e}); reinstall mha-check") from None
    return json.loads(text)


def variants() -> dict[str, dict]:
    """mutant id -> knobs of `reference.variants.forward` for every mutant that changes only what is computed."""
    return {mid: _knobs(entry["variant"]) for mid, entry in load().items() if entry.get("variant")}


def fitted() -> dict[str, tuple[str, ...]]:
    """mutant id -> the knobs of its variant whose value is read off the module's output (`MutantInfo.fitted`), for
    the mutants that have any."""
    return {mid: tuple(entry["fitted"]) for mid, entry in load().items() if entry.get("fitted")}


def _knobs(variant: dict) -> dict:
    return {k: (-math.inf if v in ("-inf", "-Infinity") else v) for k, v in variant.items()}
