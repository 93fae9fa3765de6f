"""The child process: the only place where the student's code runs.

It answers typed requests (`harness.wire.messages`) from the trusted process over a private channel (its original
stdin/stdout, duplicated before any student code runs, or a socket when forked by the batch zygote; the student's
prints go to the captured log).  It sends back plain arrays and short texts; it never decides a verdict.  torch is
imported with one thread, before anything is forked from this module (OpenMP thread pools do not survive a fork).
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import gc
import os
import random
import re
import sys
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")


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


import socket  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.nn.utils import parametrize  # noqa: E402
from torch.nn.utils.weight_norm import WeightNorm  # noqa: E402

from harness.child import cache, calling, construct, layouts, norms, raw_params, references  # noqa: E402
from harness.child.recorders import (DeviceRecorder, LineTrail, OriginRecorder, ReturnLine, TraceRecorder,  # noqa: E402
                                     square_nonzero)
from harness.child.target import TargetError, describe_exception, load_target, settings_from_globals  # noqa: E402
from harness.child import torch_limits  # noqa: E402
from harness.wire import messages as m  # noqa: E402
from harness.wire import protocol  # noqa: E402
from harness.wire.config import Config  # noqa: E402
from harness.wire.form import form_of  # noqa: E402
from harness.wire.errors import DTYPE_MARK, HISTORY_MARK, PLATFORM_MARK, SIZE_MARK  # noqa: E402

torch.set_num_threads(1)
torch.set_default_dtype(torch.float64)
sys.dont_write_bytecode = True  # leave no __pycache__ in the student's folder


DTYPES = {"float64": torch.float64, "float32": torch.float32}  # a configuration's dtype (harness.wire.config)


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype):
    """torch's default dtype while the student's code builds or runs a module of `dtype`: float64 is this process's
    own (set at import), float32 is what a layer trained in float32 runs under (a tensor its forward makes without a
    dtype is then float32, as in training)."""
    if dtype is torch.float64:
        yield
        return
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


DTYPE_CLASH = re.compile(r"(Double|float64).*(Float|float32)|(Float|float32).*(Double|float64)|dtype", re.S)


def _dtype_clash(exc: BaseException | None) -> bool:
    """Whether the constructor's exception speaks of two floating dtypes, or of a dtype: the only ones worth building
    again under float32 (a refusal, ValueError("d_model must be divisible"), is not run twice)."""
    return exc is not None and bool(DTYPE_CLASH.search(str(exc)[:2000]))


def _graph_keepers(module: nn.Module) -> list[str]:
    """The buffers and plain tensor attributes of the module that hold autograd history after a forward (a KV cache
    written in place, Meta llama's `self.cache_k[:b, start_pos:start_pos + n] = xk`): a backward that raises then
    meets an earlier call's graph, which a training loop meets on its second step."""
    kept = [f"the buffer {name}" for name, b in module.named_buffers() if b is not None and b.grad_fn is not None]
    for path, mod in module.named_modules():
        for name, value in vars(mod).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter) and value.grad_fn is not None:
                kept.append(f"the tensor {path + '.' if path else ''}{name}")
    return kept


class StudentError(Exception):
    """Student code raised; `text` is the summary to report, `stage` where it happened."""

    def __init__(self, stage: str, text: str):
        super().__init__(text)
        self.stage, self.text = stage, text


class AdapterError(Exception):
    """mha-check cannot drive the module (a constructor parameter it cannot bind, a forward it cannot call):
    reported as stage "adapter", which the trusted side turns into *cannot tell*, never into a failure."""


BATCHED_JACOBIAN = False  # set by warm_batched_jacobian(), where its one-time cost is paid before any submission
# output positions per vectorised backward call: the 64-token configuration's 64 at once keep several 8 MB
# intermediates out of the cache; 16 at a time give the numbers of one call (bit for bit, measured on the
# lesson's layer) in about 70% of the time
JACOBIAN_ROWS = 16


