"""Independently written implementations (tests/zoo/): correct ones in many layouts pass every check with a
reproduced weight mapping and no mistake named; buggy ones fail the checks made for their mistake and are
diagnosed as it."""
import pytest

from conftest import ROOT, ZOO, zoo_constants

pytestmark = pytest.mark.slow
CORRECT = sorted((ZOO / "correct").glob("*.py"))
BUGGY = sorted((ZOO / "buggy").glob("*.py"))


def target(path):
    return f"{path}:{zoo_constants(path)['TARGET']}"


def _named(report) -> str | tuple[str, str] | None:
    """The mistake the report names, None when it names none (or nothing failed); two made together (two_*.py) as
    a pair, as their files' DIAGNOSIS declares them."""
    d = report.diagnosis
    return None if d is None else (d.mutant, d.also.mutant) if d.also else d.mutant


@pytest.fixture(scope="module", autouse=True)
def _want(reports):
    reports.want([target(p) for p in CORRECT + BUGGY])


def test_zoo_is_big_enough():
    assert len(CORRECT) >= 6 and len(BUGGY) >= 14


@pytest.mark.parametrize("path", CORRECT, ids=[p.stem for p in CORRECT])
def test_correct_implementation_passes_every_check(path, reports):
    """Every check of the math passes; of the lesson's rules, all but those the file says it breaks (RULES_BROKEN:
    a finite fill, which the layer's numbers never show, is still not the lesson's -inf)."""
    report = reports(target(path))
    broken = set(zoo_constants(path).get("RULES_BROKEN", ()))
    assert [(c.id, c.status, c.message) for c in report.checks if c.status != "pass" and c.id not in broken] == []
    assert {c.id for c in report.checks if c.id in broken and c.status == "fail" and c.kind == "rule"} == broken
    assert report.adapter.mapping["proof"] == "reference", report.adapter
    assert report.diagnosis is None or (broken and report.diagnosis.mutant == zoo_constants(path).get(
        "RULE_MISTAKE"))  # no mistake of the math named; a rule broken, as its own mistake where one is catalogued


@pytest.mark.parametrize("path", BUGGY, ids=[p.stem for p in BUGGY])
def test_buggy_implementation_fails_the_check_made_for_its_mistake(path, reports):
    expect = zoo_constants(path)["EXPECT"]
    assert expect, "a buggy zoo file must name the checks that catch it"
    statuses = {c.id: c.status for c in reports(target(path)).checks}
    assert {cid: statuses[cid] for cid in expect if statuses[cid] != "fail"} == {}


@pytest.mark.parametrize("path", BUGGY, ids=[p.stem for p in BUGGY])
def test_buggy_implementation_is_diagnosed_as_its_mistake_or_not_at_all(path, reports):
    """Never a wrong name: the diagnosis is the mistake the file was written with, or "no known mistake matches"
    where the file's mistake is not exactly a catalogued one (UNNAMED_OK)."""
    want = zoo_constants(path)
    got = _named(reports(target(path)))
    assert got == want["DIAGNOSIS"] or (got is None and want.get("UNNAMED_OK")), (want["DIAGNOSIS"], got)


UNTOUCHED = [p for p in BUGGY if zoo_constants(p).get("MUST_PASS")]


@pytest.mark.parametrize("path", UNTOUCHED, ids=[p.stem for p in UNTOUCHED])
def test_buggy_implementation_passes_the_checks_its_mistake_does_not_touch(path, reports):
    """Issue 28: a layer without an output projection is read without one (W_o the identity) once that reading
    reproduces it (item 3), and the weight-free checks run and decide as before: a layer whose only mistake is the
    missing projection, or a mask on the CPU beside it, passes the checks it does not touch, the weight checks among
    them; no cannot-tell."""
    statuses = {c.id: c.status for c in reports(target(path)).checks}
    assert {cid: statuses[cid] for cid in zoo_constants(path)["MUST_PASS"] if statuses[cid] != "pass"} == {}


def test_nearly_every_unseen_buggy_implementation_of_a_catalogued_mistake_is_named(reports):
    catalogued = [p for p in BUGGY if zoo_constants(p)["DIAGNOSIS"]]  # DIAGNOSIS = None: no mutant is its mistake
    named = [p.stem for p in catalogued if _named(reports(target(p))) ==
             zoo_constants(p)["DIAGNOSIS"]]
    assert len(named) >= 0.9 * len(catalogued), sorted(set(p.stem for p in catalogued) - set(named))


