"""Which tensors follow the module to another device (harness.child.recorders.DeviceRecorder), on forwards run in
this process: a layer made in forward and moved with `.to(x.device, x.dtype)` goes where the input goes (Module.to
parses the device anew and may hand back the tensor itself: a student's trial was told its weights stay on the CPU);
the same layer left where it was made stays, and a mask made without device= stays."""
from __future__ import annotations

import torch
import torch.nn as nn

from harness.child.recorders import DeviceRecorder


class Projected(nn.Module):
    """q, then an output projection made in forward: moved to the input's device (`how`), or not."""

    def __init__(self, how: str):
        super().__init__()
        self.how = how
        self.q = nn.Linear(4, 4)

    def forward(self, x):
        y = self.q(x)
        if self.how == "mask":
            return y.masked_fill(torch.ones(x.shape[1], 4).bool(), 0.0)
        out = nn.Linear(4, 4, dtype=torch.float32 if self.how == "to-new-dtype" else None)
        if self.how in ("to-device-dtype", "to-new-dtype"):  # (a new dtype: Module.to sets param.data to a copy)
            out = out.to(x.device, x.dtype)
        elif self.how == "to-device":
            out = out.to(x.device)
        elif self.how == "to-keyword":
            out = out.to(device=x.device)
        return out(y)


def _mixes(how: str) -> list[dict]:
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        module = Projected(how).eval()
        x = torch.randn(2, 3, 4)
        recorder = DeviceRecorder(__file__, [x, *module.parameters(), *module.buffers()])
        with torch.no_grad(), recorder:
            module(x)
    finally:
        torch.set_default_dtype(before)
    return recorder.mixes


def test_a_layer_moved_to_the_inputs_device_moves_with_it():
    for how in ("to-device-dtype", "to-new-dtype", "to-device", "to-keyword"):
        assert _mixes(how) == [], how


def test_a_layer_or_a_mask_left_on_the_cpu_stays():
    assert [m["op"] for m in _mixes("stay")] == ["linear"]
    assert [m["op"] for m in _mixes("mask")] == ["masked_fill"]
