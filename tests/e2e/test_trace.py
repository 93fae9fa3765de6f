"""`mha-check trace`: the lesson's steps named in order, known mistakes marked where they show, the arithmetic.

Each trace starts a child process (about 1.2 s); the runs are few and the mutant sweep runs two at a time.
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import mutants
from checks import all_checks
from harness.engine.trace.result import arithmetic
from harness.engine.trace.vocabulary import LESSON_STEPS
from harness.frontends.trace import main, trace
from harness.render.trace_text import render
from harness.sandbox.pool import Fork
from harness.sandbox.subject import Subject
from conftest import zoo_constants

pytestmark = pytest.mark.usefixtures("warm_single_runs")  # see conftest

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = str(ROOT / "reference" / "causal_mha.py") + ":CausalMHA"


def mutant(name: str) -> str:
    return str(ROOT / "mutants" / f"{name}.py") + ":CausalMHA"


@pytest.fixture(scope="module")
def reference_trace():
    return trace(REFERENCE, d=768, heads=12, qkv_bias=True)  # the arithmetic for GPT-2 small's attention layer


def test_reference_takes_the_lessons_steps_in_order(reference_trace):
    r = reference_trace
    assert r.error is None and r.ok
    assert r.lesson_order == list(LESSON_STEPS) and r.missing == []
    assert r.mistakes == []
    assert r.output_shape == [2, 3, 8]
    text = render(r, wide=True)
    assert "  " + " -> ".join(LESSON_STEPS) in text.splitlines()
    assert "no known mistake shows" in render(r)
    labels = [s.label for s in r.steps]
    assert labels[:3] == ["project", "split", "move heads forward"] and labels[-1] == "output projection"
    split = next(s for s in r.steps if s.label == "split")
    assert (split.op, split.shapes, split.symbols) == ("view", "(2, 3, 8) -> (2, 3, 2, 4)",
                                                       "(B, n, d) -> (B, n, H, dh)")
    mask = next(s for s in r.steps if s.op == "masked_fill")
    assert mask.label == "mask" and "-inf" in mask.call and mask.at.startswith("causal_mha.py:")


def test_gpt2_arithmetic(reference_trace):
    a = reference_trace.arithmetic
    assert (a["head_width"], a["param_formula"], a["param_counted"]) == (64, 2_362_368, 2_362_368)
    assert (a["score_entries"], a["score_bytes_float32"]) == (12_582_912, 50_331_648)
    text = render(reference_trace)
    assert "2,362,368" in text and "12,582,912 entries" in text and "50.3 MB" in text
    assert arithmetic(768, 12, 1024, 1, qkv_bias=False)["param_formula"] == 2_360_064  # the lesson's figure
    assert arithmetic(8, 2, 3, 2)["param_formula"] == 264


def test_split_view_order_is_marked_at_the_split(capsys):
    code = main(["trace", mutant("split_view_order"), "--format", "json", "--n", "256"])  # as cli dispatches
    assert code == 1
    data = json.loads(capsys.readouterr().out)
    assert not data["ok"] and {m["mutant"] for m in data["mistakes"]} == {"split-view-order"}
    marked = [s for s in data["steps"] if s["mistake"]]
    assert marked and all(s["label"] == "split" and s["op"] == "view" for s in marked)
    assert marked[0]["symbols"] == "(B, n, d) -> (B, H, n, dh)"
    assert "move heads forward" in data["missing"]
    assert data["arithmetic"]["n"] == 256 and data["arithmetic"]["score_entries"] == 2 * 256 * 256


# (target, the mistake the trace must mark, the label of the step it is marked at; None: the forward as a whole)
SWEEP = [
    (mutant("no_mask"), "no-mask", "mask"),
    (mutant("finite_fill"), "finite-fill", "mask"),
    (mutant("softmax_wrong_axis"), "softmax-wrong-axis", "softmax"),
    (mutant("merge_no_transpose"), "merge-no-transpose", "merge"),
    (mutant("scale_by_dh"), "scale-by-dh", "scale"),
    (mutant("no_scaling"), "no-scaling", "scores"),  # never scaled: marked where the scores are made
    (mutant("dropout_in_eval"), "dropout-in-eval", "dropout"),  # training=True in eval
    (mutant("mask_no_device"), "mask-no-device", "mask"),  # torch.ones(n, n) with no device=
    (mutant("additive_mask_1e9"), "additive-mask-1e9", ""),  # where(mask, -1e9, 0): marked where -1e9 is written
    (str(ROOT / "tests" / "zoo" / "buggy" / "own_zero_after_softmax_tril.py") + ":MaskedAttention",
     "zero-after-softmax", "mask"),  # softmax, then wei * tril: not "no mask"
    (mutant("split_view_order_queries"), "split-view-order-queries", "split"),  # one projection alone: its role
    (mutant("split_view_order_keys"), "split-view-order-keys", "split"),  # is read from q @ kᵀ and weights @ v
    (mutant("split_view_order_values"), "split-view-order-values", "split"),
    (str(ROOT / "tests" / "zoo" / "buggy" / "values_split_view_order.py") + ":CausalSelfAttention",
     "split-view-order-values", "split"),  # ... or from a fused attention's q, k, v
    (str(ROOT / "tests" / "zoo" / "correct" / "fused_config_sdpa.py") + ":CausalSelfAttention", None, None),
    (str(ROOT / "tests" / "zoo" / "correct" / "d2l_bmm.py") + ":MultiHeadAttention", "fill-minus-1e9", "mask"),
    # (d2l's masked_softmax fills with -1e6: the lesson's rule, marked where mask-fill fails it)
]


@pytest.fixture(scope="module")
def swept(reports):
    """Every target traced in a child forked from the suite's warm zygotes (the command line's own path, a fresh
    child, is traced by the tests above)."""
    def one(target):
        with reports.zygotes.take() as zygote:
            return trace(target, make_subject=lambda spec, **kw: Subject(spec, start=Fork(zygote), **kw))

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip([t for t, _, _ in SWEEP], pool.map(one, [t for t, _, _ in SWEEP])))


@pytest.mark.parametrize("target,mistake,label", SWEEP, ids=[Path(t.split(":")[0]).stem for t, _, _ in SWEEP])
def test_known_mistakes_are_marked_and_correct_styles_are_not(swept, target, mistake, label):
    r = swept[target]
    assert r.error is None, render(r)
    if mistake is None:
        assert r.mistakes == [], render(r)
        assert r.missing in ([], ["move heads forward"]), render(r)
        return
    assert [m["mutant"] for m in r.mistakes] == [mistake], render(r)
    step = r.steps[r.mistakes[0]["step"] - 1]
    assert step.label == label and step.mistake["mutant"] == mistake
    assert mistake in render(r)


def test_a_split_mistake_on_two_projections_is_marked_as_that_pair_and_no_single_mistake():
    r = trace(str(ROOT / "tests" / "zoo" / "buggy" / "keys_values_split_view_order.py") + ":KVAttention")
    assert [(m["id"], m["mutant"]) for m in r.mistakes] == [("keys-and-values-split-without-transpose",
                                                            "split-view-order-keys-values")] * 2
    texts = [m["text"] for m in r.mistakes]
    assert texts[0].startswith("the keys are split") and texts[1].startswith("the values are split"), render(r)
    assert all("while the queries are split the lesson's way" in t for t in texts)


def test_a_forward_that_raises_is_traced_up_to_the_failing_step():
    r = trace(mutant("view_without_contiguous"))
    assert r.error and "view size is not compatible" in r.error
    assert [m["mutant"] for m in r.mistakes] == ["view-without-contiguous"]
    last = r.steps[-1]
    assert last.op == "view" and last.mistake and last.label == "merge"
    assert not r.ok


def test_a_view_that_raises_on_a_fused_projections_slice_is_a_wrong_order_not_a_missing_contiguous():
    """The same view error has two causes: after a transpose, .contiguous() is the fix; on a slice of a fused
    projection the view's sizes are out of order, and .contiguous() would turn the error into wrong numbers."""
    r = trace(str(ROOT / "tests" / "zoo" / "buggy" / "fused_slice_wrong_view.py") + ":ChunkedHeads")
    assert [(m["id"], m["mutant"]) for m in r.mistakes] == [("split-order-on-slice", None)], render(r)
    assert "would hide the error, not fix it" in r.mistakes[0]["text"]
    assert r.steps[-1].op == "view"


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["x.py", "--n", "0"])
    assert e.value.code == 2
    assert "--n must be at least 1" in capsys.readouterr().err