def test_the_figures_docs_checks_md_gives_for_the_buggy_zoo_are_the_measured_ones(reports):
    """docs/checks.md says how many buggy zoo modules are named right: a figure typed once went stale (it said 23 of
    23 when the zoo had grown to 113), so the sentence is held to what the reports say."""
    catalogued = [p for p in BUGGY if zoo_constants(p)["DIAGNOSIS"]]
    named = [_named(reports(target(p))) for p in catalogued]
    right = sum(got == zoo_constants(p)["DIAGNOSIS"] for p, got in zip(catalogued, named))
    unnamed = sum(got is None for got in named)
    sentence = (f"{len(BUGGY)} independently written buggy modules of `tests/zoo/buggy/`: of the {len(catalogued)} "
                f"whose mistake is catalogued, {right} named "
                f"right and {unnamed} told \"no known mistake matches\"; "
                f"none named wrong")
    assert right + unnamed == len(catalogued)  # (never a wrong name: test_buggy_implementation_is_diagnosed_as_...)
    assert sentence in " ".join((ROOT / "docs" / "checks.md").read_text().split())  # however the lines wrap


REORDERED = {  # a known mistake in a layer whose heads are merged in another order: its file, the mistake's line
    "heads_merged_reversed_no_scale": "att = q @ k.transpose(-2, -1)",
    "heads_merged_reversed_finite_fill": "att = att.masked_fill(self.bias[:T, :T] == 0, -10.0)",
    "heads_merged_rolled_scale_by_sqrt_d": "scores = q @ k.transpose(2, 3) / d ** 0.5",
    "heads_strided_no_scale":
        "att = (q @ k.transpose(-1, -2)).masked_fill(self.fut[:T, :T], float(\"-inf\")).softmax(-1)",
    "per_head_list_reversed_no_scale": "wei = q @ k.transpose(-2, -1)",
    "heads_reversed_no_proj_no_scale": "att = q @ k.transpose(-2, -1)",  # (W_q, W_k, W_v's rows read reversed)
    "prenorm_sublayer_heads_reversed_scale_by_sqrt_d":  # (read with its norm switched off)
        "y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=x.size(-1) ** -0.5)",
}


@pytest.mark.parametrize("stem", sorted(REORDERED))
def test_a_mistake_beside_heads_in_another_order_fails_the_math_and_is_named_at_its_line(stem, reports):
    """Issue 28, "a real bug must never end with zero failing checks": heads merged last first, rolled, or on strided
    features are a reading mha-check accepts; a known mistake beside them made every check of the math cannot-tell
    (no reading reproduced the layer, and the mistakes were tried in the lesson's head order only), or, where the
    parameters' reading was certain by structure, left the failure unnamed.  Under the order's reading the mistake
    reproduces the layer: the mapping is proven by it, every check of the math decides, and the mistake is named by
    its numbers at its line, as in the lesson's head order (a layer without an output projection: its heads read
    in W_q, W_k and W_v's rows, and the missing projection named beside the mistake)."""
    path = ZOO / "buggy" / f"{stem}.py"
    report = reports(target(path))
    mapping = report.adapter.mapping
    assert mapping["proof"] == "mistake" and "head_order" in mapping, mapping
    assert [c.id for c in report.checks if c.status == "cannot_tell"] == []
    root = report.diagnosis
    assert (_named(report), root.match) == (zoo_constants(path)["DIAGNOSIS"], "numbers"), root
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.strip() == REORDERED[stem])
    assert root.at is not None and root.at.endswith(f"{path.name}:{line}"), root.at


UNAPPLIED = {  # an output projection made in __init__ and never applied: its file, its name, the fix in the student's
    # names
    "nanogpt_c_proj_never_applied": ("self.c_proj", "return self.resid_dropout(self.c_proj(y))"),
    "two_c_proj_never_applied_no_scale": ("self.c_proj", "return self.resid_dropout(self.c_proj(y))"),
    "two_out_never_applied_scale_by_dh": ("self.out", "return self.out(ctx)"),
    "two_proj_never_applied_softmax_dim2": ("self.proj", "return self.proj(out)"),
    "own_out_proj_never_applied": ("self.out_proj", "return self.out_proj(ctx)"),
    "out_proj_made_not_applied": ("self.out", "return self.out(ctx)"),
}


