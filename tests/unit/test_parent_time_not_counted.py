"""Red team 16: the child's time in all (`total_seconds`) was a wall clock from the worker's start, so the parent's
own work between requests (its references, its search through the catalogued mistakes: 4.4 to 4.7 s of a 7.7 s
run of the correct example, 57-62%; 15.4 of 18.3 s for a patched worker offering 2,048 readings and call styles)
was counted as the student's, and a slow but honest layer could be timed out by it.  The clock stops while the
parent computes: only the time the child has a request counts, across restarts too."""
import time

import numpy as np
import pytest

from harness.child.inprocess import InProcess
from harness.sandbox.limits import Limits
from harness.sandbox.subject import Subject
from harness.wire.config import Config
from harness.wire.errors import WorkerDied

SLOW = """
import time
from torch import nn


class CausalMHA(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.proj = nn.Linear(d_in, d_out)

    def forward(self, x):
        time.sleep(0.3)
        return self.proj(x)
"""


def _subject(tmp_path, total: float) -> Subject:
    target = tmp_path / "slow.py"
    target.write_text(SLOW)
    return Subject(f"{target}:CausalMHA", limits=Limits(call_seconds=5.0, total_seconds=total), start=InProcess())


def _cfg() -> Config:
    return Config(d_in=12, d_out=12, heads=2, context_length=6, batch=1, n=2)


def test_the_parents_own_work_between_requests_is_not_the_childs_time(tmp_path):
    """A time in all of 2 s; the parent computes 2.5 s between two forwards of 0.3 s: the second is answered."""
    subject = _subject(tmp_path, total=2.0)
    try:
        inst = subject.build(_cfg())
        x = np.zeros((1, 2, 12))
        assert inst.forward(x).shape == (1, 2, 12)
        time.sleep(2.5)  # the parent's work: a reference, a search, a diagnosis
        assert inst.forward(x).shape == (1, 2, 12)
        assert subject.used < 1.5  # two forwards of 0.3 s and a build, not the parent's 2.5 s
    finally:
        subject.close()


def test_the_childs_own_time_still_adds_up_to_the_time_in_all(tmp_path):
    """Forwards of 0.3 s each under a time in all of 1 s: the fourth runs past it and is stopped as the student's
    time in all, however long the parent computes between them."""
    subject = _subject(tmp_path, total=1.0)
    try:
        inst = subject.build(_cfg())
        x = np.zeros((1, 2, 12))
        with pytest.raises(WorkerDied, match="1 s in all") as died:
            for _ in range(6):
                inst.forward(x)
                time.sleep(0.2)
        assert died.value.kind == "time"
        subject.child._thread.join(5)  # the worker thread ends its sleep before the process may exit
    finally:
        subject.close()
