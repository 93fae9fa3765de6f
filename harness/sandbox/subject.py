"""Trusted side: the student's module as seen from outside, through a sandboxed child process.

`Subject` starts the worker (`python -I`, in a new session, under resource limits, in a throwaway folder, and in
private PID and network namespaces where the machine allows), sends requests and parses the replies strictly,
each under a wall-clock deadline.  `Instance` is one built module in the child.  Nothing here imports torch or the
student's code; errors raised by student code come back as `TargetFailure`; a child that hangs, dies or exceeds
a limit becomes a `WorkerDied` whose `kind` says which.
"""
from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

import numpy as np

from harness import PACKAGES_ROOT

from harness.wire import protocol
from harness.sandbox import limits as sandbox
from harness.wire.config import Config

MEMORY_WORDS = ("MemoryError", "can't allocate memory", "not enough memory", "out of memory", "bad_alloc")


class TargetFailure(Exception):
    """The student's code raised (or the child died) while doing what was asked."""

    def __init__(self, stage: str, message: str):
        super().__init__(message)
        self.stage, self.message = stage, message

    @property
    def kind(self) -> str:
        return "memory" if any(w in self.message for w in MEMORY_WORDS) else "raised"


class WorkerDied(Exception):
    """The child is gone: `kind` is time, cpu, memory, output, channel, crash or exit.  Deliberately not a TargetFailure: a check
    that expects the student's code to raise must never mistake a dead process for an answer."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind, self.message, self.stage = kind, message, "process"


@dataclass
class Instance:
    subject: "Subject"
    cfg: Config
    info: dict
    layout: int | None = None  # the layout index chosen by the proof

    @property
    def handle(self) -> int:
        return self.info["handle"]

    @property
    def layouts(self) -> list[dict]:
        return self.info["layouts"]

    def __post_init__(self):
        self._pending: dict | None = None  # weights to write with the next request (saves a round trip)

    def call(self, op: str, arrays=None, **header) -> tuple[dict, dict]:
        return self.calls([(op, arrays, header)])[0]

    def calls(self, requests) -> list[tuple[dict, dict]]:
        """Several requests on this instance in one round trip (with any pending weight transplant first)."""
        requests = [(op, arrays, {**header, "handle": self.handle}) for op, arrays, header in requests]
        if self._pending is not None:
            requests.insert(0, ("write", self._pending, {"handle": self.handle, "layout": self.layout}))
            self._pending = None
            return self.subject.multi(requests)[1:]
        return self.subject.multi(requests) if len(requests) > 1 else [self.subject.call(requests[0][0],
                                                                                         requests[0][1],
                                                                                         **requests[0][2])]

    def forward(self, x: np.ndarray, mode: str = "eval", noncontig: bool = False, want_x_after: bool = False):
        head, arr = self.call("forward", {"x": x}, mode=mode, noncontig=noncontig, want_x_after=want_x_after)
        y = _array(arr, "y")
        return (y, arr.get("x_after")) if want_x_after else y

    def forward_many(self, xs: list[np.ndarray], mode: str = "eval") -> list[np.ndarray]:
        """Forward passes of several inputs in one round trip."""
        replies = self.calls([("forward", {"x": x}, {"mode": mode}) for x in xs])
        return [_array(arr, "y") for _, arr in replies]

    def vjp(self, x: np.ndarray, gy: np.ndarray, mode: str = "eval"):
        return self.call("vjp", {"x": x, "gy": gy}, mode=mode, layout=self.layout)

    def jacobian(self, x: np.ndarray, r: np.ndarray):
        return self.call("jacobian", {"x": x, "r": r})

    def read_weights(self, layout: int) -> dict[str, np.ndarray]:
        return self.call("read", layout=layout)[1]

    def write_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Transplant before the next request, every time: the student's forward may have changed its own
        parameters since the last one."""
        self._pending = dict(weights)

    def meta_forward(self, shape) -> dict:
        return self.call("meta", shape=list(shape))[0]

    def trace(self, x: np.ndarray, limit: int = 400) -> dict:
        """Every torch operation of one forward pass, recorded in the child (see Worker.op_trace)."""
        return self.call("trace", {"x": x}, limit=limit)[0]

    def influence(self, x: np.ndarray, r: np.ndarray) -> np.ndarray | None:
        """(B, n, n) gradient norms |d (r . y[b, t]) / d x[b, s]| (None when the output has no autograd graph or
        the wrong shape); computed from `jacobian` in this process."""
        head, arrays = self.jacobian(x, r)
        return influence_from_jacobian(arrays["jac"]) if "jac" in arrays else None