@pytest.mark.parametrize("stem", sorted(UNAPPLIED))
def test_an_output_projection_made_and_never_applied_is_named_in_the_students_names(stem, reports):
    """Issue 28: parameters-used's "unused parameter" was one signature for every parameter without a gradient, so
    nanoGPT's c_proj made and never applied, beside a second mistake, was named weights-under-no-grad; alone, it was
    told to "add an output projection nn.Linear(d_out, d_out) in __init__", which it has.  Now the finding says which
    projection gets no gradient (W_o, under the proven reading), the mistake is no-output-projection from the numbers
    (with the other one where there is one), and its fix is the student's return line with their projection
    applied; its words say the projection is made and never applied, not missing parameters."""
    path = ZOO / "buggy" / f"{stem}.py"
    report = reports(target(path))
    root = report.diagnosis
    unapplied = root if root.mutant == "no-output-projection" else root.also
    module, fix = UNAPPLIED[stem]
    assert (unapplied.mutant, unapplied.match, unapplied.fix) == ("no-output-projection", "numbers", fix)
    assert module in unapplied.title and "too few" not in unapplied.symptom, unapplied
    assert "parameters-used" in unapplied.follows
    used = next(c for c in report.checks if c.id == "parameters-used")
    assert used.details["finding"] == "unused output projection" and module in used.fix, used


HAND_SOFTMAX = ("hand_softmax_row_max_sees_future", "hand_softmax_max_values_fill_zero", "hand_softmax_exp_times_tril")


@pytest.mark.parametrize("stem", HAND_SOFTMAX)
def test_a_softmax_by_hand_whose_row_maximum_sees_the_future_is_told_at_that_line_not_as_a_fill(stem, reports):
    """trial6: exp(s - s.amax(-1)) * keep / sum leaks by rounding (its row maximum holds the future's score), the
    small leak a fill of -100 shows; the report named finite-fill-100 from that pattern alone ("fill the masked
    scores with float('-inf')"), in a layer that fills nothing.  The trace marks the maximum's line
    (exp-before-mask), whose pattern it is: no fill is named, and the report points to that line."""
    path = ZOO / "buggy" / f"{stem}.py"
    report = reports(target(path))
    root = report.diagnosis
    assert (root.mutant, [k["id"] for k in root.marks]) == (None, ["exp-before-mask"]), root
    assert f"{path.name}:{zoo_constants(path)['LINE']}" in root.message, root.message
    leak = next(c for c in report.checks if c.id == "causal-leakage")
    assert (leak.status, leak.details["finding"]) == ("fail", "leak:small-leak"), leak


HIDES_PAST = {"own_mask_hides_past_bmm": "tril(", "student_mask_hides_past": "tril(", "hf_style_own_mask_triu": "triu(",
              "own_mask_hides_past_triu_keep": "triu("}  # each file's way of writing it


@pytest.mark.parametrize("stem", sorted(HIDES_PAST))
def test_a_mask_that_hides_the_past_is_titled_in_the_way_the_file_writes_it(stem, reports):
    """trial6: a keep mask made with torch.triu(ones) was named mask-hides-past, right, under the title "Mask made with
    torch.tril(..., diagonal=-1)", a line the file never wrote; the title says both ways of writing it."""
    path = ZOO / "buggy" / f"{stem}.py"
    root = reports(target(path)).diagnosis
    assert root.mutant == "mask-hides-past" and HIDES_PAST[stem] in (root.code or ""), root
    assert f"torch.{HIDES_PAST[stem]}" in root.title and "hides the past and keeps the future" in root.title, root.title


def test_a_missing_mask_of_nn_multiheadattention_is_fixed_with_its_attn_mask(reports):
    """Issue 28: a layer that wraps nn.MultiheadAttention and passes no mask was told to mask the scores with
    masked_fill, which it never computes; its fix is the call's attn_mask (is_causal=True alone raises there)."""
    path = ZOO / "buggy" / "mha_wrapper_no_mask.py"
    root = reports(target(path)).diagnosis
    assert (root.mutant, root.at) == ("no-mask", f"{path.name}:{zoo_constants(path)['LINE']}"), root
    assert "attn_mask" in root.fix and "masked_fill" not in root.fix and not root.fix_is_code, root.fix


