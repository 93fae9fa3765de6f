"""Everything the trusted process will ever run or read of mha-check's own, loaded before a child is given a
submission (`Subject.load`).

Why: once the child runs the student's code, nothing it could have changed may be imported, parsed or executed by
the trusted side.  The child's view makes mha-check's folders read-only (and invisible beyond them), but where the
kernel allows no mount namespace (`none`) the files are protected by their permissions only; so the verdict's code
is in memory before the first line of a submission runs, whatever happens to the files afterwards.  The rest of
what the trusted process reads later is the child's answers, parsed strictly (`harness.wire`), and its captured
output, shown as text only.
"""
from __future__ import annotations

import importlib
import pkgutil

TRUSTED_PACKAGES = ("harness.wire", "harness.sandbox", "harness.engine", "harness.render", "checks", "reference")
NOT_HERE = ("harness.sandbox.launch", "reference.causal_mha", "reference.causal_attention", "reference.rotary_mha",
            "reference.cached_mha", "reference.grouped_mha", "reference.cached_rotary_mha")  # the launcher
# script; the torch references (multi-head, single-head, rotary, with a KV cache, grouped-query, rotary with a cache)
LAZY_LIBRARIES = ("numpy.random",)  # imported by numpy on first use, which would be after the child started
_loaded = False


def preload() -> None:
    """Import every trusted module and read the catalogue of mistakes (once per process; about 0.1 s)."""
    global _loaded
    if _loaded:
        return
    for package in TRUSTED_PACKAGES:
        found = importlib.import_module(package)
        for module in pkgutil.walk_packages(found.__path__, package + "."):  # subpackages too (engine.trace)
            if module.name not in NOT_HERE:
                importlib.import_module(module.name)
    for name in LAZY_LIBRARIES:
        importlib.import_module(name)
    importlib.import_module("checks").all_checks()
    importlib.import_module("mutants").catalogue()
    _loaded = True
