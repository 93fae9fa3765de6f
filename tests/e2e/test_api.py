"""The Python / notebook API (`harness.api.check`): targets given as strings, classes, instances and notebook cells.

Every `check(...)` starts a child process (about 1.2 s), so there are three of them; the serialisation of notebook
code is tested on its own, without running anything.
"""
from __future__ import annotations

import json
import linecache
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from harness.frontends.api import NotebookReport, TargetSourceError, check, resolved_target, serialise

pytestmark = pytest.mark.usefixtures("warm_single_runs")  # see conftest

ROOT = Path(__file__).resolve().parents[2]
HEAD_SCALE_POWER = 0.5  # a module-level constant the local class below uses: carried into the serialised copy


def _scale(dh):
    """A module-level helper the local class below uses: its source is carried along."""
    return 1.0 / dh ** HEAD_SCALE_POWER


class ApiAttn(nn.Module):
    """The lesson's layer, defined in this test module: checked from this file (it is importable)."""

    def __init__(self, d, nheads, context_length, d_out=None, dropout=0.0, qkv_bias=False):
        super().__init__()
        d_out = d if d_out is None else d_out
        if d_out % nheads != 0:
            raise ValueError("d_out must be divisible by nheads")
        self.h, self.dh = nheads, d_out // nheads
        self.q, self.k, self.v = (nn.Linear(d, d_out, bias=qkv_bias) for _ in range(3))
        self.out = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def forward(self, x):
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = (q @ k.transpose(2, 3)) / self.dh ** 0.5
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = self.dropout(torch.softmax(scores, dim=-1))
        return self.out((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))


def _leaky_class():
    """A class defined inside a function (no importable home): it can only be checked from its source."""

    class LocalLeakyAttn(nn.Module):
        def __init__(self, d, nheads, context_length, d_out=None, dropout=0.0, qkv_bias=False):
            super().__init__()
            d_out = d if d_out is None else d_out
            assert d_out % nheads == 0
            self.h, self.dh = nheads, d_out // nheads
            self.q, self.k, self.v = (nn.Linear(d, d_out, bias=qkv_bias) for _ in range(3))
            self.out = nn.Linear(d_out, d_out)

        def forward(self, x):
            B, n, _ = x.shape
            split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)
            q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
            scores = (q @ k.transpose(2, 3)) * _scale(self.dh)  # BUG: no causal mask
            w = torch.softmax(scores, dim=-1)
            return self.out((w @ v).transpose(1, 2).reshape(B, n, self.h * self.dh))

    return LocalLeakyAttn


@pytest.fixture(scope="module")
def class_report():
    return check(ApiAttn)


def test_class_from_this_module_passes(class_report):
    assert isinstance(class_report, NotebookReport)
    assert class_report.passed, repr(class_report)
    assert class_report["causal-leakage"].status == "pass"
    assert class_report.target.endswith("test_api.py:ApiAttn")


def test_report_renders_as_text_html_and_json(class_report):
    text = repr(class_report)
    assert text.startswith("mha-check ") and "PASS: the math is correct" in text
    page = class_report._repr_html_()
    for c in class_report.checks:
        assert f"<code>{c.id}</code>" in page
    apart = [c.id for c in class_report.checks if c.not_applicable]  # no KV cache: N/A, not PASS
    assert apart == ["kv-cache"] and page.count(">N/A<") == 1
    assert page.count(">PASS<") == len(class_report.checks) - 1
    assert page.index("The math") < page.index("The lesson&#x27;s rules")  # the same order as the text report
    data = json.loads(class_report.to_json())
    assert set(data) >= {"tool", "version", "target", "passed", "seed", "summary", "adapter", "checks"}
    assert data["passed"] is True and data == class_report.to_dict()
    with pytest.raises(KeyError):
        class_report["no-such-check"]


