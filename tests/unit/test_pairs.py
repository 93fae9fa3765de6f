"""Two catalogued mistakes at once (harness.engine.pairs), on numbers alone: a composed variant is named only when it
reproduces every sample, each mistake shows, and neither is the mirror of a correct layer under another reading."""
import numpy as np
import pytest

import mutants
from checks import Outcome, all_checks
from harness.engine import pairs
from harness.engine.records import Diagnosis
from harness.engine.report import CheckResult, Report
from harness.render import formats, html, text, view
from reference import numpy_ref, variants

SHAPES = ((2, 5, 8, 2), (1, 7, 12, 3), (2, 4, 6, 3))  # (batch, n, d, heads): n, heads and head width distinct


def multi_head() -> dict[str, dict]:
    """The plain multi-head layer's mistakes with a variant (no rotary, no grouped-query one)."""
    return {m: k for m, k in mutants.variants().items() if mutants.form(m) == "multi-head" and "rope" not in k
            and not set(k) & {"kv_pairing", "kv_expand", "kv_mask"}}


def samples(**knobs) -> list[pairs.Sample]:
    """The module's outputs as the layer with `knobs` computes them, on three configurations."""
    out = []
    for i, (b, n, d, h) in enumerate(SHAPES):
        rng = np.random.default_rng(i)
        w = numpy_ref.random_weights(rng, d, d, qkv_bias=True)
        x = rng.standard_normal((b, n, d))
        out.append(pairs.Sample(x, h, w, variants.forward(x, h, w, **knobs), numpy_ref.forward(x, h, w)))
    return out


def found(**knobs) -> list[tuple[str, str]]:
    return pairs.reproducing(samples(**knobs), multi_head(), mutants.fitted())


def test_the_view_order_in_both_the_split_and_the_merge_is_that_pair_and_no_other():
    assert found(split="view-bhnd", merge="no-transpose") == [("merge-no-transpose", "split-view-order")]


@pytest.mark.parametrize("knobs, pair", [
    ({"scale": "none", "fill": -1e-9}, ("finite-fill", "no-scaling")),  # the fill read off the outputs
    ({"split": "view-bhnd", "scale": "sqrt-d"}, ("scale-by-sqrt-d", "split-view-order")),
    ({"softmax_axis": -2, "merge": "no-transpose"}, ("merge-no-transpose", "softmax-wrong-axis")),
])
def test_other_pairs_are_found_from_their_numbers(knobs, pair):
    assert pair in found(**knobs)


def test_a_mirror_of_a_correct_layer_is_never_half_of_a_pair():
    """Queries and keys swapped is the lesson's layer with W_q and W_k read the other way round: with a missing
    scale, the pair (no-scaling, swapped-q-k) reproduces, and proves nothing about a swap."""
    assert found(keys="swap", scale="none") == []


def test_a_mirror_pair_is_named_where_the_names_fix_the_reading_and_said_where_they_do_not():
    """Under the one reading the parameters' names allow (W_query, W_key: the mapping by structure), a swap is the
    student's own, as the single swapped-q-k is named there; under a reading the numbers chose, the pair is refused
    and `mirrored` lets the report say that more than one mistake may be present."""
    got = samples(keys="swap", scale="none")
    assert pairs.reproducing(got, multi_head(), mutants.fitted(), named_reading=True) == [
        ("no-scaling", "swapped-q-k")]
    assert pairs.mirrored(got, multi_head(), mutants.fitted()) == [("no-scaling", "swapped-q-k")]
    assert pairs.mirrored(samples(split="view-bhnd", merge="no-transpose"), multi_head(), mutants.fitted()) == []


def test_a_mistake_the_other_hides_is_not_named_beside_it():
    """Without a mask no fill shows: the outputs are no-mask's alone, and no pair holds no-mask with a fill."""
    assert not [p for p in found(mask="none") if "no-mask" in p]


def test_a_single_mistake_is_no_pair_with_a_mistake_that_changes_nothing():
    assert found(scale="none") == []


def test_knobs_compose_where_both_mistakes_can_be_in_one_layer():
    knobs = multi_head()
    assert variants.compose(knobs["finite-fill"], knobs["mask-multiplied"]) is None  # one fill
    assert variants.compose(knobs["split-view-order"], knobs["split-view-order-keys"]) is None  # the keys' twice
    assert variants.compose(knobs["split-view-order"], knobs["merge-no-transpose"]) == {
        "split": "view-bhnd", "merge": "no-transpose"}
    assert variants.compose(knobs["split-view-order-queries"], knobs["split-view-order-keys"]) == {
        "split": "view-bhnd:qk"}
    assert variants.compose(knobs["split-view-order-queries"], knobs["split-view-order-keys-values"]) == {
        "split": "view-bhnd"}


