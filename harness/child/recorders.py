"""Child side: recorders of one forward pass, as torch function modes.

`DeviceRecorder` follows which tensors would move with the module and which would stay on the CPU (made without
`device=`, kept outside the module's buffers), and notes where the two meet.  `TraceRecorder` records every torch
operation with its shapes, arguments, data flow and the student's line that called it, for `mha-check trace` and for the
line pointer of the report.  Both only observe: recording never changes what the student's forward computes.
"""
from __future__ import annotations

import os
import sys

import torch

from harness.wire import names
from harness.child.notebook import code_at, location, statement_at
from harness.child.target import safe_message, safe_type_name


class DeviceRecorder(torch.overrides.TorchFunctionMode):
    """Follows, through one forward pass, which tensors would move with the module and which would stay on the CPU.

    Moving: the input, the module's registered parameters and buffers, and everything computed from any of them (or
    made with an explicit device=, or moved with .to(device) / .cuda() / .type_as(moving)).  Staying: tensors made by a
    factory (torch.ones, arange, tensor, ...) without device=, tensors from outside (a plain attribute, a dict or
    list cache, a module-level global), and what is computed from those alone.  A non-scalar staying tensor that
    meets a moving one in an operation is exactly what raises "not on the expected device" on a GPU; 0-d tensors mix
    with any device.  This costs one ordinary forward; the meta-device run that confirms it costs seconds of imports.

    A `device=` argument moves a tensor only when it is the device of a moving tensor (`x.device`,
    `self.weight.device`, followed through `Tensor.device`) or names another device than the CPU: `device="cpu"`,
    `device=None`, or a `self.device` stored once in __init__ make a tensor that stays behind when the module moves.
    """

    FACTORIES = {"ones", "zeros", "empty", "full", "arange", "eye", "rand", "randn", "randint", "tensor",
                 "as_tensor", "from_numpy", "linspace", "logspace", "tril_indices", "triu_indices", "ones_like",
                 "zeros_like", "full_like", "empty_like", "rand_like", "randn_like"}
    MOVERS = {"to", "cuda", "type_as", "cpu"}

    def __init__(self, student_file, moving_tensors):
        super().__init__()
        self.student_file = os.path.abspath(student_file) if student_file else None
        self.moving = {id(t) for t in moving_tensors}
        self.staying: set[int] = set()
        self.seen: set[int] = set(self.moving)
        self.keep = list(moving_tensors)  # alive, so that ids stay unique
        self.moving_devices: set[int] = set()  # torch.device objects read from moving tensors (x.device)
        self.created: list[dict] = []
        self.mixes: list[dict] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        try:
            self._follow(getattr(func, "__name__", "") or str(func), args, kwargs, result)
        except Exception:  # noqa: BLE001 - observing must never change what the student's forward does
            pass
        return result

    def _tensors(self, values):
        for v in values:
            if isinstance(v, torch.Tensor):
                yield v
            elif isinstance(v, (list, tuple)):
                yield from self._tensors(v)

    def _moves_to(self, value) -> bool:
        """Whether a device argument goes where the module goes: a moving tensor's device (or tensor), or a device
        other than the CPU.  "cpu", None, or a device object from outside the forward stay."""
        if isinstance(value, torch.Tensor):
            return id(value) in self.moving
        if isinstance(value, torch.device) and id(value) in self.moving_devices:
            return True
        try:
            return isinstance(value, (torch.device, str)) and torch.device(value).type != "cpu"
        except (RuntimeError, TypeError):  # a string that names no device
            return False

    def _follow(self, name, args, kwargs, result) -> None:
        if name == "_has_compatible_shallow_copy_type":  # Module.to asking whether param.data may be replaced:
            return  # bookkeeping, no computation that would mix devices
        if name == "__set__" and len(args) == 2 and all(isinstance(a, torch.Tensor) for a in args):
            self._set_data(*args)
            return
        if name == "_parse_to" and isinstance(result, tuple):  # Module.to(x.device): the device it parses is x's
            if any(self._moves_to(a) for a in [*args, *kwargs.values()] if not isinstance(a, torch.Tensor)):
                for device in (d for d in result if isinstance(d, torch.device)):
                    self.moving_devices.add(id(device))
                    self.keep.append(device)
            return
        if isinstance(result, torch.device):  # Tensor.device: the device of a moving tensor moves with it
            if args and isinstance(args[0], torch.Tensor) and id(args[0]) in self.moving:
                self.moving_devices.add(id(result))
                self.keep.append(result)
            return
        inputs = list(self._tensors(list(args) + list(kwargs.values())))
        for t in inputs:
            if id(t) not in self.seen:  # from outside the forward: a plain attribute, a cache, a global
                self.seen.add(id(t))
                self.keep.append(t)
                if t.dim() > 0:
                    self.staying.add(id(t))
        moving_in = any(id(t) in self.moving for t in inputs)
        staying_in = [t for t in inputs if id(t) in self.staying and t.dim() > 0]
        device_given = "device" in kwargs
        if name in self.MOVERS:
            device_given = device_given or any(isinstance(a, (torch.device, str, torch.Tensor)) for a in args[1:])
            to_moving = name == "cuda" or any(self._moves_to(a) for a in [*args[1:], kwargs.get("device")])
            source_moves = bool(args) and isinstance(args[0], torch.Tensor) and id(args[0]) in self.moving
            # .to(dtype) keeps where the tensor is; .to("cpu") on a moving tensor pins it there
            moves = name != "cpu" and (to_moving or (source_moves and not device_given))
            staying_in = []  # moving a tensor is the cure, not a mix
        else:
            moves = moving_in or self._moves_to(kwargs.get("device"))
        if moving_in and staying_in and len(self.mixes) < 10:
            self.mixes.append({"op": name, "shape": list(staying_in[0].shape), "at": self._where(),
                               "parameter": isinstance(staying_in[0], torch.nn.Parameter)})
        outputs = list(self._tensors([result]))
        for out in outputs:
            self.seen.add(id(out))
            self.keep.append(out)
            if moves:
                self.moving.add(id(out))
                self.staying.discard(id(out))  # .to(x.device) may hand back the tensor itself (already there)
            else:
                self.staying.add(id(out))
        if name in self.FACTORIES and not moves and outputs and outputs[0].dim() > 0 and len(self.created) < 20:
            self.created.append({"call": f"torch.{name}", "shape": list(outputs[0].shape), "at": self._where(),
                                 "device": _trace_scalar(kwargs["device"]) if device_given else None})

    def _set_data(self, target: torch.Tensor, value: torch.Tensor) -> None:
        """`target.data = value`, as Module.to and .cuda() move a module's parameters: the parameter now holds the
        moved values and goes where they go (a student's `nn.Linear(C, C).to(x.device, x.dtype)` made in forward
        was read as weights left on the CPU)."""
        if id(value) in self.moving:
            self.staying.discard(id(target))
            self.moving.add(id(target))
            self.seen.add(id(target))
            self.keep.append(target)

    def _where(self) -> str:
        frame = sys._getframe(3)
        while frame is not None:
            if self.student_file and os.path.abspath(frame.f_code.co_filename) == self.student_file:
                return location(self.student_file, frame.f_lineno)
            frame = frame.f_back
        return "?"