def test_instance_of_a_local_class_is_checked_from_its_source():
    cls = _leaky_class()
    report = check(cls(8, 2, 16), only=["causal-leakage"])
    assert report["causal-leakage"].status == "fail"
    assert not report.passed
    assert any("checked through its class LocalLeakyAttn" in n for n in report.notes)
    assert report.source and "def _scale(dh):" in report.source and "HEAD_SCALE_POWER = 0.5" in report.source
    assert "(from its source)" in report.target
    page = report._repr_html_()
    assert ">FAIL<" in page and "causal-leakage" in page and ("fix:" in page or "write:" in page)


def test_path_string_target():
    report = check(str(ROOT / "examples" / "buggy_attention.py") + ":MultiHeadAttention", only="view-order")
    assert [c.id for c in report.checks] == ["construct", "contiguity", "output-shape", "view-order"]  # with
    # the prerequisites
    assert report["view-order"].status == "fail"
    assert "view-order" in report._repr_html_()


def test_notebook_cell_source_is_found_through_linecache():
    """What IPython does: the cell's text lives in linecache under a pseudo file name, the class's module is
    __main__ (no file), and inspect.getsource cannot find the class."""
    cell = (
        "import torch\nimport torch.nn as nn\nimport numpy as np\nWIDTH = 8\n\n"
        "class CellAttn(nn.Module):\n"
        "    def __init__(self, d, nheads, context_length):\n"
        "        super().__init__()\n"
        "        self.lin = nn.Linear(d, d)\n"
        "        self.scale = 1 / np.sqrt(d // nheads)\n"
        "    def forward(self, x):\n"
        "        return self.lin(x) * self.scale\n"
    )
    name = "<ipython-input-3-0123456789ab>"
    linecache.cache[name] = (len(cell), None, cell.splitlines(True), name)
    try:
        namespace = {"__name__": "__main__"}
        exec(compile(cell, name, "exec"), namespace)
        text, notes = serialise(namespace["CellAttn"])
    finally:
        del linecache.cache[name]
    assert "import numpy as np" in text and "class CellAttn(nn.Module):" in text
    assert "WIDTH" not in text  # not used by the class: not carried
    assert notes == []
    compile(text, "serialised", "exec")


def test_objects_that_cannot_be_sent():
    nameless = type("NoSource", (nn.Module,), {"forward": lambda self, x: x})
    with pytest.raises(TargetSourceError, match="cannot get the source code"):
        with resolved_target(nameless):
            pass
    with pytest.raises(TargetSourceError, match="source=False"):
        with resolved_target(_leaky_class(), source=False):
            pass
    with pytest.raises(TargetSourceError, match="cannot check a int"):
        with resolved_target(3):
            pass
    with pytest.raises(ValueError, match="unknown check id"):
        check("examples/correct_attention.py", only=["no-such-check"])


def test_uncarried_globals_are_reported():
    blob = torch.zeros(2)

    class UsesTensorGlobal(nn.Module):
        def forward(self, x):
            return x + blob + math.pi

    text, notes = serialise(UsesTensorGlobal)
    assert "import math" in text
    assert any("'blob' (Tensor)" in n for n in notes)


def _kernel(*cells: str) -> dict:
    """Run cells as a Jupyter kernel does: one __main__ namespace, each cell's text in linecache under its own name
    (removed again by the caller through `_forget`)."""
    namespace = {"__name__": "__main__"}
    for k, cell in enumerate(cells):
        name = f"<ipython-input-{k + 90}-mha{k}>"
        linecache.cache[name] = (len(cell), None, cell.splitlines(True), name)
        exec(compile(cell, name, "exec"), namespace)
    return namespace


def _forget() -> None:
    for name in [n for n in linecache.cache if n.startswith("<ipython-input-") and "-mha" in n]:
        del linecache.cache[name]


