"""The engine's pieces without a child: comparisons as data, the diagnosis's rules of evidence on reports built by
hand, the report model, and the shared view and text renderer (order, width, plain words)."""
import re
import threading

import numpy as np
import pytest

from checks import Outcome, all_checks, needs_by_id
import mutants
from harness.engine import diagnosis, rewrite
from harness.engine.compare import close, compare, same
from harness.engine.records import Adapter, Diagnosis, ProcessEvent
from harness.engine.report import CheckResult, Report
from harness.render import text, view
from harness.render.rubric import Rubric
from harness.wire.errors import ChildEnd
from mutants._info import REWRITES

CHECKS = {c.id: c for c in all_checks()}


def result(check_id, status="pass", message="ok", **details):
    return CheckResult.of(CHECKS[check_id], Outcome(status, message, details=details))


def report(*failing, construct="pass", **kw):
    """A report where every check passes except `failing` = (id, finding) pairs."""
    bad = dict(failing)
    checks = [result(c, "fail" if c in bad else ("pass" if c != "construct" else construct),
                     f"{c} failed because of something specific" if c in bad else "fine", **(
                         {"finding": bad[c]} if bad.get(c) else {})) for c in CHECKS]
    return Report("student.py:Attn", checks, **kw)


def test_a_mismatch_is_data_with_the_tolerance():
    a = np.zeros((2, 3))
    b = a.copy()
    b[1, 2] = 0.5
    mm = compare(a, b)
    assert (mm.differing, mm.total, mm.index, mm.max_abs) == (1, 6, (1, 2), 0.5)
    assert "1 of 6 values differ beyond relative 1e-05" in mm.describe()
    assert compare(a, a + 1e-9) is None and close(a, a) and not close(a * np.nan, a)
    assert same(a * np.nan, a * np.nan) and compare(a, np.zeros(3)).describe().startswith("shape")


def test_a_mistake_is_named_on_its_signature_and_only_then():
    named = diagnosis.diagnose(report(("eval-determinism", "dropout in eval")))
    assert named.mutant == "dropout-in-eval" and named.match == "signature"
    assert named.follows == ("eval-determinism",)
    generic = diagnosis.diagnose(report(("reference-match", None)))
    assert generic.mutant is None and "no known mistake matches" in generic.message


def test_a_grouped_query_mistake_is_never_named_in_a_plain_layer():
    """A plain layer (no key/value heads of its own) that leaks every future position shows gqa-mask-one-group's
    leak signature: a layer without an output projection, no scale and a fill of -1e-9 was told it masked only the
    first group of query heads.  Its key/value heads are its heads: that mistake cannot be in it."""
    from types import SimpleNamespace

    from harness.wire.form import MULTI_HEAD

    def ctx(grouped):
        return SimpleNamespace(form=MULTI_HEAD, grouped=grouped,
                               mapping=SimpleNamespace(certain=False), recorded=lambda: 1 / 0)

    leak = report(("causal-leakage", "leak:all-future"), ("reference-match", None))
    assert diagnosis.diagnose(leak, ctx(grouped=True)).mutant == "gqa-mask-one-group"
    assert diagnosis.diagnose(leak, ctx(grouped=False)).mutant is None


def test_no_mistake_is_named_for_a_module_that_could_not_be_built_or_a_dead_process():
    broken = report(("construct", "load:import"), construct="fail")
    assert diagnosis.diagnose(broken).mutant is None
    dead = report(("causal-leakage", "leak:no-mask"))
    dead.adapter = Adapter(process=(ProcessEvent(ChildEnd.TIME, "time limit", True),))
    assert diagnosis.diagnose(dead).mutant is None


def test_a_lesson_rule_is_never_the_root_cause_of_wrong_math():
    both = report(("divisibility", "no divisibility check"), ("causal-leakage", "leak:future"))
    assert diagnosis.diagnose(both).mutant is None  # the leak is unexplained: the rule does not explain it
    rule_only = report(("divisibility", "no divisibility check"))
    assert rule_only.math_correct and diagnosis.diagnose(rule_only).mutant == "no-divisibility-check"


def test_two_broken_rules_on_correct_math_are_not_called_an_unknown_mistake():
    rules = report(("divisibility", "no divisibility check"), ("out-proj-bias", "no output bias"))
    found = diagnosis.diagnose(rules)
    assert found.mutant is None and found.message == ""  # the verdict line says it: math correct, 2 rules
    assert view.verdict(rules) == "FAIL: the math is correct, but 2 lesson rules are not followed"
    assert "no known mistake" not in text.render(view.build(rules))


