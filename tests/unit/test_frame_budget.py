"""The trusted side reads no more of a reply frame than its requests can need (harness.wire.budget): every reply our
own worker sends fits the budget, a frame declaring more is refused from its header before any array is read."""
import io

import numpy as np
import pytest
import torch

_DTYPE = torch.get_default_dtype()
from harness.child import worker  # noqa: E402 - sets float64 as the process's default dtype...

torch.set_default_dtype(_DTYPE)  # ...which the rest of the suite does not expect

from harness import PACKAGES_ROOT  # noqa: E402
from harness.wire import budget  # noqa: E402
from harness.wire import messages as m  # noqa: E402
from harness.wire import protocol  # noqa: E402
from harness.wire.config import Config  # noqa: E402


class CountingStream(io.BytesIO):
    """A channel that remembers how much of it was read."""

    def __init__(self, data: bytes):
        super().__init__(data)
        self.taken = 0

    def read(self, n=-1):
        out = super().read(n)
        self.taken += len(out)
        return out

    def readinto(self, view):
        got = super().readinto(view)
        self.taken += got
        return got


def test_a_frame_declaring_more_than_allowed_is_refused_before_its_arrays_are_read():
    frame = protocol.encode({"batch": [{"type": "Output"}]}, {"0:y": np.zeros(1000), "padding": np.zeros(100_000)})
    stream = CountingStream(frame)
    with pytest.raises(protocol.FrameTooLarge) as refused:
        protocol.decode(stream, max_payload=8000)
    assert (refused.value.declared, refused.value.allowed) == (808_000, 8000)
    head = int.from_bytes(frame[:4], "big")
    assert stream.taken == 4 + head  # the header only: not a byte of the 0.8 MB of arrays
    assert isinstance(refused.value, protocol.ProtocolError)  # the trusted side's handling of a corrupted channel
    header, arrays = protocol.decode(io.BytesIO(frame), max_payload=808_000)  # exactly the room: read, as before
    assert arrays["padding"].shape == (100_000,) and arrays["0:y"].dtype == np.float64


def test_a_frame_of_header_only_replies_may_hold_no_array():
    assert budget.reply_budget([m.Load("a.py", "/tmp"), m.Build({}), m.Bye()], {}) == 0
    frame = protocol.encode({"batch": [{"type": "Done"}]}, {"x": np.zeros(1)})
    with pytest.raises(protocol.FrameTooLarge):
        protocol.decode(io.BytesIO(frame), max_payload=0)


def _reference_worker() -> worker.Worker:
    w = worker.Worker(own_process=False)
    loaded = w.answer(m.Load("reference/causal_mha.py:CausalMHA", PACKAGES_ROOT, submission=False))
    assert isinstance(loaded, m.Loaded), loaded
    return w


def _payload(replies) -> int:
    header, arrays = protocol.decode(io.BytesIO(m.encode_batch(replies)))
    return sum(a.nbytes for a in arrays.values())


@pytest.mark.parametrize("cfg", [Config(8, 8, 2, 7, batch=2, n=5), Config(12, 8, 4, 64, batch=1, n=64),
                                 Config(3, 12, 3, 4, batch=3, n=4)])
def test_every_reply_of_our_worker_fits_its_budget_and_the_budget_stays_small(cfg):
    """What each request kind really gets back from the worker, request by request and as one frame, against the
    budget the trusted side allows it; and that budget is megabytes, never the hundreds a padded frame holds."""
    torch.set_default_dtype(torch.float64)
    try:
        w = _reference_worker()
        handle = w.answer(m.Build(cfg.to_dict(), handle=0)).handle
        rng = np.random.default_rng(0)
        x = rng.standard_normal((cfg.batch, cfg.n, cfg.d_in))
        requests = [m.ReadWeights(handle, 0), m.Forward(handle, x), m.Forward(handle, x, want_x_after=True),
                    m.Vjp(handle, x, rng.standard_normal((cfg.batch, cfg.n, cfg.d_out)), layout=0),
                    m.Jacobian(handle, x, rng.standard_normal(cfg.d_out)), m.MetaForward(handle, list(x.shape)),
                    m.Devices(handle, x), m.Trace(handle, x)]
        replies = [w.answer(r) for r in requests]
    finally:
        torch.set_default_dtype(_DTYPE)
    assert not any(isinstance(r, m.Failed) for r in replies), replies
    configs = {handle: cfg}
    for request, reply in zip(requests, replies):
        used = _payload([reply])
        allowed = budget.reply_budget([request], configs)
        assert used <= allowed, (request.op, used, allowed)
        assert (allowed == 0) == (used == 0), request.op  # header-only replies: no room for any array
        if used:
            assert used * budget.MARGIN <= allowed - budget.FLOOR, (request.op, used)  # the margin is all there
    assert _payload(replies) <= budget.reply_budget(requests, configs) < 64 << 20


def test_without_the_modules_configuration_the_input_stands_in():
    x = np.zeros((2, 3, 8))
    assert budget.reply_elements(m.Forward(0, x), None) == 2 * 3 * 8
    assert budget.reply_elements(m.Forward(0, x), Config(8, 16, 2, 4)) == 2 * 3 * 16
    assert budget.reply_elements(m.Jacobian(0, x, np.zeros(8)), None) == 6 * x.size