def _memory(t: torch.Tensor) -> tuple:
    """Where a tensor's values are (its memory, shape and strides): nn.Parameter(w) wraps w's memory in a new
    object, so this, not id(), tells that a parameter made in forward holds what an earlier operation computed."""
    return t.data_ptr(), tuple(t.shape), t.stride()


def _trace_scalar(value) -> str:
    """A short, JSON-safe text for a non-tensor argument (floats keep repr: '-inf', '0.5', '-1e+09')."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return repr(value)[:60]
    if isinstance(value, (torch.dtype, torch.device, slice, type(Ellipsis))):
        return str(value)[:60]
    if isinstance(value, torch.Size):
        return repr(tuple(value))
    return f"<{type(value).__name__}>"


def _trace_exception(exc: BaseException) -> str:
    """'TypeName: message' without running the student's own __str__ (the safe helpers of harness.child.target)."""
    return f"{safe_type_name(exc)}: {safe_message(exc)}"[:400]


OURS = {  # what an operation of mha-check's own, shown in a trace, does: by the function of ours that made it
    "causal_mask": "made by mha-check to call your forward (the causal mask it passes)",
    "sequence_first_input": "made by mha-check to call your forward: x given sequence first, (n, B, d)",
    "seq_first_output": "made by mha-check after your forward: its output read back as (B, n, d)",
    "residual_removed": "made by mha-check after your forward: your input taken away from its output (the residual "
                        "your layer adds back)",
}


