"""Batch grading with one warm torch import: `Zygote` (the template process) and `ForkedSubject` (a Subject whose
worker is forked from it instead of started from scratch, which saves the ~1 s torch import per submission)."""
from __future__ import annotations

import contextlib
import json
import queue
import os
import socket
import subprocess
import sys
import threading

from harness import PACKAGES_ROOT

from harness.sandbox import limits as sandbox
from harness.sandbox.subject import Subject


class ZygoteError(RuntimeError):
    """The template process itself failed (our problem, not a submission's)."""


class Zygote:
    def __init__(self, limits: sandbox.Limits | None = None):
        self.limits = limits or sandbox.Limits()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        root = PACKAGES_ROOT
        boot = (f"import sys; sys.path.insert(0, {root!r}); import harness.child.zygote as z; "
                f"z.main({theirs.fileno()})")
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0")
        self.proc = subprocess.Popen(sandbox.wrap_network_only([sys.executable, "-I", "-c", boot]),
                                     pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, env=env,
                                     start_new_session=True)
        theirs.close()
        self.control = ours
        self._lock = threading.Lock()  # one request at a time on the control socket, whatever thread asks
        self.info = self.request({"op": "hello"})

    def request(self, message: dict, fds=()) -> dict:
        try:
            with self._lock:
                socket.send_fds(self.control, [json.dumps(message).encode()], list(fds))
                data = self.control.recv(1 << 16)
        except OSError as e:
            raise ZygoteError(f"the grading template process failed: {e}") from None
        if not data:
            raise ZygoteError(f"the grading template process ended (status {self.proc.poll()})")
        return json.loads(data)

    def spawn(self, channel_fd: int, log_fd: int, cwd: str, limits: sandbox.Limits) -> int:
        return int(self.request({"op": "spawn", "cwd": cwd, "limits": limits.to_dict()},
                                (channel_fd, log_fd))["pid"])

    def wait(self, pid: int, timeout: float) -> int | None:
        return self.request({"op": "wait", "pid": pid, "timeout": timeout}).get("status")

    def close(self) -> None:
        try:
            self.request({"op": "bye"})
        except ZygoteError:
            pass
        self.control.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class ZygotePool:
    """Several zygotes for several threads.  A zygote serves one submission at a time: when a submission's child
    ends it kills every other child it has (the submission's leftovers), so two threads must never share one."""

    def __init__(self, count: int, limits: sandbox.Limits | None = None):
        self.free: queue.Queue = queue.Queue()
        self.all = [Zygote(limits) for _ in range(count)]
        for z in self.all:
            self.free.put(z)

    @contextlib.contextmanager
    def take(self):
        zygote = self.free.get()
        try:
            yield zygote
        finally:
            self.free.put(zygote)

    def close(self) -> None:
        for z in self.all:
            z.close()


class ForkedSubject(Subject):
    """A Subject whose worker is forked from a warm `Zygote`."""

    def __init__(self, zygote: Zygote, spec: str, **kwargs):
        self.zygote = zygote
        self._status: int | None = None
        super().__init__(spec, **kwargs)

    def _spawn(self) -> None:
        ours, theirs = socket.socketpair()
        try:
            self.pid = self.zygote.spawn(theirs.fileno(), self.log.fileno(), self.scratch, self.limits)
        finally:
            theirs.close()
        self.sock = ours
        self._out_fd = ours.fileno()

    def _send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _wait(self, timeout: float) -> int | None:
        if self._status is None:
            self._status = self.zygote.wait(self.pid, timeout)
        return self._status

    def _alive(self) -> bool:
        return self._wait(0) is None

    def protections(self) -> list[str]:
        out = list(super().protections())
        if self.zygote.info.get("subreaper"):
            out.append("leftover processes killed after the submission (child subreaper)")
        return out

    def close(self) -> None:
        super().close()
        self.sock.close()
