"""harness.engine.together through search.find_failure: a property of one configuration, asked of several together,
sends one frame per step however many configurations there are, and gives the verdict of asking one at a time, in
order: the first configuration that fails or raises decides, a failing request ends the frame where it would have
ended the calls, and no property is left running."""
import os
import signal
import time

import numpy as np
import pytest
import torch

from checks import failed
from harness.child.inprocess import InProcess
from harness.engine import search
from harness.engine.together import _Worker
from harness.sandbox.subject import Subject
from harness.wire.config import Config
from harness.wire.errors import TargetFailure

LAYER = """
import torch
from torch import nn


class CausalMHA(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        with open({log!r}, "a") as log:
            log.write(f"{{num_heads}}\\n")
        self.proj = nn.Linear(d_in, d_out)

    def forward(self, x):
        if x.shape[1] == 3:
            raise RuntimeError("three tokens refused")
        return self.proj(x)
"""


class Ctx:
    """What find_failure reads of a Context, with the child."""
    separate_widths = False
    examples = 6

    def __init__(self, subject):
        self.subject = subject

    def accepts(self, key):
        return False


def _cfg(heads: int, n: int = 2) -> Config:
    return Config(d_in=12, d_out=12, heads=heads, context_length=6, batch=2, n=n)


@pytest.fixture
def child(tmp_path):
    """(subject, the ops of every frame sent, the heads of every constructor run)."""
    log = tmp_path / "built.log"
    target = tmp_path / "layer.py"
    target.write_text(LAYER.format(log=str(log)))
    subject = Subject(f"{target}:CausalMHA", start=InProcess())
    subject.load()
    sent = []
    exchange = subject._exchange

    def recording(requests, **how):
        sent.append([r.op for r in requests])
        return exchange(requests, **how)
    subject._exchange = recording
    yield subject, sent, lambda: log.read_text().split() if log.exists() else []
    try:
        assert _Worker.idle() == _Worker.started  # every property has ended, its thread free for the next search
    finally:
        subject.close()


def _search(subject, prop, configs):
    return search.find_failure(Ctx(subject), prop, generated=False, required=configs)


def test_every_configuration_takes_its_steps_together_one_frame_each(child):
    subject, sent, built = child
    seen = []

    def prop(cfg):
        inst = subject.build(cfg)
        inst.info  # noqa: B018 - step 1: the constructor's answer
        y = inst.forward(np.ones((2, cfg.n, 12)))  # step 2
        seen.append((cfg.heads, y.shape))
        return None
    assert _search(subject, prop, [_cfg(1), _cfg(2), _cfg(4)]) is None
    assert sent == [["build"] * 3, ["forward"] * 3]
    assert seen == [(1, (2, 2, 12)), (2, (2, 2, 12)), (4, (2, 2, 12))]  # resumed in configuration order
    assert built() == ["1", "2", "4"]


def test_a_failing_request_ends_the_frame_and_the_configurations_after_it_are_sent_again(child):
    subject, sent, built = child
    raised = []

    def prop(cfg):
        inst = subject.build(cfg)
        try:
            inst.forward(np.ones((2, cfg.n, 12)))
        except TargetFailure as e:  # judged fine here: the search goes on
            raised.append((cfg.heads, e.message))
        return None
    assert _search(subject, prop, [_cfg(1), _cfg(2, n=3), _cfg(4)]) is None
    assert sent == [["build", "forward"] * 3, ["build", "forward"]]  # the third after the failure: once more
    assert [h for h, _ in raised] == [2] and "three tokens refused" in raised[0][1]
    assert built() == ["1", "2", "4"]  # each constructor ran once: the third's Build did not run in the first frame


def test_the_first_configuration_in_order_decides_even_when_a_later_one_fails_sooner(child):
    subject, sent, _ = child
    started = []

    def prop(cfg):
        started.append(cfg.heads)
        inst = subject.build(cfg)
        y = inst.forward(np.ones((2, cfg.n, 12)))
        if cfg.heads == 2:
            return failed("two heads", finding="two")  # decided at the first step
        inst.forward(2 * np.ones((2, cfg.n, 12)))  # the first configuration's second step
        if cfg.heads == 1:
            raise ValueError(f"one head, {y.shape}")
        return None
    with pytest.raises(ValueError, match="one head"):  # raised in its turn: before the second's failure
        _search(subject, prop, [_cfg(1), _cfg(2), _cfg(4)])
    assert started == [1, 2, 4] and sent == [["build", "forward"] * 3, ["forward"]]  # the third: abandoned


def test_no_configuration_after_a_decided_one_is_started(child):
    subject, sent, _ = child
    started = []

    def prop(cfg):
        started.append(cfg.heads)
        return failed("at once") if cfg.heads == 2 else None
    out = _search(subject, prop, [_cfg(1), _cfg(2), _cfg(4)])
    assert out.config == _cfg(2).to_dict() and started == [1, 2] and sent == []


def test_a_later_configuration_answered_in_the_deciding_frame_is_kept_for_the_shrink(child):
    """The frame that decided carried the later configurations' requests too: what they judge from it is kept (a
    shrink that asks about one of them gets its answer without another round trip), and one that wants another
    round trip is abandoned."""
    subject, sent, _ = child

    def prop(cfg):
        inst = subject.build(cfg)
        inst.forward(np.ones((2, cfg.n, 12)))
        if cfg.heads == 4:
            inst.forward(np.ones((2, cfg.n, 12)))  # a second step: never sent
        return failed("one head") if cfg.heads == 1 else None
    answers = search.together(Ctx(subject), prop, [_cfg(1), _cfg(2), _cfg(4)])
    assert {cfg.heads: getattr(outcome, "message", outcome) for cfg, outcome in answers.items()} == \
        {1: "one head", 2: None}
    assert sent == [["build", "forward"] * 3]


def test_a_forked_process_searches_with_threads_of_its_own(child):
    """mutmut forks a process per mutant from one that ran the checks: the idle workers it inherited listed threads
    it does not have, and its first search waited forever (every mutant of the reference timed out)."""
    subject, _, _ = child

    def prop(cfg):
        subject.build(cfg).forward(np.ones((2, cfg.n, 12)))
        return None
    assert _search(subject, prop, [_cfg(1), _cfg(2)]) is None and _Worker.idle() > 0
    torch.set_num_threads(1)  # as mutmut's runner does: OpenMP's pool does not survive a fork
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the forked process
        signal.alarm(60)
        os._exit(0 if _search(subject, prop, [_cfg(1), _cfg(2), _cfg(4)]) is None else 1)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise AssertionError("the forked process's search never ended")
    assert os.waitstatus_to_exitcode(status) == 0