def test_passed_counts_rules_unless_told_not_to():
    r = report(("out-proj-bias", "no output bias"))
    assert not r.passed and r.math_correct
    r.rules_counted = False
    assert r.passed


def test_the_view_puts_the_root_cause_first_and_fits_80_columns():
    r = report(("eval-determinism", "dropout in eval"))
    r.diagnosis = diagnosis.diagnose(r)
    shown = text.render(view.build(r))
    lines = shown.splitlines()
    assert lines[1].startswith("FAIL") and lines[3].startswith("Root cause:")
    assert lines.index("The math") > 3 and max(map(len, lines)) <= text.REPORT_WIDTH
    assert "  it makes 1 check fail:\n    FAIL eval-determinism" in shown  # listed under the root cause it follows
    assert "PASS       construct, contiguity" in shown  # the passes in one list when something failed
    quiet = text.render(view.build(r), quiet=True).splitlines()
    assert len(quiet) == 2 + len(r.checks) and max(map(len, quiet)) <= text.REPORT_WIDTH  # verdict, root cause, checks


def test_hidden_checks_never_reach_the_shared_view():
    r = report(("eval-determinism", "dropout in eval"))
    r.diagnosis = diagnosis.diagnose(r)
    hidden = view.build(r, hidden=frozenset({"eval-determinism"}))
    assert hidden.root is None and "eval-determinism" not in [ln.id for ln in hidden.lines]
    assert "eval-determinism" not in hidden.verdict and "PASS SO FAR: every check shown here passes" in hidden.verdict


def test_a_check_is_shown_no_earlier_than_the_checks_it_needs():
    """A visible check that a hidden one's failure skips would show that failure (red team 5): mask-fill needs
    causal-leakage, and everything after output-shape needs it; instructor's tests and checks that need nothing
    hidden keep the rubric's own visibility."""
    rubric = Rubric(visibility={"causal-leakage": "hidden", "contiguity": "after_due_date",
                                "reference-match": "after_published"}, needs=needs_by_id())
    ids = [c.id for c in all_checks()]
    assert rubric.visibility_for("mask-fill") == "hidden"
    assert rubric.visibility_for("output-shape") == rubric.visibility_for("view-order") == "after_due_date"
    assert rubric.visibility_for("reference-match") == "after_published"
    assert rubric.visibility_for("construct") == rubric.visibility_for("tests/t.py::test_x") == "visible"
    assert rubric.hidden(ids) == frozenset(ids) - {"construct", "head-invariance", "divisibility", "out-proj-bias",
                                                   "param-count", "registered"}


def test_a_root_cause_is_shown_while_a_visible_check_supports_it_and_hidden_failures_are_not_counted():
    """A rubric hides view-order (or shows it after the due date): the split mistake it proves also makes the
    visible reference-match and causal-leakage fail, so the root cause stays (hiding a check never takes away what a
    visible check supports), explains only the visible ones and names view-order nowhere; the verdict counts only
    the failures shown.  When only hidden checks support it, the root cause is not shown."""
    r = report(("view-order", "split view-bhnd"), ("reference-match", "differs"), ("causal-leakage", "leaks"))
    r.diagnosis = Diagnosis("split-view-order", "signature", title="t", evidence="what view-order found is its "
                            "pattern", fix="f", symptom="s", lesson="l",
                            follows=("view-order", "reference-match", "causal-leakage"))
    shown = view.build(r, hidden=frozenset({"view-order"}))
    assert shown.verdict.startswith("FAIL: 2 checks find a bug") and shown.root is not None
    assert shown.root.follows == ["reference-match", "causal-leakage"] and "view-order" not in shown.root.evidence
    assert re.search(r"(?<![\w-])view-order(?![\w-])", text.render(shown, verbose=True)) is None  # (the mistake's
    # own name, split-view-order, is what the root cause says)
    assert view.build(r).root is not None and view.build(r).verdict.startswith("FAIL: 3 checks")
    only_hidden = view.build(r, hidden=frozenset({"view-order", "reference-match", "causal-leakage"}))
    assert only_hidden.root is None


@pytest.mark.parametrize("evil", ["\x1b[2J\x1b[31mowned", "bell\x07", "\x9b31m"])
def test_terminal_control_characters_are_shown_not_obeyed(evil):
    r = report(("output-shape", None))
    r.checks[[c.id for c in r.checks].index("output-shape")].message = f"forward raised ValueError: {evil}"
    shown = text.render(view.build(r), verbose=True)
    assert not any(ch in shown for ch in "\x1b\x07\x9b")