def test_the_table_fits_100_columns_with_the_students_line_on_its_own_row(swept, reference_trace):
    for r in [reference_trace, *swept.values()]:
        narrow, wide = render(r).splitlines(), render(r, wide=True).splitlines()
        assert max(map(len, narrow)) <= 100, [ln for ln in narrow if len(ln) > 100]
        for s in r.steps:  # the line a step comes from heads its run of operations; --wide keeps it on the row
            assert any(ln.startswith(f"  {s.statement or s.at}  ") for ln in narrow), s  # a statement over
            # several lines heads its operations once, with its lines ("attn.py:31-33")
            assert any(ln.rstrip().endswith(f"{s.at}  {s.code}".rstrip()) and f"{s.index:>3}  " in ln for ln in wide)
    marked = render(swept[mutant("no_mask")])
    assert "^ MISTAKE [no-mask]:" in marked and "mha-check explain no-mask" in marked


def test_the_mask_mha_check_passes_is_shown_as_ours_not_as_a_line_of_code():
    """A student's trial: a forward that takes its causal mask from the caller showed mha-check's own making of that
    mask under `<string>:1`, as if it were a line of code somewhere."""
    r = trace(str(ROOT / "tests" / "zoo" / "correct" / "caller_future_mask.py") + ":DecoderSelfAttention")
    made = [s for s in r.steps if s.at == "mha-check"]
    assert made and all(s.label == "mask" for s in made), render(r)
    assert not any("<string>" in (s.at or "") for s in r.steps)
    assert "made by mha-check to call your forward" in render(r)
    assert r.lesson_order.index("scores") < r.lesson_order.index("mask"), r.lesson_order  # the mask made for the
    # call is no masking step: a student's trial read "mask -> project -> ..." for a layer that masks after softmax


