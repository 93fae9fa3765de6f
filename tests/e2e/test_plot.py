"""The leakage-map picture (`harness.render.plot`): a real PNG, with the right verdict per panel; matplotlib is
optional."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("warm_single_runs")  # see conftest

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = str(ROOT / "reference" / "causal_mha.py") + ":CausalMHA"
NO_MASK = str(ROOT / "mutants" / "no_mask.py") + ":CausalMHA"


def test_missing_matplotlib_is_a_clear_error(monkeypatch, tmp_path):
    from harness.frontends.api import plot_leakage

    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # makes `import matplotlib.figure` fail
    with pytest.raises(RuntimeError, match=r"pip install 'mha-check\[plot\]'"):
        plot_leakage(REFERENCE, tmp_path / "x.png")  # refused before any child process starts
    assert not (tmp_path / "x.png").exists()


def _distinct_colours(path: Path) -> int:
    import matplotlib.image
    import numpy as np

    pixels = matplotlib.image.imread(str(path))[..., :3]
    return len(np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0))


@pytest.mark.parametrize("target,leaks", [(REFERENCE, False), (NO_MASK, True)], ids=["reference", "no-mask"])
def test_png_with_a_panel_per_head(tmp_path, target, leaks):
    pytest.importorskip("matplotlib")
    from harness.frontends.api import plot_leakage

    out = tmp_path / "leakage.png"
    info = plot_leakage(target, out)
    assert info["path"] == str(out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.stat().st_size > 10_000
    assert _distinct_colours(out) > 20
    assert [p["label"] for p in info["panels"]] == ["module", "head 0", "head 1"]
    for p in info["panels"]:
        assert (p["leaks"] > 0) is leaks, p
        assert p["verdict"].startswith("LEAKS" if leaks else "causal")
    assert info["config"]["n"] == 8
    assert info["headline"].startswith("LEAK" if leaks else "causal")  # the title names the finding


def test_the_command_says_where_the_picture_went(tmp_path):
    pytest.importorskip("matplotlib")
    import subprocess

    out = tmp_path / "leak.png"
    run = subprocess.run([sys.executable, "-m", "harness.frontends.cli", NO_MASK, "--plot", str(out), "-q"],
                         capture_output=True, text=True, cwd=ROOT, timeout=180)
    assert run.returncode == 1 and out.read_bytes()[:4] == b"\x89PNG"
    assert f"leakage plot written to {out}" in run.stderr and "LEAK" in run.stderr
