"""A course's rubric may ask for the layer with a KV cache (`kv_cache = true`), or for the lesson's layer rather than
the grouped-query family (`grouped = false`).

Red team 17: a layer whose cache is wrong (mask rows not offset by the cached tokens, `kvcache-mask-not-offset`),
driven by a keyword and a method whose names mha-check does not know, got 19 of 19 with `--grading --format
gradescope`: kv-cache found no cache, so it did not apply, a pass's points, and no rubric option could ask for the
cache.  With `kv_cache = true` a layer that shows no cache fails kv-cache, saying why and what the assignment asks;
every other check judges the layer as before; a layer whose cache mha-check drives is graded as before; without the
key nothing changes.  Likewise the lesson's layer without its output bias, dressed as grouped-query attention by an
optional `kv_heads`, was exempt from out-proj-bias (19 of 19); with `grouped = false` it fails it."""
import csv
import json
import subprocess
import sys

import pytest

from checks import all_checks
from conftest import ROOT, report_for
from harness.render.rubric import RubricError, load_rubric

HIDDEN = f"{ROOT / 'tests' / 'hostile' / 'policy' / 'hidden_kv_cache.py'}:MyAttn"


def test_the_rubric_reads_kv_cache_and_refuses_anything_but_a_bool(tmp_path):
    ids = {c.id for c in all_checks()}
    path = tmp_path / "rubric.toml"
    assert load_rubric(None, ids).kv_cache is False
    path.write_text("kv_cache = true\n")
    assert load_rubric(str(path), ids).kv_cache is True
    path.write_text('kv_cache = "yes"\n')
    with pytest.raises(RubricError, match="kv_cache must be true or false"):
        load_rubric(str(path), ids)


def test_a_layer_that_shows_no_cache_fails_kv_cache_where_the_course_asks_for_one():
    allowed = {c.id: c for c in report_for(HIDDEN).checks}
    asked = {c.id: c for c in report_for(HIDDEN, kv_cache=True).checks}
    assert allowed["kv-cache"].status == "pass" and allowed["kv-cache"].not_applicable  # the gap: every point
    assert asked["kv-cache"].status == "fail", asked["kv-cache"].message
    assert "asks for the layer with a KV cache" in asked["kv-cache"].message
    assert "kv_cache = true" in asked["kv-cache"].message
    assert {i: c.status for i, c in asked.items() if i != "kv-cache"} == \
        {i: c.status for i, c in allowed.items() if i != "kv-cache"}


def test_a_layer_whose_cache_is_driven_is_graded_as_before_under_the_same_rubric():
    cache = f"{ROOT / 'mutants' / 'kvcache_mask_not_offset.py'}:CausalMHA"
    assert {c.id: c.status for c in report_for(cache, kv_cache=True).checks} == \
        {c.id: c.status for c in report_for(cache).checks}


def test_gradescope_takes_the_kv_cache_point_from_a_hidden_cache(tmp_path):
    rubric = tmp_path / "rubric.toml"
    rubric.write_text("kv_cache = true\n")
    run = subprocess.run([sys.executable, "-m", "harness.frontends.cli", HIDDEN, "--format", "gradescope",
                          "--rubric", str(rubric)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    data = json.loads(run.stdout)
    lost = {t["name"].split()[0] for t in data["tests"] if t["score"] < t["max_score"]}
    assert lost == {"kv-cache"}, (lost, run.stderr[-2000:])


GROUPED = f"{ROOT / 'tests' / 'hostile' / 'policy' / 'grouped_no_out_bias.py'}:MyAttn"


def test_the_rubric_reads_grouped_and_refuses_anything_but_a_bool(tmp_path):
    ids = {c.id for c in all_checks()}
    path = tmp_path / "rubric.toml"
    assert load_rubric(None, ids).grouped is True
    path.write_text("grouped = false\n")
    assert load_rubric(str(path), ids).grouped is False
    path.write_text("grouped = 0\n")
    with pytest.raises(RubricError, match="grouped must be true or false"):
        load_rubric(str(path), ids)


def test_a_grouped_layer_without_an_output_bias_fails_where_the_course_asks_for_the_lessons_layer():
    allowed = {c.id: c for c in report_for(GROUPED).checks}
    asked = {c.id: c for c in report_for(GROUPED, grouped=False).checks}
    assert allowed["out-proj-bias"].status == "pass" and allowed["out-proj-bias"].not_applicable  # the gap
    assert asked["out-proj-bias"].status == "fail", asked["out-proj-bias"].message
    assert "grouped = false" in asked["out-proj-bias"].message
    assert {i: c.status for i, c in asked.items() if i != "out-proj-bias"} == \
        {i: c.status for i, c in allowed.items() if i != "out-proj-bias"}
    assert asked["reference-match"].status == "pass"  # the math judged as it is


def test_the_lessons_layer_is_graded_as_before_under_grouped_false():
    correct = f"{ROOT / 'examples' / 'correct_attention.py'}"
    assert {c.id: c.status for c in report_for(correct, grouped=False).checks} == \
        {c.id: c.status for c in report_for(correct).checks}


def test_grade_reads_both_keys_as_single_runs_do(tmp_path):
    """`mha-check grade --rubric` passes kv_cache and grouped on to every submission, as a single run with the same
    rubric does (red team 17 left grade.py's Options line for later: the batch still gave both layers every point)."""
    subs = tmp_path / "subs"
    for name, target in (("hidden", HIDDEN), ("grouped", GROUPED)):
        (subs / name).mkdir(parents=True)
        (subs / name / "attention.py").write_text(open(target.rsplit(":", 1)[0]).read())
    rubric = tmp_path / "rubric.toml"
    rubric.write_text("kv_cache = true\ngrouped = false\n")
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "harness.frontends.cli", "grade", str(subs), "--out", str(out),
                          "--target", "MyAttn", "--jobs", "1", "--rubric", str(rubric)], capture_output=True,
                         text=True, cwd=ROOT, timeout=900)
    assert run.returncode in (0, 1), run.stderr[-2000:]
    rows = {r["submission"]: r for r in csv.DictReader(open(out / "summary.csv", newline=""))}
    assert rows["hidden"]["kv-cache"] == "fail", rows["hidden"]
    assert rows["grouped"]["out-proj-bias"] == "fail", rows["grouped"]
