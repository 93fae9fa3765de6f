"""What a check works with: the student's module behind the child process, inputs, weights and the reference.

The runner makes one `Context` per target.  Everything random is drawn from generators seeded by (seed, what it
is for), so the same target and seed always give the same inputs, weights and verdicts.
"""
from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

import numpy as np

from harness.wire.config import Config
from harness.sandbox.subject import Instance, Subject, TargetFailure
from reference import numpy_ref

RTOL, ATOL = 1e-5, 1e-6  # inputs and reference in float64; a layer may round in float32 inside (LLaMA-style
# softmax in float32), so agreement within float32 rounding counts; every known mistake differs by more than 1e-4


def close(observed: np.ndarray, expected: np.ndarray) -> bool:
    """Equal up to float32 rounding (relative 1e-5, absolute 1e-6 of the expected magnitude)."""
    if observed.shape != expected.shape or not np.all(np.isfinite(observed)):
        return False
    scale = max(1.0, float(np.abs(expected).max(initial=0.0)))
    return bool(np.allclose(observed, expected, rtol=RTOL, atol=ATOL * scale))


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """For comparing the module with itself: equal up to rounding, NaN where the other has NaN."""
    if a.shape != b.shape:
        return False
    scale = max(1.0, float(np.nanmax(np.abs(b), initial=0.0)))
    return bool(np.allclose(a, b, rtol=RTOL, atol=ATOL * scale, equal_nan=True))


def worst_difference(observed: np.ndarray, expected: np.ndarray, names=("yours", "reference")) -> str:
    if observed.shape != expected.shape:
        return f"shape {observed.shape} instead of {expected.shape}"
    diff = np.abs(observed - expected)
    if not np.all(np.isfinite(observed)):
        return f"{int((~np.isfinite(observed)).sum())} non-finite values (NaN or inf)"
    at = np.unravel_index(int(np.argmax(diff)), diff.shape)
    return (f"largest difference {diff[at]:.3g} at index {tuple(int(i) for i in at)} "
            f"({names[0]} {observed[at]:.6g}, {names[1]} {expected[at]:.6g})")


@dataclass
class Mapping:
    """Which candidate weight layout is used, and whether it reproduced the module's own output."""

    index: int | None
    proven: bool
    description: dict
    how: str
    problem: str = ""

    def to_dict(self) -> dict:
        return {"layout": self.description, "how": self.how, "proven": self.proven, "problem": self.problem}


class Context:
    def __init__(self, subject: Subject, seed: int = 0, examples: int = 6):
        self.subject = subject
        self.seed = seed
        self.examples = examples
        self._mapping: Mapping | None = None
        self.square_only = False  # set by `construct` when the constructor refuses d_in != d_out

    # -- what the constructor allows ------------------------------------------------------------------------------
    @property
    def signature(self) -> dict:
        return self.subject.load()["signature"]

    def accepts(self, key: str) -> bool:
        return key in self.signature["accepts"] or bool(self.signature["config_param"])

    @property
    def separate_widths(self) -> bool:
        if self.square_only:
            return False
        return bool(self.signature["separate_widths"]) or bool(self.signature["config_param"] and
                                                               "d_in" in self.signature["accepts"])

    def required_configs(self) -> list[Config]:
        """Always tried: batch > 1, n < context_length and n == context_length, n, heads, head width distinct."""
        sep = self.separate_widths
        return [Config(d_in=5 if sep else 6, d_out=6, heads=2, context_length=7, batch=2, n=4),
                Config(d_in=7 if sep else 12, d_out=12, heads=3, context_length=5, batch=3, n=5)]

    @property
    def base(self) -> Config:
        return self.required_configs()[0]

    # -- random but reproducible ------------------------------------------------------------------------------------
    def rng(self, *key) -> np.random.Generator:
        return np.random.default_rng([self.seed, zlib.crc32(repr(key).encode())])

    def input(self, cfg: Config, tag: str = "x") -> np.ndarray:
        return self.rng(tag, cfg).standard_normal((cfg.batch, cfg.n, cfg.d_in))

    def build(self, cfg: Config, force_dropout: float = 0.0) -> Instance:
        inst = self.subject.build(cfg, force_dropout)
        if self.mapping.index is not None and inst.layouts:
            inst.layout = self._same_layout(inst.layouts)
        return inst

    def _same_layout(self, layouts: list[dict]) -> int:
        """The candidate that reads the parameters as the proven mapping does (same names, same orientation): the
        number of candidates depends on the shapes, so an index proven on one configuration means nothing on
        another (with d_in = d_out every raw matrix is ambiguous, with d_in != d_out only the square ones)."""
        proven = {r: re.sub(r"\[\d+:\d+\]", "", p) for r, p in self.mapping.description.items()}

        def agreement(layout):
            return sum(re.sub(r"\[\d+:\d+\]", "", p) == proven.get(r) for r, p in layout["roles"].items())

        return max(range(len(layouts)), key=lambda i: (agreement(layouts[i]), -i))

    # -- weights ----------------------------------------------------------------------------------------------------
    @property
    def mapping(self) -> Mapping:
        """Prove once, on the base configuration, which layout reproduces the module's own output."""
        if self._mapping is None:
            self._mapping = self._prove()
        return self._mapping

    def _prove(self) -> Mapping:
        inst = self.subject.build(self.base)
        if not inst.layouts:
            return Mapping(None, False, {}, "", inst.info["layout_problem"])
        x = self.input(self.base, "proof")
        try:
            own = inst.forward(x)
        except TargetFailure as e:
            first = inst.layouts[0]
            return Mapping(0, False, first["roles"], first["how"], f"your forward raised: {e.message}")
        for i, layout in enumerate(inst.layouts):
            w = numpy_ref.Weights(**inst.read_weights(i))
            if close(own, numpy_ref.forward(x, self.base.heads, w)):
                return Mapping(i, True, layout["roles"], layout["how"])
        first = inst.layouts[0]
        return Mapping(0, False, first["roles"], first["how"],
                       "with this mapping the reference does not reproduce your module's own output")

    def weights_for(self, inst: Instance, tag: str = "w") -> numpy_ref.Weights:
        """Random weights for the roles this module has (a role it lacks, e.g. a Q/K/V bias, is zero)."""
        roles = set(inst.layouts[inst.layout]["roles"]) if inst.layout is not None else set()
        cfg = inst.cfg
        w = numpy_ref.random_weights(self.rng(tag, cfg), cfg.d_in, cfg.d_out, qkv_bias=True)
        for r in numpy_ref.ROLES[4:]:
            if r not in roles:
                setattr(w, r, None)
        return w

    def transplant(self, inst: Instance, w: numpy_ref.Weights) -> None:
        """Write `w` into the module; a role the module has but `w` lacks (a bias) is written as zeros."""
        roles = inst.layouts[inst.layout]["roles"]
        inst.write_weights({r: getattr(w, r) if getattr(w, r) is not None else np.zeros(w.d_out) for r in roles})

    def mapping_caveat(self) -> str:
        m = self.mapping
        if m.proven:
            return ""
        return (" (note: the weight mapping was not proven on your module's own weights; if you are sure your "
                "module is correct, the mapping is wrong: pass --map ROLE=PARAMETER to fix it)")