def test_a_missing_mask_is_told_at_the_softmax_also_when_each_head_runs_its_own(reports):
    """trial13: Karpathy's Head in an nn.ModuleList without its masked_fill was named no-mask with no line: the
    place was looked for only where the forward ran exactly one softmax, and it runs one a head, all on one line."""
    path = ZOO / "buggy" / "karpathy_heads_no_mask.py"
    root = reports(target(path)).diagnosis
    assert (root.mutant, root.at) == ("no-mask", f"{path.name}:{zoo_constants(path)['LINE']}"), root


def test_a_view_error_on_a_slice_never_advises_contiguous(reports):
    """A chunk of a fused projection viewed in the wrong order raises; .contiguous() would make it silently wrong."""
    report = reports(target(ZOO / "buggy" / "fused_slice_wrong_view.py"))
    contiguity = next(c for c in report.checks if c.id == "contiguity")
    assert contiguity.status == "fail"
    assert ".view(B, n, H, dh)" in contiguity.fix and "would only hide the error" in contiguity.fix
    assert "the tokens where the heads belong" in contiguity.message and report.diagnosis.mutant is None


def test_a_softmax_over_the_heads_is_told_as_such_not_as_the_queries_axis(reports):
    """The catalogued mistake is a softmax over the queries (dim=-2); over the heads its effect differs, and the
    report tells the student's own axis, with their own line corrected."""
    root = reports(target(ZOO / "buggy" / "softmax_over_heads.py")).diagnosis
    assert root.mutant == "softmax-wrong-axis" and "heads" in root.title and "queries" not in root.title
    assert "NaN" in root.symptom and "later queries" not in root.symptom
    assert root.fix == "weights = self.dropout(F.softmax(scores, -1))"


def test_a_forward_that_raises_gets_a_fix_about_shapes_not_about_masks(reports):
    """output-shape's general fix (return out_proj(context); NaN means a fully masked row) is wrong advice for an
    exception: the fix then points to the line that raised and to the shape trace."""
    report = reports(target(ZOO / "buggy" / "heads_never_transposed.py"))
    shape = next(c for c in report.checks if c.id == "output-shape")
    assert shape.status == "fail" and shape.message.startswith("forward raised")
    assert "mha-check trace" in shape.fix and "NaN" not in shape.fix


def test_a_fill_value_other_than_the_catalogues_is_told_with_its_own_value_and_size(reports):
    root = reports(target(ZOO / "buggy" / "fill_zero.py")).diagnosis
    assert root.mutant == "finite-fill" and root.title == "Masked scores filled with 0 instead of -inf"
    assert "-10" not in root.symptom and "small" not in root.symptom
    assert root.fix == 'wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))'


GROUPED_REFERENCE = f"{ROOT / 'reference' / 'grouped_mha.py'}:GroupedMHA"


def test_the_grouped_reference_passes_every_check_as_grouped_query_attention(reports):
    """reference/grouped_mha.py, which the gqa- mutants copy, passes every check, built with fewer key/value heads."""
    report = reports(GROUPED_REFERENCE)
    assert [(c.id, c.status, c.message) for c in report.checks if c.status != "pass"] == []
    assert report.adapter.mapping["proof"] == "reference" and report.diagnosis is None
    count = next(c for c in report.checks if c.id == "param-count")
    assert "grouped-query" in count.message


def test_a_kv_heads_argument_given_with_arg_is_used_where_it_divides_the_heads(reports):
    """Issue 31: `--arg num_kv_groups=2` used to build 3-head configurations with 2 key/value heads (construct
    failed) or crash mha-check with a TypeError; now 2 is used where it divides the heads."""
    report = reports(target(ZOO / "correct" / "gqa_rasbt.py"), overrides={"num_kv_groups": 2})
    assert [(c.id, c.status, c.message) for c in report.checks if c.status != "pass"] == []
    assert report.adapter.mapping["proof"] == "reference"