def warm_batched_jacobian() -> None:
    """Turn on vectorised Jacobians.  The first vectorised backward call imports and sets up about 0.3 s of
    machinery; every later one takes about a millisecond where the loop over output positions takes tens.  Worth it
    where one process serves many targets (the batch zygote before it forks, the in-process worker of the test
    suite), not in a single run's child, which would pay more than it saves."""
    global BATCHED_JACOBIAN
    x = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    y = torch.softmax(x @ x.transpose(1, 2), -1).sum(-1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.autograd.grad(y, x, torch.eye(6, dtype=torch.float64).reshape(6, 2, 3), is_grads_batched=True)
    except Exception:  # noqa: BLE001 - this torch cannot: the loop stays
        return
    BATCHED_JACOBIAN = True



def _within_bounds(found: list, ways) -> list:
    """The readings and call styles within what the trusted side accepts from a worker (harness.wire.messages:
    MAX_LAYOUTS, MAX_CALL_STYLES, MAX_READINGS_TRIED), the first ones kept: past them the parent refuses the reply
    as a corrupted channel, so a layer with very many same-shaped parameters would have been told its code
    corrupted the channel (our limit, not the student's mistake); cut here, the readings not offered leave the
    weight checks cannot-tell at worst.  `ways.styles` is cut in place.  A reading with a role that takes more than
    MAX_ROLE_TEXT characters to write is left out likewise."""
    del ways.styles[m.MAX_CALL_STYLES:]
    short = [lay for lay in found if all(len(text) <= m.MAX_ROLE_TEXT for text in lay.describe().values())]
    if short and len(short) < len(found):
        short[0].notes.append(f"{len(found) - len(short)} reading(s) of the parameters too long to write were not "
                              "tried")
    found = short
    room = max(1, min(m.MAX_LAYOUTS, m.MAX_READINGS_TRIED // max(1, len(ways.styles))))
    if len(found) > room:
        for lay in found:
            lay.certain = False
        found[0].notes.append(f"only the first {room} of {len(found)} readings of the parameters were tried")
        del found[room:]
    return found

SCRIPTED = ("your module is a TorchScript module (torch.jit.script), whose submodules mha-check cannot look into "
            "to find the projections by their names or order")
DESCRIPTION_ROOM = protocol.MAX_HEADER - (64 << 10)  # one module's description (Built) and a frame's other replies


def _describable(built: m.Built) -> m.Built:
    """`built` if the trusted side can read it: a module's description has one MAX_HEADER of room there, and a larger
    header is refused as a corrupted channel.  A layer whose parameters' and buffers' names take more (20,000 tiny
    parameters in a ParameterList, the fourth red team's) was told its code corrupted the channel; said here, it is
    a limit of mha-check's (cannot tell)."""
    size = m.frame_size(built)  # its fields kept for the frame that sends it (issue 27: not made twice)
    if size <= DESCRIPTION_ROOM:
        return built
    many = lambda count, what: f"{count:,} {what}{'' if count == 1 else 's'}"
    raise AdapterError(f"{SIZE_MARK}your module has {many(len(built.params), 'parameter')} and "
                       f"{many(len(built.buffers), 'buffer')}, whose names and shapes take {size / (1 << 20):.1f} MB: "
                       f"more than the {DESCRIPTION_ROOM / (1 << 20):.1f} MB mha-check reads of one module's "
                       "description, so it cannot check it")


class Worker:
    def __init__(self, own_process: bool = True):
        self.own_process = own_process  # False: a thread of the caller's process (inprocess), which keeps its imports
        self.target = None
        self.signature: m.Signature | None = None
        self._unbindable: str | None = None  # why the loaded target's constructor cannot be called, "" if it can
        self.overrides: dict = {}
        self.weight_map: dict = {}
        self.instances: dict[int, dict] = {}
        self.chan_out = None  # the channel, for a request answered in several frames (RunTests)
        self.handlers = {m.Load: self.load, m.Build: self.build, m.Forward: self.forward, m.Vjp: self.vjp,
                         m.Jacobian: self.jacobian, m.ReadWeights: self.read, m.WriteWeights: self.write,
                         m.MetaForward: self.meta, m.Devices: self.devices, m.Trace: self.trace,
                         m.CacheRun: self.cached, m.RunTests: self.tests,
                         m.Bye: lambda request: m.Done()}

    # -- helpers -------------------------------------------------------------------------------------------------
    def _student(self, stage: str, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except BaseException as e:  # SystemExit, KeyboardInterrupt: all are the student's, but a limit of torch
            where = self.target.module_file if self.target else None
            if torch_limits.is_torch_limit(e):
                raise AdapterError(PLATFORM_MARK + torch_limits.summary(e, where)[:4000]) from e
            raise StudentError(stage, describe_exception(e, where)[:4000]) from e

    def _inst(self, request) -> dict:
        return self.instances[request.handle]

    @staticmethod
    def _output(result) -> torch.Tensor:
        if isinstance(result, (tuple, list)) and result and isinstance(result[0], torch.Tensor):
            result = result[0]
        if not isinstance(result, torch.Tensor):
            raise StudentError("forward", f"forward returned a value of type {type(result).__name__}, not a tensor "
                                          "(or a tuple whose first element is the output tensor)")
        if not result.is_floating_point():
            raise StudentError("forward", f"forward returned a tensor of dtype {result.dtype}, not floating point")
        return result

    def _forward(self, inst, x: torch.Tensor, mode: str, style: int = 0, hide_nothing: bool = False,
                 spare_mask: int | None = None) -> torch.Tensor:
        module = inst["module"]
        picked = inst["calling"].pick(style)
        if picked is None:
            raise AdapterError(inst["calling"].problem or f"no call style {style}")
        args, kwargs = picked.style.arguments(x, picked.seq_first, hide_nothing, spare_mask)
        if picked.norms_off and not inst["norms"]:
            raise AdapterError(f"call style {style} switches off normalisations, and the module has none")
        training = mode == "train"
        if any(mod.training != training for mod in module.modules()):  # as a training loop does: once, not per call
            self._student("forward", module.train, training)
        off = norms.switched_off(inst["norms"]) if picked.norms_off else contextlib.nullcontext()
        with default_dtype(inst["dtype"]), off:
            try:
                y = self._output(self._student("forward", module, *args, **kwargs))
            except StudentError as e:
                if (inst["dtype"] is torch.float64 and x.device.type == "cpu" and _unrecorded()
                        and _runs_in_training_dtypes(module, args, kwargs)):
                    raise AdapterError(f"{DTYPE_MARK}your forward raised on float64 inputs ({e.text[:600]}) and runs "
                                       "on the same inputs in float32 and in half precision") from None
                raise
        if picked.residual:
            if tuple(y.shape) != tuple(x.shape):
                raise AdapterError(f"the input cannot be taken away from an output of shape {tuple(y.shape)} "
                                   f"(the input's is {tuple(x.shape)})")
            return calling.residual_removed(y, x)
        return calling.seq_first_output(y) if picked.seq_first else y

    @staticmethod
    def _tensor(array) -> torch.Tensor:
        return torch.from_numpy(array.copy())

    def _input(self, inst: dict, array) -> torch.Tensor:
        """An array of the trusted side's (float64 on the wire) as the instance's dtype: float32 for a module built
        for a float32 configuration, as a layer trained in float32 is fed."""
        t = self._tensor(array)
        return t if inst["dtype"] is torch.float64 else t.to(inst["dtype"])

    # -- operations ----------------------------------------------------------------------------------------------
    def load(self, request: m.Load) -> m.Reply:
        self.overrides = dict(request.overrides)
        self.weight_map = dict(request.weight_map)
        try:
            self.target = load_target(request.spec, request.search_dir, request.submission and self.own_process)
        except TargetError as e:  # which class to check is unclear: mha-check cannot tell, the code is not wrong
            return m.Failed("adapter" if e.kind == "ambiguous" else e.kind, str(e), e.notes)
        self.signature = construct.read_signature(self.target.obj, self.overrides)
        self._unbindable = None
        kind = "class" if isinstance(self.target.obj, type) else "factory"
        return m.Loaded(self.target.name, kind, self.signature, self.target.module_file,
                        settings_from_globals(self.target.obj), self.target.notes)

    def build(self, request: m.Build) -> m.Reply:
        cfg = Config(**request.cfg)
        if self._unbindable is None:  # the same for every build of the loaded target (issue 27: reading the
            # constructor's signature again at each of a submission's thirty-odd builds was a tenth of their time)
            try:
                construct.require_bindable(self.signature, self.overrides)
                construct.require_free_sizes(self.target.obj, self.signature, self.overrides)
                self._unbindable = ""
            except construct.Unbindable as e:
                self._unbindable = str(e)
        if self._unbindable:
            raise AdapterError(self._unbindable)
        # the CPU generator, where every module is built: torch.manual_seed would also queue a CUDA seeding, with a
        # captured stack, on every build (a millisecond each, twenty builds per submission)
        torch.random.default_generator.manual_seed(request.seed)
        reads: set = set()
        dtype = DTYPES[cfg.dtype]
        recorder = OriginRecorder(self.target.module_file) if request.origins else contextlib.nullcontext()
        try:
            with default_dtype(dtype), recorder:  # a float32 configuration is built as a layer trained in float32 is
                module = self._student("construct", construct.build, self.target.obj, cfg, self.overrides,
                                       self.signature, reads)
        except StudentError as e:
            why = construct.ours(self.target.obj, cfg, self.overrides, self.signature, e.__cause__, e.text)
            if why is not None:
                raise AdapterError(f"for {cfg.describe()}, {why}") from None
            if dtype is not torch.float64 or not _dtype_clash(e.__cause__):
                raise
            # torch's default dtype float64 is this process's choice, not the student's: a constructor that mixes
            # a tensor made in the default dtype with one made .float() (torch.polar(torch.ones(n, m),
            # torch.outer(t.float(), freqs)), a rotary table) raises only under it.  Built as the student builds it,
            # under float32, then cast to float64 below as .double() would; raising there too, the error stands.
            torch.random.default_generator.manual_seed(request.seed)
            recorder = OriginRecorder(self.target.module_file) if request.origins else contextlib.nullcontext()
            try:
                with default_dtype(torch.float32), recorder:
                    reads.clear()  # the settings this build reads, not the failed one's
                    module = construct.build(self.target.obj, cfg, self.overrides, self.signature, reads)
            except BaseException:  # noqa: BLE001 - the student's constructor: the float64 error is the one to report
                raise e from None
        if not isinstance(module, nn.Module):
            raise StudentError("construct", f"{self.target.name}(...) returned a value of type "
                                            f"{type(module).__name__}, not a torch.nn.Module")
        folded = _bake_weight_norm(module)  # g * v / ||v|| made a plain weight: the layer the same, its W readable
        origins = _made_at(recorder, module) if request.origins and isinstance(module, nn.Module) else None
        if _has_complex(module):  # module.to(float64) would drop the imaginary part of a rotary freqs_cis buffer
            self._student("construct", module._apply, _to_float64 if dtype is torch.float64 else _to_float32)
        else:
            self._student("construct", module.to, dtype)
        if request.force_dropout is not None:
            for mod in module.modules():
                if isinstance(mod, nn.Dropout):
                    mod.p = float(request.force_dropout)
        out_proj = form_of(self.signature, self.overrides).out_proj
        found, problem = self._readings(module, cfg, out_proj)
        ways = calling.styles_for(module)
        found = _within_bounds(found, ways)
        kept = self._student("construct", norms.find, module)  # a probe runs a norm of the student's own class
        handle = request.handle if request.handle is not None else len(self.instances)
        self.instances[handle] = {"module": module, "cfg": cfg, "layouts": found, "calling": ways, "dtype": dtype,
                                  "norms": kept, **({"origins": origins} if origins is not None else {})}
        return _describable(m.Built(
            handle=handle,
            param_count=sum(p.numel() for p in module.parameters()),
            params=[m.Param(n, list(p.shape)) for n, p in module.named_parameters()],
            buffers=[m.Param(n, list(b.shape)) for n, b in module.named_buffers()],
            state_dict=list(module.state_dict().keys()),
            plain_tensors=_plain_tensor_attributes(module),
            containers=_unregistered_containers(module),
            dropout_modules=sum(isinstance(mod, nn.Dropout) for mod in module.modules()),
            layouts=[m.LayoutInfo(lay.describe(), lay.how, lay.notes, lay.certain, lay.kv_width) for lay in found],
            layout_problem=problem,
            call_styles=[s.describe() for s in ways.styles],
            call_problem=ways.problem,
            call_bare=[s.bare for s in ways.styles],
            call_masked=[s.convention is not None for s in ways.styles],
            call_spare=[s.spare is not None for s in ways.styles],
            config_reads=construct.config_reads(reads),
            frozen=[n for n, p in module.named_parameters() if not p.requires_grad],
            norms=[m.NormInfo(n.path, n.kind, n.params) for n in kept],
            inert_masks=_inert_masks(module, cfg.context_length),
            weight_norm=folded,
            init_at=construct.init_at(type(module)),
            unread_flags=_unread_flags(module, self.signature),
        ))

    def _readings(self, module: nn.Module, cfg, out_proj: bool) -> tuple[list, str]:
        """The candidate readings of the module's parameters as the lesson's roles, and why there is none: by names
        and structure (harness.child.layouts), without an output projection, then raw parameters by their order
        (harness.child.raw_params).  A TorchScript module (a factory returning torch.jit.script(layer), a student's
        trial) cannot be looked into by submodule: it has no reading but --map's, and the weight-free checks still
        judge it (its mask one diagonal off had ended in zero failing checks: construct could not tell)."""
        try:
            found, problem = layouts.discover(module, cfg.d_in, cfg.d_out, cfg.heads, self.weight_map,
                                              cfg.kv_heads, out_proj=out_proj)
        except RuntimeError:
            if not isinstance(module, torch.jit.ScriptModule):
                raise
            return [], SCRIPTED
        if not found and out_proj:  # a multi-head layer with no output projection: read without one, to be proven
            # (the problem stays: why no reading with a W_o exists)
            found = layouts.without_out_proj(module, cfg.d_in, cfg.d_out, cfg.heads, self.weight_map, cfg.kv_heads)
        if not found and not out_proj:  # a single head with an output projection (fairseq's SingleHeadAttention):
            # read with one, to be proven (harness.wire.form.readings_form; the problem stays: why none without W_o)
            found, _ = layouts.discover(module, cfg.d_in, cfg.d_out, cfg.heads, self.weight_map, cfg.kv_heads)
        if not found and not self.weight_map:  # raw parameters whose names say no role, read by their order (a
            # ParameterList, a stacked (3, d, d)), never certain: the proof decides
            found = raw_params.by_position(module, cfg.d_in, cfg.d_out, out_proj)
        return found, problem

    def forward(self, request: m.Forward) -> m.Reply:
        inst = self._inst(request)
        x = self._input(inst, request.x)
        if request.noncontig:
            x = x.transpose(0, 1).contiguous().transpose(0, 1)  # same values, non-contiguous strides
        with torch.no_grad():
            y = self._forward(inst, x, request.mode, request.style)
        return m.Output(y.detach().to(torch.float64).numpy(), x.is_contiguous(),
                        x.detach().to(torch.float64).numpy() if request.want_x_after else None)

    def vjp(self, request: m.Vjp) -> m.Reply:
        """One forward and one backward of sum(gy * y): gradients for x and, through a layout, every role."""
        inst = self._inst(request)
        module = inst["module"]
        leaf = self._input(inst, request.x).requires_grad_(True)
        # in train() mode, as a training step gives it: the output of an operation (a residual stream's sum), not a
        # leaf; red team 9's layer left out its mask wherever x.grad_fn was set, which no probe's leaf ever had
        x = leaf + torch.zeros_like(leaf) if request.mode == "train" else leaf
        module.zero_grad(set_to_none=True)
        y = self._forward(inst, x, request.mode, request.style)
        if not y.requires_grad:
            return m.Gradients(no_graph=True, y=y.detach().to(torch.float64).numpy(),
                               unused=[n for n, _ in module.named_parameters()])
        gy = self._input(inst, request.gy)
        if tuple(gy.shape) != tuple(y.shape):
            raise StudentError("forward", f"output has shape {tuple(y.shape)}, expected {tuple(gy.shape)}")
        # A scalar loss, not y.backward(gy): the latter imports sympy on first use (0.3 s).
        try:
            self._student("backward", (y * gy).sum().backward)
        except StudentError as e:
            kept = _graph_keepers(module)
            if not kept:
                raise
            raise StudentError(e.stage, f"{HISTORY_MARK}{', '.join(kept[:4])}, written in forward with "
                                        "tensors that need a gradient, tie each call's graph to the earlier calls' "
                                        f"(freed by their backward, or with weights changed since): {e.text}") from None
        grads = {}
        if request.layout is not None and inst["layouts"]:
            grads = {role: g.numpy() for role, g in inst["layouts"][request.layout].read(grad=True).items()}
        gx = leaf.grad if leaf.grad is not None else torch.zeros_like(leaf)
        unused = [n for n, p in module.named_parameters() if p.requires_grad and p.grad is None]
        return m.Gradients(y=y.detach().numpy(), gx=gx.numpy(), grads=grads, unused=unused)

    def jacobian(self, request: m.Jacobian) -> m.Reply:
        """J[b, t, c, s, :] = d (r · y[b, t]) / d x[c, s, :] for every output position (b, t)."""
        inst = self._inst(request)
        x = self._input(inst, request.x).requires_grad_(True)
        r = self._input(inst, request.r)
        y = self._forward(inst, x, request.mode, request.style, request.hide_nothing, request.spare_mask)
        B, n = x.shape[:2]
        axis = request.token_axis
        if y.requires_grad and 0 < axis < y.dim() and y.shape[0] == B and y.shape[axis] == n:
            y = y.movedim(axis, 1).reshape(B, n, -1)  # an output of another shape (B, H, n, dh), by its token axis
        if not y.requires_grad or y.dim() != 3 or y.shape[:2] != (B, n) or y.shape[-1] != r.shape[0]:  # (B, 1, 1, d)
            # from one head of one token is no (B, n, d) output
            return m.JacobianResult(no_graph=not y.requires_grad, shape=list(y.shape))
        proj = (y * r).sum(-1)
        jac = self._batched_jacobian(proj, x) if BATCHED_JACOBIAN else None
        if jac is None:
            jac = torch.zeros((B, n) + tuple(x.shape), dtype=torch.float64)
            for b in range(B):
                for t in range(n):
                    (g,) = self._student("backward", torch.autograd.grad, proj[b, t], x, retain_graph=True,
                                         allow_unused=True)
                    if g is not None:
                        jac[b, t] = g
        return m.JacobianResult(shape=list(y.shape), jac=jac.numpy())

    @staticmethod
    def _batched_jacobian(proj: torch.Tensor, x: torch.Tensor) -> torch.Tensor | None:
        """All B·n backward passes in vectorised calls of JACOBIAN_ROWS each (is_grads_batched): about 10x faster
        than one call per output position, with the same exact zeros and NaNs (what the verdict reads) and the same
        other values to rounding (a relative 1e-13: on longer sequences the batched kernels add in another order).
        Anything it cannot do (an operation without a batching rule, a hook of the student's that does not vectorise)
        returns None and the position-by-position
        loop runs, whose errors are the student's as usual; its warnings are ours, never the student's output."""
        B, n = proj.shape
        seeds = torch.eye(B * n, dtype=proj.dtype).reshape(B * n, B, n)
        rows = []
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for start in range(0, B * n, JACOBIAN_ROWS):
                    (g,) = torch.autograd.grad(proj, x, seeds[start:start + JACOBIAN_ROWS], retain_graph=True,
                                               allow_unused=True, is_grads_batched=True)
                    if g is None:
                        return torch.zeros((B, n) + tuple(x.shape), dtype=torch.float64)
                    rows.append(g.detach())
        except BaseException:  # noqa: BLE001 - the loop runs the same code again and reports what it raises
            return None
        return torch.cat(rows).reshape((B, n) + tuple(x.shape)).to(torch.float64)

    def read(self, request: m.ReadWeights) -> m.Reply:
        layout = self._inst(request)["layouts"][request.layout]
        return m.Weights({k: v.numpy() for k, v in layout.read().items()})

    def write(self, request: m.WriteWeights) -> m.Reply:
        layout = self._inst(request)["layouts"][request.layout]
        layout.write({k: self._tensor(v) for k, v in request.weights.items()})
        return m.Done()

    def meta(self, request: m.MetaForward) -> m.Reply:
        """Move a copy of the module to the meta device and run it: a mask that is not a buffer stays behind."""
        inst = self._inst(request)
        module = self._student("meta", copy.deepcopy, inst["module"])
        self._student("meta", module.to, "meta")
        x = torch.empty(tuple(request.shape), device="meta", dtype=inst["dtype"])
        y = self._forward({**inst, "module": module}, x, "eval", request.style)
        return m.MetaResult(str(y.device), list(y.shape))

    def devices(self, request: m.Devices) -> m.Reply:
        """Run forward following which tensors would move with the module and which would stay on the CPU."""
        inst = self._inst(request)
        module, x = inst["module"], self._input(inst, request.x)
        recorder = DeviceRecorder(self.target.module_file, [x, *module.parameters(), *module.buffers()])
        with torch.no_grad(), recorder:
            self._forward(inst, x, "eval", request.style)
        return m.DevicesResult([m.Created(**c) for c in recorder.created], [m.Mix(**c) for c in recorder.mixes],
                               _plain_tensor_attributes(module))

    def trace(self, request: m.Trace) -> m.Reply:
        """Run forward once (eval, autograd on, as a training step runs it) recording every torch operation: its
        name, the shapes of its tensor inputs and outputs, its other arguments, which earlier operation produced
        each input (data flow), the student's line that called it, and whether the student's code had turned
        autograd off there (`torch.no_grad()` around the attention weights).  Labelling the steps is the trusted
        side's job (harness.engine.trace)."""
        inst = self._inst(request)
        module = inst["module"]
        x = self._input(inst, request.x)
        names = {id(p): n for n, p in module.named_parameters()}
        names.update({id(b): n for n, b in module.named_buffers()})
        names[id(x)] = "x"
        recorder = TraceRecorder(self.target.module_file, names, request.limit, self._origins(inst, x.shape[1]),
                                 getattr(getattr(type(module), "forward", None), "__code__", None))
        raised, output = None, None
        returned = ReturnLine(module, self.target.module_file)
        trail = LineTrail(module)
        reset_lines = []
        try:
            if request.chunks:
                y, reset_lines = self._trace_cached(inst, request, x, recorder, returned, trail)
            else:
                with torch.enable_grad(), recorder, returned, trail:
                    y = self._forward(inst, x, "train" if request.mode == "train" else "eval", request.style)
            output = {"shape": list(y.shape), "src": recorder.producer.get(id(y)),
                      **({"returned": returned.found} if returned.found else {})}
        except StudentError as e:
            raised = e.text
        read = {t.get("name") for op in recorder.ops for t in op["in"]}
        picked = inst["calling"].pick(request.style)
        off = {p for norm in inst["norms"] for p in norm.params} if picked is not None and picked.norms_off else set()
        # (a normalisation this call style switches off is never read, by our doing: not a layer forward leaves
        # unused; a correct pre-norm sublayer's RMSNorm was marked unused-projection)
        untouched = [_with_reference(module, made) for made in recorder.made.values()
                     if made.get("kind") == "parameter" and made.get("path") not in read | off]
        return m.TraceResult(recorder.ops, recorder.truncated, raised, output,
                             [{**line, "fn": "reset"} for line in reset_lines] + trail.lines, untouched)

    def _trace_cached(self, inst: dict, request: m.Trace, x: torch.Tensor, recorder, returned, trail):
        """The last call of a decode with the layer's KV cache (harness.child.cache), recorded: x fed in
        `request.chunks` after the cache's reset (its method's lines recorded too, where `request.reset`); the
        earlier calls run unrecorded.  (its output, the reset's lines); the student's error raised as StudentError,
        the layer without a cache mha-check can drive an AdapterError."""
        module = inst["module"]
        api, problem = cache.find_api(module)
        if api is None:
            raise AdapterError(problem or "the layer shows no KV cache")
        picked = inst["calling"].pick(request.style)
        if picked is None or picked.seq_first or picked.residual:
            raise AdapterError("mha-check traces the KV cache of a layer called with its input alone")
        if sum(request.chunks) != x.shape[1] or any(c < 1 for c in request.chunks):
            raise ValueError(f"chunks {request.chunks} do not cover {x.shape[1]} tokens")
        # as the kv-cache check decodes (`cached`): the layer's normalisations switched off where its call style
        # switches them off, and a cache handed in that None does not start begun with () instead
        off = norms.switched_off(inst["norms"]) if picked.norms_off else contextlib.nullcontext()
        if api.kind == "argument":  # (a cache handed back and forth: the module keeps nothing a dry run changes)
            with torch.no_grad(), default_dtype(inst["dtype"]), off:
                api, dry, objects = self._decode_begun(module, api, picked.style.arguments, x, list(request.chunks),
                                                       False)
            if dry.error is None and not dry.grows:  # nothing kept between calls: no decode with a cache to trace,
                # as the kv-cache check finds (zenith-nlp's KVCache object, which mha-check cannot make: its calls
                # traced with None were read as positions never advanced)
                raise AdapterError(f"the cache mha-check hands your forward ({api.describe()}) holds nothing "
                                   "between calls" + (": it reads its cache as an object of its own type"
                                                      if len(objects) == 2 else ""))
        off = norms.switched_off(inst["norms"]) if picked.norms_off else contextlib.nullcontext()
        reset = LineTrail(module, method=api.reset) if api.reset else contextlib.nullcontext()

        def around(stage: str):
            if stage == "reset":
                return reset
            stack = contextlib.ExitStack()
            for part in (torch.enable_grad(), recorder, returned, trail):
                stack.enter_context(part)
            return stack

        if any(mod.training for mod in module.modules()):
            self._student("forward", module.train, False)
        with default_dtype(inst["dtype"]), off:
            run = cache.decode(module, api, picked.style.arguments, x, list(request.chunks), request.reset,
                               lambda fn, *a, **k: self._student("forward", fn, *a, **k), self._output, around)
        if run.error is not None:
            raise run.error
        return run.outputs[-1], list(getattr(reset, "lines", []))

    def _decode_begun(self, module, api: cache.Api, arguments, x: torch.Tensor, chunks: list[int], reset: bool,
                      around=None) -> tuple[cache.Api, cache.Decoded, list[str]]:
        """A decode (harness.child.cache.decode) with the cache begun as the layer wants: a cache handed in whose
        None ran but never grew may mean "no cache" (MosaicML's MPT layers): begun with () instead where that runs
        and grows, else with {} (a dict the layer fills in place, FlexiTransformers' kv_cache).  (the api it was
        begun with, the run, what () and {} raised where the layer reads its cache as an object of its own type).
        The kv-cache check (`cached`) and the trace of a decode (`_trace_cached`, its dry run) both decide it here,
        so that they decode alike."""
        def call(fn, *a, **k):
            return self._student("forward", fn, *a, **k)

        run = cache.decode(module, api, arguments, x, chunks, reset, call, self._output, around)
        objects = []  # what () raised where the layer reads its cache as an object of its own type
        for empty in ((), {}) if api.kind == "argument" and run.error is None and not run.grows else ():
            started = dataclasses.replace(api, empty=empty)
            again = cache.decode(module, started, arguments, x, chunks, reset, call, self._output, around)
            if again.error is None and again.grows:
                return started, again, []
            if isinstance(again.error, StudentError) and (
                    empty != () or "'tuple' object has no attribute" in again.error.text):
                objects.append(again.error.text)
        return api, run, objects

    def _origins(self, inst: dict, n: int) -> dict[int, dict]:
        """Where the constructor made each buffer, plain tensor attribute, parameter and tensor kept in a plain
        container of the traced module: id -> {"at", "code", "nonzero", "path"[, "kind"]} (`nonzero`: what its first
        n x n positions mark, for a mask; `kind`: "parameter", "container" or "unregistered" (a layer's parameter in a
        plain list), none for a buffer or attribute),
        matched by path (the module was moved to float64 since it was built: other tensors, same paths).  Noted
        while the module was built when the Build asked for it (`Build.origins`: a trace's own instance), so the
        constructor runs once.  An instance built earlier without it (a check's, which the report's trace reuses) is
        built once more under an `OriginRecorder`; the generator's state is put back, so that build draws nothing
        from what follows (torch's, Python's and numpy's generators), and a constructor that raises this time leaves
        the lines unknown, nothing else."""
        if "origins" in inst:
            theirs = {path: (t, kind) for path, t, kind in _origin_tensors(inst["module"])}
            return {id(theirs[path][0]): _origin(where, theirs[path], path, n)
                    for path, where in inst["origins"].items() if path in theirs}
        recorder = OriginRecorder(self.target.module_file)
        numpy = sys.modules.get("numpy")
        states = (torch.random.get_rng_state(), random.getstate(), numpy.random.get_state() if numpy else None)
        try:
            with recorder:
                twin = construct.build(self.target.obj, inst["cfg"], self.overrides, self.signature, set())
        except Exception:  # noqa: BLE001 - the lines are a help, never a reason to fail the trace
            return {}
        finally:  # the generators a constructor may draw from, as they were
            torch.random.set_rng_state(states[0])
            random.setstate(states[1])
            if numpy is not None:
                numpy.random.set_state(states[2])
        if not isinstance(twin, nn.Module):
            return {}
        theirs = {path: (t, kind) for path, t, kind in _origin_tensors(inst["module"])}
        out = {}
        for path, t, kind in _origin_tensors(twin):
            where, mine = recorder.origin(t, first=kind in WEIGHTS), theirs.get(path)
            if where is not None and mine is not None:
                out[id(mine[0])] = _origin(where, mine, path, n)
        return out

    def cached(self, request: m.CacheRun) -> m.Reply:
        """Decode with the layer's KV cache (harness.child.cache), in eval mode without gradients; what the
        student's code raises is reported in the answer, with the chunk it happened at, for the trusted side to
        judge (on the first call it means mha-check did not find how to drive the cache)."""
        inst = self._inst(request)
        module = inst["module"]
        api, problem = cache.find_api(module)
        if api is None:
            return m.CacheResult(problem=problem)
        picked = inst["calling"].pick(request.style)
        if picked is None:
            raise AdapterError(inst["calling"].problem or f"no call style {request.style}")
        style = picked.style
        if picked.seq_first:
            raise AdapterError("mha-check does not decode with the KV cache of a layer that reads its input "
                               "sequence first")
        if picked.residual:
            raise AdapterError("mha-check does not decode with the KV cache of a layer that adds its input to its "
                               "output (a sublayer's x + attention(...))")
        if not style.bare and any(c > 1 for c in request.chunks[1:]):  # only a prompt and single tokens are masked
            raise AdapterError("chunks of several tokens after the first need a mask offset by the cached tokens")
        x = self._input(inst, request.x)
        if sum(request.chunks) != x.shape[1] or any(c < 1 for c in request.chunks):
            raise ValueError(f"chunks {request.chunks} do not cover {x.shape[1]} tokens")
        if any(mod.training for mod in module.modules()):
            self._student("forward", module.train, False)
        # a normalisation acting per token (harness.child.norms) is switched off for the whole decode, as for every
        # other check of the math: token by token it gives what it gives on the whole sequence
        off = norms.switched_off(inst["norms"]) if picked.norms_off else contextlib.nullcontext()
        with torch.no_grad(), default_dtype(inst["dtype"]), off:
            api, run, objects = self._decode_begun(module, api, style.arguments, x, list(request.chunks),
                                                   request.reset)
        # zenith-nlp's cache.update(layer_idx, k, v): a KVCache the caller makes, on which () and {} both raise (a
        # dict the layer reads by keys of the caller's, DALLE's cache_key and 'offset', raises nothing: not this)
        if len(objects) == 2:
            first_line = objects[0].strip().splitlines()[-1][:200]
            return m.CacheResult(api.describe(), api.kind, grows=False, problem=(
                f"your forward reads its {api.cache_arg} as an object of its own type (given an empty tuple: "
                f"{first_line}), which mha-check cannot make; with None it keeps nothing"))
        raised = ""
        if isinstance(run.error, ValueError) and str(run.error).startswith("forward returned shape"):
            raised = str(run.error)
        elif run.error is not None:
            if not isinstance(run.error, StudentError):
                raise run.error
            raised = run.error.text
        if len({t.shape[-1] for t in run.outputs}) > 1:
            run.outputs, raised, run.raised_at = [], "forward returned outputs of different widths", 0
        y = torch.cat([t.detach().to(torch.float64) for t in run.outputs], dim=1).numpy() if run.outputs else None
        return m.CacheResult(api.describe(), api.kind, y=y, grows=run.grows, raised=raised, raised_at=run.raised_at)

    def tests(self, request: m.RunTests) -> m.Reply:
        """The instructor's pytest files on the student's class (harness.child.instructor): a frame per test as it
        ends, then TestsDone.  Sent before any Load: the tests are collected before the student's code runs."""
        from harness.child import instructor  # noqa: PLC0415 - pytest is imported only by a child that needs it

        def send(reply: m.Reply) -> None:
            self.chan_out.write(m.encode_batch([reply]))

        return instructor.run(request, request.spec, request.search_dir, request.submission, send)

    # -- the loop --------------------------------------------------------------------------------------------------
    def answer(self, request: m.Request) -> m.Reply:
        try:
            return self.handlers[type(request)](request)
        except StudentError as e:
            return m.Failed(e.stage, e.text)
        except AdapterError as e:
            return m.Failed("adapter", str(e)[:4000])
        except BaseException as e:  # noqa: BLE001 - our failure, or student code reached through our code
            return m.Failed("harness", describe_exception(e)[:4000])

    def serve(self, chan_in, chan_out) -> None:
        """Answer frames until the channel closes or `Bye`; a frame's requests run in order and stop at the first
        failure (the replies then end with it)."""
        self.chan_out = chan_out
        while True:
            try:
                header, arrays = protocol.decode(chan_in)
                requests = m.decode_requests(header, arrays)
            except EOFError:
                return
            except protocol.ProtocolError as e:
                chan_out.write(m.encode_batch([m.Failed("harness", f"bad request: {e}")]))
                continue
            replies = []
            for request in requests:
                replies.append(self.answer(request))
                if isinstance(replies[-1], m.Failed):
                    break
            chan_out.write(m.encode_batch(replies))
            if any(isinstance(r, m.Bye) for r in requests):
                return


def _bake_weight_norm(module: nn.Module) -> list[str]:
    """Weight normalisation undone into the weight it makes (torch.nn.utils.remove_weight_norm, or
    remove_parametrizations for the parametrize form): a weight-normalised nn.Linear (fairseq's `Linear`) computes
    with W = g * v / ||v||, recomputed into a plain attribute before every call, so that W can be neither read as a
    parameter (nor its gradient) nor written.  The forward is unchanged: the same W, now a registered parameter of
    the same shape as nn.Linear's, counted as the lesson's layer counts it.  Returns the weights so folded
    ("in_proj_q.weight"), which the report names: the module checked is no longer the module as written."""
    folded = []
    for path, mod in module.named_modules():
        for hook in [h for h in mod._forward_pre_hooks.values() if isinstance(h, WeightNorm)]:
            torch.nn.utils.remove_weight_norm(mod, hook.name)
            folded.append(f"{path}.{hook.name}" if path else hook.name)
        if parametrize.is_parametrized(mod):
            for name, plist in list(mod.parametrizations.items()):
                if all(type(p).__name__ == "_WeightNorm" for p in plist):
                    parametrize.remove_parametrizations(mod, name, leave_parametrized=True)
                    folded.append(f"{path}.{name}" if path else name)
    return folded


def _plain_tensor_attributes(module: nn.Module) -> list[str]:
    """Tensors stored as plain attributes (not parameters, not buffers): they do not follow .to() or state_dict.
    (Buffers and parameters live in _buffers/_parameters, so vars() shows only the plain ones.)"""
    found = []
    for name, mod in module.named_modules():
        for attr, value in vars(mod).items():
            # a 0-d tensor (a scale factor) is fine: PyTorch mixes CPU scalars with tensors on any device
            if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter) and value.dim() > 0:
                found.append(f"{name + '.' if name else ''}{attr}")
    return found


def _with_reference(module: nn.Module, made: dict) -> dict:
    """An untouched parameter's origin, with where its layer's class code reads the layer outside __init__
    (`referenced`: harness.child.references) when it does: unused on these inputs, not dead code."""
    where = references.referenced(module, made.get("path", "").rpartition(".")[0])
    return {**made, "referenced": where} if where else made


def _made_at(recorder: OriginRecorder, module: nn.Module) -> dict[str, dict]:
    """Path -> {"at", "code"}: the student's line that made each buffer, plain tensor attribute, parameter and tensor
    of a plain container, read from the recorder the module was built under."""
    out = {}
    for path, t, kind in _origin_tensors(module):
        where = recorder.origin(t, first=kind in WEIGHTS)
        if where is not None:
            out[path] = where
    return out


def _origin(where: dict, tensor_kind: tuple, path: str, n: int) -> dict:
    """A tensor's origin as the trace records it: where it was made, its path, what kind of tensor of the module it
    is, and for a buffer or attribute what its first n x n positions mark (a mask's pattern; a weight has none)."""
    t, kind = tensor_kind
    return {**where, "path": path, **({"kind": kind} if kind else {}),
            **({} if kind in WEIGHTS else {"nonzero": square_nonzero(t, n)})}


def _tensor_attributes(module: nn.Module) -> list[tuple[str, torch.Tensor]]:
    """The module's buffers and plain tensor attributes (not parameters), by their attribute path."""
    found = list(module.named_buffers())
    for name, mod in module.named_modules():
        for attr, value in vars(mod).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
                found.append((f"{name + '.' if name else ''}{attr}", value))
    return found


def _origin_tensors(module: nn.Module) -> list[tuple[str, torch.Tensor, str | None]]:
    """(path, tensor, kind) of every tensor whose making the constructor's line is noted for: buffers and plain
    tensor attributes (kind None), parameters ("parameter": the line that built a layer, `nn.Linear(d, d,
    bias=False)`, is where its construction goes wrong) and the tensors of plain lists, tuples and dicts
    ("container": `self.masks = {t: ...}`, path `masks[3]`), and the parameters of the layers of such a container
    ("unregistered": `self.projections = [nn.Linear(d, d) for _ in range(3)]`, path `projections[0].weight`)."""
    found = [(path, t, None) for path, t in _tensor_attributes(module)]
    found += [(path, p, "parameter") for path, p in module.named_parameters()]
    for name, mod in module.named_modules():
        for attr, value in vars(mod).items():
            if attr in _MODULE_INTERNALS or not isinstance(value, (dict, list, tuple)):
                continue
            items = list(value.items() if isinstance(value, dict) else enumerate(value))
            found += [(f"{name + '.' if name else ''}{attr}[{key!r}]", t, "container") for key, t in items
                      if isinstance(t, torch.Tensor) and not isinstance(t, nn.Parameter)]
            found += [(f"{name + '.' if name else ''}{attr}[{key!r}].{path}", p, "unregistered") for key, layer in items
                      if isinstance(layer, nn.Module) for path, p in layer.named_parameters()]  # a layer of a plain
            # list: its line is where the list was built
    return found


WEIGHTS = ("parameter", "unregistered")  # kinds of origin whose line is the layer's (`first`); no mask
_MODULE_INTERNALS = frozenset(vars(nn.Module()))  # _parameters, _buffers, _modules, hooks: nn.Module's own


def _unregistered_containers(module: nn.Module) -> list[str]:
    """Plain Python lists, tuples or dicts that hold modules or tensors: nn.Module does not register them, so
    .to(), .eval(), .parameters() and the state_dict never reach what is inside (heads in a list, masks in a dict)."""
    found = []
    for name, mod in module.named_modules():
        for attr, value in vars(mod).items():
            if attr in _MODULE_INTERNALS:
                continue
            items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
            if any(isinstance(v, (nn.Module, torch.Tensor)) for v in items):
                found.append(f"{name + '.' if name else ''}{attr}")
    return found


def main():
    """Single run: the protocol on the original stdin/stdout (kept private before any student code runs)."""
    chan_in, chan_out = _open_channel()
    gc.freeze()  # torch's and our objects, alive for the whole run, out of every collection's walk: the first full
    # collection (the student's code allocates, and builds trigger one) walked them all, 60 ms in the middle of a check
    chan_out.write(m.encode_batch([m.Ready()]))  # our imports are done; the student's time starts now
    Worker().serve(chan_in, chan_out)
    chan_out.flush()
    os._exit(0)


def serve_forked(channel_fd: int) -> None:
    """Batch grading: a child forked from the zygote serves one submission over a socket, then exits."""
    sock = socket.socket(fileno=channel_fd)
    stream = sock.makefile("rwb", buffering=0)
    try:
        Worker().serve(stream, stream)
    finally:
        os._exit(0)


if __name__ == "__main__":
    main()


def _has_complex(module: nn.Module) -> bool:
    """The module keeps a complex tensor (Meta llama's rotary `freqs_cis`)."""
    return any(t.is_complex() for t in (*module.parameters(), *module.buffers()))


def _unread_flags(module: nn.Module, signature) -> list[str]:
    """The constructor's causal flag (bound to True), when the module's classes only store it and never read it."""
    flag = signature.accepts.get("causal") if signature is not None else None
    try:
        return [flag] if flag and construct.unread_flag(module, flag) else []
    except Exception:  # noqa: BLE001 - source that cannot be read is no evidence
        return []


def _inert_masks(module: nn.Module, context_length: int) -> list[str]:
    """The registered buffers shaped as a mask over the context (their last two axes both the context length) that
    hold one value everywhere: a mask of the layer's own that hides nothing (eztransformer's all-True `bias` for
    recent_context=None).  With a plain call that computes unmasked attention, the evidence that the layer masks by
    itself and lets the future through, not that it leaves the mask to its caller (harness.engine.mapping)."""
    found = []
    if context_length < 2:
        return found
    for name, buf in module.named_buffers():
        try:
            square = buf.dim() >= 2 and tuple(buf.shape[-2:]) == (context_length, context_length)
            if square and not buf.is_meta and bool((buf == buf.reshape(-1)[0]).all()):
                found.append(name)
        except Exception:  # noqa: BLE001 - a buffer that cannot be compared is no evidence
            continue
    return found


def _unrecorded() -> bool:
    """No recorder is on (the trace's, the device run's, a line trail or a return hook): a trial forward under one
    would add its operations to what is recorded of the real call."""
    return torch._C._len_torch_function_stack() == 0 and sys.gettrace() is None and sys.getprofile() is None


def _runs_in_training_dtypes(module: nn.Module, args: tuple, kwargs: dict) -> bool:
    """Whether copies of `module` in float32 and in a half precision (bfloat16 or float16) run the call that raised
    in float64 (Sockeye's fill table has entries for those three only): then the failure is of mha-check's float64
    comparison, not evidence of a bug.  A layer that runs in float32 alone (corext: its float32 softmax meets half
    and double values alike) is wrong in the dtypes training uses, and its failure stands.  Asked only after a
    forward raised, on copies, so the module the checks use is untouched; anything that goes wrong is a no."""
    return _runs_as(module, args, kwargs, torch.float32) and any(
        _runs_as(module, args, kwargs, half) for half in (torch.bfloat16, torch.float16))


def _runs_as(module: nn.Module, args: tuple, kwargs: dict, dtype: torch.dtype) -> bool:
    """The same call in `dtype`: the same grad mode, and each input requiring grad, and a leaf or not, as the
    original (an in-place change of a leaf that requires grad raises in every dtype: no limit of ours)."""
    def cast(value):
        if not isinstance(value, torch.Tensor) or not value.is_floating_point():
            return value
        leaf = value.detach().to(dtype).requires_grad_(value.requires_grad)
        return leaf if value.is_leaf else leaf + torch.zeros_like(leaf)  # the training step's x + 0 (vjp)

    def cast_module(t: torch.Tensor) -> torch.Tensor:
        if t.is_complex():  # a rotary freqs_cis: complex64 beside any real dtype (no complex half on the CPU)
            return t.to(torch.complex64)
        return t.to(dtype) if t.is_floating_point() else t

    try:
        trial = copy.deepcopy(module)
        trial._apply(cast_module)
        with default_dtype(torch.float32):  # the grad mode of the call that raised
            result = trial(*(cast(a) for a in args), **{k: cast(v) for k, v in kwargs.items()})
        Worker._output(result)
        return True
    except BaseException:  # noqa: BLE001 - the student's code, any way it fails: no evidence of a limit of ours
        return False


def _to_float64(t: torch.Tensor) -> torch.Tensor:
    """float64 for real floating tensors, complex128 for complex ones (their values kept), others unchanged."""
    if t.is_complex():
        return t.to(torch.complex128)
    return t.to(torch.float64) if t.is_floating_point() else t


def _to_float32(t: torch.Tensor) -> torch.Tensor:
    """float32 for real floating tensors, complex64 for complex ones, others unchanged: a float32 configuration."""
    if t.is_complex():
        return t.to(torch.complex64)
    return t.to(torch.float32) if t.is_floating_point() else t
