"""harness.frontends.seeds: a grade's seed drawn from the OS's randomness, and grade's record of it in --out."""
import os

import pytest

from harness.frontends import seeds
from harness.sandbox.subject import child_seed


def test_a_drawn_seed_is_never_one_people_type_and_fits_the_option():
    drawn = {seeds.draw() for _ in range(200)}
    assert len(drawn) == 200
    assert all(seeds.DRAWN_FROM <= s < seeds.SEED_LIMIT for s in drawn)


def test_the_child_builds_with_the_seed_people_type_and_never_learns_a_drawn_one():
    assert [child_seed(s) for s in (0, 3, 2 ** 32 - 1)] == [0, 3, 2 ** 32 - 1]  # as before: same seed, same verdict
    drawn = seeds.draw()
    assert child_seed(drawn) != drawn and 0 <= child_seed(drawn) < 2 ** 32
    assert child_seed(drawn) == child_seed(drawn)  # repeatable with --seed N


def test_the_record_is_read_back_staff_only_and_never_written_over(tmp_path):
    assert seeds.read_record(tmp_path) is None
    assert seeds.write_record(tmp_path, 2 ** 40 + 5) == 2 ** 40 + 5
    assert os.stat(tmp_path / seeds.RECORD).st_mode & 0o777 == 0o600
    assert seeds.read_record(tmp_path) == 2 ** 40 + 5
    assert seeds.write_record(tmp_path, 2 ** 41) == 2 ** 40 + 5  # another batch (a shard) recorded first: its seed
    assert seeds.write_record(tmp_path, 2 ** 41, replace=True) == 2 ** 41  # --overwrite
    assert seeds.read_record(tmp_path) == 2 ** 41
    assert sorted(p.name for p in tmp_path.iterdir()) == [seeds.RECORD]  # no temporary left


@pytest.mark.parametrize("text", ["", "seed\n", "-1\n", f"{2 ** 63}\n"])
def test_a_record_mha_check_did_not_write_is_refused(tmp_path, text):
    (tmp_path / seeds.RECORD).write_text(text)
    with pytest.raises(seeds.RecordError, match="remove it"):
        seeds.read_record(tmp_path)


def test_a_link_is_not_a_record(tmp_path):
    (tmp_path / "elsewhere").write_text("12345\n")
    os.symlink(tmp_path / "elsewhere", tmp_path / seeds.RECORD)
    with pytest.raises(seeds.RecordError):
        seeds.read_record(tmp_path)
