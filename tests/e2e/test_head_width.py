"""A head width the class refuses by design (issue 28 item 2): a class that refuses the lesson's narrow heads
(`assert head_dim % 8 == 0`) and builds wider ones with the same heads is checked at head widths it accepts, passes
when correct and fails by the right check when not; one that builds nothing mha-check makes is cannot-tell; and a
guard written the wrong way round (it refuses a divisible width and builds an indivisible one) is still named
divisibility-inverted, which the narrow-heads guard never is."""
import pytest

import mutants
from conftest import REALZOO, ZOO

pytestmark = pytest.mark.slow
MULTIPLE_OF_8 = f"{ZOO / 'correct' / 'head_width_multiple_of_8.py'}:HeadWidthMultipleOf8"
WIDE_ONLY = f"{ZOO / 'ours' / 'head_width_256_at_least.py'}:WideHeadsOnly"
FKODOM = f"{REALZOO / 'fkodom_gqa_groups_summed_pre_fix.py'}:MultiheadGQA"
FKODOM_AS_LESSON = {"layer_norm": False, "kv_heads": "@heads"}  # no LayerNorm, as many key/value heads as heads
INVERTED = f"{mutants.source_path('divisibility-inverted')}:CausalMHA"


@pytest.fixture(scope="module", autouse=True)
def _want(reports):
    reports.want([MULTIPLE_OF_8, WIDE_ONLY, FKODOM, INVERTED])
    reports.want([FKODOM], overrides=FKODOM_AS_LESSON)


def _by_id(report) -> dict:
    return {c.id: c for c in report.checks}


def test_a_class_refusing_narrow_heads_is_checked_with_heads_it_accepts(reports):
    checks = _by_id(reports(MULTIPLE_OF_8))
    assert {c.id: c.status for c in checks.values() if c.status != "pass"} == {}
    assert "builds heads of width 8 with the same numbers of heads" in checks["construct"].message
    assert checks["divisibility"].message == "refused d_out=26 with 3 heads and d_out=34 with 4 heads"


def test_its_real_bug_is_found_by_the_check_made_for_it(reports):
    """fkodom's MultiheadGQA: by default (LayerNorm, grouped heads summed) a failure no catalogued mistake explains;
    as the lesson's layer (--arg), its scores divided by dh are named from reference-match and gradient-match."""
    plain = reports(FKODOM)
    assert _by_id(plain)["construct"].status == "pass" and _by_id(plain)["param-count"].status == "fail"
    assert plain.diagnosis.mutant is None
    lesson = reports(FKODOM, overrides=FKODOM_AS_LESSON)
    failing = {c.id for c in lesson.checks if c.status == "fail"}
    assert failing == {"reference-match", "gradient-match"} and lesson.diagnosis.mutant == "scale-by-dh"


def test_a_class_that_builds_nothing_mha_check_makes_is_cannot_tell(reports):
    report = reports(WIDE_ONLY)
    construct = _by_id(report)["construct"]
    assert construct.status == "cannot_tell" and "--arg NAME=VALUE" in construct.help
    assert not [c.id for c in report.checks if c.status == "fail"] and report.diagnosis is None


def test_an_inverted_divisibility_guard_is_still_named(reports):
    report = reports(INVERTED)
    construct = _by_id(report)["construct"]
    assert construct.status == "fail" and construct.details["finding"] == "refuses valid widths as not divisible"
    assert "it builds 8 with 3 heads, which do not divide it" in construct.message
    assert report.diagnosis.mutant == "divisibility-inverted"
