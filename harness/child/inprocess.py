"""`InProcess`: a Subject's worker in a thread of this process, the real child-side code and the real protocol (a
socket, typed messages, strict decoding), without a process to start or a torch import to wait for:
`Subject(spec, start=InProcess())`.

ONLY for our own code (the reference and the mutants): the unit tests of the checks and mutation testing (where
mutmut's trampolines must run in the process that set MUTANT_UNDER_TEST) use it.  A student's code never runs here:
it would run beside the verdict, which is exactly what the child process exists to prevent.  Nothing in the trusted
side imports this module, and it imports nothing of the trusted side: it is a `harness.sandbox.subject.Start` by its
shape alone (a typing.Protocol), so the caller (a test) puts the two together (tests/unit/test_layers.py).
"""
from __future__ import annotations

import os
import socket
import threading

import torch

_CALLERS_DTYPE = torch.get_default_dtype()

from harness.child.worker import Worker  # noqa: E402 - sets float64 as the process's default dtype...

torch.set_default_dtype(_CALLERS_DTYPE)  # ...which is the caller's to choose: the worker thread sets its own


class InProcess:
    """`Start` (harness.sandbox.subject): the worker serves a socket pair from a daemon thread.  No walls, no Ready
    (nothing to import), no CPU time of its own; the slot and the scratch copy are the Subject's as for any child.
    The policy, the log and the limits are not applied: the thread shares this process."""

    announces_ready = False
    cpu = None

    def lent_slot(self) -> None:
        return None

    def start(self, policy, log, limits, allow_unconfined: bool) -> tuple[int, int, dict]:
        self.sock, self._theirs = socket.socketpair()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        return os.getpid(), self.sock.fileno(), {}  # no isolation record: nothing confines a thread

    def _serve(self) -> None:
        stream = self._theirs.makefile("rwb", buffering=0)
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)  # as in the child (the caller waits while the worker runs)
        try:
            Worker(own_process=False).serve(stream, stream)  # never hide the caller's packages from its imports
        except OSError:  # the caller hung up (a time-out shuts the socket): nobody is left to answer
            pass
        finally:
            torch.set_default_dtype(previous)
            stream.close()
            self._theirs.close()

    def send(self, data: bytes, deadline: float) -> None:
        self.sock.sendall(data)  # our own worker thread, which always reads

    def wait(self, timeout: float) -> int | None:
        self._thread.join(timeout)
        return None if self._thread.is_alive() else 0

    def kill(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def protections(self, limits) -> list[str]:
        return ["in-process worker (tests of our own code only)"]

    def close(self) -> None:
        self.sock.close()