KERNEL_ATTN = (
    "class KernelAttn(nn.Module):\n"
    "    def __init__(self, d, nheads, context_length):\n"
    "        super().__init__()\n"
    "        self.h, self.dh = nheads, d // nheads\n"
    "        self.q, self.k, self.v, self.out = (nn.Linear(d, d) for _ in range(4))\n"
    "        self.register_buffer('mask', torch.triu(torch.ones(context_length, context_length), 1).bool())\n"
    "    def forward(self, x):\n"
    "        B, n, d = x.shape\n"
    "        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)\n"
    "        s = split(self.q(x)) @ split(self.k(x)).transpose(2, 3) / self.dh ** 0.5\n"
    "        w = softmax_last(s.masked_fill(self.mask[:n, :n], float('-inf')))\n"
    "        return self.out((w @ split(self.v(x))).transpose(1, 2).reshape(B, n, d))\n")


def test_a_lambda_global_of_the_kernel_is_carried_as_its_assignment():
    try:
        ns = _kernel("import torch\nimport torch.nn as nn\nsoftmax_last = lambda s: torch.softmax(s, dim=-1)\n",
                     KERNEL_ATTN)
        text, notes = serialise(ns["KernelAttn"])
    finally:
        _forget()
    assert "softmax_last = lambda s: torch.softmax(s, dim=-1)" in text and "<lambda>" not in text, text
    compile(text, "serialised", "exec")
    assert notes == []


def test_an_empty_subclass_of_a_kernel_class_is_checked_with_its_base():
    try:
        ns = _kernel("import torch\nimport torch.nn as nn\ndef softmax_last(s):\n    return torch.softmax(s, -1)\n",
                     KERNEL_ATTN, "class Mine(KernelAttn):\n    pass\n")
        report = check(ns["Mine"], only="construct")
    finally:
        _forget()
    assert report["construct"].status == "pass", repr(report)
    assert "class KernelAttn(nn.Module):" in report.source and "class Mine(KernelAttn):" in report.source


def test_a_pointer_into_kernel_code_names_the_notebook_not_our_copy():
    try:
        ns = _kernel("import torch\nimport torch.nn as nn\n",
                     "class Broken(nn.Module):\n    def __init__(self, d, nheads, context_length):\n"
                     "        super().__init__()\n        raise RuntimeError('not yet')\n")
        report = check(ns["Broken"], only="construct")
    finally:
        _forget()
    message = report["construct"].message
    assert report["construct"].status == "fail" and "not yet" in message
    assert "mha_notebook_" not in message and "your notebook, class Broken, line 4" in message, message


def test_a_class_without_source_is_a_report_that_cannot_tell():
    report = check(type("NoSource", (nn.Module,), {"forward": lambda self, x: x}))
    assert report["construct"].status == "cannot_tell" and not report.passed
    assert "cannot get the source code of 'NoSource'" in report["construct"].message


def test_a_notebook_target_string_has_the_notes_of_its_loading():
    report = check(str(ROOT / "tests" / "notebooks" / "lab.ipynb") + ":CausalMHA", only="construct")
    assert any("'!pip install torch' (a magic or shell command) was left out" in n for n in report.notes)
    assert repr(report).count("!pip install torch") == 1  # said once, not once per list


def test_in_a_process_where_a_students_module_would_stand_in_for_ours_check_says_so(tmp_path):
    """The notebook API runs in the student's own process: with their reference.py first on sys.path (a notebook's
    folder), our engine's `from reference import numpy_ref` imported their file and ended in a traceback of ours.
    Now one sentence names the file and the way out, before anything of ours is imported (harness.wire.names)."""
    (tmp_path / "reference.py").write_text("MINE = True\n")
    code = ("import harness\ntry:\n    harness.check('attention.py')\nexcept ImportError as e:\n    print(e)\n"
            "import reference\nprint('theirs', reference.MINE)\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    assert "reference.py would be imported in place of mha-check's own package" in run.stdout, run.stdout
    assert "mha-check your_file.py" in run.stdout and "theirs True" in run.stdout  # their module is untouched
