"""Every id `mha-check trace` can emit is one `mha-check explain` understands.  A student's trial: trace marked a
single-head layer's F.dropout `dropout-always-on` (a detector's id, the JSON's "id"), and `explain` rejected it."""
import json

import pytest

import mutants
from harness.engine.trace.detectors import DETECTORS, UNCATALOGUED
from harness.frontends.teach import explain, main, marked_as

MARKS = sorted(DETECTORS)  # the registry: a detector may set only the ids it registered (registry.Findings)


@pytest.mark.parametrize("mark", MARKS)
def test_every_trace_mark_is_explained(mark):
    data = json.loads(explain(mark, "json"))
    text = explain(mark)
    declared = marked_as(mark)
    if mark in mutants.catalogue():  # the mark is spelt as its mistake (mask-added): the mistake itself
        assert mark in declared and (data["kind"], data["id"]) == ("mutant", mark)
        return
    assert data["mistakes"] == declared
    if declared:  # explained as the catalogued mistake it stands for
        assert data["kind"] == "mutant" and data["id"] == declared[0] and data["mark"] == mark
        assert f"for the mistake {declared[0]}" in " ".join(text.split()) and f"{declared[0]} (mistake)" in text
    else:  # in its own words, with the nearest catalogued mistakes
        assert data["kind"] == "trace mark" and data["explanation"] == UNCATALOGUED[mark][0]
        assert set(data["related"]) <= set(mutants.catalogue())


def test_the_marks_no_mistake_declares_are_exactly_those_explained_in_their_own_words():
    assert {m for m in MARKS if not marked_as(m)} == set(UNCATALOGUED)


def test_a_mark_of_two_forms_is_explained_as_the_multi_head_mistake_naming_the_other():
    declared = marked_as("softmax-not-last-axis")
    assert declared == ["softmax-wrong-axis", "single-softmax-wrong-axis"]
    assert "in a single-head layer: single-softmax-wrong-axis" in " ".join(explain("softmax-not-last-axis").split())


def test_the_command_line_explains_a_mark(capsys):
    assert main(["explain", "dropout-always-on"]) == 0
    assert "dropout-in-eval (mistake)" in capsys.readouterr().out
    assert main(["explain", "dropout-alwys-on"]) == 2
    assert "did you mean dropout-always-on" in capsys.readouterr().err