def test_a_config_object_layer_that_reads_its_key_value_heads_is_checked_as_grouped(reports):
    """A Llama-style `Attention(config)` takes no parameter for its key/value heads: what it reads off the config
    object (num_key_value_heads) makes it grouped, so it is built with 2 of 4 and 1 of 3 key/value heads and counted
    by the grouped formula (before, the config answered as many as the heads, and a .repeat pairing passed)."""
    report = reports(target(ZOO / "correct" / "gqa_hf_llama_config.py"))
    checks = {c.id: c for c in report.checks}
    assert "grouped-query" in checks["param-count"].message
    assert "in groups of 2" in checks["head-invariance"].message


def test_a_forward_random_without_dropout_is_not_told_as_dropout_left_on(reports):
    """A layer created in forward draws new weights at every call: eval-determinism fails, but built with dropout=0
    it is random too, so the message says something in forward is random, not that dropout is still active."""
    report = reports(target(ZOO / "buggy" / "own_layer_in_forward.py"))
    check = next(c for c in report.checks if c.id == "eval-determinism")
    assert check.status == "fail" and check.details["finding"] == "random in eval", check.message
    assert "dropout is still active" not in check.message and "random at every call" in check.message
    assert "__init__" in check.fix and "nn.Dropout" not in check.fix


def test_a_trace_mark_the_checks_refute_is_not_where_to_look(reports):
    """A student's trial: `scores * self.log_tau.exp()` (a learnable temperature of 1/sqrt(dh)) was marked "the scores
    are never scaled", and the report sent the student to that mark, while reference-match and gradient-match (the
    checks made for no-scaling) passed.  A mark of a mistake every check of which passed is not shown."""
    root = reports(target(ZOO / "buggy" / "per_head_temperature.py")).diagnosis
    assert root.mutant is None and "trace marks" not in root.message, root.message
    assert not any(m["mutant"] == "no-scaling" for m in root.marks or ()), root.marks


def test_the_report_gives_the_marked_line_of_a_mistake_it_does_not_name(reports):
    """A student's trial: the report said "mha-check trace marks the step that looks wrong" without the line, while
    trace named the line (the student's tril where triu belongs); and causal-leakage told them of a `~mask` they had
    never written."""
    root = reports(target(ZOO / "buggy" / "heads_never_transposed.py")).diagnosis
    assert root.mutant is None and root.message.endswith("marks the step that looks wrong "
                                                          "(heads_never_transposed.py:32)"), root.message
    report = reports(target(ZOO / "buggy" / "student_mask_hides_past.py"))  # named since mask-hides-past, there
    assert (report.diagnosis.mutant, report.diagnosis.at) == ("mask-hides-past", "student_mask_hides_past.py:22")
    leak = next(c for c in report.checks if c.id == "causal-leakage")
    assert "as tril where triu belongs would" in leak.message


def test_a_mask_cached_in_forward_is_told_by_its_attribute_not_as_made_without_device(reports):
    """A student's trial: the mask made in forward with device=x.device, but kept in a plain attribute for the next
    calls; the report named mask-no-device ("made without device=") and its fix, which the student had applied."""
    path = ZOO / "buggy" / "mask_cached_in_forward.py"
    check = next(c for c in reports(target(path)).checks if c.id == "mask-buffer")
    assert check.status == "fail" and "_mask" in check.message and "register_buffer" in (check.fix or ""), check


def test_dropout_by_hand_left_on_is_titled_by_what_the_code_does(reports):
    """A student's trial: a keep-mask drawn with torch.rand_like at every call was named dropout-in-eval under the
    title "F.dropout(..., training=True)", a call the code never makes, and without its line."""
    root = reports(target(ZOO / "buggy" / "own_dropout_in_eval_by_hand.py")).diagnosis
    assert root.mutant == "dropout-in-eval" and "F.dropout" not in root.title and "rand_like" in root.title, root


def test_a_frozen_mask_parameter_is_not_called_trainable(reports):
    """nn.Parameter(mask, requires_grad=False) is no trainable parameter: mask-buffer says what it does instead
    (model.parameters() yields it, so the lesson's count gains its entries) - student10's trial."""
    path = ZOO / "buggy" / "mask_frozen_bool_parameter.py"
    check = next(c for c in reports(target(path)).checks if c.id == "mask-buffer")
    assert check.status == "fail" and "requires_grad=False" in check.message, check.message
    assert "trainable" not in check.message and "model.parameters()" in check.message, check.message


