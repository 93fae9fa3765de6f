"""A notebook as the target (`mha-check lab.ipynb`), as a student in Jupyter, Colab or a classroom hands it in.

The notebooks in tests/notebooks/ are what students write: a setup cell with `%matplotlib inline` and `!pip install`,
the class, then a cell that trains forever and a `%%time` cell that never ends.  Only the definitions run, so every
run here finishes; every message points into the notebook ("lab.ipynb, code cell 2, line 16"), never at the file we
write from it; nothing is written next to the notebook.
"""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from .test_cli import checks_of, mha, no_traceback, report

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("warm_single_runs")]  # see conftest
NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A student's folder holding copies of the test notebooks."""
    for nb in NOTEBOOKS.glob("*.ipynb"):
        shutil.copy(nb, tmp_path / nb.name)
    return tmp_path


def write_notebook(path: Path, *cells: str) -> Path:
    nbformat.write(new_notebook(cells=[new_code_cell(c) for c in cells]), str(path))
    return path


def test_a_correct_notebook_passes_without_running_its_training_or_shell_cells(folder: Path):
    before = sorted(p.name for p in folder.iterdir())
    data = report(mha("lab.ipynb", "--format", "json", cwd=folder), 0)  # the class is found without `:CausalMHA`
    assert data["adapter"]["construction"].startswith("CausalMHA(")
    notes = "\n".join(data["adapter"]["notes"])
    assert "'!pip install torch' (a magic or shell command) was left out" in notes
    assert "code cell 4: the cell magic %%time was left out" in notes
    assert "code cell 4: 1 statement(s) that do not define anything" in notes  # `while True: pass`
    assert "code cell 3: 2 statement(s) that do not define anything" in notes  # the endless training loop
    assert "code cell 5: 1 statement(s)" in notes  # os.system(...)
    assert sorted(p.name for p in folder.iterdir()) == before  # no lab_cells.py, no cache, nothing


def test_a_method_written_in_a_later_cell_is_part_of_the_class(folder: Path):
    data = report(mha("split_lab.ipynb:CausalMHA", "--format", "json", cwd=folder), 0)
    assert checks_of(data)["reference-match"]["status"] == "pass"


def test_the_root_cause_points_to_the_cell_and_line_in_the_notebook(folder: Path):
    data = report(mha("buggy_lab.ipynb", "--format", "json", cwd=folder), 1)
    cause = data["diagnosis"]
    assert cause["mutant"] == "split-view-order"
    assert cause["at"] == "buggy_lab.ipynb, code cell 2, line 16"
    assert cause["code"].startswith("split = lambda t: t.view(B, self.h, n, self.dh)")
    text = mha("buggy_lab.ipynb", cwd=folder)
    assert "where:        buggy_lab.ipynb, code cell 2, line 16" in text.stdout, text.log
    assert "_cells.py" not in text.stdout + text.stderr, text.log  # the file we wrote is never named


def test_extensions_in_capitals_are_read_as_platforms_export_them(folder: Path):
    (folder / "buggy_lab.ipynb").rename(folder / "Buggy_Lab.IPYNB")
    data = report(mha("Buggy_Lab.IPYNB", "--format", "json", cwd=folder), 1)
    assert data["diagnosis"]["at"] == "Buggy_Lab.IPYNB, code cell 2, line 16"
    shutil.copy(Path(__file__).resolve().parents[2] / "examples" / "correct_attention.py", folder / "ATTENTION.PY")
    assert report(mha("ATTENTION.PY", "--format", "json", cwd=folder), 0)["passed"] is True


def test_a_file_that_is_not_a_notebook_is_a_clear_failure(folder: Path):
    data = report(mha("broken.ipynb:CausalMHA", "--only", "construct", "--format", "json", cwd=folder), 1)
    construct = checks_of(data)["construct"]
    assert construct["status"] == "fail"
    assert "broken.ipynb is not a readable notebook (NotJSONError" in construct["message"]


def test_a_syntax_error_names_the_cell_and_line(tmp_path: Path):
    write_notebook(tmp_path / "typo.ipynb", "import torch", "class A(torch.nn.Module):\n    def forward(self x):\n"
                                                            "        return x")
    run = mha("typo.ipynb:A", "--only", "construct", "--format", "json", cwd=tmp_path)
    message = checks_of(report(run, 1))["construct"]["message"]
    assert "SyntaxError in typo.ipynb, code cell 2, line 2" in message


def test_a_value_made_by_a_call_in_a_cell_is_explained(tmp_path: Path):
    write_notebook(tmp_path / "cfg.ipynb",
                   "import json\nimport torch\ncfg = json.loads('{\"d\": 8}')",
                   "class A(torch.nn.Module):\n    WIDTH = cfg['d']\n    def forward(self, x):\n        return x")
    run = mha("cfg.ipynb:A", "--only", "construct", "--format", "json", cwd=tmp_path)
    message = checks_of(report(run, 1))["construct"]["message"]
    assert "NameError" in message and "cfg.ipynb, code cell 2, line 2" in message
    assert "from a notebook only the definitions are run" in message


