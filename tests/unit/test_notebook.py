"""Which cells of a notebook become the checked module (harness/child/notebook.py), tested with `ast` alone: nothing of
the notebook runs here.  Every case is what a student's notebook really holds (a user trial found them)."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from harness.child import notebook


def extract(tmp_path: Path, *cells: str) -> notebook.Extracted:
    path = tmp_path / "lab.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell(c) for c in cells]), str(path))
    found = notebook.extract(str(path))
    compile(found.source, "generated", "exec")  # what is kept always parses
    return found


def kept(found: notebook.Extracted) -> list[str]:
    return [line for line in found.source.splitlines() if line.strip()]


def notes(found: notebook.Extracted) -> str:
    return "\n".join(found.notes)


# -- 1. real definitions are kept, anything that runs something is not -------------------------------------------------
def test_a_constant_named_after_another_is_kept(tmp_path):
    assert kept(extract(tmp_path, "D_MODEL = 8\nD_OUT = D_MODEL")) == ["D_MODEL = 8", "D_OUT = D_MODEL"]


def test_a_call_inside_a_lambda_body_does_not_count(tmp_path):
    found = extract(tmp_path, "import torch\nact = lambda x: torch.relu(x)\nsq = lambda x: helper(x) ** 2")
    assert "act = lambda x: torch.relu(x)" in kept(found) and "sq = lambda x: helper(x) ** 2" in kept(found)
    assert "early = lambda x=train(): x" not in kept(extract(tmp_path, "early = lambda x=train(): x"))  # a default
    # value is evaluated when the lambda is made


def test_calls_of_safe_modules_and_builtins_are_kept_other_calls_are_not(tmp_path):
    found = extract(tmp_path,
                    "import math\nimport torch\nimport numpy as np\nimport torch.nn.functional as F\nimport requests",
                    "device = 'cuda' if torch.cuda.is_available() else 'cpu'\nSCALE = 1 / math.sqrt(64)\n"
                    "SIZES = tuple(range(3))\nBIG = max(len(SIZES), int(np.prod([2, 3])))\nACT = F.gelu\n"
                    "W = torch.load('weights.pt')\nPAGE = requests.get('http://x')\nresult = train(model)\n"
                    "model = MyAttn(8, 2)\nnp.random.seed(0)")
    lines = kept(found)
    for line in ("device = 'cuda' if torch.cuda.is_available() else 'cpu'", "SCALE = 1 / math.sqrt(64)",
                 "SIZES = tuple(range(3))", "BIG = max(len(SIZES), int(np.prod([2, 3])))", "ACT = F.gelu"):
        assert line in lines
    for line in ("torch.load", "requests.get", "train(", "MyAttn(", "np.random.seed"):
        assert not any(line in k for k in lines[5:]), (line, lines)
    assert "code cell 2: 5 statement(s) that do not define anything" in notes(found)


def test_an_if_that_only_defines_is_kept_a_main_block_is_not(tmp_path):
    found = extract(tmp_path, "import torch",
                    "if torch.cuda.is_available():\n    WIDTH = 64\nelse:\n    WIDTH = 8\n",
                    "if WIDTH > 8:\n    class A:\n        pass\nelif WIDTH > 4:\n    A = None\nelse:\n    def A():\n"
                    "        return 1\n",
                    "if True:\n    train()\n",
                    'if __name__ == "__main__":\n    X = 1\n')
    lines = kept(found)
    assert "    WIDTH = 64" in lines and "    WIDTH = 8" in lines and "    class A:" in lines
    assert "    def A():" in lines
    assert "    train()" not in lines and "    X = 1" not in lines
    assert "code cell 5" in notes(found) and "__main__" in notes(found)


def test_a_future_import_in_a_later_cell_goes_first(tmp_path):
    found = extract(tmp_path, "import torch\nX = 1", "from __future__ import annotations\nclass A:\n    y: Later = 1")
    assert kept(found)[0] == "from __future__ import annotations"
    assert found.lines[1] == (2, 1)  # still named by its own cell and line


# -- 2. IPython syntax -------------------------------------------------------------------------------------------------
def test_time_magics_keep_a_definition_and_drop_anything_else(tmp_path):
    found = extract(tmp_path, "%time X = 3\n%timeit -n 10 -r 2 Y = 4\n%time train(model)\n%timeit f(3)")
    assert kept(found) == ["X = 3", "Y = 4"]
    assert found.lines[1] == (1, 1) and found.lines[2] == (1, 2)


def test_a_timing_cell_magic_is_filtered_like_any_cell(tmp_path):
    found = extract(tmp_path, "%%time\nimport torch\nclass A(torch.nn.Module):\n    pass\nwhile True: pass",
                    "%%capture\nB = 2", "%%bash\necho hi", "%%writefile x.py\nclass Z: pass")
    lines = kept(found)
    assert "class A(torch.nn.Module):" in lines and "B = 2" in lines
    assert not any("echo" in k or "Z" in k for k in lines)
    assert "code cell 3: a cell magic (%%bash): the cell was left out" in notes(found)
    assert "code cell 4: a cell magic (%%writefile)" in notes(found)
    assert found.lines[lines.index("class A(torch.nn.Module):") + 1] == (1, 3)


def test_help_shell_and_nested_magics_become_pass(tmp_path):
    found = extract(tmp_path,
                    "import torch\ntorch.nn?\n??torch\ntorch.softmax??\nfiles = !ls\n!pip install einops\n"
                    "%matplotlib inline\nX = 1",
                    "def f():\n    %time g()\n\ndef h():\n    %matplotlib inline\n\nfor i in range(3):\n"
                    "    !echo hi\nclass A:\n    def m(self):\n        %debug\n    Z = 1\n")
    lines = kept(found)
    assert lines[0] == "import torch" and "X = 1" in lines
    assert "def f():" in lines and "    g()" in lines  # timed inside a function: the function still does it
    assert "def h():" in lines and "    pass" in lines and "class A:" in lines and "        pass" in lines
    assert "    !echo hi" not in lines  # the loop itself is not a definition
    text = notes(found)
    for shown in ("torch.nn?", "??torch", "torch.softmax??", "files = !ls", "!pip install einops",
                  "%matplotlib inline", "%debug"):
        assert repr(shown) in text, (shown, text)


def test_a_magic_looking_line_in_a_string_is_left_alone(tmp_path):
    found = extract(tmp_path, 'DOC = """\n%not a magic\nwhy?\n"""\nX = 1')
    assert kept(found) == ['DOC = """', "%not a magic", "why?", '"""', "X = 1"]
    assert found.notes == []


# -- 3. cells that do not parse ----------------------------------------------------------------------------------------
def test_a_broken_cell_without_definitions_is_skipped(tmp_path):
    found = extract(tmp_path, "import torch", "print('unclosed'", "X = 1")
    assert kept(found) == ["import torch", "X = 1"]
    assert "code cell 2 does not parse" in notes(found) and "skipped" in notes(found)


def test_a_broken_cell_with_a_class_is_the_students_syntax_error(tmp_path):
    with pytest.raises(notebook.NotebookError, match=r"SyntaxError in lab.ipynb, code cell 2, line 2"):
        extract(tmp_path, "import torch", "class A:\n    def f(self x):\n        return x")


# -- 4. imports of modules that are not installed ----------------------------------------------------------------------
def test_an_import_of_a_missing_module_is_left_out(tmp_path):
    found = extract(tmp_path, "import torch\nimport no_such_module_mha\nfrom no_such_tqdm_mha import tqdm\n"
                              "import math, no_such_module_mha as nsm\nfrom . import sibling")
    assert kept(found)[0] == "import torch" and kept(found)[1] == "import math"
    assert not any("no_such" in k for k in kept(found))
    text = notes(found)
    assert "'no_such_module_mha' is not installed" in text and "'no_such_tqdm_mha' is not installed" in text
    assert "from . import sibling" in kept(found)  # relative: the notebook's own folder, not ours to judge


def test_an_import_in_a_try_is_the_students_own_fallback(tmp_path):
    found = extract(tmp_path, "try:\n    import no_such_module_mha\nexcept ImportError:\n    pass")
    assert "    import no_such_module_mha" in kept(found) and found.notes == []
