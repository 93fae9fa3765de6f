"""Where no mistake is named, the report's hint "mha-check trace marks the step that looks wrong (LINE)" leaves out
the marks of mistakes only a lesson rule's check kills (a student's trial: a rotary layer failing `registered` was
sent to its `nn.Linear(dim, dim, bias=False)`, the out-proj-no-bias mark, which says nothing of the math)."""
import mutants
from harness.engine.diagnosis import _rule_mark

KINDS = {"out-proj-bias": "rule", "divisibility": "rule", "reference-match": "math", "gradient-match": "math"}


def test_a_lesson_rules_mark_is_no_place_to_look_for_the_math():
    catalogue = mutants.catalogue()
    assert _rule_mark({"mutant": "out-proj-no-bias", "at": "a.py:31"}, catalogue, KINDS)
    assert _rule_mark({"mutant": "no-divisibility-check", "at": "a.py:20"}, catalogue, KINDS)


def test_a_math_mistakes_mark_and_an_unnamed_mark_stay_in_the_hint():
    catalogue = mutants.catalogue()
    assert not _rule_mark({"mutant": "scale-by-sqrt-d", "at": "a.py:25"}, catalogue, KINDS)
    assert not _rule_mark({"mutant": None, "at": "a.py:32"}, catalogue, KINDS)