TABLE_SIZE = 64  # the most values of a tensor the trace keeps (a rotary table of the worked example: n x dh/2)


def _table_values(t: torch.Tensor) -> dict:
    """{"values"[, "complex"]}: the values of a small floating or complex tensor that does not depend on the input
    and is no parameter (a rotary embedding's cos/sin or phase table, sliced to the tokens), complex numbers as
    (real, imaginary) pairs; {} otherwise.  A detector compares the tables the queries and the keys are turned by,
    and reads their frequencies off them (harness.engine.trace.detect_rope)."""
    if isinstance(t, torch.nn.Parameter) or t.device.type == "meta" or not 1 < t.numel() <= TABLE_SIZE or \
            not (t.is_floating_point() or t.is_complex()) or not bool(torch.isfinite(t).all()):
        return {}
    if t.is_complex():
        return {"values": torch.view_as_real(t.detach()).double().tolist(), "complex": True}
    return {"values": t.detach().double().tolist()}


def _column_prints(t: torch.Tensor) -> dict:
    """{"columns": [...]}: one number for each feature of a small floating tensor of two axes or more (its last
    axis at most TABLE_SIZE wide), a fixed weighted sum over every other position, so that a tensor whose features
    are another's moved and negated (rotate_half's cat((-x2, x1)), rotate-every-two's stack((-x2, x1))) shows which
    feature each one is (harness.engine.trace.detect_rope: rotation-pairs-mismatched); {} otherwise."""
    if not t.is_floating_point() or t.dim() < 2 or not 1 < t.shape[-1] <= TABLE_SIZE or t.numel() > 1 << 16 or \
            t.device.type == "meta" or t.layout != torch.strided:
        return {}
    flat = t.detach().double().reshape(-1, t.shape[-1])
    weights = torch.sin(torch.arange(1, flat.shape[0] + 1, dtype=torch.float64, device=flat.device)) + 1.5
    prints = (flat * weights[:, None]).sum(0)
    return {"columns": prints.tolist()} if bool(torch.isfinite(prints).all()) else {}


