"""Nothing of ours outlives an mha-check command: its process adopts the processes it started that lose their parent,
and before it exits waits for every one of them (and kills those still there after a grace).

Why: `grade` in a container returned while the zygotes of its graders were still running (0.1 to 0.3 s measured on
this machine, 0.3 to 0.6 s in a trial): each grader exits, its zygote sees the end of its control socket and only
then ends.  A script that runs mha-check and then reads its results, removes its folders or ends the container must
find nothing of ours running (issue 27: the grader must not exit leaving processes).  The zygotes of the warm template
are the same: the template is killed at the end of a batch, and its zygotes, and the meta template's, die with it
(harness.child.zygote) as the command's children, which it must reap.

How: PR_SET_CHILD_SUBREAPER on the command's process (`adopt`, at its start): a process below it whose parent ends
becomes its child, wherever it runs, without a namespace or a capability (so in a container without CAP_SYS_ADMIN
too).  `settle`, at its end, reaps every child that was not there when it adopted, waiting up to SETTLE_SECONDS for
them to end on their own (a zygote ends once its grader is gone), then kills what is left (SIGKILL), again until
none is left: a killed child's own children become ours in turn.  A child is never killed by a pid that could have
been reused: a child's pid stays ours until we reap it.  The processes a submission leaves behind are killed as
before, by their slot's uid, before each verdict (`harness.sandbox.scratch.kill_leftovers`): this is for our own.
"""
from __future__ import annotations

import os
import signal
import sys
import time

from harness.sandbox import syscalls as linux

SETTLE_SECONDS = 10.0  # for our processes to end on their own (a zygote's end: 0.1 s; many on a loaded machine: more)
KILL_SECONDS = 10.0  # then for the killed ones to be gone

_BEFORE: set[int] | None = None  # the children this process had when it adopted (None: it has not adopted)


def adopt() -> bool:
    """Make this process the one its orphaned descendants come back to; once (the first call) per process.  Only
    for the process of an mha-check command (harness.frontends.cli.main): `settle` takes every child it did not
    have when it adopted for one of the command's.  False where the kernel refuses it (then settle waits for its
    own children alone)."""
    global _BEFORE

    if _BEFORE is not None:
        return True
    _BEFORE = set(linux.children())
    try:
        return linux.prctl(linux.PR_SET_CHILD_SUBREAPER, 1) == 0
    except OSError:
        return False


def settle(grace: float = SETTLE_SECONDS) -> list[int]:
    """Wait for every process the command started (our children since `adopt`) to end; kill what is left after
    `grace` seconds.  Returns the pids killed.  Nothing to do in a process that has not adopted."""
    if _BEFORE is None:
        return []
    killed: list[int] = []
    gentle = time.monotonic() + grace
    hard = gentle + KILL_SECONDS
    while True:
        kids = _reap_and_list()
        now = time.monotonic()
        if not kids:
            return killed
        if now >= hard:
            print(f"mha-check: warning: {len(kids)} of mha-check's own processes did not end when killed "
                  f"(pids {', '.join(map(str, kids[:10]))})", file=sys.stderr)
            return killed
        if now >= gentle:
            for pid in kids:
                try:
                    os.kill(pid, signal.SIGKILL)  # our child, not yet reaped: its pid cannot be someone else's
                    killed.append(pid)
                except ProcessLookupError:
                    pass
        linux.until_exited(kids[0], min(now + 0.1, gentle) if now < gentle else now + 0.05, fallback=0.01)


def _reap_and_list() -> list[int]:
    """Our children since `adopt` that are still running, the ended ones reaped."""
    alive = []
    for pid in linux.children():
        if pid in _BEFORE:
            continue
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # reaped meanwhile (by its Popen)
            continue
        if not done:
            alive.append(pid)
    return alive