def test_a_mask_applied_after_the_softmax_is_ordered_so_and_the_order_note_says_order_alone_is_no_mistake():
    r = trace(str(ROOT / "tests" / "zoo" / "buggy" / "own_zero_after_softmax_tril.py") + ":MaskedAttention")
    assert r.lesson_order.index("softmax") < r.lesson_order.index("mask"), r.lesson_order
    assert "another order, or a step not seen, is no mistake by itself" in " ".join(render(r).split())
    assert "no mistake by itself" not in render(trace(REFERENCE))  # the lesson's order: nothing to say


CORRECT = sorted((ROOT / "tests" / "zoo" / "correct").glob("[a-z]*.py"))


@pytest.fixture(scope="module")
def traced_correct(reports):
    def one(path):
        name = zoo_constants(path)["TARGET"]
        with reports.zygotes.take() as zygote:
            return trace(f"{path}:{name}", make_subject=lambda spec, **kw: Subject(spec, start=Fork(zygote), **kw))

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(CORRECT, pool.map(one, CORRECT)))


def test_trace_marks_no_mistake_in_any_correct_zoo_layer(traced_correct):
    """Students' trials: projections by a 3-D or 4-D weight through einsum (`btd,hde->bhte`) were not seen as
    projections, so the scale after q @ kᵀ was not seen as a scale and the merged heads' W_o not as the output
    projection (no-scaling, no-output-projection marked on correct code); and scores kept as (B, n, n, H), heads
    last, had their right softmax(dim=2) marked softmax-wrong-axis.  The report passed all of them."""
    marked = {p.stem: [m["mutant"] or m["id"] for m in r.mistakes] for p, r in traced_correct.items() if r.mistakes}
    rules = {c.id for c in all_checks() if c.kind == "rule"}  # a lesson rule a correct layer breaks (d2l's -1e6
    # fill) is marked where the report fails that rule: the math is correct, the rule is not followed
    catalogue = mutants.catalogue()
    assert {k: v for k, v in marked.items()
            if not all(m in catalogue and catalogue[m]["killed_by"][0] in rules for m in v)} == {}


REAL_CORRECT = [p for p in sorted((ROOT / "tests" / "realzoo").glob("[a-z]*.py"))
                if zoo_constants(p)["TRUTH"] == "correct" and not zoo_constants(p).get("KNOWN_WRONG")]
# an entry carrying KNOWN_WRONG (a mistake mha-check is known to name for a correct layer, its trace marking it too:
# realzoo22's FastNLP 1.0.1 no-mask, Compressive Transformer unused-projection) is held by its strict xfail in
# tests/e2e/test_realzoo.py, as test_no_false_alarm_and_no_wrong_diagnosis_on_correct_code leaves it to that