class TraceRecorder(torch.overrides.TorchFunctionMode):
    """Records every torch operation of one forward pass (for `mha-check trace`).

    While this handler runs the mode is popped, so nested calls inside one operation (F.softmax calling
    Tensor.softmax, nn.Linear's internals) are not recorded twice, and the inspection below is not recorded.
    Every produced tensor is kept alive so that `id()` identifies it for the data flow (`src`).
    """

    INPLACE_DUNDER = {"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__idiv__"}

    def __init__(self, student_file, names: dict, limit: int = 400, made: dict | None = None, forward=None):
        super().__init__()
        self.student_file = os.path.abspath(student_file) if student_file else None
        self.names = names
        self.made = made or {}  # id of a module tensor -> where the constructor made it (OriginRecorder.origin)
        self.forward = forward  # the code of the module's forward: an operation run inside a helper it calls (a
        # rope(t, cos, sin) of the student's) also notes forward's own line, the call (`call_at`, `call_code`)
        self.limit = limit
        self.ops: list[dict] = []
        self.producer: dict[int, int] = {}
        self.memory: dict[tuple, int] = {}  # (data_ptr, shape, strides) of a tensor made -> the operation that made it
        self.keep: list = []
        self.truncated = False
        self.from_input: set[int] = set()  # the operations whose result depends on the input x

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            result = func(*args, **kwargs)
        except BaseException as e:  # noted (the step that raised), then raised on unchanged
            try:
                self._record(func, args, kwargs, None, raised=_trace_exception(e))
            except Exception:  # noqa: BLE001
                pass
            raise
        try:
            self._record(func, args, kwargs, result)
        except Exception:  # noqa: BLE001 - recording must never change what the student's forward does
            pass
        return result

    def _record(self, func, args, kwargs, result, raised: str | None = None):
        name = getattr(func, "__name__", "") or str(func)
        if name == "__get__":  # a property such as .T / .mT / .data
            name = getattr(getattr(func, "__self__", None), "__name__", name)
        tensors_out = [result] if isinstance(result, torch.Tensor) else (
            [r for r in result if isinstance(r, torch.Tensor)] if isinstance(result, (tuple, list)) else [])
        inplace = name in self.INPLACE_DUNDER or (name.endswith("_") and not name.startswith("_"))
        if not tensors_out and name != "__setitem__" and raised is None:
            return  # x.shape, x.size(), x.dim(), ...: no tensor made
        if len(self.ops) >= self.limit:
            self.truncated = True
            return
        ins: list[dict] = []

        def show(a):
            if isinstance(a, torch.Tensor):
                ins.append(self._info(a))
                return f"<T{len(ins) - 1}>"
            if isinstance(a, (list, tuple)) and not isinstance(a, torch.Size) and len(a) <= 64:
                inner = ", ".join(show(b) for b in a)
                return f"[{inner}]" if isinstance(a, list) else f"({inner}{',' if len(a) == 1 else ''})"
            return _trace_scalar(a)

        shown_args = [show(a) for a in args]
        shown_kwargs = {k: show(v) for k, v in kwargs.items()}
        index = len(self.ops)
        if any(t.get("name") == "x" or t.get("src") in self.from_input for t in ins):
            self.from_input.add(index)
        record = {"i": index, "op": name, "in": ins, "args": shown_args, "kwargs": shown_kwargs,
                  "inplace": inplace}
        record.update(self._where())
        if not torch.is_grad_enabled():  # the trace runs with autograd on: the student's code turned it off
            record["no_grad"] = True
        if raised is not None:
            record["raised"] = raised
        if isinstance(result, torch.Tensor):
            record["out"] = self._info(result, index in self.from_input)
        elif tensors_out:
            record["outs"] = [self._info(t, index in self.from_input) for t in tensors_out]
        self.ops.append(record)
        for t in tensors_out:
            self.producer[id(t)] = index
            self.keep.append(t)
            if t.device.type != "meta":
                self.memory[_memory(t)] = index
        if inplace and args and isinstance(args[0], torch.Tensor):
            self.producer[id(args[0])] = index
            self.keep.append(args[0])
            base = args[0]._base  # written through a view (att[:, :g].masked_fill_(...)): the tensor it views has
            # changed too, and what reads that tensor next reads this operation's work (it was "never used")
            if base is not None and (id(base) in self.producer or id(base) in self.names):
                self.producer[id(base)] = index
                self.keep.append(base)

    def _info(self, t: torch.Tensor, from_input: bool = False) -> dict:
        info = {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")}
        if id(t) in self.producer:
            info["src"] = self.producer[id(t)]
        elif id(t) in self.names:
            info["name"] = self.names[id(t)]
        elif isinstance(t, torch.nn.Parameter) and t.device.type != "meta" and _memory(t) in self.memory:
            info["src"] = self.memory[_memory(t)]  # nn.Parameter(tensor) made in forward: a new tensor object on
            # the same memory, made by no torch operation the mode sees; its data is what the operation made
        if "src" not in info and id(t) in self.made:
            info["made"] = self.made[id(t)]
        if t.device.type == "meta":
            return info
        if t.numel() == 1:
            info["value"] = _trace_scalar(t.item())
        if t.dtype == torch.bool and t.dim() >= 2 and t.numel() <= 1024:
            info["pattern"] = t.to(torch.int64).tolist()
        elif t.is_floating_point() and t.numel() <= 1 << 16:
            if bool(torch.isnan(t).any()):
                info["nan"] = True  # dropout on scores that hold -inf: 0 · -inf
            neginf = torch.isneginf(t)
            if bool(neginf.any()):
                info["neginf"] = True
                if t.dim() >= 2 and t.numel() <= 1024:
                    info["pattern"] = neginf.to(torch.int64).tolist()
        if not from_input and info.get("name") != "x" and info.get("src") not in self.from_input:
            info.update(_table_values(t))
        if "values" not in info:
            info.update(_column_prints(t))
        return info

    def _students(self, path: str) -> bool:
        """The target's file, or another file of the student's beside it (a factory in one file that wraps a class
        from another: the line that matters is in the class's file, the innermost of the student's frames).  Never
        mha-check's own packages, should the student's folder be the one that holds them."""
        if path == self.student_file:
            return True
        folder = os.path.dirname(self.student_file) + os.sep
        return path.startswith(folder) and path.endswith(".py") and not names.is_ours(path)

    def _where(self) -> dict:
        """The student's line that led to this operation (the innermost frame in the student's files)."""
        frame = sys._getframe(3)
        fallback, ours = None, None
        while frame is not None:
            filename = frame.f_code.co_filename
            if self.student_file and self._students(os.path.abspath(filename)):
                statement = statement_at(filename, frame.f_lineno)  # a statement over several lines: one heading
                return {"at": location(filename, frame.f_lineno), "code": code_at(filename, frame.f_lineno),
                        **({"statement": statement} if statement else {}), **self._called_at(frame)}
            parts = filename.split(os.sep)
            if fallback is None and ours is None and "harness" in parts and "torch" not in parts:
                ours = frame  # mha-check's own code, before any of the student's: the causal mask it passes
            if fallback is None and "torch" not in parts and "harness" not in parts:
                fallback = frame
            frame = frame.f_back
        if ours is not None:  # (the outermost frame, `python -c`'s <string>, had been shown as its line)
            return {"at": "mha-check", "code": OURS.get(ours.f_code.co_name, "made by mha-check to call your forward")}
        if fallback is not None:
            filename = fallback.f_code.co_filename
            return {"at": f"{os.path.basename(filename)}:{fallback.f_lineno}",
                    "code": code_at(filename, fallback.f_lineno)}
        return {"at": "?", "code": ""}


    def _called_at(self, frame) -> dict:
        """{"call_at", "call_code"}: the line of the module's forward that led to an operation run in a helper of the
        student's (`frame`, the innermost of theirs, not forward's own); {} when it ran in forward itself, or there is
        no such line."""
        if self.forward is None or frame.f_code is self.forward:
            return {}
        outer = frame.f_back
        while outer is not None and outer.f_code is not self.forward:
            outer = outer.f_back
        if outer is None:
            return {}
        filename = outer.f_code.co_filename
        return {"call_at": location(filename, outer.f_lineno),
                "call_code": code_at(filename, outer.f_lineno)}


class LineTrail:
    """The lines of the module's own forward in the order it ran them (a line run again after another is listed
    again): a trace in eval mode and one in training mode part where a line such as `if not self.training:` sends
    them different ways.  A line tracer on forward's frames only, on for one forward pass; where another tracer is
    already on (a debugger, coverage) it records nothing rather than displace it."""

    def __init__(self, module, limit: int = 400, method: str = "forward"):
        forward = getattr(type(module), method, None)  # (another method: reset_cache(), run before a KV cache's trace)
        self.code = getattr(forward, "__code__", None)
        self.limit = limit
        self.lines: list[dict] = []
        self.on = False

    def _call(self, frame, event, arg):
        return self._line if frame.f_code is self.code else None

    def _line(self, frame, event, arg):
        if event == "line" and len(self.lines) < self.limit:
            filename = frame.f_code.co_filename
            at = location(filename, frame.f_lineno)
            if not self.lines or self.lines[-1]["at"] != at:
                self.lines.append({"at": at, "code": code_at(filename, frame.f_lineno)})
        return self._line

    def __enter__(self):
        if self.code is not None and sys.gettrace() is None:
            self.on = True
            sys.settrace(self._call)
        return self

    def __exit__(self, *exc):
        if self.on:
            sys.settrace(None)
        return False


class ReturnLine:
    """Where the student's forward returns: the line of its `return` (`return ctx` runs no torch operation, so the
    trace has no step there).  What a missing output projection is told at: the place to apply it.  A profile hook,
    on for one forward pass only, that looks at returns from the module's own forward and nothing else."""

    def __init__(self, module, student_file):
        forward = getattr(type(module), "forward", None)
        self.code = getattr(forward, "__code__", None)
        self.student_file = os.path.abspath(student_file) if student_file else None
        self.found: dict | None = None
        self.before = None

    def _hook(self, frame, event, arg):
        if event == "return" and frame.f_code is self.code:
            filename = frame.f_code.co_filename
            if self.student_file and os.path.abspath(filename) == self.student_file:
                self.found = {"at": location(filename, frame.f_lineno),
                              "code": code_at(filename, frame.f_lineno)}
        if self.before is not None:
            self.before(frame, event, arg)

    def __enter__(self):
        if self.code is not None:
            self.before = sys.getprofile()
            sys.setprofile(self._hook)
        return self

    def __exit__(self, *exc):
        if self.code is not None:
            sys.setprofile(self.before)
        return False


class OriginRecorder(TraceRecorder):
    """Where the student's constructor made each tensor: the innermost line of the student's files for every torch
    operation run while the module is built, and which tensors each was made from.  A mask buffer built wrongly in
    __init__ (`torch.triu(torch.ones(n, n))`) shows its mistake in forward, at the masked_fill that uses it; the line
    to change is the one that built it (`origin`).  Only observes, like the trace."""

    SHAPERS = {"tril", "triu", "tril_", "triu_"}  # the operations that decide which positions a mask marks
    POWERS = {"pow", "__pow__", "__rpow__", "float_power", "exp"}  # theta ** (-2i / width), or exp(-2i·log(theta) /
    # width): the line that chose a rotary table's frequencies (`spectrum_at`), which a detector reads when they are
    # wrong

    def __init__(self, student_file, limit: int = 2000):
        super().__init__(student_file, {}, limit)
        self.made_by: dict[int, dict] = {}  # id(tensor) -> {"op", "at", "code", "from": [ids of its inputs]}
        self.first_by: dict[int, dict] = {}  # id(tensor) -> the first such record (a weight's: its layer's line, not
        # a later re-initialisation's)
        self.wrapped: dict[tuple, int] = {}  # (data pointer, shape, strides) -> id of the tensor made there: what
        # `nn.Parameter(t)` wraps is found from the parameter, another object over the same memory (`_wrapped`)
        self.written: dict[int, dict] = {}  # id(tensor) -> {"at", "code", "value"}: the last line that wrote a plain
        # number into part of it (`bias[torch.triu(...)] = -100.0`, `m.masked_fill_(hide, -1e4)`): a float mask's fill

    def _record(self, func, args, kwargs, result, raised: str | None = None):
        if raised is not None or len(self.made_by) >= self.limit:
            return
        name = getattr(func, "__name__", "") or str(func)
        self._note_write(name, args)
        outs = [result] if isinstance(result, torch.Tensor) else (
            [r for r in result if isinstance(r, torch.Tensor)] if isinstance(result, (tuple, list)) else [])
        in_place = name.endswith("_") and not name.startswith("_") and args and isinstance(args[0], torch.Tensor)
        if in_place:
            outs = [args[0]]  # in place: the tensor itself is remade
        if not outs:
            return
        inputs = _tensors_in(list(args) + list(kwargs.values()))  # torch.cat([f, f]): its tensors in a list
        record = {"op": name, **self._where(), "from": [id(a) for a in inputs if a is not outs[0]]}
        record.update(self._outer(record.get("at")))
        for t in outs:
            self.made_by[id(t)] = record
            if id(t) not in self.first_by:  # filled in place before any operation made this object: a Parameter
                # wrapping memory an earlier operation made (skip_init's to_empty, nn.Parameter(torch.empty(...))
                # filled by a reset method or a factory) was made THERE, not at the fill (OpenNMT-py 3.5's
                # skip_init layers were said to be built at the factory's xavier_uniform_ line)
                earlier = self.wrapped.get(_memory(t)) if in_place and _memory(t)[0] else None
                self.first_by[id(t)] = self.first_by.get(earlier, record) if earlier != id(t) else record
            self.wrapped.setdefault(_memory(t), id(t))
            self.keep.append(t)
        self.keep.extend(inputs)

    WRITES = {"__setitem__": -1, "masked_fill_": -1, "fill_": -1, "index_fill_": -1}  # in-place writes of a number:
    # the position of the number among the arguments

    def _note_write(self, name: str, args) -> None:
        """A plain number written in place into a tensor made by the student's code (`bias[future] = -100.0`, whose
        __setitem__ returns nothing and so makes no tensor `made_by` holds): the line, kept as the tensor's
        `written`, where a float mask's finite fill is written (not the line that made the zeros it is written into)."""
        if name not in self.WRITES or len(args) < 2 or not isinstance(args[0], torch.Tensor):
            return
        value = args[self.WRITES[name]]
        if isinstance(value, torch.Tensor):
            if value.dim() or value.is_complex():
                return
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return
        where = self._where()
        if where.get("at", "?") not in ("?", "mha-check"):
            self.written[id(args[0])] = {"at": where["at"], "code": where.get("code", ""), "value": float(value)}

    def _outer(self, at) -> dict:
        """{"outer_at", "outer_code", "args"} where the student's innermost line (`at`) ran in a function of theirs
        called from another line of theirs: the outermost such line (the layer's __init__ building a head module of
        the student's, `OneHead(emb, emb, block)`) and the innermost function's parameter names (`head_size`: a
        width the caller chose); {} otherwise."""
        frames, frame = [], sys._getframe(2)
        while frame is not None:
            if self.student_file and self._students(os.path.abspath(frame.f_code.co_filename)):
                frames.append(frame)
            frame = frame.f_back
        if len(frames) < 2:
            return {}
        outer = frames[-1]
        where = location(outer.f_code.co_filename, outer.f_lineno)
        if where == at:
            return {}
        args = []  # of the functions running the innermost line (a generator expression's, and the __init__ it is in)
        for f in frames:
            if location(f.f_code.co_filename, f.f_lineno) != at:
                break
            args += f.f_code.co_varnames[:f.f_code.co_argcount + f.f_code.co_kwonlyargcount]
        line = code_at(outer.f_code.co_filename, outer.f_lineno)
        return {"outer_at": where, "outer_code": line, "args": args}

    def _wrapped(self, t: torch.Tensor) -> int:
        """id(t), or, for a tensor no operation made (a raw `nn.Parameter(torch.randn(d, d) / d ** 0.5)`: the
        Parameter wraps the quotient without an operation torch reports), the id of the tensor made over the same
        memory, so that the raw parameter has the line that made it (a student's W_q of (d, H·d) had none, and its
        full-width heads no line)."""
        if id(t) in self.made_by:
            return id(t)
        return self.wrapped.get(_memory(t), id(t))

    def origin(self, t: torch.Tensor, first: bool = False) -> dict | None:
        """{"at", "code"} of the student's line that made `t`: the tril/triu that shaped it if one did (not the
        `.bool()` or `register_buffer` line after it), otherwise the operation that made it; None when none of the
        student's lines did.  With "spectrum_at", "spectrum_code" where a power made it (a rotary table's
        frequencies, theta ** (-2i / width): the line that chose them).  `first`: the line of the first operation
        that made it, alone (a parameter: the layer built at `nn.Linear(...)`, whose initialisation fills it, not
        an `_init_weights` that fills it again)."""
        if first:
            made = self.first_by.get(self._wrapped(t))
            return {"at": made["at"], "code": made["code"], **{k: made[k] for k in ("outer_at", "outer_code", "args")
                                                               if k in made}} if made and made["at"] != "?" else None
        latest = self.made_by.get(self._wrapped(t))
        if latest is None:
            return None
        wrote = self.written.get(self._wrapped(t)) or self.written.get(id(t))
        if wrote is not None:  # "written_at": the last line that wrote a number into it (a float mask's fill)
            spectrum_or_write = {"written_at": wrote["at"], "written_code": wrote["code"], "written": wrote["value"]}
        else:
            spectrum_or_write = {}
        seen, todo, spectrum = set(), [self._wrapped(t)], {}
        while todo:
            made = self.made_by.get(todo.pop(0))
            if made is None or id(made) in seen:
                continue
            seen.add(id(made))
            if made["op"] in self.SHAPERS and made["at"] != "?":
                return {"at": made["at"], "code": made["code"], **spectrum_or_write}
            if made["op"] in self.POWERS and made["at"] != "?" and not spectrum:
                spectrum = {"spectrum_at": made["at"], "spectrum_code": made["code"]}
            todo.extend(made["from"])
        return {"at": latest["at"], "code": latest["code"], **spectrum, **spectrum_or_write} if latest["at"] != "?" \
            else None


def _tensors_in(values: list) -> list[torch.Tensor]:
    """The tensors among `values`, and in the lists and tuples among them (one level: torch.cat's sequence)."""
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out += [t for t in v if isinstance(t, torch.Tensor)]
    return out


def square_nonzero(t: torch.Tensor, n: int) -> list | None:
    """Which of the first n x n positions of a mask-like tensor (..., L, L), leading axes of size 1, are nonzero
    (1) or zero (0): what a mask buffer marks, whatever its dtype (-inf counts as marked)."""
    if t.device.type == "meta" or t.dim() < 2 or t.shape[-1] < n or t.shape[-2] < n or t.is_complex():
        return None
    top = t[..., :n, :n].reshape(-1, n, n)
    if top.shape[0] != 1:
        return None
    return (top[0] != 0).to(torch.int64).tolist()


def _memory(t: torch.Tensor) -> tuple:
    """Where a tensor's values lie and how they are laid out: the same for a tensor and a Parameter wrapping it."""
    try:
        return t.data_ptr(), tuple(t.shape), t.stride()
    except RuntimeError:  # a tensor without storage (a functional or sparse one): its own
        return id(t), (), ()
