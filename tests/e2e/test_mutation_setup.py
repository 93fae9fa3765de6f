"""The mutation run's staging (mutation/run.py), without running mutmut: it never touches the project's `mutants/`
package, and what mutmut's tests and the checks' child import is the real code, not a stale copy."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from conftest import ROOT


def _run_module():
    spec = importlib.util.spec_from_file_location("mutation_run", ROOT / "mutation" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


run = _run_module()


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    before = run.tree_digest(ROOT / "mutants")
    dest = run.stage(tmp_path_factory.mktemp("mutation") / "stage")
    return dest, before


def test_staging_never_touches_the_projects_mutants_package(staged):
    dest, before = staged
    assert run.tree_digest(ROOT / "mutants") == before
    assert (dest / "mutants").resolve() != (ROOT / "mutants").resolve()
    assert not (dest / "mutants").is_symlink()  # mutmut writes its working copy there: a real folder of its own
    cfg = (dest / "setup.cfg").read_text()
    assert "[mutmut]" in cfg and "[tool:pytest]" in cfg  # and pytest stops there instead of reading ours


def test_staging_links_the_real_code_never_copies(staged):
    dest, _ = staged
    assert (dest / "reference").resolve() == ROOT / "reference"  # what mutmut copies and mutates: the current file
    for name in run.TESTS:
        assert (dest / "tests" / name).resolve() == ROOT / "mutation" / name
    for pkg in run.LINKED_PACKAGES:
        assert (dest / "mutants" / pkg).resolve() == ROOT / pkg


def test_staged_tests_and_the_checks_child_import_the_real_packages(staged):
    """Imported the way mutmut's test processes import (its working folder first on sys.path): harness and checks
    are the real packages, the hand-made mutants too, and the checks' child looks first in mutmut's working folder,
    where mutmut puts its mutated `reference`."""
    dest, _ = staged
    work = dest / "mutants"
    probe = (
        "import json, os, sys; sys.path.insert(0, os.getcwd())\n"
        "import harness, checks, mutants\n"
        "from harness.sandbox.subject import worker_command\n"
        "print(json.dumps({m.__name__: os.path.realpath(m.__file__) for m in (harness, checks, mutants)}"
        " | {'child': worker_command()[-1]}))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=work, capture_output=True, text=True, check=True).stdout
    found = json.loads(out)
    assert found["harness"] == str(ROOT / "harness" / "__init__.py")
    assert found["checks"] == str(ROOT / "checks" / "__init__.py")
    assert found["mutants"] == str(ROOT / "mutants" / "__init__.py")
    assert f"sys.path.insert(0, {str(work)!r})" in found["child"]


def test_staging_refuses_to_wipe_what_it_did_not_build(tmp_path):
    with pytest.raises(SystemExit):
        run.stage(ROOT / "mutants")
    with pytest.raises(SystemExit):
        run.stage(ROOT)
    foreign = tmp_path / "not-a-stage"
    (foreign / "keep").mkdir(parents=True)
    with pytest.raises(SystemExit):
        run.stage(foreign)
    assert (foreign / "keep").is_dir()


def test_the_mutation_test_stays_out_of_the_main_suite():
    tomllib = run.tomllib

    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["testpaths"] == \
        ["tests"]
    assert not (ROOT / "tests" / "test_reference_passes.py").exists()


def test_equivalent_mutants_are_reviewed_entries_with_reasons():
    entries = run.load_equivalent()
    keys = [(e["file"], e["function"], e["before"], e["after"]) for e in entries]
    assert len(keys) == len(set(keys))
    for e in entries:
        assert e["file"] in run.MUTATED and e["before"] != e["after"]
        assert e["reason"].strip() and "\n" not in e["reason"]


def test_mutants_are_named_by_file_function_and_changed_line():
    diff = ("--- reference/causal_mha.py\n+++ reference/causal_mha.py\n@@ -1,3 +1,3 @@\n def forward(self, x):\n"
            '-    w = torch.softmax(scores, dim=-1)\n+    w = torch.softmax(scores, dim=-2)\n')
    assert run.describe("reference.causal_mha.xǁCausalMHAǁforward__mutmut_7", diff) == {
        "file": "reference/causal_mha.py", "function": "CausalMHA.forward",
        "before": "w = torch.softmax(scores, dim=-1)", "after": "w = torch.softmax(scores, dim=-2)"}
    assert run.describe("reference.numpy_ref.x__softmax_masked__mutmut_3", "")["function"] == "_softmax_masked"
