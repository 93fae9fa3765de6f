"""The batch's processes: one template imports torch for every zygote, a zygote forked from it serves a
submission as one started on its own does, a zygote still starts when the template cannot give one, and nothing of
either outlives the batch."""
from __future__ import annotations

import os
import socket
import threading

from conftest import ROOT
from harness.sandbox.pool import ForkedSubject, Template, Zygote, ZygotePool

CORRECT = str(ROOT / "tests" / "zoo" / "correct" / "lesson.py")


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _sockets(pid: int) -> set[str]:
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        if target.startswith("socket:"):
            found.add(target)
    return found


def test_zygotes_share_one_template_serve_and_leave_nothing_behind():
    pool = ZygotePool(2)
    template = pool.template.proc.pid
    zygotes = [z.info["pid"] for z in pool.all]
    try:
        assert len(set(zygotes)) == 2 and all(_parent(pid) == template for pid in zygotes)
        assert all(z.proc is None for z in pool.all)  # no torch import of their own
        for pid in zygotes:  # a zygote keeps only its own control socket: not the template's, not a sibling's
            assert len(_sockets(pid)) == 1 and not _sockets(pid) & _sockets(template)
        assert not _sockets(zygotes[0]) & _sockets(zygotes[1])
        for zygote in pool.all:
            subject = ForkedSubject(zygote, CORRECT)
            try:
                assert subject.load().name == "CausalMHA"
                if os.geteuid() == 0:  # confined as the children of a zygote started on its own are
                    assert subject.isolation["uid"] != 0 and subject.isolation["capabilities_dropped"]
            finally:
                subject.close()
    finally:
        pool.close()
    assert all(_gone(pid) for pid in [template, *zygotes])


def test_a_zygote_starts_on_its_own_when_the_template_is_gone():
    template = Template()
    template.proc.kill()
    template.proc.wait()
    zygote = Zygote(template=template.socket)
    try:
        assert zygote.proc is not None and zygote.info["pid"] == zygote.proc.pid
    finally:
        zygote.close()
        template.socket.close()


def test_a_zygote_starts_on_its_own_when_the_template_drops_the_request():
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)

    def drop():  # a template that ends between reading the request and forking
        _, fds, _, _ = socket.recv_fds(theirs, 1024, 1)
        for fd in fds:
            os.close(fd)

    dropper = threading.Thread(target=drop)
    dropper.start()
    zygote = Zygote(template=ours)
    try:
        dropper.join(5)
        assert zygote.proc is not None and zygote.info["pid"] == zygote.proc.pid
    finally:
        zygote.close()
        ours.close()
        theirs.close()
