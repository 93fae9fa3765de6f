"""Teaching commands (kill matrix, mutant story and diff, explain) and the trusted side's torch-free promise."""
import json
import subprocess
import sys

from checks import all_checks
from conftest import ROOT
from harness.frontends import cli as cli_module
from harness.frontends import teach


def cli(*args):
    return subprocess.run([sys.executable, "-m", "harness.frontends.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_matrix_lists_every_mutant_and_check():
    data = json.loads(cli("mutants", "--format", "json").stdout)
    assert data["checks"] == [c.id for c in all_checks()] and len(data["mutants"]) >= 20
    for row in data["mutants"]:
        assert set(row["killed_by"]) <= set(row["failing"]), row  # what it declares is what was measured
    text = cli("mutants").stdout
    assert "split-view-order" in text and "1 construct" in text


def test_show_prints_the_story_and_only_the_bug_as_diff():
    run = cli("mutants", "show", "merge-no-transpose")
    assert run.returncode == 0
    minus = [l for l in run.stdout.splitlines() if l.startswith("-") and not l.startswith("---")]
    plus = [l for l in run.stdout.splitlines() if l.startswith("+") and not l.startswith("+++")]
    assert len(minus) == len(plus) == 1 and "# BUG" in plus[0]
    assert json.loads(cli("mutants", "show", "merge-no-transpose", "--format", "json").stdout)["diff"]


def test_explain_a_check_and_a_mutant_with_a_worked_example():
    check = cli("explain", "causal-leakage").stdout
    assert "Worked example:" in check and "Fix:" in check and "finite-fill" in check
    mutant = json.loads(cli("explain", "split-view-order", "--format", "json").stdout)
    assert mutant["kind"] == "mutant" and "(2, 3, 8)" in mutant["example"] and "view-order" in mutant["caught_by"]


def test_explain_unknown_id_suggests_and_exits_2():
    run = cli("explain", "view-ordr")
    assert run.returncode == 2 and "did you mean view-order" in run.stderr and "Traceback" not in run.stderr


def test_trusted_side_never_imports_torch():
    """The process that computes verdicts and renders reports must not import torch (isolation and speed)."""
    code = ("import sys; import harness.engine.runner, harness.engine.diagnosis, harness.frontends.teach, "
            "harness.render.formats, harness.frontends.grade, "
            "checks; checks.all_checks(); harness.frontends.teach.matrix(); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert run.returncode == 0, run.stderr


def test_teaching_text_fits_100_columns_unless_wide():
    """explain (checks and mistakes), show and the kill matrix, as projected in a class: wrapped at 100 columns;
    --wide prints the long lines as they are."""
    import mutants
    from harness.frontends import teach

    ids = mutants.ids() + [c.id for c in all_checks()]
    pages = [teach.explain(i) for i in ids] + [teach.show(m) for m in mutants.ids()] + [teach.matrix()]
    too_wide = [(page.splitlines()[0], ln) for page in pages for ln in page.splitlines() if len(ln) > 100]
    assert too_wide == []
    wide = teach.explain("causal-leakage", wide=True)
    assert max(map(len, wide.splitlines())) > 100
    assert " ".join(wide.split()) == " ".join(teach.explain("causal-leakage").split())  # same words, rewrapped
    run = cli("explain", "split-view-order", "--wide")
    assert run.returncode == 0 and run.stdout.rstrip("\n") == teach.explain("split-view-order", wide=True)


def test_a_reader_that_leaves_ends_explain_quietly(monkeypatch, capsys):
    """`mha-check explain ID | head -1`: a broken pipe is not an error of the command (it printed one)."""
    class Gone:
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            pass

        def fileno(self):
            return sys.__stdout__.fileno()

    monkeypatch.setattr(sys, "stdout", Gone())
    monkeypatch.setattr(cli_module.os, "dup2", lambda *a: None)  # the real one would point the test's stdout at devnull
    assert cli_module.main(["explain", "causal-leakage"]) == 0
    assert "Broken pipe" not in capsys.readouterr().err


def test_explain_names_every_check_a_mistake_fails_as_measured_not_only_those_made_for_it():
    """query-for-keys is made for reference-match and gradient-match, and its unused W_k fails parameters-used too:
    `explain` said only the first two while `mutants show` said all three; a check's explain lists the mistakes it
    fails as measured."""
    text = teach.explain("query-for-keys")
    assert "Caught by: reference-match, gradient-match (also fails: parameters-used)" in " ".join(text.split())
    assert json.loads(teach.explain("query-for-keys", "json"))["also_fails"] == ["parameters-used"]
    assert "query-for-keys" in " ".join(teach.explain("parameters-used").split())