def test_the_queries_and_the_keys_split_in_the_wrong_order_are_those_two_mistakes():
    """No catalogued mistake has the queries' and the keys' views wrong and the values' right: the two are named."""
    assert found(split="view-bhnd:qk") == [("split-view-order-keys", "split-view-order-queries")]


def test_several_pairs_are_told_apart_only_by_what_trace_marks():
    """A fill of 0 is finite-fill's value and mask-multiplied's: only the marked line decides, and the pair is told
    in the order the forward reaches its lines."""
    catalogue = mutants.catalogue()
    both = [("finite-fill", "no-scaling"), ("mask-multiplied", "no-scaling")]
    assert pairs.choose(both, [], catalogue) is None
    marks = [{"id": catalogue["no-scaling"]["trace"][0], "mutant": "no-scaling"},
             {"id": catalogue["finite-fill"]["trace"][0], "mutant": "finite-fill"}]
    assert pairs.choose(both, marks, catalogue) == ("no-scaling", "finite-fill")
    assert pairs.choose(both[:1], [], catalogue) == ("finite-fill", "no-scaling")


def _two_mistake_report():
    """A report built by hand: no scale and a finite fill, each with its line, the leak the fill's alone."""
    failing = {"reference-match", "gradient-match", "causal-leakage"}
    checks = [CheckResult.of(c, Outcome("fail" if c.id in failing else "pass", f"{c.id} says", details={}))
              for c in all_checks()]
    fill = Diagnosis("finite-fill", "numbers", title="fill", fix='att = att.masked_fill(m, float("-inf"))',
                     at="a.py:30", code="att = att.masked_fill(m, -1e-9)", follows=("causal-leakage",))
    scale = Diagnosis("no-scaling", "numbers", title="scale", fix="att = q @ k.mT / q.size(-1) ** 0.5",
                      at="a.py:29", code="att = q @ k.mT", follows=("reference-match", "gradient-match"),
                      also=fill)
    return Report("a.py:Attn", checks, diagnosis=scale)


def test_each_failing_check_shows_the_fix_of_the_mistake_that_explains_it():
    shown = view.build(_two_mistake_report())
    fixes = {ln.id: ln.fix for ln in shown.lines if ln.status == "fail"}
    assert fixes == {"reference-match": shown.root.fix, "gradient-match": shown.root.fix,
                     "causal-leakage": shown.root.also.fix}
    assert [ln.id for ln in shown.follows] == ["reference-match", "gradient-match", "causal-leakage"]


def test_the_second_mistake_survives_json_and_every_report_says_both():
    report = Report.from_dict(_two_mistake_report().to_dict())
    assert report.diagnosis.also.mutant == "finite-fill" and report.diagnosis.also.at == "a.py:30"
    shown = view.build(report)
    for words in (text.render(shown), text.render(shown, quiet=True), html.render(shown),
                  formats.render(report, "gradescope", None)):
        assert "a.py:29" in words and "a.py:30" in words, words[:400]


def test_the_summary_row_and_the_class_view_name_both_mistakes():
    """grade's summary said only the first of two mistakes named together, and the class view counted only it: the
    second (its own line and fix in every report) was invisible where a grader looks across the class."""
    import csv
    import io

    from harness.frontends import batch_files
    from harness.frontends.grader import graded
    from harness.render import class_report

    row = graded("bob", "a.py:Attn", _two_mistake_report(), {"format": "json"}, 0.0)["row"]
    assert (row["diagnosis"], row["second_mistake"]) == ("no-scaling", "finite-fill")
    one = dict(row, submission="cyd", diagnosis="finite-fill", second_mistake="")
    read = list(csv.DictReader(io.StringIO(batch_files.summary_text([row, one]))))  # as --only reads it back
    for rows in ([row, one], read):
        shown = class_report.build(rows, [(c.id, c.claim) for c in all_checks()], mutants.catalogue(), {})
        assert [(m.id, [s.name for s in m.students]) for m in shown.mistakes] == [
            ("finite-fill", ["bob", "cyd"]), ("no-scaling", ["bob"])]
        assert [s.named for s in shown.students] == ["no-scaling + finite-fill", "finite-fill"]
        assert shown.unnamed == []
        assert "no-scaling + finite-fill" in class_report.page(shown)


