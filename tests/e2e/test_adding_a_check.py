"""Adding a check is two files and one command: proved on a throwaway check and mutant, in a copy of the project.

The copy gets `checks/large_inputs_stay_finite.py` (a real claim: inputs a thousand times larger still give a finite
output) and `mutants/softmax_unstable.py` (a softmax written as exp / sum without subtracting the maximum, which
overflows there).  Then `.ci/regenerate --quick` alone must make the catalogue and the tables of docs/checks.md
current, and the kill matrix must hold for them in the copy: the reference passes the new check, the mutant fails it
and is diagnosed as itself.  (The golden reports, the command's other half, would take minutes for every target: the
behaviour snapshot's test of staleness covers them.)  The copy lives in a folder every user can read, since the
child runs under a slot uid.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow

CHECK = '''"""large-inputs-stay-finite: a throwaway check, written by tests/e2e/test_adding_a_check.py."""
import numpy as np

from checks import check, failed, passed
from checks.output_shape import output_shape


@check(
    id="large-inputs-stay-finite",
    claim="inputs a thousand times larger still give a finite output",
    explanation="""A softmax must subtract the row's maximum before exponentiating, or large scores overflow.""",
    fix="""Use torch.softmax(scores, dim=-1), which subtracts the maximum for you.""",
    needs=(output_shape,),
    example="""x * 1000: scores of order 1e5; exp(1e5) is inf in float64, and inf / inf is NaN""",
)
def large_inputs_stay_finite(ctx):
    def holds(cfg):
        y = ctx.build(cfg).forward(ctx.input(cfg, "large") * 1000.0)
        if not np.all(np.isfinite(y)):
            return failed("an input 1000 times larger gave NaN or inf in the output", observed="not finite",
                          expected="finite", finding="overflow")
        return None

    return ctx.find_failure(holds) or passed("outputs stay finite for inputs 1000 times larger")
'''

MUTANT_INFO = '''"""A softmax written by hand without subtracting the maximum: overflows for large scores."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="softmax-unstable",
    task="Large inputs give NaN.",
    topic="the softmax",
    title="A softmax computed as exp(scores) / sum without subtracting the maximum",
    lesson="The softmax turns scores into weights; torch.softmax does it stably.",
    killed_by=("large-inputs-stay-finite",),
    symptom="Scores above about 709 overflow exp in float64: the weights become inf / inf = NaN.",
    fix="w = torch.softmax(scores, dim=-1)",
    remedy="Compute the weights with torch.softmax, which subtracts the row's maximum first.",
    example="scores 1e5: exp gives inf, and inf / inf is NaN",
)
'''


@pytest.fixture(scope="module")
def copy():
    """The project without its environment and history, in a folder the slot uid can read."""
    where = Path(tempfile.mkdtemp(prefix="mha-check-adding-"))
    try:
        where.chmod(0o755)
        repo = where / "repo"
        shutil.copytree(ROOT, repo, ignore=shutil.ignore_patterns(".venv", ".git", "mutmut-stage", "__pycache__",
                                                                   ".tox", "*.egg-info"))
        (repo / "checks" / "large_inputs_stay_finite.py").write_text(CHECK)
        reference = (ROOT / "reference" / "causal_mha.py").read_text()
        body = reference[reference.index("import torch.nn as nn\n") + len("import torch.nn as nn\n"):]
        body = body[:body.index("\n\ndef mha_forward")] + "\n"
        stable = "        w = torch.softmax(scores, dim=-1)\n"
        assert stable in body
        body = body.replace(stable, "        w = scores.exp() / scores.exp().sum(-1, keepdim=True)  # BUG: no max "
                                    "subtracted\n")
        (repo / "mutants" / "softmax_unstable.py").write_text(MUTANT_INFO + body)
        yield repo
    finally:
        shutil.rmtree(where, ignore_errors=True)


def run(repo: Path, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(repo), "PYTHON": sys.executable}
    return subprocess.run(args, cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)


def test_one_command_derives_the_rest_and_the_kill_matrix_holds(copy):
    regenerated = run(copy, "bash", ".ci/regenerate", "--quick")
    assert regenerated.returncode == 0, regenerated.stderr[-3000:]
    entry = json.loads((copy / "mutants" / "catalogue.json").read_text())["softmax-unstable"]
    assert "large-inputs-stay-finite" in entry["failing"], entry["failing"]
    tables = (copy / "docs" / "checks.md").read_text()
    assert "`large-inputs-stay-finite`" in tables and "softmax-unstable" in tables
    matrix = run(copy, sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                 "tests/e2e/test_kill_matrix.py", "-k",
                 "reference_passes or softmax-unstable or softmax_unstable")
    assert matrix.returncode == 0, matrix.stdout[-3000:]
    ran = re.search(r"^(\d+) passed", matrix.stdout, re.M)  # the references, the mutant killed and diagnosed
    assert ran and int(ran.group(1)) >= 3 and "failed" not in matrix.stdout, matrix.stdout[-1000:]
