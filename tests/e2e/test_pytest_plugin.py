"""The pytest plugin (`harness.frontends.pytest_plugin`): `pytest --mha-target ...` and the `mha_check` fixture.

A throwaway project (pytester) holds the two shipped examples and a course test that uses the fixture; one pytest
subprocess checks both examples (each once) and runs the course test.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from checks import all_checks

pytestmark = pytest.mark.usefixtures("warm_single_runs")  # see conftest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
CHECK_IDS = [c.id for c in all_checks()]


def plugin_args() -> list[str]:
    """Once the `pytest11` entry point is installed the plugin loads by itself (and `-p harness.frontends.pytest_plugin`
    would register it twice); before that it is loaded by hand."""
    installed = any(ep.name == "mha_check" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "harness.frontends.pytest_plugin"]


COURSE_TEST = '''
def test_fixture_runs_single_checks(mha_check):
    report = mha_check("correct_attention.py:MultiHeadAttention", only=["causal-leakage"])
    assert report.passed
    assert report["causal-leakage"].status == "pass"
    assert [c.id for c in report.checks] == ["construct", "contiguity", "output-shape", "causal-leakage"]
    assert mha_check("correct_attention.py:MultiHeadAttention", only=["causal-leakage"]) is report  # cached


def test_fixture_sees_the_bug(mha_check):
    report = mha_check("buggy_attention.py:MultiHeadAttention", only=["view-order"])
    assert not report.passed
    assert report["view-order"].status == "fail"
'''


@pytest.fixture(scope="module")
def project_run(tmp_path_factory):
    """pytest --mha-target correct --mha-target buggy, plus the course test, in one subprocess."""
    folder = tmp_path_factory.mktemp("course")
    for name in ("correct_attention.py", "buggy_attention.py"):
        shutil.copy(ROOT / "examples" / name, folder / name)
    (folder / "test_course.py").write_text(COURSE_TEST)
    args = [sys.executable, "-m", "pytest", *plugin_args(), "-p", "no:cacheprovider", "-rA", "-q",
            "--mha-target", "correct_attention.py:MultiHeadAttention", "--mha-target", "buggy_attention.py",
            "--mha-seed", "0"]
    proc = subprocess.run(args, cwd=folder, capture_output=True, text=True, timeout=300)
    return proc


def test_correct_example_passes_every_check(project_run):
    out = project_run.stdout
    for check_id in CHECK_IDS:
        assert f"PASSED mha-check:correct_attention.py:MultiHeadAttention::{check_id}" in out, out[-3000:]


def test_buggy_example_fails_with_message_and_fix(project_run):
    out = project_run.stdout
    assert project_run.returncode == 1, out[-3000:]
    assert "FAILED mha-check:buggy_attention.py::view-order" in out
    assert "PASSED mha-check:buggy_attention.py::construct" in out
    assert "root cause: Heads split with view(B, H, n, dh)" in out  # the same order as the text report
    assert "buggy_attention.py:30" in out  # the line to change
    words = " ".join(out.split())  # the failure text is wrapped to 80 columns, as the text report is
    assert "heads are split with view(B, H, n, dh) straight from (B, n, d)" in words
    assert "fix: queries = queries.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)" in words
    assert "smallest failing configuration:" in out


def test_fixture_in_a_course_test(project_run):
    out = project_run.stdout
    assert "PASSED test_course.py::test_fixture_runs_single_checks" in out, out[-3000:]
    assert "PASSED test_course.py::test_fixture_sees_the_bug" in out


def test_without_a_target_nothing_is_added(pytester):
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    result = pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result = pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", "--help")
    result.stdout.fnmatch_lines(["*--mha-target=TARGET*"])


def test_the_plugin_imports_neither_torch_nor_numpy():
    code = ("import sys, harness.frontends.pytest_plugin; "
            "print(sorted(m for m in ('torch', 'numpy', 'checks', 'harness.engine.runner') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
