"""A Subject whose worker runs in a thread of the test process: the real child-side code and the real protocol (a
socket, typed messages, strict decoding), without a process to start.  Only for our own code (the reference and
the mutants), never for anything hostile: unit tests of the checks and the engine use it to run in milliseconds.
"""
from __future__ import annotations

import os
import socket
import threading

import torch

from harness.child.worker import Worker
from harness.sandbox.subject import Subject

torch.set_default_dtype(torch.float32)  # importing the worker set float64 for the whole process: undo it here


class InProcessSubject(Subject):
    def _spawn(self) -> None:
        ours, theirs = socket.socketpair()
        self.sock, self._theirs = ours, theirs
        self._out_fd = ours.fileno()
        self.pid = os.getpid()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        stream = self._theirs.makefile("rwb", buffering=0)
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)  # as in the child (the caller waits while the worker runs)
        try:
            Worker().serve(stream, stream)
        finally:
            torch.set_default_dtype(previous)
            stream.close()
            self._theirs.close()

    def _send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _wait(self, timeout: float) -> int | None:
        self._thread.join(timeout)
        return None if self._thread.is_alive() else 0

    def _alive(self) -> bool:
        return self._thread.is_alive()

    def _kill(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def protections(self) -> list[str]:
        return ["in-process worker (tests of our own code only)"]

    def close(self) -> None:
        super().close()
        self.sock.close()