@pytest.mark.parametrize("line", ["    " + "a" * 230, "+   " + "b" * 150 + " c", "x" * 300])
def test_preformatted_wrapping_ends_and_keeps_every_character(line):
    """A long unbreakable line once looped forever: the search for a break found the continuation's own indent."""
    lines = text.wrap_preformatted(line, width=100)
    assert all(len(part) <= 100 for part in lines)
    assert "".join(lines).replace(" ", "").replace("+", "") == line.replace(" ", "").replace("+", "")


@pytest.mark.parametrize("more", [60, 96, 98, 100, 140])
@pytest.mark.parametrize("indent", [2, 99, 120])
def test_preformatted_wrapping_ends_when_the_continuation_indent_leaves_no_room(more, indent):
    """`mha-check trace` hung, a CPU spinning for good, on a file with a long name (Realzoo23, tests/realzoo/
    sign_language_translator_causal_mhsa_heads_first_sdpa_fill_mask_view_two_inferred.py): the trace indents a
    statement's continuation lines past its `FILE:LINES` heading (more=len(at) + 2), and where that indent (or the
    line's own) left no column of the width, no cut ever shortened the line."""
    at = "sign_language_translator_causal_mhsa_heads_first_sdpa_fill_mask_view_two_inferred.py:168-172"
    line = " " * indent + f"{at}  x = x.transpose(-3, -2).contiguous()  #     (batch, seq_len, n_head, head_size)"
    done = []
    worker = threading.Thread(target=lambda: done.append(text.wrap_preformatted(line, 100, more=more)), daemon=True)
    worker.start()
    worker.join(10)
    assert done, "wrap_preformatted did not end"
    kept = "".join(done[0]).replace(" ", "").replace("#", "")
    assert kept == line.replace(" ", "").replace("#", "")
    assert all(len(part) <= 100 for part in done[0][1:])  # (a first line indented past the width stays as it is)


def test_a_comment_broken_across_lines_stays_a_comment():
    """A student's trial read the second half of a mutant's `# BUG:` comment, wrapped in `explain`'s diff, as a line
    of code: `+            (B, H, n, dh) straight from (B, n, d)`."""
    line = "+        q = self.q(x).view(B, self.h, n, self.dh)  # BUG: view(B, H, n, dh) straight from (B, n, d) mixes"
    first, second = text.wrap_preformatted(line, width=80)
    assert first.endswith("# BUG:") and second.startswith("+") and second[1:].lstrip().startswith("# view(B, H")


def test_a_one_line_summary_keeps_a_notebook_pointer_whole():
    finding = ("masked_fill at decor.ipynb, code cell 3, line 12 uses a (8, 8) tensor that stays on the CPU, "
               "and so does the other one")
    for room in (52, 60, 70):
        short = text.one_line(finding, room)
        assert len(short) <= room and "decor.ipynb, code cell 3, line 12" in short, short


