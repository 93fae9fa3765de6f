"""What can go wrong on the other side of the boundary, as the trusted side sees it.

Different things, never confused, because they lead to different outcomes:

- `TargetFailure`: the student's code raised (at import, construction, forward, backward...): evidence of a bug.
- `CannotDrive`: mha-check could not call the student's code the way it needs (cannot tell, with what would help).
- `HarnessFailure`: mha-check's own code in the child failed: our problem, never the student's (cannot tell).
- `WorkerDied`: the child is gone (time or memory limit, crash, exit, corrupted channel); `kind`, a `ChildEnd`, says
  which, and `ours` whether it was one of mha-check's limits (cannot tell) or something the code did (a failure).
"""
from __future__ import annotations

from harness.wire.status import StrEnum

MEMORY_WORDS = ("MemoryError", "can't allocate memory", "not enough memory", "out of memory", "bad_alloc")
OUTPUT_WORDS = ("File too large", "[Errno 27]")  # a write past the file-size limit (the captured output counts)
DISK_FULL_WORDS = ("No space left on device", "[Errno 28]", "Disk quota exceeded", "[Errno 122]")  # the machine's
# disk, not the code: full, maybe by another submission of the batch (a red team's made a classmate's print fail)


class ChildEnd(StrEnum):
    """How the child running the student's code ended: one of a few fixed codes, documented here once (as isolate's
    meta file does).  Written as its word in the report's adapter.process (`"kind"`) and the summary's `process`.

    A limit of mha-check's (`is_limit`): the code may be right, only slow or large.  DISK: its folder holds more than
    its budget, where no filesystem of its own bounds it.  KILLED: a signal from outside the process (SIGKILL beyond
    the CPU limit, SIGTERM, SIGINT, ...), or a process found stopped (SIGSTOP) at the time limit: sent by the code to
    itself, or by an operator, the OOM killer or a container runtime.  The check is then run once more in a fresh
    process: KILLED_OUTSIDE when that run gives its result (not the code's doing), KILLED again when it is killed
    again (the code's: it happens every time)."""

    TIME = "time"
    CPU = "cpu"
    MEMORY = "memory"
    OUTPUT = "output"
    DISK = "disk"
    STARTUP = "startup"  # our worker died or stalled before any code of the student's ran
    CHANNEL = "channel"  # the code corrupted the channel to mha-check
    CRASH = "crash"  # a signal of the code's own making (SIGSEGV, SIGABRT, ...)
    KILLED = "killed"
    KILLED_OUTSIDE = "killed-outside"
    EXIT = "exit"  # the process exited without answering
    INTERRUPTED = "interrupted"  # mha-check itself was stopped (Ctrl-C, a grader stopped) while the child worked
    GRADER_ERROR = "grader error"  # a batch's grading process broke on the submission (never a WorkerDied)

    @property
    def is_limit(self) -> bool:
        """One of mha-check's limits was reached: the code may be correct, only slow or large."""
        return self in (ChildEnd.TIME, ChildEnd.CPU, ChildEnd.MEMORY, ChildEnd.OUTPUT, ChildEnd.DISK)

    @property
    def is_ours(self) -> bool:
        """Not held against the code (cannot tell): a limit, our own worker or process, or a kill from outside."""
        return self.is_limit or self in (ChildEnd.STARTUP, ChildEnd.KILLED_OUTSIDE, ChildEnd.INTERRUPTED,
                                         ChildEnd.GRADER_ERROR)

    @property
    def ends_run(self) -> bool:
        """Nothing more is asked of the code after it (no fresh child for the checks left)."""
        return self.is_limit or self in (ChildEnd.STARTUP, ChildEnd.CHANNEL, ChildEnd.INTERRUPTED,
                                         ChildEnd.GRADER_ERROR)


class TargetFailure(Exception):
    """The student's code raised while doing what was asked."""

    def __init__(self, stage: str, message: str):
        super().__init__(message)
        self.stage, self.message = stage, message

    @property
    def out_of_memory(self) -> bool:
        return any(w in self.message for w in MEMORY_WORDS)

    @property
    def over_output_limit(self) -> bool:
        return any(w in self.message for w in OUTPUT_WORDS)

    @property
    def disk_full(self) -> bool:
        return any(w in self.message for w in DISK_FULL_WORDS)


class HarnessFailure(Exception):
    """mha-check's own code failed in the child (a bug of ours, or our worker damaged by the code it runs)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


PLATFORM_MARK = "a limit of torch on this machine, not a mistake in your code: "  # how the child says it
PLATFORM_HELP = ("nothing to change in your code for this: mha-check runs it on the CPU (and on PyTorch's meta device "
                 "for mask-buffer), where torch cannot do this; the checks that do not need it decide")


SIZE_MARK = "a limit of mha-check's, not a mistake in your code: "  # a module larger than mha-check reads
SIZE_HELP = ("nothing is wrong with a module this large, only with checking it: one parameter holding many values, "
             "rather than one parameter each, lets mha-check read it")


HISTORY_MARK = "in backward, as your module keeps autograd history from one call to the next: "  # see the child's vjp
HISTORY_FIX = ("Keep no graph in the module between calls: write the cache with detached tensors "
               "(`self.cache_k[:b, start:start + n] = k.detach()`) and attend over the cached keys before this call "
               "joined with this call's own, `torch.cat([self.cache_k[:b, :start], k], dim=1)`, or fill the cache only "
               "when decoding, under torch.no_grad().")


DTYPE_MARK = "a limit of mha-check's float64 comparison, not a mistake in your code: "  # see the child's float32 trial
DTYPE_HELP = ("mha-check compares your layer with the reference in float64 (as torch.autograd.gradcheck does); a layer "
              "that works only in float32 cannot be checked that way: make it work in any floating dtype, e.g. a fill "
              "of float('-inf') or torch.finfo(scores.dtype).min rather than a value by dtype, and tensors made in "
              "forward with dtype=x.dtype")


def limit_help(e: "CannotDrive") -> str | None:
    """The help for a limit of torch's or of mha-check's that a `CannotDrive` carries, or None for any other."""
    if e.platform:
        return PLATFORM_HELP
    if e.too_large:
        return SIZE_HELP
    if e.message.startswith(DTYPE_MARK):
        return DTYPE_HELP
    return None


class CannotDrive(Exception):
    """mha-check could not drive the module: a constructor argument it cannot bind, a forward that needs more than
    `x` and a mask, settings read from module-level globals, or a limit of torch where mha-check runs the code (no
    CPU backward, no meta-device kernel: `platform`, see harness.child.torch_limits).  Never the student's failure:
    `help` says the one option that would let mha-check tell (--arg, --map, a factory)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    @property
    def platform(self) -> bool:
        return self.message.startswith(PLATFORM_MARK)

    @property
    def too_large(self) -> bool:
        return self.message.startswith(SIZE_MARK)


class WorkerDied(Exception):
    """The child is gone: `kind` says how (a `ChildEnd`; its word is accepted and checked).  Deliberately not a
    TargetFailure: a check that expects the student's code to raise must never mistake a dead process for one.
    `op`: what the child was doing ("load": importing the student's file), where known."""

    def __init__(self, kind: ChildEnd | str, message: str, op: str = ""):
        super().__init__(message)
        self.kind, self.message, self.stage, self.op = ChildEnd(kind), message, "process", op

    @property
    def ours(self) -> bool:
        """One of mha-check's limits was reached (the code may be correct, only slow or large), or our own worker
        never got as far as the student's code, or the code was killed from outside."""
        return self.kind.is_ours