def test_a_cache_buffer_that_keeps_the_graph_is_told_so_with_a_fix_that_detaches_it(reports):
    """A KV cache written in place into buffers and read back (Meta llama's) ties each call's graph to the last:
    the second backward raises. gradient-match had said "keep the forward differentiable: no .detach()", the
    opposite of the fix, which its correct twin (the fix pasted) shows passing (student11)."""
    report = reports(target(ZOO / "buggy" / "llama_cache_buffer_keeps_graph.py"))
    for check_id in ("gradient-match", "parameters-used"):
        line = next(c for c in report.checks if c.id == check_id)
        assert line.status == "fail" and "keeps autograd history" in line.message
        assert "cache_k" in line.message and "k.detach()" in line.fix and "no torch.no_grad()" not in line.fix


def test_a_cache_handed_back_and_forth_is_told_a_fix_for_it_not_reset_cache_and_ptr(reports):
    """kv-cache's fix speaks of ptr and reset_cache(); a tuple cache (`layer_past`) whose cached keys are rotated
    twice, named by no mistake, was told to reset a ptr it has not (student11)."""
    report = reports(target(ZOO / "buggy" / "gptj_tuple_cache_keys_rotated_twice.py"))
    line = next(c for c in report.checks if c.id == "kv-cache")
    assert line.status == "fail" and report.diagnosis.mutant is None
    assert "reset_cache()" not in line.fix and "ptr" not in line.fix
    assert "from the cache you are handed" in line.fix and "rotate each key once" in line.fix


def test_an_inverted_mask_of_nn_multiheadattention_is_told_as_its_numbers_show_a_leak_and_a_bias(reports):
    """nn.MultiheadAttention given tril as its boolean attn_mask: the last token's row, every key hidden, gets zero
    weights under autograd (its output the projection's bias), NaN only in the no-grad fast path; the report said
    "its output is NaN", which the numbers reference-match compares do not show (fixes28 item 1)."""
    root = reports(target(ZOO / "buggy" / "own_mask_inverted_mha_tril.py")).diagnosis
    assert root.mutant == "mask-inverted", root
    assert "bias" in root.symptom and "later tokens" in root.symptom, root.symptom
    assert not root.symptom.endswith("so its output is NaN."), root.symptom


def test_key_value_heads_tiled_by_expand_are_titled_by_the_expand_not_by_repeat(reports):
    """gqa-repeat-not-interleave's title speaks of `.repeat`; a layer that tiles its key/value heads with expand() on
    a new axis before them has no .repeat to look for (fixes28 item 2); one written with .repeat keeps the title."""
    root = reports(target(ZOO / "buggy" / "own_gqa_expand_group_first.py")).diagnosis
    assert root.mutant == "gqa-repeat-not-interleave" and "expand" in root.code, root
    assert "expanded with .repeat instead" not in root.title and "expanded along a new axis" in root.title, root.title
    repeat = reports(target(ZOO / "buggy" / "own_gqa_repeat_kv.py")).diagnosis
    assert repeat.mutant == "gqa-repeat-not-interleave" and ".repeat instead of" in repeat.title, repeat.title


def test_a_tensor_left_on_the_cpu_is_told_once_for_each_line_that_meets_it(reports):
    """A rotary line multiplying by two tables kept as plain attributes read "mul at ...:51 uses a (1, 5, 1, 2) tensor
    that stays on the CPU" three times over, and the reason once per table (fixes28 item 3)."""
    check = next(c for c in reports(target(ZOO / "buggy" / "rotary_plain_attr_cache_negative_angle.py")).checks
                 if c.id == "mask-buffer")
    assert check.status == "fail", check
    head = check.message.split(": RuntimeError")[0]
    assert head.count("stays on the CPU") == 1 and head.count("set by forward") == 1, check.message
    assert "rotation.cos_table and rotation.sin_table" in head, check.message


def test_a_default_mask_made_from_the_batch_axis_is_told_at_the_line_that_makes_it(reports):
    """causal-leakage's default-mask probe (forward(x), the mask left out) found the mask wrong with no line; a
    recorded forward on the batch where it leaks shows the (1, 1) mask made at the student's line meeting (5, 5)
    scores (fixes28 item 6)."""
    path = ZOO / "buggy" / "default_mask_from_batch_axis.py"
    leak = next(c for c in reports(target(path)).checks if c.id == "causal-leakage")
    assert leak.status == "fail" and leak.details.get("finding") == "leak:default-mask", leak
    assert f"at {path.name}:34 (`mask = torch.tril(torch.ones(x.size(0), x.size(0)" in leak.message, leak.message
    assert "is (1, 1) on (B=1, n=5), where the scores it meets are (5, 5)" in leak.message, leak.message