def test_code_inside_definitions_runs_in_the_child_only(tmp_path: Path):
    """What docs/usage.md says: a class body, a default argument and a decorator run when the definition runs, in the
    confined child (where they print into the report's student output), never in the trusted parent (whose stdout is
    the JSON report alone); a top-level statement that defines nothing does not run at all."""
    write_notebook(tmp_path / "runs.ipynb",
                   "import torch\ndef helper(x=print('default argument ran')):\n    return x",
                   "print('top level ran')",
                   "class A(torch.nn.Module):\n    print('class body ran')\n    def forward(self, x):\n"
                   "        return x")
    data = report(mha("runs.ipynb:A", "--only", "construct", "--format", "json", cwd=tmp_path), 0)
    printed = data["student_output"]
    assert "class body ran" in printed and "default argument ran" in printed, printed
    assert "top level ran" not in printed, printed


def test_a_notebook_with_no_class_says_so(tmp_path: Path):
    write_notebook(tmp_path / "empty.ipynb", "print('hello')")
    run = mha("empty.ipynb", "--only", "construct", cwd=tmp_path)
    assert run.rc == 1, run.log
    no_traceback(run)
    assert "empty.ipynb" in run.stdout + run.stderr, run.log


def test_grade_takes_folders_and_flat_files_of_notebooks(tmp_path: Path):
    folders, flat = tmp_path / "folders", tmp_path / "flat"
    for student, nb in (("ana", "lab.ipynb"), ("ben", "buggy_lab.ipynb")):
        (folders / student).mkdir(parents=True)
        shutil.copy(NOTEBOOKS / nb, folders / student / nb)
        flat.mkdir(exist_ok=True)
        shutil.copy(NOTEBOOKS / nb, flat / f"{student}_lab.ipynb")  # the name every student hands in, as a platform
        # exports it (ben_buggy_lab.ipynb beside ana_lab.ipynb would be the student ben_buggy: see exports.py)
    for where in (folders, flat):
        run = mha("grade", where, "--out", tmp_path / f"out-{where.name}", cwd=tmp_path)
        assert run.rc == 0, run.log
        assert "found 2 submissions" in run.stdout, run.log
        rows = {r["submission"]: r for r in csv.DictReader(open(tmp_path / f"out-{where.name}" / "summary.csv"))}
        assert rows["ana"]["passed"] == "True" and rows["ben"]["passed"] == "False", rows
        assert rows["ben"]["diagnosis"] == "split-view-order", rows["ben"]


def test_a_notebook_as_students_write_it_is_checked(tmp_path: Path):
    """What a user trial found dropped or refused: a constant named after another, a lambda calling torch, a device
    chosen with a call, an if/else choosing a constant, a later `from __future__`, IPython timing, help and shell
    syntax, a scratch cell that does not parse, an import of a module not installed here."""
    lab = (NOTEBOOKS / "lab.ipynb").read_text()
    attn = next(c for c in nbformat.reads(lab, as_version=4).cells if "class CausalMHA" in c.source).source
    write_notebook(tmp_path / "trial.ipynb",
                   "import torch\nimport torch.nn as nn\nfrom no_such_tqdm_mha import tqdm\nD_MODEL = 8\n"
                   "D_OUT = D_MODEL\nact = lambda x: torch.relu(x)\n"
                   "device = 'cuda' if torch.cuda.is_available() else 'cpu'\nnn?\nfiles = !ls",
                   "if D_OUT > 4:\n    WIDE = True\nelse:\n    WIDE = False",
                   "%%time\nfrom __future__ import annotations\n" + attn.replace(
                       "        self.h, self.dh", "        assert WIDE and act is not None and device\n"
                                                 "        self.h, self.dh"),
                   "%timeit -n 1 model = CausalMHA(8, 2, 4)\nfor batch in tqdm(range(3)):\n    %time model(batch",
                   'if __name__ == "__main__":\n    train()')
    data = report(mha("trial.ipynb", "--format", "json", cwd=tmp_path), 0)
    notes = "\n".join(data["adapter"]["notes"])
    assert "'no_such_tqdm_mha' is not installed here" in notes
    assert "code cell 4 does not parse" in notes and "__main__" in notes


@pytest.mark.parametrize("broken", ["    WIDTH = cfg['d']\n", "    def __init__(self, d, heads, context_length):\n"
                                                            "        raise RuntimeError('not written yet')\n"])
def test_the_notes_are_in_the_report_when_the_class_cannot_be_loaded_or_built(tmp_path: Path, broken: str):
    write_notebook(tmp_path / "half.ipynb", "!pip install einops\nimport torch\nprint('setup')",
                   "class A(torch.nn.Module):\n" + broken + "    def forward(self, x):\n        return x")
    data = report(mha("half.ipynb:A", "--only", "construct", "--format", "json", cwd=tmp_path), 1)
    notes = "\n".join(data["adapter"].get("notes", []))
    assert "'!pip install einops' (a magic or shell command) was left out" in notes, data["adapter"]
    assert "code cell 1: 1 statement(s) that do not define anything" in notes
    text = mha("half.ipynb:A", "--only", "construct", cwd=tmp_path).stdout
    assert "!pip install einops" in text


def test_the_readers_own_warnings_are_not_what_the_student_printed(tmp_path: Path):
    """A notebook whose cells have no ids (nbformat 4.5 wants them): nbformat warns; that is not the student's."""
    source = (NOTEBOOKS / "lab.ipynb").read_text()
    data = json.loads(source)
    data["nbformat_minor"] = 5
    for cell in data["cells"]:
        cell.pop("id", None)
    (tmp_path / "noid.ipynb").write_text(json.dumps(data))
    out = report(mha("noid.ipynb", "--format", "json", cwd=tmp_path), 0)
    assert "MissingIDFieldWarning" not in out["student_output"]
