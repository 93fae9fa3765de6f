"""Shared fixtures: reports of whole mha-check runs, computed two at a time (each run is one child process)."""
from __future__ import annotations

import ast
import functools
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "tests" / "zoo"
sys.path.insert(0, str(ROOT))


def zoo_constants(path: Path) -> dict:
    """TARGET and EXPECT of a zoo file, read without importing it."""
    out = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) in ("TARGET", "EXPECT", "DIAGNOSIS"):
            out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


@functools.lru_cache(maxsize=None)
def report_for(target: str, seed: int = 0):
    from harness.engine.runner import run_checks

    return run_checks(target, seed=seed)


def prewarm(targets) -> None:
    """Run many targets concurrently (two cores: two children at a time) so tests only read cached reports."""
    with ThreadPoolExecutor(max_workers=max(2, (os.cpu_count() or 2))) as pool:
        list(pool.map(report_for, targets))


@pytest.fixture(scope="session")
def reports():
    return report_for
