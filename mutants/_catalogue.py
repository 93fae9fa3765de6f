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


def load_or_empty() -> dict[str, dict]:
    """`load()`, or {} where the catalogue is missing (a broken installation): for the views that still count and
    rank mistakes by id without their titles (the class view, grade's summary row)."""
    try:
        return load()
    except CatalogueMissing:
        return {}


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


_read: dict[str, tuple[dict, object]] = {}  # what variants(), fitted() and named_by_trace() read off the entries


def _read_once(what: str, read) -> dict:
    """`read(entries)` of the entries in use, made once per entries: diagnosis asks for every mistake's knobs in
    loops over readings and mistakes, thousands of times per submission (issue 27); a dict the caller treats as
    read-only, as load()'s."""
    entries = load()
    held = _read.get(what)
    if held is None or held[0] is not entries:
        held = _read[what] = (entries, read(entries))
    return held[1]


def variants() -> dict[str, dict]:
    """mutant id -> knobs of `reference.variants.forward` for every mutant that changes only what is computed (the
    same dict on every call while the entries are the same: treat it as read-only)."""
    return _read_once("variants", lambda entries: {mid: _knobs(entry["variant"]) for mid, entry in entries.items()
                                                   if entry.get("variant")})


def fitted() -> dict[str, tuple[str, ...]]:
    """mutant id -> the knobs of its variant whose value is read off the module's output (`MutantInfo.fitted`), for
    the mutants that have any (the same dict on every call while the entries are the same: treat it as read-only)."""
    return _read_once("fitted", lambda entries: {mid: tuple(entry["fitted"]) for mid, entry in entries.items()
                                                 if entry.get("fitted")})


def named_by_trace() -> frozenset[str]:
    """The mutants named only where the recorded forward marks them (`MutantInfo.named_by_trace`: scale-other, whose
    divisor read off the output fits a learned temperature too), read once per entries, as fitted()."""
    return _read_once("named_by_trace", lambda entries: frozenset(
        mid for mid, entry in entries.items() if entry.get("named_by_trace")))


def _knobs(variant: dict) -> dict:
    return {k: (-math.inf if v in ("-inf", "-Infinity") else v) for k, v in variant.items()}
