"""Two catalogued mistakes at once (tests/zoo/buggy/two_*.py: the wrong view order in both the head split and the
head merge, a missing scale with a fill that hides nothing, the split's view order with the model width's scale).

Before, no single mistake reproduced such a layer, so nothing was named and causal-leakage's fix sent the student to
the mask, which was right in none of the two view-order layers.  Now both mistakes are named from the numbers, each
at the student's own line, the line `mha-check trace` marks for it; every failing check shows the fix of a mistake
that explains it, never the mask's where no named mistake is the mask's; and the two fixes pasted into a copy make
the layer pass every check."""
from pathlib import Path

import pytest

import mutants
from conftest import ZOO, pasted, zoo_constants
from harness.frontends.trace import trace
from harness.render import text, view
from harness.sandbox.pool import Fork
from harness.sandbox.subject import Subject

pytestmark = pytest.mark.slow
TWO = sorted((ZOO / "buggy").glob("two_*.py"))


def target(path: Path) -> str:
    return f"{path}:{zoo_constants(path)['TARGET']}"


@pytest.fixture(scope="module", autouse=True)
def _want(reports):
    reports.want([target(p) for p in TWO])


def test_the_zoo_has_the_common_pairs():
    assert len(TWO) >= 3
    assert ("split-view-order", "merge-no-transpose") in {zoo_constants(p)["DIAGNOSIS"] for p in TWO}


@pytest.mark.parametrize("path", TWO, ids=[p.stem for p in TWO])
def test_both_mistakes_are_named_each_at_its_own_line(path, reports):
    want = zoo_constants(path)
    root = reports(target(path)).diagnosis
    assert root is not None and root.also is not None, root
    lines = path.read_text().splitlines()
    got = [(d.mutant, d.match, d.at, d.code) for d in (root, root.also)]
    assert got == [(m, "numbers", f"{path.name}:{n}", lines[n - 1].strip())
                   for m, n in zip(want["DIAGNOSIS"], want["LINES"])]


@pytest.mark.parametrize("path", TWO, ids=[p.stem for p in TWO])
def test_trace_marks_the_same_two_mistakes_at_the_same_lines(path, reports):
    want = zoo_constants(path)
    with reports.zygotes.take() as zygote:
        result = trace(target(path), make_subject=lambda spec, **kw: Subject(spec, start=Fork(zygote), **kw))
    first = {}
    for m in result.mistakes:  # (a missing output projection marks the forward as a whole, at its return line)
        first.setdefault(m["mutant"], result.where(m)[0])
    assert first == {m: f"{path.name}:{n}" for m, n in zip(want["DIAGNOSIS"], want["LINES"])}


UNAPPLIED = {"no-output-projection": {"parameters-used"}}  # an output projection made and never applied: its
# parameters get no gradient, which the mutant (no projection at all) cannot show


@pytest.mark.parametrize("path", TWO, ids=[p.stem for p in TWO])
def test_every_failing_check_shows_the_fix_of_a_named_mistake_that_explains_it(path, reports):
    """causal-leakage said "mask the scores before the softmax" on layers whose masks are right: the leak is the
    view order's.  Now a failing check's fix is that of a named mistake whose mutant fails the check too."""
    report = reports(target(path))
    shown = view.build(report)
    fixes = {shown.root.mutant: shown.root.fix, shown.root.also.mutant: shown.root.also.fix}
    catalogue = mutants.catalogue()
    failing = [ln for ln in shown.lines if ln.status == "fail"]
    assert failing and all(ln.follows_root for ln in failing), [ln.id for ln in failing if not ln.follows_root]
    for ln in failing:
        owners = [m for m, fix in fixes.items() if fix == ln.fix]
        assert owners and any(ln.id in set(catalogue[m]["killed_by"]) | set(catalogue[m]["failing"]) |
                              UNAPPLIED.get(m, set()) for m in owners), (ln.id, ln.fix)
    mask_named = any(catalogue[m]["topic"] == "the causal mask" for m in fixes)
    for leak in (ln for ln in failing if ln.id == "causal-leakage"):  # (a scale beside a projection never applied
        # leaks nothing)
        assert mask_named or "mask" not in leak.fix.lower(), leak.fix


@pytest.fixture(scope="module")
def fixed(reports, tmp_path_factory):
    folder = tmp_path_factory.mktemp("two_fixed")
    copies = {}
    for path in TWO:
        want = zoo_constants(path)
        root = reports(target(path)).diagnosis
        kinds = {m: mutants.catalogue()[m]["rewrite"] for m in want["DIAGNOSIS"]}
        copy = folder / path.name
        copy.write_text(pasted(path, [(n, d.fix, kinds[d.mutant])
                                         for n, d in zip(want["LINES"], (root, root.also))]))
        copies[path] = f"{copy}:{want['TARGET']}"
    reports.want(list(copies.values()))
    return copies


@pytest.mark.parametrize("path", TWO, ids=[p.stem for p in TWO])
def test_the_two_fixes_applied_make_the_layer_pass(path, fixed, reports):
    report = reports(fixed[path])
    assert [(c.id, c.status, c.message) for c in report.checks if c.status != "pass"] == []
    assert report.diagnosis is None


@pytest.mark.parametrize("path", TWO, ids=[p.stem for p in TWO])
def test_the_text_report_shows_both_lines(path, reports):
    shown = text.render(view.build(reports(target(path))), cols=100)
    assert "Root cause: " in shown and "and a second mistake: " in shown
    assert all(f"{path.name}:{n}" in shown for n in zoo_constants(path)["LINES"])


def test_a_mistake_hidden_behind_a_forward_that_raises_is_said_as_possibly_present(reports):
    """A head split with the wrong view order before a merge that raises for want of .contiguous(): nothing after
    the raise runs, so no number shows the split.  The report named the missing .contiguous() as if it were the only
    mistake; now it also says that more than one may be present, with the split's line that trace marks."""
    path = ZOO / "buggy" / "split_view_order_no_contiguous.py"
    root = reports(target(path)).diagnosis
    hidden, line = zoo_constants(path)["HIDDEN"]
    assert (root.mutant, root.also) == ("view-without-contiguous", None)
    assert "more than one mistake may be present" in root.evidence
    assert f"{hidden} at {path.name}:{line}" in root.evidence, root.evidence
    assert "more than one mistake may be present" in text.render(view.build(reports(target(path))), cols=100)
