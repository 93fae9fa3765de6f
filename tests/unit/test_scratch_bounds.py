"""A child's scratch on the shared disk is measured against its budget, and a disk with no room for a copy is never
a submission cut short (harness.sandbox.scratch)."""
import errno
import mmap
import os
import time

import pytest

from harness.sandbox import scratch
from harness.sandbox import syscalls as linux


def test_usage_counts_blocks_and_entries_and_stops_counting_past_the_budget(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "big").write_bytes(b"x" * (1 << 20))
    with open(tmp_path / "sparse", "wb") as f:  # a terabyte that takes no disk
        f.truncate(1 << 40)
    for i in range(50):
        (tmp_path / "a" / f"n{i}").touch()
    size, entries = scratch.usage(str(tmp_path), 1000)
    assert entries == 53 and (1 << 20) <= size < (2 << 20)
    assert scratch.usage(str(tmp_path), 10)[1] <= 53  # counting stops early: a million files are never all walked


def test_an_unbounded_scratch_says_when_it_holds_more_than_its_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(scratch, "_mount_bounded", lambda *args: "")
    monkeypatch.setattr(scratch, "_PARENT", str(tmp_path))
    source = tmp_path / "source"
    source.mkdir()
    (source / "attention.py").write_text("x = 1\n")
    room = scratch.Scratch.with_copy(7, str(source), 1 << 20, room_bytes=1 << 20, room_files=20)
    try:
        assert room.budget is not None and room.overflow() is None
        assert room.describe()["bounded"].startswith("no:")
        for i in range(25):
            open(os.path.join(room.path, f"f{i}"), "w").close()
        assert room.overflow() == f"more than {room.budget[1]} files and folders"
        for i in range(25):
            os.unlink(os.path.join(room.path, f"f{i}"))
        with open(os.path.join(room.path, "big"), "wb") as f:
            f.write(b"x" * (2 << 20))
        assert room.overflow().startswith("2 MB, more than")
    finally:
        room.remove()
    assert not os.path.exists(room.root)


def test_a_copy_the_disk_has_no_room_for_is_refused_whole_not_cut_short(tmp_path, monkeypatch):
    """Found by an attacker's trial: classmates copied while a disk filler held the disk got a copy cut short
    ("attention.py has no 'MyAttn'"), a failure that read as theirs."""
    source = tmp_path / "source"
    source.mkdir()
    (source / "attention.py").write_text("class MyAttn: pass\n")
    (tmp_path / "dest").mkdir()

    def no_space(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(scratch.os, "write", no_space)
    with pytest.raises(scratch.NoRoom, match="No space left on device.*not the student's doing"):
        scratch.copy_submission(str(source), str(tmp_path / "dest"), (os.getuid(), os.getgid()), 1 << 20)


def _written(path, size: int) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.write(fd, b"x" * size)
    os.fsync(fd)
    return fd


def test_files_deleted_but_held_open_or_mapped_count_against_the_budget(tmp_path, monkeypatch):
    """Found by an attacker's trial: a child that deletes what it wrote and keeps it open (or mapped, the descriptor
    closed) held 1.6 GB of the shared disk against a 64 MB budget while a walk of its folder found nothing.  The
    measure now adds, for the child's processes, every file with no name left on the scratch's filesystem."""
    monkeypatch.setattr(scratch, "_mount_bounded", lambda *args: "")
    monkeypatch.setattr(scratch, "_PARENT", str(tmp_path))
    source = tmp_path / "source"
    source.mkdir()
    (source / "attention.py").write_text("x = 1\n")
    room = scratch.Scratch.with_copy(7, str(source), 1 << 20, room_bytes=1 << 20, room_files=20)
    dev, me = os.stat(room.path).st_dev, [os.getpid()]
    held, named = _written(os.path.join(room.path, "held"), 2 << 20), _written(os.path.join(room.path, "named"), 4096)
    try:
        os.unlink(os.path.join(room.path, "held"))
        assert room.overflow() is None  # a walk alone saw nothing
        assert scratch.held_unlinked(me, dev)[0] >= 2 << 20  # the named file counts in the walk, not here
        assert scratch.held_unlinked(me, dev + 1)[0] == 0  # another filesystem is not the scratch's
        said = room.overflow(me)
        assert said and "2 MB of it in files it deleted but kept open" in said, said
        mapped = mmap.mmap(held, 2 << 20)
        os.close(held)
        held = -1
        assert scratch.held_unlinked(me, dev)[0] >= 2 << 20 and room.overflow(me)  # the mapping alone holds it
        mapped.close()
        assert scratch.held_unlinked(me, dev) == (0, []) and room.overflow(me) is None  # released: nothing held
    finally:
        for fd in (held, named):
            if fd >= 0:
                os.close(fd)
        room.remove()


def test_the_process_tree_of_a_child_holds_its_descendants_only():
    pid = os.fork()
    if pid == 0:
        os.execvp("sleep", ["sleep", "30"])
    try:
        tree = linux.process_tree(os.getpid())
        assert os.getpid() in tree and pid in tree and 1 not in tree
        assert linux.process_tree(pid) == [pid]
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)