@pytest.mark.parametrize("stem,finding", [("kv_cache_unsliced_zero_slots", "empty cache slots read"),
                                          ("kv_cache_rope_cached_keys_twice", "cached keys rotated twice"),
                                          ("gptj_tuple_cache_keys_rotated_twice", "cached keys rotated twice"),
                                          ("dict_cache_rope_cached_keys_twice", "cached keys rotated twice")])
def test_a_cache_read_whole_or_its_keys_rotated_twice_fails_kv_cache_by_its_numbers_and_is_told_at_its_line(
        stem, finding, reports):
    """fixes28 item 5: a cache preallocated with zeros and read whole, and cached keys rotated again with the new
    ones, failed kv-cache with no more said and `trace` marked nothing (it showed the plain forward alone): the first
    decoded token now equals a numeric variant of the mistake (the finding), and the decoded call's trace marks the
    line, which the report gives; no catalogued mistake is named. A cache handed in and returned (a tuple, a dict)
    had no line, the trace's mark reading only caches kept on the layer (fixes28b item 3)."""
    path = ZOO / "buggy" / f"{stem}.py"
    report = reports(target(path))
    cache = next(c for c in report.checks if c.id == "kv-cache")
    assert cache.status == "fail" and cache.details.get("finding") == finding, cache.message
    assert report.diagnosis.mutant is None, report.diagnosis
    assert report.diagnosis.message.endswith(f"marks the step that looks wrong ({path.name}:"
                                             f"{zoo_constants(path)['LINE']})"), report.diagnosis.message


def test_a_correct_cache_has_neither_cache_mark(reports):
    """The two marks of fixes28 item 5 never on a cache that decodes right (rotated once before the join; sliced)."""
    for stem in ("rotary_kv_cache", "kv_cache_pointer_mask", "kv_cache_sdpa_past", "llama_cache_buffer_detached",
                 "llama_cache_max_batch_4"):
        report = reports(target(ZOO / "correct" / f"{stem}.py"))
        assert report.passed, (stem, [(c.id, c.message) for c in report.checks if c.status != "pass"])


def test_a_finite_fill_in_a_float_mask_given_to_sdpa_is_told_at_the_line_that_made_it(reports):
    """Student trial 12: a float attn_mask buffer with -100 above the diagonal was named finite-fill-100 with no line
    (the trace read fills of masked_fill, where and additions only, and marked nothing)."""
    path = ZOO / "buggy" / "sdpa_float_bias_finite_fill.py"
    root = reports(target(path)).diagnosis
    assert (root.mutant, root.at) == ("finite-fill-100", f"{path.name}:{zoo_constants(path)['LINE']}"), root


@pytest.mark.parametrize("stem,fix", [("rotary_half_interleaved_tables", "torch.cat((freqs, freqs), dim=-1)"),
                                      ("rotary_every_two_half_tables", "repeat_interleave(2, dim=-1)")])
def test_a_rotation_whose_tables_are_laid_out_for_the_other_pairs_fails_by_its_numbers_at_its_line(
        stem, fix, reports):
    """fixes28b item 1: repeat_interleave tables with rotate_half (or cat tables with rotate-every-two) turn the two
    features of a pair by different angles, no rotation; it was cannot tell, with --map as the help. Read with its
    pairs and tables as written (which reproduces it exactly), it is compared with the rotary reference of its own
    pairs: reference-match fails, says which layout the tables need, and the report gives trace's line."""
    path = ZOO / "buggy" / f"{stem}.py"
    report = reports(target(path))
    check = next(c for c in report.checks if c.id == "reference-match")
    assert check.status == "fail" and check.details.get("finding") == "rotary tables of the other convention", check
    assert fix in check.fix, check.fix
    assert report.adapter.mapping["proof"] == "mixed-rotary", report.adapter.mapping
    assert report.diagnosis.mutant is None and report.diagnosis.message.endswith(
        f"marks the step that looks wrong ({path.name}:{zoo_constants(path)['LINE']})"), report.diagnosis.message
