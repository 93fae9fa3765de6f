"""Exceptions that are a limit of torch on this machine, not a mistake in the student's code.

mha-check runs every layer on the CPU in float64, and on PyTorch's meta device for mask-buffer.  Some correct code
cannot run there: FlexAttention has no backward on the CPU and refuses the meta device, an operator may have no
kernel for a backend ("Could not run 'aten::...' with arguments from the 'Meta' backend"), and Dynamo, which
FlexAttention and torch.compile use, may not trace under mha-check's recorders ("Unsupported").  On a GPU, as
written, the same code runs.  Such an exception is reported as *cannot tell*, naming the limit, never as a failing
check.  The evidence is where and what: raised inside torch's own files (or by its dispatcher), of a kind that says
"not on this device/backend", never from the student's file and never the `forward` a module forgot to define.
"""
from __future__ import annotations

import os
import re
import sys
import traceback

import torch

from harness.child.target import safe_message, safe_type_name, student_frames

TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
PLATFORM_WORDS = re.compile(r"\b(cpu|cuda|meta|device|devices|backend|backward)\b", re.IGNORECASE)
UNSUPPORTED_WORDS = re.compile(r"(not support|only support|not supported|not implemented)", re.IGNORECASE)


def _dynamo_unsupported(kind: type) -> bool:
    exc_module = sys.modules.get("torch._dynamo.exc")  # imported by torch once Dynamo has run, and only then
    unsupported = getattr(exc_module, "Unsupported", None) if exc_module is not None else None
    return isinstance(unsupported, type) and issubclass(kind, unsupported)


def is_torch_limit(exc: BaseException) -> bool:
    """Whether `exc`, raised while running the student's code, is a limit of torch here (see the module docstring).
    Read without running any of the student's code: no __str__, no __class__, no metaclass of theirs."""
    kind = type(exc)
    if _dynamo_unsupported(kind):
        return True
    tb = BaseException.__dict__["__traceback__"].__get__(exc)
    frames = traceback.extract_tb(tb) if tb is not None else []
    last = frames[-1] if frames else None
    if last is not None and last.name == "_forward_unimplemented":  # the class has no forward: the student's
        return False
    text = safe_message(exc)
    not_implemented = issubclass(kind, NotImplementedError)
    if not_implemented and text.startswith("Could not run '") and "backend" in text:
        return True  # the dispatcher: no kernel of this operator for this backend (Meta, CPU)
    inside = last is not None and os.path.abspath(last.filename).startswith(TORCH_DIR)
    return inside and bool(PLATFORM_WORDS.search(text)) and (not_implemented or bool(UNSUPPORTED_WORDS.search(text)))


def summary(exc: BaseException, filename: str | None) -> str:
    """The limit in a line or two: its kind, the start of torch's message (Dynamo's runs to pages), and the
    student's line that met it."""
    text = " ".join(safe_message(exc).split())
    text = text if len(text) <= 300 else text[:300] + " ..."
    tb = BaseException.__dict__["__traceback__"].__get__(exc)
    where = student_frames(tb, filename) if tb is not None else ""
    return f"{safe_type_name(exc)}: {text}" + (f" (at {where})" if where else "")
