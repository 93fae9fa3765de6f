"""The notebook API in a real Jupyter kernel (ipykernel, run by nbclient), as a student's lab runs it: the class is
defined in one cell and checked from the next, so its source comes from IPython's cell cache, not from a file.  The
unit tests simulate that cache (linecache names as IPython makes them); this runs the real thing."""
from __future__ import annotations

from pathlib import Path

import pytest

nbclient = pytest.importorskip("nbclient", reason="the real-kernel test needs nbclient and ipykernel ([test] extras)")
pytest.importorskip("ipykernel")
from nbformat.v4 import new_code_cell, new_notebook  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("warm_single_runs")]  # see conftest
ROOT = Path(__file__).resolve().parents[2]
CORRECT = (ROOT / "examples" / "correct_attention.py").read_text()
BUGGY = (ROOT / "examples" / "buggy_attention.py").read_text()


def _run(cells: list[str], cwd: Path) -> list[str]:
    """Every cell's printed output, after the notebook ran top to bottom in a fresh kernel."""
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    resources = {"metadata": {"path": str(cwd)}}
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources=resources).execute()
    return ["".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream") for cell in nb.cells]


def test_a_class_defined_in_a_cell_is_checked_from_the_next_one(tmp_path):
    out = _run([CORRECT,  # the lesson's layer, as the student typed it
                "from harness.frontends.api import check\n"
                "report = check(MultiHeadAttention)\n"
                "print('PASSED' if report.passed else report)",
                "print(sorted(p.name for p in __import__('pathlib').Path('.').iterdir()))"], tmp_path)
    assert out[1].strip() == "PASSED", out[1]
    assert out[2].strip() == "[]"  # nothing left in the student's folder


def test_a_buggy_cell_is_diagnosed_and_pointed_at_in_the_notebook(tmp_path):
    out = _run([BUGGY,
                "from harness.frontends.api import check\n"
                "r = check(MultiHeadAttention)\n"
                "print(r.passed, r.diagnosis.mutant if r.diagnosis else None)\n"
                "print(r.diagnosis and r.diagnosis.at)"], tmp_path)
    passed, mutant = out[1].splitlines()[0].split()
    assert passed == "False" and mutant != "None", out[1]
    where = out[1].splitlines()[1]
    assert where.startswith("your notebook") and "tmp" not in where, out[1]