@pytest.fixture(scope="module")
def traced_real_correct(reports):
    def one(path):
        with reports.zygotes.take() as zygote:
            return trace(f"{path}:{zoo_constants(path)['TARGET']}",
                         make_subject=lambda spec, **kw: Subject(spec, start=Fork(zygote), **kw))

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(REAL_CORRECT, pool.map(one, REAL_CORRECT)))


def test_trace_marks_no_mistake_of_the_math_in_any_correct_real_layer(traced_real_correct):
    """Code nobody here wrote, correct by its independent ground truth (tests/realzoo/_truth.py), traced as a student
    would: the trace names no mistake of the math, as the report names none (issue 28: the trace and the report never
    disagree).  A sweep found five that did: TimesFM's learned per-dimension scale on the queries read as "never
    scaled"; ESPnet's zeroing of the masked weights after a softmax it had already masked, as zero-after-softmax; a
    DTensor test's is_causal passed by position, as no mask; GeoV adding the 0/1 mask mha-check guessed for its
    required argument, as mask-added, and its RoPER (values rotated, the output turned back), as rope-on-values; and
    labml's sequence-first layer, which mha-check cannot call (its mask is [n, n, B]), traced under a guessed call
    as no-mask and softmax-wrong-axis.  Lesson rules a correct layer breaks (no bias on W_o) stay marked."""
    assert len(REAL_CORRECT) >= 60
    rules = {c.id for c in all_checks() if c.kind == "rule"}
    catalogue = mutants.catalogue()
    marked = {p.stem: [m["mutant"] or m["id"] for m in r.mistakes] for p, r in traced_real_correct.items()}
    assert {k: v for k, v in marked.items()
            if not all(m in catalogue and catalogue[m]["killed_by"][0] in rules for m in v)} == {}
    labml = traced_real_correct[ROOT / "tests" / "realzoo" / "labml_mha_seq_first.py"]
    assert any("could not tell how to call your forward" in note and "softmax-wrong-axis" in note
               for note in labml.notes), labml.notes


def test_marks_of_a_guessed_call_or_an_ambiguous_axis_are_not_named_where_the_report_names_them_not():
    """uvadlc's tutorial layer before its fix raises at its merge whichever way it is called, so the trace calls it
    without the mask it takes: its no-mask was a mark of that guess (the merge's mark stays, its evidence is the
    raise).  A layer that folds heads first, (H·B, n, dh), merges with view(H, B, n, dh).permute(1, 2, 0, 3): with
    as many sequences as heads in the worked example that reads as moving the batch, which batch-independence
    does not find; its no-output-projection, the file's one mistake, stays."""
    uvadlc = trace(str(ROOT / "tests" / "realzoo" / "uvadlc_tutorial6_mha_pre_fix.py") + ":MultiheadAttention")
    assert [m["mutant"] for m in uvadlc.mistakes] == ["merge-view-d-in"], render(uvadlc)
    assert any("raised whichever way" in note and "no-mask" in note for note in uvadlc.notes), uvadlc.notes
    folded = trace(str(ROOT / "tests" / "zoo" / "buggy" / "heads_batch_major_bool_mask_no_out_proj.py") +
                   ":FoldedHeadsAttention")
    assert [m["mutant"] for m in folded.mistakes] == ["no-output-projection"], render(folded)


def test_a_sequence_first_layer_is_traced_as_checked_and_our_transposes_say_what_they_are():
    """A sequence-first layer is traced called as the checks call it, x given as (n, B, d): mha-check's own
    transposes of the input and the output are shown as such, not as "the causal mask it passes"."""
    r = trace(str(ROOT / "tests" / "zoo" / "correct" / "seq_first_batch_first_false.py") + ":SeqFirstSelfAttention")
    ours = [s.code for s in r.steps if s.at == "mha-check"]
    assert r.mistakes == [] and len(ours) == 2, render(r)
    assert "sequence first" in ours[0] and "read back as (B, n, d)" in ours[1] and "mask" not in " ".join(ours)


def test_the_arithmetic_counts_the_layer_without_its_normalisation_as_param_count_does():
    """A pre-norm layer keeps a normalisation inside itself: the trace's count leaves its parameters out and says
    so, as param-count does (the trace said 'differs from the formula by +16' where the check passed)."""
    a = trace(str(ROOT / "tests" / "zoo" / "correct" / "prenorm_sublayer_rmsnorm.py")).arithmetic
    assert a["param_counted"] == a["param_formula"] and "not counted" in a["counted_note"]
