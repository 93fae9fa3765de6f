"""The warm template of a batch: one process that imports torch once and forks a zygote for every grader that asks
(`harness.child.zygote.template`; `harness.sandbox.pool.Zygote` asks).  Its own module, with nothing heavier than
the standard library to import, so that `mha-check grade` can start it first thing, while the rest of mha-check
imports (`harness.frontends.cli`).
"""
from __future__ import annotations

import os
import socket
import subprocess
import tempfile

from harness.sandbox import isolation
from harness.sandbox.policy import clean_env
from harness.wire import names

TEMPLATE_VARIABLE = "MHA_CHECK_TEMPLATE"  # the path of a listening `Template(address=...)` for single runs
# glibc's malloc asks for transparent huge pages (glibc 2.35 and later; ignored before): most of torch's 180 MB of
# heap then sits in 2 MB pages, whose page-table entries a fork copies 512 at a time (see zygote._huge_pages)
HUGE_PAGE_MALLOC = "glibc.malloc.hugetlb=1"


def launch(entry: str, theirs: socket.socket | None = None) -> tuple[socket.socket | None, subprocess.Popen]:
    """`harness.child.zygote.<entry>(fd)` in a fresh interpreter, in a session of its own and with a clean
    environment (never the grader's: each fork can read that block in /proc); returns our end of its control socket
    (None when its socket, `theirs`, was given) and the process."""
    ours = None
    if theirs is None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    # every request is stamped with its sender's pid and uid from the start, even one sent while the template still
    # imports torch (the kernel adds them only when the receiving socket asks for them at the time of sending)
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    boot = names.boot(f"import harness.child.zygote as z; z.{entry}({theirs.fileno()})")
    try:
        env = {**clean_env(tempfile.gettempdir()), "GLIBC_TUNABLES": HUGE_PAGE_MALLOC}
        proc = subprocess.Popen(isolation.python_command(boot), pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
    except BaseException:
        if ours is not None:
            ours.close()
        raise
    finally:
        theirs.close()
    return ours, proc


class Template:
    """The process that imports torch once for every zygote of a batch (`harness.child.zygote.template`): one
    torch import instead of one per grader (1.5 to 2 s of CPU each), started before the graders import the engine.
    `socket` is what a grader needs to ask it for a zygote (`Zygote(limits, template=...)`); it pickles into
    graders started by multiprocessing.  The template ends when every copy of `socket` is closed.

    With `address`, it listens instead on a datagram socket at that path, for processes that did not inherit a
    socket from us (`template_at`): the path's folder must let only our own user in, since whoever can write to the
    socket can ask for a zygote.  It then ends at `close()` or with the process that started it."""

    def __init__(self, address: str | None = None):
        listening, self.address = None, address
        if address is not None:
            folder = os.stat(os.path.dirname(os.path.abspath(address)))
            if folder.st_uid != os.geteuid() or folder.st_mode & 0o077:
                raise ValueError(f"a template's socket needs a folder that only its own user may enter: {address}")
            listening = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            listening.bind(address)
        self.socket, self.proc = launch("template", listening)

    def close(self) -> None:
        """Once its zygotes are no longer wanted: they die with it (harness.child.zygote), as when the kernel kills it
        with the process that started it."""
        if self.socket is not None:
            self.socket.close()
        self.proc.kill()
        self.proc.wait()


def template_at(address: str) -> socket.socket | None:
    """A socket on which to ask the template listening at `address` for a zygote; None if none listens there, or
    if the socket is not our own user's (whoever serves it would fork our children and report their walls)."""
    asking = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        if os.stat(address).st_uid != os.geteuid():
            raise PermissionError(address)
        asking.connect(address)
    except OSError:
        asking.close()
        return None
    return asking
