"""The child process: the only place where the student's code runs.

It answers requests from the trusted process over a private channel (its original stdin/stdout, duplicated before
any student code runs; the student's prints go to the captured stderr log).  It sends back plain arrays and short
texts; it never decides a verdict.  Started as `python -I -m harness.worker`.
"""
from __future__ import annotations

import copy
import os
import sys


def _open_channel():
    """Keep the real stdin/stdout for the protocol; point fd 0 at /dev/null and fd 1 at the stderr log."""
    chan_in = os.fdopen(os.dup(0), "rb", buffering=0)
    chan_out = os.fdopen(os.dup(1), "wb", buffering=0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    return chan_in, chan_out


CHANNEL = _open_channel()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from harness import construct, layouts, protocol  # noqa: E402
from harness.config import Config  # noqa: E402
from harness.target import TargetError, describe_exception, load_target  # noqa: E402

torch.set_num_threads(1)
torch.set_default_dtype(torch.float64)


class StudentError(Exception):
    """Student code raised; `text` is the summary to report, `stage` where it happened."""

    def __init__(self, stage: str, text: str):
        super().__init__(text)
        self.stage, self.text = stage, text


class Worker:
    def __init__(self):
        self.target = None
        self.signature = None
        self.overrides: dict = {}
        self.weight_map: dict = {}
        self.instances: dict[int, dict] = {}

    # -- helpers -------------------------------------------------------------------------------------------------
    def _student(self, stage: str, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - SystemExit, KeyboardInterrupt: all are the student's
            raise StudentError(stage, describe_exception(e, self.target.module_file if self.target else None)[:4000])

    def _inst(self, header) -> dict:
        return self.instances[int(header["handle"])]

    @staticmethod
    def _output(result) -> torch.Tensor:
        if isinstance(result, (tuple, list)) and result and isinstance(result[0], torch.Tensor):
            result = result[0]
        if not isinstance(result, torch.Tensor):
            raise StudentError("forward", f"forward returned a {type(result).__name__}, not a tensor "
                                          "(or a tuple whose first element is the output tensor)")
        if not result.is_floating_point():
            raise StudentError("forward", f"forward returned a tensor of dtype {result.dtype}, not floating point")
        return result

    def _forward(self, inst, x: torch.Tensor, mode: str) -> torch.Tensor:
        module = inst["module"]
        self._student("forward", module.train if mode == "train" else module.eval)
        return self._output(self._student("forward", module, x))

    # -- operations ----------------------------------------------------------------------------------------------
    def op_load(self, header, arrays):
        self.overrides = header.get("overrides", {})
        self.weight_map = header.get("weight_map", {})
        try:
            self.target = load_target(header["spec"])
        except TargetError as e:
            return {"error": {"stage": e.kind, "message": str(e)}}, {}
        self.signature = construct.read_signature(self.target.obj, self.overrides)
        kind = "class" if isinstance(self.target.obj, type) else "factory"
        return {"name": self.target.name, "kind": kind, "signature": self.signature.to_dict()}, {}

    def op_build(self, header, arrays):
        cfg = Config(**header["cfg"])
        torch.manual_seed(int(header.get("seed", 0)))
        module = self._student("construct", construct.build, self.target.obj, cfg, self.overrides, self.signature)
        if not isinstance(module, nn.Module):
            raise StudentError("construct", f"{self.target.name}(...) returned a {type(module).__name__}, "
                                            "not a torch.nn.Module")
        self._student("construct", module.to, torch.float64)
        if header.get("force_dropout"):
            for m in module.modules():
                if isinstance(m, nn.Dropout):
                    m.p = float(header["force_dropout"])
        found, problem = layouts.discover(module, cfg.d_in, cfg.d_out, cfg.heads, self.weight_map)
        handle = len(self.instances)
        self.instances[handle] = {"module": module, "cfg": cfg, "layouts": found}
        params = [(n, list(p.shape)) for n, p in module.named_parameters()]
        info = {
            "handle": handle,
            "param_count": sum(p.numel() for p in module.parameters()),
            "params": params,
            "buffers": [n for n, _ in module.named_buffers()],
            "state_dict": list(module.state_dict().keys()),
            "plain_tensors": _plain_tensor_attributes(module),
            "dropout_modules": sum(isinstance(m, nn.Dropout) for m in module.modules()),
            "layouts": [{"roles": l.describe(), "how": l.how, "notes": l.notes} for l in found],
            "layout_problem": problem,
        }
        return info, {}

    def op_forward(self, header, arrays):
        inst = self._inst(header)
        x = torch.from_numpy(arrays["x"].copy())
        if header.get("noncontig"):
            x = x.transpose(0, 1).contiguous().transpose(0, 1)  # same values, non-contiguous strides
        with torch.no_grad():
            y = self._forward(inst, x, header.get("mode", "eval"))
        out = {"y": y.detach().to(torch.float64).numpy()}
        if header.get("want_x_after"):
            out["x_after"] = x.detach().numpy()
        return {"contiguous_input": x.is_contiguous()}, out

    def op_vjp(self, header, arrays):
        """One forward and one backward of sum(gy * y): gradients for x and, through a layout, every role."""
        inst = self._inst(header)
        module = inst["module"]
        x = torch.from_numpy(arrays["x"].copy()).requires_grad_(True)
        module.zero_grad(set_to_none=True)
        y = self._forward(inst, x, header.get("mode", "eval"))
        if not y.requires_grad:
            return {"no_graph": True}, {"y": y.detach().numpy()}
        gy = torch.from_numpy(arrays["gy"].copy())
        if tuple(gy.shape) != tuple(y.shape):
            raise StudentError("forward", f"output has shape {tuple(y.shape)}, expected {tuple(gy.shape)}")
        # A scalar loss, not y.backward(gy): the latter imports sympy on first use (0.3 s).
        self._student("backward", (y * gy).sum().backward)
        out = {"y": y.detach().numpy(), "gx": (x.grad if x.grad is not None else torch.zeros_like(x)).numpy()}
        idx = header.get("layout")
        if idx is not None and inst["layouts"]:
            for role, g in inst["layouts"][idx].read(grad=True).items():
                out["g_" + role] = g.numpy()
        return {}, out

    def op_jacobian(self, header, arrays):
        """J[b, t, c, s, :] = d (r · y[b, t]) / d x[c, s, :] for every output position (b, t)."""
        inst = self._inst(header)
        x = torch.from_numpy(arrays["x"].copy()).requires_grad_(True)
        r = torch.from_numpy(arrays["r"].copy())
        y = self._forward(inst, x, "eval")
        B, n = x.shape[:2]
        if not y.requires_grad or y.shape[:2] != (B, n):
            return {"no_graph": not y.requires_grad, "shape": list(y.shape)}, {}
        proj = (y * r).sum(-1)
        jac = torch.zeros((B, n) + tuple(x.shape), dtype=torch.float64)
        for b in range(B):
            for t in range(n):
                (g,) = self._student("backward", torch.autograd.grad, proj[b, t], x, retain_graph=True,
                                     allow_unused=True)
                if g is not None:
                    jac[b, t] = g
        return {}, {"jac": jac.numpy()}

    def op_read(self, header, arrays):
        inst = self._inst(header)
        return {}, {k: v.numpy() for k, v in inst["layouts"][int(header["layout"])].read().items()}

    def op_write(self, header, arrays):
        inst = self._inst(header)
        values = {k: torch.from_numpy(v.copy()) for k, v in arrays.items()}
        inst["layouts"][int(header["layout"])].write(values)
        return {}, {}

    def op_meta(self, header, arrays):
        """Move a copy of the module to the meta device and run it: a mask that is not a buffer stays behind."""
        inst = self._inst(header)
        module = self._student("meta", copy.deepcopy, inst["module"])
        self._student("meta", module.to, "meta")
        x = torch.empty(tuple(header["shape"]), device="meta", dtype=torch.float64)
        y = self._forward({"module": module}, x, "eval")
        return {"device": str(y.device), "shape": list(y.shape)}, {}

    def op_factories(self, header, arrays):
        """Run forward recording tensors created without a device= argument (they would stay on the CPU)."""
        inst = self._inst(header)
        x = torch.from_numpy(arrays["x"].copy())
        recorder = _FactoryRecorder(self.target.module_file)
        with torch.no_grad(), recorder:
            self._forward(inst, x, "eval")
        return {"created": recorder.created}, {}

    def serve(self, chan_in, chan_out):
        while True:
            try:
                header, arrays = protocol.decode(chan_in)
            except EOFError:
                return
            op = header.get("op")
            try:
                reply, out = getattr(self, "op_" + op)(header, arrays)
            except StudentError as e:
                reply, out = {"error": {"stage": e.stage, "message": e.text}}, {}
            except Exception as e:  # noqa: BLE001 - our own failure on this target: report it, keep serving
                reply, out = {"error": {"stage": "harness", "message": describe_exception(e)[:4000]}}, {}
            chan_out.write(protocol.encode(reply, out))
            if op == "bye":
                return

    def op_bye(self, header, arrays):
        return {}, {}


class _FactoryRecorder(torch.overrides.TorchFunctionMode):
    """Notes every non-scalar tensor made by a factory (torch.ones, arange, tensor, ...) without device=."""

    FACTORIES = {"ones", "zeros", "empty", "full", "arange", "eye", "rand", "randn", "randint", "tensor",
                 "as_tensor", "from_numpy", "linspace", "logspace", "tril_indices", "triu_indices"}

    def __init__(self, student_file):
        super().__init__()
        self.student_file = os.path.abspath(student_file) if student_file else None
        self.created = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        if (name in self.FACTORIES and "device" not in kwargs and isinstance(result, torch.Tensor)
                and result.dim() > 0 and len(self.created) < 20):
            self.created.append({"call": f"torch.{name}", "shape": list(result.shape), "at": self._where()})
        return result

    def _where(self) -> str:
        frame = sys._getframe(2)
        while frame is not None:
            if self.student_file and os.path.abspath(frame.f_code.co_filename) == self.student_file:
                return f"{os.path.basename(self.student_file)}:{frame.f_lineno}"
            frame = frame.f_back
        return "?"


def _plain_tensor_attributes(module: nn.Module) -> list[str]:
    """Tensors stored as plain attributes (not parameters, not buffers): they do not follow .to() or state_dict."""
    found = []
    for name, m in module.named_modules():
        for attr, value in vars(m).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
                found.append(f"{name + '.' if name else ''}{attr}")
    return found


def main():
    chan_in, chan_out = CHANNEL
    Worker().serve(chan_in, chan_out)
    chan_out.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