def _fs_uid(tid: int) -> int:
    with open(f"/proc/self/task/{tid}/status") as f:
        return int(next(line for line in f if line.startswith("Uid:")).split()[4])


@pytest.mark.skipif(os.geteuid() != 0, reason="only root takes another uid's file-system identity")
def test_root_looks_into_a_slots_processes_as_the_slot_in_that_thread_alone():
    """Red team 6: root in a Docker container has no CAP_SYS_PTRACE and may not read the slot uid's /proc/PID/fd;
    as the slot's uid it may (`reading_as`).  The identity is the measuring thread's only, and is given back: the
    grader's other threads keep writing reports as root meanwhile."""
    import threading
    main, seen = threading.get_native_id(), {}

    def measure():
        with linux.reading_as(61234, 61234):
            seen["measuring"], seen["main"] = _fs_uid(threading.get_native_id()), _fs_uid(main)
        seen["after"] = _fs_uid(threading.get_native_id())

    thread = threading.Thread(target=measure)
    thread.start()
    thread.join()
    assert seen == {"measuring": 61234, "main": 0, "after": 0}


def test_a_process_that_has_ended_holds_nothing():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    try:
        for _ in range(200):  # a zombie until reaped: its /proc/PID/fd is closed, and it holds no file
            if linux.exited(pid):
                break
            time.sleep(0.01)
        assert linux.exited(pid) and not linux.exited(os.getpid())
    finally:
        os.waitpid(pid, 0)
    assert linux.exited(pid)


def test_grade_says_in_one_line_where_the_batch_found_no_room_and_grades_nothing(tmp_path, capsys):
    """A TMPDIR with no room for the batch's copies (a small /tmp in a container): one line that says where the
    copies go and what to do, and nothing graded (the line once read "grade it again in /tmp")."""
    from types import SimpleNamespace

    from harness.frontends import grade

    def no_room(staging):
        raise scratch.NoRoom("no room left on the grading machine's disk for a copy of this submission (No space "
                             "left on device): not the student's doing; grade it again")

    assert grade._stage([SimpleNamespace(name="alice", stage=no_room)], tmp_path) is None
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and "(the batch's copies go to " in said and "nothing was graded" in said
    assert "set TMPDIR to a folder on a disk with room" in said and "again in /" not in said


def _deeper_than_a_path(top: str, depth: int = 300) -> int:
    """A folder chain `depth` x 21 bytes deep below `top` (past PATH_MAX, 4096: made with descriptors, as a child
    can), and the descriptor of its deepest folder."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d" * 20, dir_fd=fd)
        deeper = os.open("d" * 20, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = deeper
    return fd


def test_a_file_deeper_than_a_path_may_name_is_over_the_budget_never_unseen(tmp_path, monkeypatch):
    """Red team 17: a walk by path cannot name what lies past PATH_MAX (ENAMETOOLONG), and skipped it: a child in a
    container wrote 300 MB in 15 MB files under a folder chain 6,300 bytes deep, past its 64 MB budget, and passed;
    with no bound on the count of such files, the grader's disk is the limit.  What cannot be measured is over the
    budget (as a folder closed to the measure), never nothing."""
    monkeypatch.setattr(scratch, "_mount_bounded", lambda *args: "")
    monkeypatch.setattr(scratch, "_PARENT", str(tmp_path))
    room = scratch.Scratch.with_copy(7, None, 1 << 20, room_bytes=1 << 20, room_files=1000)  # 300 folders fit
    try:
        fd = _deeper_than_a_path(room.path)
        try:
            with open(os.open("big", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "wb") as f:
                f.write(b"x" * (2 << 20))
        finally:
            os.close(fd)
        said = room.overflow()
        assert said is not None and "closed to mha-check's measure" in said, said
    finally:
        room.remove()
    assert not os.path.exists(room.root)  # removed whole, however deep (remove_tree works by descriptor)


def test_a_long_file_name_just_within_a_path_is_counted_or_over_the_budget(tmp_path):
    """The folder's path fits, an entry's full path does not: its stat by path fails, and the file was skipped."""
    top = tmp_path / "top"
    top.mkdir()
    fd = _deeper_than_a_path(str(top), depth=(4096 - len(str(top)) - 100) // 21)
    try:
        with open(os.open("f" * 250, os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "wb") as f:
            f.write(b"x" * (2 << 20))
    finally:
        os.close(fd)
    closed: list[str] = []
    size, _ = scratch.usage(str(top), 10_000, closed)
    assert size >= 2 << 20 or closed, (size, closed)
