"""mha-check's own process runs numpy without OpenBLAS threads of its own (harness/frontends/cli.py): the
configurations already run on threads and `grade` runs a grader per core, and OpenBLAS's spinning threads on top of
them made the float32 probe's reference six times slower under load (docs/benchmarks.md, 2026-12-07).  A notebook that
imports harness keeps its numpy's threads."""
import os
import subprocess
import sys

import pytest

from harness import PACKAGES_ROOT

THREADS = "import os, sys; {first}; import numpy; print(len(os.listdir('/proc/self/task')))"


def _threads_after(first: str) -> int:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", THREADS.format(first=first)], env=env, cwd=PACKAGES_ROOT,
                         capture_output=True, text=True, timeout=120, check=True)
    return int(out.stdout.strip())


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="OpenBLAS starts no threads of its own on one core")
def test_the_command_line_starts_no_blas_threads():
    assert _threads_after("pass") > 1  # the control: numpy alone starts OpenBLAS's pool on this machine
    assert _threads_after("import harness.engine.runner") > 1  # a notebook's kernel: its own numpy, untouched
    assert _threads_after("import harness.frontends.cli") == 1