@pytest.mark.parametrize("kind, line, fixed", [
    ("split-all", "queries = queries.view(b, self.num_heads, num_tokens, self.head_dim)  # (b, h, n, hd)",
     "queries = queries.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)"
     " # and the other two projections alike"),
    ("split", "v = v.reshape(B, self.n_head, T, hs)",
     "v = v.reshape(B, T, self.n_head, hs).transpose(1, 2)"),
    ("merge", "ctx = (w @ v).contiguous().view(B, n, d)  # BUG",
     "ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)"),
    ("merge", "c = c.view(B, n, d)", "c = c.transpose(1, 2).contiguous().view(B, n, d)"),
    ("merge", "c = c.transpose(1, 2).contiguous().view(B, n, d)", None),  # the mistake is elsewhere
    ("split-all", "a = x.view(1, 2, 3, 4) + y.view(1, 2, 3, 4)", None),  # which one? say nothing
    ("split-all", "split = lambda t: t.view(B, self.h, n, self.dh)",  # one line for all three: no note
     "split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)"),
    ("split-all", "if x:", None),
    ("split-pair", "k = self.k(x).view(B, self.h, n, self.dh)",
     "k = self.k(x).view(B, n, self.h, self.dh).transpose(1, 2) # likewise the other projection split this way"),
    ("split-pair", "memory = lambda t: t.view(B, self.h, n, self.dh)",  # one helper for both: no note
     "memory = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)"),
    ("", "s = q @ k.transpose(2, 3)", None),  # not a one-call change: the catalogue's fix stays
    ("mask", "scores.masked_fill(self.mask[:n, :n], float('-inf'))",
     "scores = scores.masked_fill(self.mask[:n, :n], float('-inf'))"),
    ("mask", "y = F.scaled_dot_product_attention(q, k, v, is_causal=False)",
     "y = F.scaled_dot_product_attention(q, k, v, is_causal=True)"),
    ("mask", "y = F.scaled_dot_product_attention(q, k, v)",
     "y = F.scaled_dot_product_attention(q, k, v, is_causal=True)"),
    ("mask", "y = F.scaled_dot_product_attention(q, k, v, attn_mask=m)", None),  # the mistake is in m
    ("softmax", "attn_weights = torch.softmax(attn_scores, dim=1)", "attn_weights = torch.softmax(attn_scores, "
                                                                    "dim=-1)"),
    ("softmax", "w = F.softmax(s, -2)", "w = F.softmax(s, -1)"),
    ("softmax", "w = s.softmax(dim=2)", "w = s.softmax(dim=-1)"),
    ("softmax", "w = self.drop(att.softmax(1))", "w = self.drop(att.softmax(-1))"),
    ("softmax", "w = torch.softmax(s)", None),  # no axis written: nothing to change on this line
    ("softmax", "w = F.softmax(a, 1) + F.softmax(b, 1)", None),  # which one? say nothing
    ("softmax", "output = self.softmax(output)", None),  # an nn.Softmax module: its axis is __init__'s (FastNLP)
    ("fill", "att = att.masked_fill(self.bias[:, :, :T, :T] == 0, 0.)",
     'att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))'),
    ("fill", "s.masked_fill_(m, value=-1e4)", 's.masked_fill_(m, value=float("-inf"))'),
    # issue 28 item 6: the head width is the queries' own last axis, whatever the class calls it
    ("scale", "wei = q @ k.transpose(-2, -1) * C ** -0.5", "wei = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5"),
    ("scale", "scores = q @ k.transpose(2, 3) / self.dh", "scores = q @ k.transpose(2, 3) / q.size(-1) ** 0.5"),
    ("scale", "att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C))",
     "att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))"),
    ("scale", 's = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(D)',
     's = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.size(-1))'),
    ("scale", "att = torch.bmm(q, k.transpose(1, 2))", "att = torch.bmm(q, k.transpose(1, 2)) / q.size(-1) ** 0.5"),
    ("scale", "s = self.q(x) @ self.k(x).mT", None),  # the queries are no name to repeat: words instead
    ("scale", "s = s / C ** 0.5", None),  # no product on the line: which tensor is the queries?
    ("dropout", "att = F.dropout(att, self.p)", "att = F.dropout(att, self.p, training=self.training)"),
    ("dropout", "w = nn.functional.dropout(w, 0.1, training=True)",
     "w = nn.functional.dropout(w, 0.1, training=self.training)"),
    ("slice", 'wei = wei.masked_fill(self.tril == 0, float("-inf"))',
     'wei = wei.masked_fill(self.tril[..., :wei.size(-1), :wei.size(-1)] == 0, float("-inf"))'),
    ("slice", "s.masked_fill_(self.mask.bool(), -torch.inf)",
     "s.masked_fill_(self.mask[..., :s.size(-1), :s.size(-1)].bool(), -torch.inf)"),
    ("slice", "s = s.masked_fill(self.mask[:n, :n], 0)", None),  # sliced already: the mistake is elsewhere
    ("contiguous", "y = (att @ v).transpose(1, 2).view(B, T, C)",
     "y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)"),
    ("contiguous", "y = y.contiguous().view(B, T, C)", None),
    ("invert", 'wei = wei.masked_fill(self.tril[:T, :T] == 1, float("-inf"))',
     'wei = wei.masked_fill(self.tril[:T, :T] != 1, float("-inf"))'),
    ("invert", 's = s.masked_fill(~self.mask[:n, :n], -inf)', "s = s.masked_fill(self.mask[:n, :n], -inf)"),
    ("invert", "y = F.scaled_dot_product_attention(q, k, v, attn_mask=self.future[:T, :T])",
     "y = F.scaled_dot_product_attention(q, k, v, attn_mask=~self.future[:T, :T])"),
    ("invert", "a = a.masked_fill(m & n, 0)", "a = a.masked_fill(~(m & n), 0)"),
    ("keys", "att = torch.matmul(q, k.transpose(1, 2)) / math.sqrt(self.hd)",
     "att = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.hd)"),
    ("keys", "attn_scores = queries @ keys.T", "attn_scores = queries @ keys.transpose(-2, -1)"),
    ("keys", "s = q @ k.permute(0, 2, 1, 3)", None),
    ("additive", "att = att + torch.where(self.causal[:T, :T], -1e9, 0.0)",
     'att = att + torch.where(self.causal[:T, :T], float("-inf"), 0.0)'),
    ("additive", "wei = wei + (1.0 - self.tril[:T, :T]) * -1e9", None),  # -inf * 0 would be NaN: words instead
])
def test_the_fix_is_the_students_own_line_corrected_when_that_is_one_call(kind, line, fixed):
    assert rewrite.own_line_fix(kind, line) == fixed


