"""mha-check: check the bugs out of a causal multi-head attention layer.

The one import for notebooks, scripts and tests:

    from harness import check
    report = check("attn.py:MyAttn")      # or a class, a factory function, an nn.Module instance
    report.passed, report["causal-leakage"].status

The subpackages, by which side of the trust boundary they run on:

- `harness.child`: runs in the sandboxed child process, beside the student's code (imports torch and the student's
  module): loading the target, building it, finding its weights, answering requests.
- `harness.wire`: what crosses the boundary: the frame format and the typed messages (no torch).
- `harness.sandbox`: process control in the trusted process: starting, confining, limiting and talking to the child.
- `harness.engine`: the verdict, in the trusted process: runs the checks (`checks/`) against the numpy reference
  (`reference/`), diagnoses the mistake from the catalogue (`mutants/`) and returns a `Report`, nothing else.
- `harness.render`: a `Report` as text, JSON, HTML, Gradescope, JUnit or a picture; renderers share one view.
- `harness.frontends`: the command line, batch grading, the notebook API, the pytest plugin, teaching and trace.

Nothing but `harness.child` (and the zygote it forks from) imports torch or the student's code.
"""
from __future__ import annotations

import os

PACKAGES_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the folder holding harness/, checks/...
OUTPUT_CUT_MARK = "[mha-check kept the last "  # opens a student's output cut to its end: "... 8000 of 91234 bytes]"
SOURCE_COPY_PREFIX = "mha_notebook_"  # the notebook API writes a kernel's class to mha_notebook_<Name>.py; the
# child names places in it "your notebook, class Name, line 4", never that file (the student never saw it)

__all__ = ["check", "Report", "CheckResult", "PACKAGES_ROOT"]


def __getattr__(name):  # lazy: `import harness` stays free of numpy (the pytest plugin needs that)
    if name in ("check", "Report", "CheckResult"):  # the student's own process: their reference.py could stand in
        from harness.wire import names  # noqa: PLC0415 - lazy, as below

        names.require_ours()
    if name == "check":
        from harness.frontends.api import check  # noqa: PLC0415 - lazy: `import harness` stays free of numpy

        return check
    if name in ("Report", "CheckResult"):
        from harness.engine import report  # noqa: PLC0415 - lazy, as above

        return getattr(report, name)
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