def influence_from_jacobian(jac: np.ndarray) -> np.ndarray:
    """(B, n, B, n, d_in) Jacobian -> (B, t, s) gradient norms within each sequence."""
    return np.stack([np.linalg.norm(jac[b, :, b], axis=-1) for b in range(jac.shape[0])])


def _array(arrays: dict, name: str) -> np.ndarray:
    """A reply's array, float64, or a clear failure when the child did not send it."""
    if name not in arrays or arrays[name].dtype != np.float64:
        raise TargetFailure("forward", f"no float output came back ({name})")
    return arrays[name]


class _DeadlineReader:
    """A pipe read with a deadline: a child that stops answering is a time-out, not a hung grader."""

    def __init__(self, fd: int, deadline: float):
        self.fd, self.deadline = fd, deadline

    def read(self, n: int) -> bytes:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0 or not select.select([self.fd], [], [], remaining)[0]:
            raise TimeoutError
        return os.read(self.fd, min(n, 1 << 20))


class Subject:
    """One sandboxed child process running one target."""

    def __init__(self, spec: str, overrides: dict | None = None, seed: int = 0, cwd: str | None = None,
                 weight_map: dict | None = None, limits: sandbox.Limits | None = None):
        self.spec, self.overrides, self.seed = spec, overrides or {}, seed
        self.weight_map = weight_map or {}
        self.limits = limits or sandbox.Limits()
        self.search_dir = os.path.abspath(cwd or os.getcwd())
        self.scratch = tempfile.mkdtemp(prefix="mha-check-")
        self.log = tempfile.TemporaryFile()
        self.started = time.monotonic()
        self._spawn()
        self._builds: dict[tuple, Instance] = {}
        self.loaded: dict | None = None
        self.dead: WorkerDied | None = None

    def _spawn(self) -> None:
        """Start the worker: a fresh interpreter in the sandbox (the batch pool forks it from a warm zygote)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0", HOME=self.scratch,
                   TMPDIR=self.scratch)
        self.proc = subprocess.Popen(
            sandbox.wrap(worker_command()), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
            cwd=self.scratch, env=env, start_new_session=True, preexec_fn=sandbox.preexec(self.limits),
        )
        self.pid = self.proc.pid
        self._out_fd = self.proc.stdout.fileno()

    def _send(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def _wait(self, timeout: float) -> int | None:
        """The worker's exit status (negative: killed by that signal), or None if it is still running."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def _alive(self) -> bool:
        return self.proc.poll() is None

    def call(self, op: str, arrays=None, **header) -> tuple[dict, dict]:
        if self.dead:
            raise self.dead
        now = time.monotonic()
        deadline = min(now + self.limits.call_seconds, self.started + self.limits.total_seconds)
        try:
            self._send(protocol.encode({"op": op, **header}, arrays))
            reply, out = protocol.decode(_DeadlineReader(self._out_fd, deadline))
        except TimeoutError:
            self._kill()
            total = deadline >= self.started + self.limits.total_seconds
            limit = f"{self.limits.total_seconds:g} s in all" if total else f"{self.limits.call_seconds:g} s"
            self.dead = WorkerDied("time", f"time limit: your code did not finish {op} within {limit} "
                                           "(an endless loop, a sleep, or far too much work)")
            raise self.dead from None
        except (EOFError, BrokenPipeError, OSError, protocol.ProtocolError) as e:
            self.dead = self._classify_death(op, e)
            raise self.dead from None
        if not isinstance(reply, dict):
            raise TargetFailure("protocol", "malformed reply")
        if "error" in reply:
            err = reply["error"] if isinstance(reply["error"], dict) else {}
            self._raise(err)
        return reply, out

    def _raise(self, err: dict):
        """The student's code raised: a TargetFailure, or a memory-limit death when it ran out of memory."""
        failure = TargetFailure(str(err.get("stage", "?"))[:40], str(err.get("message", ""))[:4000])
        if failure.kind == "memory":
            self._kill()
            self.dead = WorkerDied("memory", f"memory limit: your code tried to use more than "
                                             f"{self.limits.memory_mb} MB ({failure.message[:300]})")
            raise self.dead
        raise failure

    def multi(self, requests) -> list[tuple[dict, dict]]:
        """[(op, arrays, header), ...] in one round trip; raises TargetFailure for the first request that failed."""
        arrays = {f"{i}:{k}": v for i, (_, arr, _) in enumerate(requests) for k, v in (arr or {}).items()}
        calls = [{"op": op, **header} for op, _, header in requests]
        reply, out = self.call("multi", arrays, calls=calls)
        replies = reply.get("replies", [])
        results = []
        for i, r in enumerate(replies if isinstance(replies, list) else []):
            if not isinstance(r, dict):
                raise TargetFailure("protocol", "malformed reply")
            if "error" in r:
                self._raise(r["error"] if isinstance(r["error"], dict) else {})
            results.append((r, {k.split(":", 1)[1]: v for k, v in out.items() if k.startswith(f"{i}:")}))
        if len(results) != len(requests):
            raise TargetFailure("protocol", "the child answered fewer requests than were sent")
        return results

    def _classify_death(self, op: str, error: Exception) -> WorkerDied:
        if isinstance(error, protocol.ProtocolError):  # garbage on the channel: no answer can be trusted now
            self._kill()
            return WorkerDied("channel", f"your code corrupted the channel to mha-check during {op} ({error}): "
                                         "it writes to file descriptors it does not own")
        code = self._wait(5)
        if code is None:  # the channel closed but the process lives on
            self._kill()
            return WorkerDied("crash", f"your code closed its channel to mha-check during {op} ({error})")
        self._kill()
        sig = -code if code < 0 else code - 128 if code > 128 else 0
        tail = self.stderr_tail(300).strip().splitlines()[-1:] or [""]
        if sig == signal.SIGXCPU:
            return WorkerDied("cpu", f"CPU time limit ({self.limits.cpu_seconds} s) exceeded during {op}")
        if sig == signal.SIGXFSZ:
            return WorkerDied("output", f"your code wrote more than {self.limits.file_mb} MB (to a file or to "
                                        f"stdout/stderr) during {op}")
        if sig:
            name = signal.Signals(sig).name if sig in signal.Signals.__members__.values() else str(sig)
            return WorkerDied("crash", f"the process running your code crashed with signal {name} during {op}"
                                       f" (last output: {tail[0][:200]!r})")
        return WorkerDied("exit", f"the process running your code exited (status {code}) during {op} without "
                                  f"answering: sys.exit / os._exit in your code? (last output: {tail[0][:200]!r})")

    def _kill(self) -> None:
        """The whole process group, and with it (PID namespace) everything the child started."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self._wait(5)

    def load(self) -> dict:
        if self.loaded is None:
            self.loaded = self.call("load", spec=self.spec, overrides=self.overrides, weight_map=self.weight_map,
                                    search_dir=self.search_dir)[0]
        return self.loaded

    def build(self, cfg: Config, force_dropout: float = 0.0) -> Instance:
        """Build (once per constructor configuration) the student's module in the child."""
        key = cfg.ctor_key() + (force_dropout,)
        if key not in self._builds:
            info, _ = self.call("build", cfg=cfg.to_dict(), seed=self.seed, force_dropout=force_dropout)
            self._builds[key] = Instance(self, cfg, info)
        return self._builds[key]

    def stderr_tail(self, n: int = 2000) -> str:
        try:
            self.log.seek(0, os.SEEK_END)
            size = self.log.tell()
            self.log.seek(max(0, size - n))
            return self.log.read().decode("utf-8", "replace")
        except (ValueError, OSError):
            return ""

    def protections(self) -> list[str]:
        return sandbox.protections(self.limits, throwaway_cwd=True)

    def close(self) -> None:
        if self._alive() and not self.dead:
            try:
                self.call("bye")
            except (TargetFailure, WorkerDied):
                pass
        self._kill()
        self.log.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


def worker_command() -> list[str]:
    """`python -I` (no cwd, no PYTHONPATH on sys.path: a student's harness.py cannot shadow ours), with the folder our
    own packages came from put first explicitly."""
    root = PACKAGES_ROOT
    boot = f"import sys; sys.path.insert(0, {root!r}); import harness.child.worker as w; w.main()"
    return [sys.executable, "-I", "-c", boot]