def test_an_inverted_mask_is_inverted_only_when_the_trace_says_it_hides_exactly_the_past_and_the_diagonal():
    """A mask that hides the strict past (tril(-1)) is "inverted" too, but its inverse would hide the diagonal."""
    line = "s = s.masked_fill(self.m[:n, :n] == 1, float('-inf'))"
    exact = "the mask is inverted: it hides the past and shows the future (hidden, row by row: x..; xx.; xxx; expected"
    strict = "the mask is inverted: it hides the past and shows the future (hidden, row by row: ...; x..; xx.; expected"
    assert rewrite.own_line_fix("invert", line, exact) == "s = s.masked_fill(self.m[:n, :n] != 1, float('-inf'))"
    assert rewrite.own_line_fix("invert", line, strict) is None


def test_every_rewrite_a_mutant_may_declare_is_one_the_engine_makes():
    assert set(REWRITES) == set(rewrite.KINDS) | {""}


def test_a_one_line_summary_never_ends_on_a_word_that_needs_its_object():
    """`-q` once printed "... straight from" and stopped: a cut before "(B, n, d)" left the sentence hanging."""
    finding = ("the queries are split into heads with view(B, H, n, dh) straight from (B, n, d) (the keys and values "
               "the lesson's way): a head's positions are slices cut across tokens")
    short = text.one_line(finding, 66)
    assert len(short) <= 66 and not short.endswith((" from", " with")), short
    assert text.one_line("output has shape (2, 3, 4), expected (2, 3, 8)", 30) == "output has shape (2, 3, 4)…"


def test_a_list_cut_short_in_a_one_line_summary_says_so():
    """A student read "wrong gradient for the input, W_q, W_k, W_v, W_o, b_q" as the whole list (b_k and b_v
    followed): a part cut at a comma ends with "…"; a clause cut at "; " needs none."""
    finding = "wrong gradient for the input, W_q, W_k, W_v, W_o, b_q, b_k, b_v"
    assert text.one_line(finding, 56) == "wrong gradient for the input, W_q, W_k, W_v, W_o, b_q…"
    assert text.one_line("output differs from the reference; largest at (0, 1, 2) by 0.5", 40) == \
        "output differs from the reference"


def test_a_trace_pattern_is_not_named_when_its_check_found_another_mistakes_pattern():
    """No mask op in the code, but a rounding-level leak (1e-19): the missing mask is not what fails the checks."""
    no_mask = {"signature": ["causal-leakage:leak:all-future"]}
    assert diagnosis._contradicted(no_mask, {"causal-leakage:leak:small-leak"})
    assert not diagnosis._contradicted(no_mask, {"causal-leakage:leak:all-future", "param-count:count: other"})
    assert not diagnosis._contradicted(no_mask, set())  # nothing specific found: the trace may speak


def test_a_marked_line_is_no_name_when_the_numbers_say_no():
    """Issue 28 item 4: scale-by-sqrt-d marked on an SDPA line of a layer whose outputs no scaling explains."""
    mark = [{"id": "sdpa-default-scale", "mutant": "scale-by-sqrt-d", "text": "", "at": None, "code": None}]
    assert diagnosis._numbers_refute("scale-by-sqrt-d", [], mark)  # asked, and its variant is not the output
    assert not diagnosis._numbers_refute("scale-by-sqrt-d", None, mark)  # unmapped: the numbers could not be asked
    assert not diagnosis._numbers_refute("scale-by-sqrt-d", ["scale-by-sqrt-d"], mark)
    own = [{**mark[0], "title": "its own variant"}]
    assert not diagnosis._numbers_refute("scale-by-sqrt-d", [], own)  # a mark that tells its own variant
    without_variant = next(m for m in mutants.catalogue() if m not in mutants.variants())
    assert not diagnosis._numbers_refute(without_variant, [], mark)