def test_two_rotary_mistakes_compose_in_one_rotary_layer_and_are_that_pair():
    """Every rotary mistake declares the layer it is made in (`rope`): compose refused any two of them as "the same
    knob twice", so the values rotated with the keys left alone was no mistake and no pair, and no check failed."""
    from reference.rotary import Rope

    rope, knobs = Rope("interleaved"), mutants.variants()
    assert variants.compose(knobs["rope-on-values"], knobs["rope-keys-not-rotated"]) == {
        "rope": "interleaved", "rope_values": True, "rope_keys": False}
    assert variants.compose(knobs["rope-on-values"], {"rope": "half", "rope_keys": False}) is None  # two rotations
    out = []
    for i, (b, n, d, h) in enumerate(SHAPES):
        rng = np.random.default_rng(i)
        w = numpy_ref.random_weights(rng, d, d, qkv_bias=True)
        x = rng.standard_normal((b, n, d))
        y = variants.forward(x, h, w, rope_values=True, rope_keys=False, **rope.knobs())
        out.append(pairs.Sample(x, h, w, y, numpy_ref.forward(x, h, w, rope=rope)))
    rotary = {**multi_head(), **{m: k for m, k in knobs.items() if m.startswith("rope-")}}
    assert pairs.reproducing(out, rotary, mutants.fitted(), rope) == [("rope-keys-not-rotated", "rope-on-values")]


def test_two_patterns_in_checks_apart_are_two_mistakes_and_overlapping_ones_are_not():
    """A wrapper of full-width heads with no projection (its shape and counts) and a softmax over the queries (its
    leak along the token axis): each signature in checks the other's does not name, so both are named; two patterns
    in one check are no such evidence."""
    from harness.engine import diagnosis

    catalogue = mutants.catalogue()
    assert diagnosis._apart(["softmax-wrong-axis", "full-width-heads-no-projection"], catalogue) == (
        "softmax-wrong-axis", "full-width-heads-no-projection")
    overlapping = [m for m in catalogue if m != "softmax-wrong-axis" and catalogue[m]["signature"]
                   and {s.split(":")[0] for s in catalogue[m]["signature"]} & {"causal-leakage"}]
    assert overlapping and diagnosis._apart(["softmax-wrong-axis", overlapping[0]], catalogue) is None
    assert diagnosis._apart(["softmax-wrong-axis"], catalogue) is None


def test_a_mistake_every_reproducing_pair_shares_needs_no_mark_of_its_own():
    """An inverted mask with a finite fill: the fill is finite-fill's -10 or finite-fill-100's -100 by the numbers
    (both tried values reproduce a -1e4 fill), the inverted mask is in both pairs.  The marked fill decides which
    pair; the inverted mask, in every pair that reproduces, needs no mark of its own (torchtext's -1e8 fill with its
    inverted square subsequent mask)."""
    catalogue = mutants.catalogue()
    both = [("finite-fill", "mask-inverted"), ("finite-fill-100", "mask-inverted")]
    assert pairs.choose(both, [], catalogue) is None
    marks = [{"id": catalogue["finite-fill-100"]["trace"][0], "mutant": "finite-fill-100"}]
    assert pairs.choose(both, marks, catalogue) == ("finite-fill-100", "mask-inverted")


def test_a_rule_broken_beside_the_root_cause_is_counted_in_the_class_view():
    """A student's trial (instructor): ten layers without a divisibility guard, seven of them with a mistake of the
    math too; the class view ranked no-divisibility-check under 3 students while its own pass rates showed all 10
    failing divisibility, and summary.csv's second_mistake was empty. A failing rule whose finding is exactly one
    catalogued mistake's is now that student's rule mistake too (`rule_mistakes`), counted with the others."""
    from harness.frontends.grader import graded
    from harness.render import class_report

    report = _two_mistake_report()
    report.checks = [CheckResult.of(c, Outcome("fail", "built a module for d_out=8 with 3 heads",
                                               details={"finding": "no divisibility check"}))
                     if c.id == "divisibility" else r for c, r in zip(all_checks(), report.checks)]
    row = graded("bob", "a.py:Attn", report, {"format": "json"}, 0.0)["row"]
    assert (row["diagnosis"], row["second_mistake"], row["rule_mistakes"]) == \
        ("no-scaling", "finite-fill", "no-divisibility-check")
    alone = graded("cyd", "a.py:Attn", _two_mistake_report(), {"format": "json"}, 0.0)["row"]
    assert alone["rule_mistakes"] == ""
    shown = class_report.build([row, alone], [(c.id, c.claim) for c in all_checks()], mutants.catalogue(), {})
    assert [(m.id, [s.name for s in m.students]) for m in shown.mistakes] == [
        ("finite-fill", ["bob", "cyd"]), ("no-scaling", ["bob", "cyd"]), ("no-divisibility-check", ["bob"])]
