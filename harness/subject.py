"""Trusted side: the student's module as seen from outside, through a child process.

`Subject` starts `python -I -m harness.worker`, sends requests and parses the replies strictly.  `Instance` is one
built module in the child.  Nothing here imports torch or the student's code; errors raised by student code come
back as `TargetFailure` carrying the child's one-line summary.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass

import numpy as np

from harness import protocol
from harness.config import Config

STDERR_CAP = 64 * 1024


class TargetFailure(Exception):
    """The student's code raised (or the child died) while doing what was asked."""

    def __init__(self, stage: str, message: str):
        super().__init__(message)
        self.stage, self.message = stage, message


class WorkerDied(TargetFailure):
    pass


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

    def call(self, op: str, arrays=None, **header) -> tuple[dict, dict]:
        return self.subject.call(op, arrays, handle=self.handle, **header)

    def forward(self, x: np.ndarray, mode: str = "eval", noncontig: bool = False, want_x_after: bool = False):
        head, arr = self.call("forward", {"x": x}, mode=mode, noncontig=noncontig, want_x_after=want_x_after)
        return (arr["y"], arr.get("x_after")) if want_x_after else arr["y"]

    def vjp(self, x: np.ndarray, gy: np.ndarray, mode: str = "eval"):
        head, arr = self.call("vjp", {"x": x, "gy": gy}, mode=mode, layout=self.layout)
        return head, arr

    def jacobian(self, x: np.ndarray, r: np.ndarray):
        return self.call("jacobian", {"x": x, "r": r})

    def read_weights(self, layout: int) -> dict[str, np.ndarray]:
        return self.call("read", layout=layout)[1]

    def write_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Transplant, every time: the student's forward may have changed its own parameters since."""
        self.call("write", weights, layout=self.layout)

    def meta_forward(self, shape) -> dict:
        return self.call("meta", shape=list(shape))[0]


class Subject:
    """One child process running one target."""

    def __init__(self, spec: str, overrides: dict | None = None, seed: int = 0, cwd: str | None = None,
                 weight_map: dict | None = None):
        self.spec, self.overrides, self.seed = spec, overrides or {}, seed
        self.weight_map = weight_map or {}
        self.log = tempfile.TemporaryFile()
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0")
        self.proc = subprocess.Popen(
            worker_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, cwd=cwd, env=env,
        )
        self._builds: dict[tuple, Instance] = {}
        self.loaded: dict | None = None

    def call(self, op: str, arrays=None, **header) -> tuple[dict, dict]:
        try:
            self.proc.stdin.write(protocol.encode({"op": op, **header}, arrays))
            self.proc.stdin.flush()
            reply, out = protocol.decode(self.proc.stdout)
        except (EOFError, BrokenPipeError, protocol.ProtocolError) as e:
            code = self.proc.wait()
            raise WorkerDied("crash", f"the process running your code ended (exit status {code}) during {op}: "
                                      f"{e}; its last output: {self.stderr_tail(400)!r}") from None
        if "error" in reply:
            err = reply["error"]
            raise TargetFailure(str(err.get("stage", "?")), str(err.get("message", ""))[:4000])
        return reply, out

    def load(self) -> dict:
        if self.loaded is None:
            self.loaded = self.call("load", spec=self.spec, overrides=self.overrides,
                                    weight_map=self.weight_map)[0]
        return self.loaded

    def build(self, cfg: Config, force_dropout: float = 0.0) -> Instance:
        """Build (once per constructor configuration) the student's module in the child."""
        key = cfg.ctor_key() + (force_dropout,)
        if key not in self._builds:
            info, _ = self.call("build", cfg=cfg.to_dict(), seed=self.seed, force_dropout=force_dropout)
            self._builds[key] = Instance(self, cfg, info)
        return self._builds[key]

    def stderr_tail(self, n: int = 2000) -> str:
        self.log.seek(0, os.SEEK_END)
        size = self.log.tell()
        self.log.seek(max(0, size - n))
        return self.log.read().decode("utf-8", "replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.call("bye")
            except TargetFailure:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


def worker_command() -> list[str]:
    """`python -I` (no cwd, no PYTHONPATH on sys.path: a student's harness.py cannot shadow ours), with the folder our
    own packages came from put first explicitly."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(protocol.__file__)))
    boot = f"import sys; sys.path.insert(0, {root!r}); import harness.worker as w; w.main()"
    return [sys.executable, "-I", "-c", boot]