def test_a_mistake_of_the_layer_is_named_before_one_of_its_kv_cache():
    """Two mistakes, each with its own signature (bark: dropout in eval, and a cache whose chunks are not masked):
    the layer's own is the root cause, as kv-cache judges the cache only of a layer right without it."""
    both = diagnosis.diagnose(report(("eval-determinism", "dropout in eval"), ("kv-cache", "not reset")))
    assert both.mutant == "dropout-in-eval" and both.match == "signature"
    assert diagnosis.diagnose(report(("kv-cache", "not reset"))).mutant == "kvcache-not-reset"


@pytest.mark.parametrize("is_code", [True, False])
def test_a_fix_in_words_is_shown_as_words_and_a_corrected_line_as_code(is_code):
    """The student's own line corrected is code; a remedy in words (no line could be rewritten) is a sentence, not
    a code span on Gradescope's page nor <code> in HTML."""
    from harness.render import formats, html

    r = report(("reference-match", "differs"))
    fix = "wei = q @ k.transpose(-2, -1) * q.size(-1) ** -0.5" if is_code else "Scale the scores by the head width."
    r.diagnosis = Diagnosis("scale-by-sqrt-d", "numbers", title="t", evidence="e", fix=fix, fix_is_code=is_code,
                            symptom="s", lesson="l", follows=("reference-match",))
    output = formats.gradescope(r)["output"]
    page = html.render(view.build(r))
    assert (f"Fix: `{fix}`" in output) == is_code and (f"<code>{fix}</code>" in page) == is_code
    assert "Scale the scores" in output or is_code


@pytest.mark.parametrize("others", [(), (("mask-fill", None),)])
def test_feedback_reads_the_same_whether_the_hidden_checks_pass_or_fail(others):
    """Red team 12: with reference-match and gradient-match hidden, a student whose layer was wrong only there read
    "FAIL: every check shown here passes ...", a correct one "PASS: the math is correct ...", each check's claim
    spelt out for the latter only, and the parameter reading "a known mistake reproduces your output" against
    "the lesson's layer reproduces your output": the hidden checks' result, told three ways.  What the student may
    see depends on the shown checks only (the hidden ones still count toward the score)."""
    from harness.render import formats
    hiding = Rubric(visibility={"reference-match": "hidden", "gradient-match": "hidden"}, needs=needs_by_id())
    layout = {"layout": {"wq": "W_query.weight.T", "wk": "W_key.weight.T", "wv": "W_value.weight.T",
                         "wo": "out_proj.weight.T"}}
    right = report(*others, adapter=Adapter(mapping={**layout, "proof": "reference"}))
    wrong = report(("reference-match", "differs"), ("gradient-match", "differs"), *others,
                   adapter=Adapter(mapping={**layout, "proof": "mistake"}))
    right.diagnosis, wrong.diagnosis = diagnosis.diagnose(right), diagnosis.diagnose(wrong)
    assert formats.feedback(right, hiding) == formats.feedback(wrong, hiding), \
        (formats.feedback(right, hiding), formats.feedback(wrong, hiding))


def test_feedback_for_a_student_names_no_hidden_check_and_shows_the_score_only_when_the_rubric_does():
    """grade --feedback (instructor trial 10: the reports grade writes are the staff's, and a batch had nothing to
    hand back): the hidden check's id appears nowhere, its failure neither in the verdict nor in a skip; the count
    of hidden checks is said, and the total only where the rubric shows it at once (less the visible tests' points
    it tells what the hidden ones earned)."""
    from harness.render import formats
    r = report(("eval-determinism", "dropout in eval"))
    r.diagnosis = diagnosis.diagnose(r)
    hiding = Rubric(visibility={"eval-determinism": "hidden"}, needs=needs_by_id())
    given = formats.feedback(r, hiding)
    assert "eval-determinism" not in given and "dropout" not in given.lower(), given
    assert "1 check that counts toward the score is not shown here." in given and "score:" not in given
    shown_at_once = Rubric(visibility={"eval-determinism": "hidden"}, score_visibility="visible", needs=needs_by_id())
    assert re.search(r"^score: \d+ of \d+$", formats.feedback(r, shown_at_once), re.MULTILINE)
    plain = formats.feedback(r, Rubric())
    assert "FAIL eval-determinism" in plain and "not shown here" not in plain and "score: " in plain
