"""A course's rubric may refuse the single-head form for a multi-head assignment (`single_head = false`).

Red team 15: the previous lesson's single-head CausalAttention, handed in for the multi-head assignment with
`--grading --format gradescope`, got 19 of 19: the checks about heads (view-order, head-invariance, divisibility,
out-proj-bias) do not apply to one head, so they passed, and no rubric option could ask for heads.  With
`single_head = false` those checks fail for a single-head layer, saying why and what the assignment asks; the math
checks still judge the layer as it is; a multi-head layer is graded as before; without the key nothing changes."""
import json
import subprocess
import sys

import pytest

from checks import all_checks
from conftest import ROOT, report_for
from harness.render.rubric import RubricError, load_rubric

SINGLE = f"{ROOT / 'tests' / 'zoo' / 'correct' / 'single_head_rasbt.py'}"
ABOUT_HEADS = {"view-order", "head-invariance", "divisibility", "out-proj-bias"}


def test_the_rubric_reads_single_head_and_refuses_anything_but_a_bool(tmp_path):
    ids = {c.id for c in all_checks()}
    path = tmp_path / "rubric.toml"
    assert load_rubric(None, ids).single_head is True
    path.write_text("single_head = false\n")
    assert load_rubric(str(path), ids).single_head is False
    path.write_text('single_head = "no"\n')
    with pytest.raises(RubricError, match="single_head must be true or false"):
        load_rubric(str(path), ids)


def test_a_single_head_layer_fails_the_checks_about_heads_where_the_course_asks_for_heads():
    allowed = {c.id: c for c in report_for(SINGLE).checks}
    refused = {c.id: c for c in report_for(SINGLE, single_head=False).checks}
    assert {i for i in ABOUT_HEADS if allowed[i].status == "pass"} == ABOUT_HEADS  # the form's "does not apply"
    for i in ABOUT_HEADS:
        assert refused[i].status == "fail", (i, refused[i].message)
        assert "asks for multi-head attention" in refused[i].message and "single_head = false" in refused[i].message
    # the math is judged as it is: the same statuses for every other check
    assert {i: c.status for i, c in refused.items() if i not in ABOUT_HEADS} == \
        {i: c.status for i, c in allowed.items() if i not in ABOUT_HEADS}
    assert refused["reference-match"].status == "pass"


def test_a_multi_head_layer_is_graded_as_before_under_the_same_rubric():
    correct = f"{ROOT / 'examples' / 'correct_attention.py'}"
    assert {c.id: c.status for c in report_for(correct, single_head=False).checks} == \
        {c.id: c.status for c in report_for(correct).checks}


def test_gradescope_gives_the_single_head_layer_the_points_of_the_math_only(tmp_path):
    rubric = tmp_path / "rubric.toml"
    rubric.write_text("single_head = false\n")
    run = subprocess.run([sys.executable, "-m", "harness.frontends.cli", SINGLE, "--format", "gradescope",
                          "--rubric", str(rubric)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    data = json.loads(run.stdout)
    lost = {t["name"].split()[0] for t in data["tests"] if t["score"] < t["max_score"]}
    assert ABOUT_HEADS <= lost, (lost, run.stderr[-2000:])
    assert data["score"] <= len(data["tests"]) - len(ABOUT_HEADS)
