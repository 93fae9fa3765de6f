"""A child's scratch on the shared disk is measured against its budget, and a disk with no room for a copy is never
a submission cut short (harness.sandbox.scratch)."""
import errno
import os

import pytest

from harness.sandbox import scratch


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
