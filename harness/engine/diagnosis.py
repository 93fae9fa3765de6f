"""Which known mistake (mutant) a failing target has: named only on evidence.

Evidence, strongest first, all computed in the trusted process:

1. numbers: under the same transplanted weights and inputs, on every required configuration, the target's output
   equals what a catalogued mistake's numeric variant computes (`reference.variants`), and differs from the
   reference.  Where several mistakes compute the same numbers, the recorded forward (trace marks) decides.  Where
   no single mistake does, two made together may (`harness.engine.pairs`: both named, each at its own line).
2. a signature: the specific findings of the failing checks (a leak pattern, a parameter-count pattern, an
   unregistered container...) contain a catalogued mistake's measured signature, and no other mistake's.
3. a trace mark: the recorded forward shows a pattern that exactly one catalogued mistake declares, the check
   made for that mistake failed, and the numbers do not refute it (where the weights are mapped, a mistake that
   has a numeric variant is named from a line only if its variant is the module's output).

A mistake whose own checks (those it is guaranteed to fail) passed here is never named.  Nothing is named for an
import or syntax error, a constructor mha-check could not call, a time-out, a memory limit or a crash: the report
then says what happened, not a mistake it did not see.  Without evidence: "no known mistake matches", with the
symptoms.
"""
from __future__ import annotations

import dataclasses

import numpy as np

import mutants
from harness.engine import fitting, pairs, rewrite
from harness.engine.compare import same
from harness.engine.records import Diagnosis
from harness.engine.trace.detect_params import BIAS_LEFT_OUT
from harness.engine.trace.drive import guessed_marks
from harness.wire.errors import CannotDrive, ChildEnd, HarnessFailure, TargetFailure, WorkerDied
from harness.wire.status import Status
from reference import numpy_ref, variants
from reference.rotary import with_rope

GROUPED_ONLY = ("gqa-", "mqa-")  # mistakes of the grouped-query layer (mutants.FAMILY): in no plain layer
RANDOM = {"eval-determinism:random in eval",  # the module built with dropout=0 is random in eval() too
          "batch-independence:differs between calls",  # one call, asked twice, answered differently
          "eval-determinism:differs between calls"}  # one with no dropout at all (weights drawn in forward)
GENERIC = {"leak:future", "leak:dead-past", "count: other", "wrong shape", "dropout scaling in eval",
           "refuses valid widths"}


def findings(report) -> list[str]:
    """The specific findings of the failing checks, as 'check-id:finding'."""
    out = set()
    for c in report.checks:
        code = c.details.get("finding")
        if c.status == Status.FAIL and code and code not in GENERIC and \
                not code.startswith(("raised", "wrong gradients", "load:")):
            out.add(f"{c.id}:{code}")
    return sorted(out)


def symptoms(report) -> dict:
    """What a report shows: the failing checks and their specific findings (recorded for every mutant)."""
    return {"failing": sorted(c.id for c in report.checks if c.status == Status.FAIL), "findings": findings(report)}


def _no_evidence(reason: str, report, marks: list[dict] | None = None) -> Diagnosis:
    seen = symptoms(report)
    return Diagnosis(None, "none", tuple(seen["failing"]), tuple(seen["findings"]), reason,
                     tuple(marks) if marks is not None else None)


def diagnose(report, ctx=None) -> Diagnosis | None:
    """The identified mistake, or "no known mistake matches" with the symptoms; None when nothing failed.  Either
    way with the lines the trace marks for the lesson rules that failed (`Diagnosis.rule_lines`)."""
    found = _diagnose(report, ctx)
    lines = _rule_lines(report, ctx) if found is not None and ctx is not None else {}
    return dataclasses.replace(found, rule_lines=lines) if lines else found


def _rule_lines(report, ctx) -> dict:
    """Failing lesson rule -> {"at", "code"[, "missing"]} of the first trace mark of a catalogued mistake that rule
    is the check made for (out-proj-no-bias for out-proj-bias, no-divisibility-check for divisibility)."""
    failing = {c.id for c in report.checks if c.status == Status.FAIL and c.kind == "rule"}
    if not failing:
        return {}
    catalogue, out = mutants.catalogue(), {}
    for mark in _marks(ctx)[0]:
        made_for = (catalogue.get(mark.get("mutant") or "") or {}).get("killed_by", ("",))[0]
        if made_for in failing and made_for not in out and mark.get("at"):
            out[made_for] = {"at": mark["at"], "code": mark.get("code", ""),
                             **({"missing": True} if mark.get("missing") else {})}
    return out


def _diagnose(report, ctx=None) -> Diagnosis | None:
    if not any(c.status == Status.FAIL for c in report.checks):
        return None
    construct = next((c for c in report.checks if c.id == "construct"), None)
    if construct is not None and construct.status != Status.PASS and \
            f"construct:{construct.details.get('finding')}" not in findings(report):
        return _no_evidence("the module could not be loaded or built, so no mistake of the layer itself is named",
                            report)
    if any(p.kind is not ChildEnd.KILLED_OUTSIDE for p in report.adapter.process):  # a kill from outside,
        # after which the check was run again, leaves every verdict whole
        return _no_evidence("the process running your code ended abnormally, so no mistake is named", report)
    catalogue = mutants.catalogue()
    status = {c.id: c.status for c in report.checks}
    kinds = {c.id: c.kind for c in report.checks}
    form, grouped = _form(ctx), _grouped(ctx)
    fits = [m for m, e in catalogue.items() if mutants.form(m) == (form or "multi-head")  # a mistake of the
            # layer's own form (single head); where the form is not known, the lesson's layer's (a single head's
            # dropout left on is the multi-head one's pattern: one name, not two that hide each other)
            and (grouped is not False or not m.startswith(GROUPED_ONLY))  # a grouped-query mistake only in a
            # layer that has key/value heads of its own (a plain layer's leak was named gqa-mask-one-group)
            and (kinds.get(e["killed_by"][0]) != "rule" or report.math_correct)]  # a rule is named as the root
    possible = [m for m in fits if status.get(catalogue[m]["killed_by"][0]) not in (Status.PASS, None)]
    # cause only of a layer whose math is verified correct
    strict = [m for m in possible if not any(status.get(k) == Status.PASS for k in catalogue[m]["killed_by"])]
    biased = _bias_unused(report) and ctx is not None and ctx.accepts("qkv_bias")
    marks, recorded = _marks(ctx, biased) if ctx is not None else ([], False)
    samples = _samples(ctx, biased) if ctx is not None else None
    numbers, refuted = _numeric(ctx, samples, _by_numbers(possible, status, catalogue))  # numbers None: they
    # could not be asked; refuted: the mistakes whose own numbers were asked and are not the module's
    marks = [k for k in marks if (k.get("mutant") in (numbers or ()) or not _checks_refute(k, status, catalogue)
                                  or _confirmed(k, report)) and not _rule_unjudged(k, status, kinds, catalogue)]
    # (a mark whose mistake the numbers reproduce stands, though its own check passed: an out_proj made and never
    # applied passes param-count, and a student's trial got no line for it; so does one another check's finding
    # confirms: that out_proj's parameters get no gradient, beside a second mistake no single variant explains)
    if numbers:  # a mistake named only where the recorded forward marks it: a divisor fitted to the outputs is a
        # learned temperature's too (TimesFM's per-dimension scale, the layer's design), which trace does not mark
        numbers = [m for m in numbers if m not in mutants.named_by_trace()
                   or any(k.get("mutant") == m for k in marks)] or None
    several = []  # pairs that reproduce, refused as mirrors: said, not named
    if numbers:
        best = _by_marks(numbers, marks, catalogue)
        if best:
            named = _named(best, "numbers", "your outputs equal this mistake's, number for number, under the same "
                                            "weights and inputs", catalogue, marks + fitting.told(ctx, best, marks),
                           report)  # (a fill no line tells: its value read off the outputs, in the title)
            if best == NO_OUT_PROJ and _read_without_out_proj(ctx):
                return _beside_missing_projection(named, possible, strict, kinds, catalogue, marks, recorded, report)
            return named
    elif numbers == [] and not report.math_correct:  # no one mistake is the outputs: two at once may be (never
        # asked of a layer whose math passed: its outputs are the reference's)
        both = _pair(ctx, samples, _pairable(fits, possible, status, catalogue, marks, report), marks, catalogue)
        if both:
            return _named_pair(both, catalogue, marks, report)
        several = _several(ctx, samples, possible)  # two mistakes reproduce, one the mirror of a correct layer
    mine = set(findings(report))
    matching = [m for m in possible if catalogue[m]["signature"] and set(catalogue[m]["signature"]) <= mine
                and not _trace_refutes(catalogue[m], marks, recorded)
                and not (m in refuted and not any(k["mutant"] == m and "title" in k for k in marks))]
    # (a pattern is shared by layers written otherwise: a batch whose scores are centred over the batch axis
    # mixes its sequences as a merge with transpose(0, 2) does, and was named that, though the mistake's own numbers,
    # asked under the mapped weights, are not the module's; a mistake whose numbers are the reference's wherever
    # they were asked, a fill of -100, is not refuted by them)
    if RANDOM & mine:  # a forward random at every call makes any two outputs differ (alone and in the batch,
        # contiguous or not): those checks' patterns are its randomness, not another mistake's
        matching = [m for m in matching if RANDOM & set(catalogue[m]["signature"])]
    maximal = [m for m in matching if not any(set(catalogue[m]["signature"]) < set(catalogue[o]["signature"])
                                              for o in matching)]
    apart = _apart([m for m in maximal if m in strict and kinds.get(catalogue[m]["killed_by"][0]) != "rule"
                    and catalogue[m]["killed_by"][0] != "kv-cache"], catalogue)  # (lesson rules not followed are
    # listed, not named as two mistakes: the verdict says so; kv-cache judges the cache only of a layer right without
    # it, below)
    if apart:  # two mistakes, each with its own pattern in checks the other's does not touch
        return _signature_pair(apart, catalogue, marks, report)
    for narrower in (lambda ms: [m for m in ms if m in strict],  # all its checks fail here, not only its own
                     lambda ms: [m for m in ms if set(catalogue[m].get("trace", [])) & {k["id"] for k in marks}]
                     if any(kinds.get(catalogue[m]["killed_by"][0]) != "rule" for m in ms) else [],  # (not among
                     # lesson rules alone: two broken are listed, not one named because trace marks its line: below)
                     # a mistake of the layer itself before one of its KV cache (kv-cache judges the cache only of a
                     # layer right without it): bark's dropout in eval, though its cache has a mistake of its own
                     lambda ms: [m for m in ms if catalogue[m]["killed_by"][0] != "kv-cache"]):
        if len(maximal) > 1 and narrower(maximal):
            maximal = narrower(maximal)
    if len(maximal) == 1:
        shown = sorted({s.split(":", 1)[0] for s in catalogue[maximal[0]]["signature"]})
        named = _named(maximal[0], "signature", f"what {', '.join(shown)} found is this mistake's own pattern, which "
                                                "no other known mistake shows", catalogue, marks, report)
        return _untested(named, marks, possible, status, catalogue)
    rules_apart = len(maximal) > 1 and all(kinds.get(catalogue[m]["killed_by"][0]) == "rule" for m in maximal)
    # (several lesson rules broken, each its own pattern: listed, not one named because trace marks its line)
    traced = [m for m in possible if any(mark["mutant"] == m for mark in marks) and not (rules_apart and m in maximal)
              and status.get(catalogue[m]["killed_by"][0]) == Status.FAIL
              and (not _contradicted(catalogue[m], mine) or any(k["mutant"] == m and "title" in k and (
                  not k.get("confirmed_by") or _confirmed(k, report)) for k in marks))
              and not _numbers_refute(m, numbers, marks)]
    # (a mark that tells its own variant, a fill of 0 say, has its own pattern: the catalogue's is not expected;
    # where the mark says which check's finding confirms it, only with that finding: `k = self.W_k(x).detach()` is
    # weights-under-no-grad told by its line where parameters-used finds the key projection alone without gradient)
    if len(set(traced)) == 1:
        lined = any(mark["mutant"] == traced[0] and mark.get("at") for mark in marks)  # a missing step has no line
        return _untested(_named(traced[0], "trace", "your forward pass shows this mistake's pattern" +
                      (" at the marked line" if lined else "") + ", and the check made for it fails", catalogue,
                      marks, report), marks, possible, status, catalogue)
    only_rules = all(c.kind == "rule" for c in report.checks if c.status == Status.FAIL)  # the verdict line says so
    unnamed = "no known mistake matches: the failing checks below describe what is wrong"
    if numbers == [] and not report.math_correct and several:
        unnamed = (f"more than one mistake may be present: your outputs equal {' and '.join(several[0])} made "
                   "together, but one of them is the mirror image of a correct layer under another reading of your "
                   "parameters (W_q and W_k exchanged, say), which proves nothing, so neither is named; the failing "
                   "checks below describe what is wrong")
    math_marks = [k for k in marks if not _rule_mark(k, catalogue, kinds)]  # (a lesson rule's line, the output
    # projection built without its bias, is no place to look for the math that failed: a student's trial, a rotary
    # layer's tensor kept as a plain attribute, was sent to its `nn.Linear(dim, dim, bias=False)`)
    if math_marks:  # the trace marks a step (a scale no mutant has, say): not a name, but where to look, and the line
        # itself where it has one (a student's trial: the report said only "trace marks", while trace named a line)
        lines = list(dict.fromkeys(k["at"] for k in math_marks if k.get("at")))
        options = next((k["trace_options"].strip() for k in math_marks if k.get("trace_options")), "")
        unnamed += ("; mha-check trace" + (f" (with {options})" if options else "") + " marks the step that looks "
                    "wrong" + (f" ({', '.join(lines[:3])})" if lines else ""))
    return _no_evidence("" if only_rules else unnamed, report, marks)


def _rule_mark(mark: dict, catalogue: dict, kinds: dict) -> bool:
    """A trace mark of a catalogued mistake that only a lesson rule's check kills (the output projection without
    its bias): the rules' section lists it, and it says nothing of where the math goes wrong."""
    entry = catalogue.get(mark.get("mutant") or "")
    return bool(entry and entry.get("killed_by")) and kinds.get(entry["killed_by"][0]) == "rule"


NO_OUT_PROJ = "no-output-projection"


def _read_without_out_proj(ctx) -> bool:
    """The multi-head layer was proven under a reading without an output projection (Context.without_out_proj)."""
    try:
        return ctx.without_out_proj
    except WorkerDied:
        return False


def _beside_missing_projection(named: Diagnosis, possible: list[str], strict: list[str], kinds: dict,
                               catalogue: dict, marks: list[dict], recorded: bool, report) -> Diagnosis:
    """no-output-projection named from the numbers of a layer read without W_o, with the mistake whose own pattern
    the checks it does not explain show, where exactly one does: the missing projection's numbers are that reading
    itself, and say nothing of a mistake no number shows (a mask made on the CPU, found by mask-buffer, was named
    before the layer had a reading, and would have been lost behind the projection after).  Held to the signature
    path's rules: every one of its checks fails, its pattern is in checks the missing projection does not explain,
    no other candidate's pattern holds it, the trace does not refute it.  The two are told in the order the forward
    reaches their lines."""
    explained = set(named.follows) | {f.split(":", 1)[0] for f in catalogue[NO_OUT_PROJ]["signature"]}
    mine = set(findings(report))
    others = [m for m in possible if m != NO_OUT_PROJ and m in strict and catalogue[m]["signature"]
              and set(catalogue[m]["signature"]) <= mine and kinds.get(catalogue[m]["killed_by"][0]) != "rule"
              and not {f.split(":", 1)[0] for f in catalogue[m]["signature"]} & explained
              and not _trace_refutes(catalogue[m], marks, recorded)]
    maximal = [m for m in others if not any(set(catalogue[m]["signature"]) < set(catalogue[o]["signature"])
                                            for o in others)]
    if len(maximal) != 1:
        return named
    shown = sorted({f.split(":", 1)[0] for f in catalogue[maximal[0]]["signature"]})
    other = _named(maximal[0], "signature", f"what {', '.join(shown)} found is this mistake's own pattern, which no "
                                            "other known mistake shows", catalogue, marks, report)
    step = {m["mutant"]: i for i, m in reversed(list(enumerate(marks))) if m.get("mutant")}
    first, second = sorted((named, other), key=lambda d: (step.get(d.mutant, len(marks)), d.mutant))
    return _both(first, second, catalogue, marks)


def _untested(named: Diagnosis, marks: list[dict], possible: list[str], status: dict, catalogue: dict) -> Diagnosis:
    """The named mistake, saying that more than one may be present where the recorded forward also marks another
    known mistake, at a line, whose own check never ran (skipped behind a failing prerequisite): a head split
    with the wrong view order before a merge that raises for want of .contiguous() was named the missing
    .contiguous() alone, though trace marks both.  Not a second name: no number shows the other mistake."""
    others = []
    for mark in marks:
        mid = mark.get("mutant")
        if mid and mark.get("at") and not mark.get("missing") and mid != named.mutant and mid in possible and \
                mid not in [o for o, _ in others] and status.get(catalogue[mid]["killed_by"][0]) == Status.SKIP:
            # skipped behind a failing prerequisite, at a line of theirs: not a step the trace found missing (a
            # caller's mask), nor a check undecided for want of a reading (a scale the trace misreads: np.sqrt)
            others.append((mid, mark.get("at")))
    if not others:
        return named
    said = ", ".join(f"{mid}" + (f" at {at}" if at else "") for mid, at in others)
    return dataclasses.replace(named, evidence=f"{named.evidence}; more than one mistake may be present: mha-check "
                                               f"trace also marks {said}, which the checks that could not run here "
                                               "did not test (run mha-check again once this is fixed)")


def _by_numbers(possible: list[str], status: dict, catalogue: dict) -> list[str]:
    """The mistakes whose numbers are asked: the plausible ones, and where reference-match failed, every mistake of
    the math whose own first check passed for a reason of the layer's making.  An output projection made in
    __init__ and never applied keeps param-count passing, yet the module computes no-output-projection's numbers
    value for value (an instructor's trial: "no known mistake matches" while the mapping had matched it).  The
    numbers still decide: a mistake is named only if its variant is the module's output.
    Widened to every single mistake of the layer's form (issue 28, measured on 219 reports of tests/zoo and
    tests/realzoo and the 70 mutants): not one diagnosis changed (113 right, 105 rightly none, 1 pair named whose
    first mistake is the file's; mutants 70 of 70 right either way), so it stays this narrow: each mistake asked is
    more variants to compute and one more chance of a mirror image, for no name gained."""
    if status.get("reference-match") != Status.FAIL:
        return possible
    widened = [m for m, e in catalogue.items() if m not in possible and e["killed_by"][0] == "param-count"]
    return possible + widened


def _confirmed(mark: dict, report) -> bool:
    """The mark names a known mistake that a failing check's own finding confirms (`confirmed_by`, "check:finding"):
    an output projection made and never applied is marked with its name where parameters-used finds exactly its
    parameters without a gradient, read as W_o."""
    return bool(mark.get("mutant")) and bool(mark.get("confirmed_by")) and mark["confirmed_by"] in findings(report)


def _checks_refute(mark: dict, status: dict, catalogue: dict) -> bool:
    """A mark of a known mistake is no evidence, not even "where to look", when every check made to catch that
    mistake passed: the outputs are not that mistake's.  A student's trial: a learnable temperature initialised to
    1/sqrt(dh) (`scores * self.log_tau.exp()`) was marked "the scores are never scaled" while reference-match and
    gradient-match passed, and adding the division the mark asked for broke a correct layer."""
    entry = catalogue.get(mark.get("mutant") or "")
    return bool(entry) and all(status.get(k) == Status.PASS for k in entry["killed_by"])


def _rule_unjudged(mark: dict, status: dict, kinds: dict, catalogue: dict) -> bool:
    """A mark of a lesson rule broken (a -1e9 fill) is no "where to look" unless the rule's check failed: skipped
    while the math fails, it would point a student at a fill that is not their bug (a real layer that averages its
    heads was told to look at its -1e9 fill)."""
    entry = catalogue.get(mark.get("mutant") or "")
    rule = entry["killed_by"][0] if entry else ""
    return bool(entry) and kinds.get(rule) == "rule" and status.get(rule) != Status.FAIL


def _numbers_refute(mid: str, numbers: list[str] | None, marks: list[dict]) -> bool:
    """A line that looks like the mistake is no name when the numbers were asked and said no: the weights were
    mapped, the mistake computes its own numbers (a variant), and they are not the module's (an SDPA call marked
    "scaled by sqrt(d)" in a layer whose outputs no scaling explains).  A mark that tells its own variant of the
    mistake (a fill of 0 where the catalogue's is -100) is judged by its own pattern, not the catalogue's numbers."""
    if numbers is None or mid in numbers or mid not in mutants.variants():
        return False
    return not any(k["mutant"] == mid and "title" in k for k in marks)
def _form(ctx) -> str | None:
    """The form the target was checked as (harness.wire.form), or None when unknown (no context, not loaded)."""
    try:
        return ctx.form.family if ctx is not None else None
    except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied):
        return None


def _grouped(ctx) -> bool | None:
    """Whether the target was checked as a grouped-query layer (its constructor or config takes key/value heads);
    None when unknown (no context, not loaded)."""
    try:
        return bool(ctx.grouped) if ctx is not None else None
    except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied):
        return None


def _contradicted(entry: dict, mine: set) -> bool:
    """A check made for this mistake found another mistake's specific pattern (a rounding-level "small leak" where
    a missing mask leaks everything): the code may well show the mistake's trace pattern (no mask op), but the
    numbers say it is not what makes the checks fail, so the trace alone does not name it."""
    for expected in entry["signature"]:
        check_id = expected.split(":", 1)[0]
        found = {f for f in mine if f.split(":", 1)[0] == check_id}
        if found and expected not in found and not (expected in RANDOM_ALIKE and found <= RANDOM):
            return True
    return False


COMPARE_CALLS = {"contiguity", "batch-independence", "causal-leakage", "reference-match", "gradient-match",
                 "view-order", "kv-cache"}  # checks that compare the outputs of two forward calls
RANDOM_ALIKE = {"eval-determinism:dropout in eval"}  # a dropout left on in eval is random at every call: where no
# dropout argument or module lets the check switch it (F.dropout(x, 0.1) written in forward, a student's trial),
# it finds the randomness alone, which does not contradict the dropout the trace marks


def _named(mid: str, how: str, evidence: str, catalogue: dict, marks: list[dict], report) -> Diagnosis:
    entry = catalogue[mid]
    where = next((m for m in marks if m["mutant"] == mid), None)
    own = rewrite.own_line_fix(entry.get("rewrite", ""), where["code"], where["text"],
                               where.get("scores_code", "")) if where else None  # their
    # own line, else the fix a check that the mistake fails wrote in their names (out-proj-bias: `self.o`)
    own_words = next((c.fix for c in report.checks if c.status == Status.FAIL and c.details.get("own_fix")
                      and c.id in entry.get("killed_by", ())), None)
    remedy = (where or {}).get("remedy") or entry.get("remedy")  # the mark's words fit how the line is written:
    # a missing mask of an nn.MultiheadAttention is passed as its attn_mask, not made with masked_fill
    told = where if where and (how != "numbers" or mid in mutants.fitted() or _confirmed(where, report)) else {}
    # a variant of the mistake the recorded forward tells itself (the numbers of a fitted mistake are any value of
    # it: the line says which), or how the student wrote it, with the same numbers (an output projection made, in
    # their name, and never applied: not "d_out² + d_out parameters too few")
    seen = symptoms(report)
    return Diagnosis(mid, how, tuple(seen["failing"]), tuple(seen["findings"]),
                     title=told.get("title", (where or {}).get("written_title") or entry["title"]),
                     symptom=told.get("symptom", entry["symptom"]),
                     fix=own or own_words or remedy or entry["fix"],  # never the reference's line, which names
                     # attributes (self.dh, self.mask) the student's class need not have: their line corrected, or
                     # words
                     fix_is_code=bool(own) or not (own_words or remedy),  # words shown as words
                     lesson=entry["lesson"], evidence=evidence, at=where["at"] if where else None,
                     code=where["code"] if where else None,
                     follows=tuple(dict.fromkeys(tuple(_follows(mid, catalogue, report))
                                                 + _confirming(where, how, report))),
                     trace_options=(where or {}).get("trace_options", ""))


OUTPUT_COMPARISONS = ("reference-match", "gradient-match")  # the checks that compare the outputs with the reference


def _confirming(mark: dict | None, how: str, report) -> tuple[str, ...]:
    """The failing checks a confirmed mark explains beyond its mutant's: the check whose finding confirms it
    (parameters-used, for an output projection made and never applied), and, where the numbers named it, the
    comparisons with the reference (the module computes this mistake's outputs; its mutant, with no projection to
    read, is compared without one)."""
    if not mark or not _confirmed(mark, report):
        return ()
    failing = {c.id for c in report.checks if c.status == Status.FAIL}
    shown = OUTPUT_COMPARISONS if how == "numbers" else ()
    return tuple(c for c in (*shown, mark["confirmed_by"].split(":", 1)[0]) if c in failing)


def _both(first: Diagnosis, second: Diagnosis, catalogue: dict, marks: list[dict]) -> Diagnosis:
    """`first` with `second` riding along (`also`): the checks both explain are the first's, and where the two
    mistakes are on one line (an inverted mask filled with -1e4: one masked_fill), the second's fix is written on
    the first's fixed line, so that the line the student pastes last carries both fixes (each pasted alone undid the
    other)."""
    second = dataclasses.replace(second, follows=tuple(f for f in second.follows if f not in first.follows))
    if first.at and first.at == second.at and first.fix_is_code and second.fix_is_code:
        where = next((m for m in marks if m["mutant"] == second.mutant), {})
        both = rewrite.own_line_fix(catalogue[second.mutant].get("rewrite", ""), first.fix, where.get("text", ""))
        if both:
            second = dataclasses.replace(second, fix=both)
    return dataclasses.replace(first, also=second)


def _named_pair(both: tuple[str, str], catalogue: dict, marks: list[dict], report) -> Diagnosis:
    """Two mistakes, each with its own line, fix and the failing checks it explains: the first (the earlier in the
    forward) is the root cause, the second rides along as `also`; a check both explain is the first's."""
    evidence = ("your outputs equal those of these two mistakes made together, number for number, under the same "
                "weights and inputs; neither alone computes them")
    first, second = (_named(m, "numbers", evidence, catalogue, marks, report) for m in both)
    return _both(first, second, catalogue, marks)


def _apart(candidates: list[str], catalogue: dict) -> tuple[str, str] | None:
    """Exactly two mistakes whose signatures are both here, in checks the other's signature does not name: two
    patterns, each its own mistake's (a book's wrapper of full-width heads with no projection, whose shape and counts
    are that mistake's, and whose leak along the token axis is the softmax axis's).  One mistake making both patterns
    would be a catalogued one whose signature holds both, and would be the larger match."""
    if len(candidates) != 2:
        return None
    checks = [{f.split(":", 1)[0] for f in catalogue[m]["signature"]} for m in candidates]
    return tuple(candidates) if not checks[0] & checks[1] else None


def _signature_pair(both: tuple[str, str], catalogue: dict, marks: list[dict], report) -> Diagnosis:
    """Two mistakes named from their own patterns, in the order the forward reaches their marked lines (a mistake
    with a line first), each with the failing checks it explains."""
    step = {m["mutant"]: i for i, m in reversed(list(enumerate(marks))) if m.get("mutant")}
    first, second = (_named(m, "signature", "what " + ", ".join(sorted({s.split(":", 1)[0] for s in
                                                                       catalogue[m]["signature"]})) +
                            " found is this mistake's own pattern, which no other known mistake shows",
                            catalogue, marks, report)
                     for m in sorted(both, key=lambda m: (step.get(m, len(marks)), m)))
    return _both(first, second, catalogue, marks)


def _follows(mid: str, catalogue: dict, report) -> list[str]:
    """The failing checks this mistake explains (those its mutant fails too): first those made to catch it, in the
    order its mutant names them (the most specific first), then the others in report order."""
    declared = catalogue[mid]["killed_by"]
    expected = set(catalogue[mid]["failing"]) | set(declared)
    if set(catalogue[mid]["signature"]) & RANDOM_ALIKE and RANDOM & set(findings(report)):
        expected |= COMPARE_CALLS  # random at every call (a dropout no argument switches off): every comparison of
        # two calls fails with it, and their own fixes (.contiguous(), the mask) would send the student elsewhere
    failing = [c.id for c in report.checks if c.status == Status.FAIL and c.id in expected]
    return sorted(failing, key=lambda c: declared.index(c) if c in declared else len(declared))


def _by_marks(candidates: list[str], marks: list[dict], catalogue: dict, strict: bool = False):
    """One candidate: the only one, or the only one whose trace pattern shows in the recorded forward."""
    if len(candidates) == 1:
        return candidates[0]
    shown = {m["id"] for m in marks}
    traced = [c for c in candidates if set(catalogue[c].get("trace", [])) & shown]
    if len(traced) == 1:
        return traced[0]
    untraced = [c for c in candidates if not catalogue[c].get("trace")]
    if not traced and len(untraced) == 1 and not strict:
        return untraced[0]
    return None


def _trace_refutes(entry: dict, marks: list[dict], recorded: bool) -> bool:
    """A leak pattern is shared by mistakes written differently: a mask that hides the past (`tril(ones, -1)` used as
    True = masked) leaks exactly as a True = masked mask handed to scaled_dot_product_attention does.  Where the
    forward pass was recorded, marks another known mistake's line, and marks none of this mistake's own (an SDPA
    call with such a mask), the pattern is not this mistake's: a student's trial was told it passed its mask to
    SDPA, in a layer that never calls it.  A trace that marks nothing refutes nothing (its detectors miss some ways
    of writing a mistake: dropout left on through F.dropout's training flag, say)."""
    own = set(entry.get("trace", ()))
    seen = {k["id"] for k in marks if k.get("mutant")}
    if recorded and bool(own) and bool(seen) and not own & seen:
        return True
    # A mark no mistake declares that accounts for this very pattern (`explains`): a softmax written by hand whose
    # row maximum sees the future leaks by rounding as a fill of -100 does; a student's trial was told to fill the
    # masked scores with -inf, in a layer that fills nothing.  The pattern is the mark's, unless this mistake's own
    # mark is there too.
    signature = set(entry.get("signature", ()))
    return recorded and bool(signature) and not own & {k["id"] for k in marks} and \
        any(signature <= set(k.get("explains", ())) for k in marks)


def _marks(ctx, biased: bool = False) -> tuple[list[dict], bool]:
    """The known-mistake patterns in one recorded forward pass, with the student's file:line; and whether the pass
    was recorded at all (no marks then says something).  `biased` (parameters-used found a Q/K/V bias without a
    gradient, which exists only with qkv_bias=True): the marks of a second pass, built with the biases, that say
    which projection leaves its bias out, beside the first pass's."""
    try:
        result = ctx.recorded()
    except Exception:  # noqa: BLE001 - a trace is evidence when it works, never a reason to fail
        return [], False
    out = _marks_of(ctx, result)
    if biased:
        flag = ctx.signature.accepts.get("qkv_bias")  # the student's name for it: what `trace` needs to build so
        told = {"trace_options": f" --arg {flag}=True"} if flag and flag not in ctx.overrides else {}
        try:
            out += [{**m, **told} for m in _marks_of(ctx, ctx.recorded(biased=True)) if m["id"] in BIAS_LEFT_OUT]
        except Exception:  # noqa: BLE001 - as above
            pass
    return out, True



def _marks_of(ctx, result) -> list[dict]:
    out = []
    withheld = guessed_marks(ctx, result)  # what the trace itself withholds under a guessed call
    for m in result.mistakes:
        if m in withheld:
            continue
        out.append({"id": m["id"], "mutant": m.get("mutant"), "text": m["text"],
                    **dict(zip(("at", "code"), result.where(m))),
                    **{k: m[k] for k in ("title", "written_title", "symptom", "confirmed_by", "remedy", "scores_code",
                                        "explains")
                       if k in m},
                    **({"missing": True} if m.get("step") is None else {})})  # a step never taken: its line is
        # where it belongs
    return out


def _bias_unused(report) -> bool:
    """parameters-used finds a Q/K/V bias forward never adds: with qkv_bias=True only, which no required configuration
    has (query-bias-not-added's numbers are the reference's without the bias)."""
    return any(f.startswith("parameters-used:unused ") and f.endswith(("bias", "biases")) for f in findings(report))


def _samples(ctx, biased: bool = False) -> list[pairs.Sample] | None:
    """The module's outputs on every required configuration that ran, under transplanted weights, beside the
    reference's; None when they could not be asked (the weights are not mapped with certainty, the worker died, or
    no configuration ran).  A multi-head layer read without an output projection is compared with the lesson's
    whole layer, W_o included (`Context.lesson_weights_for`): its missing projection is then no-output-projection's
    numbers, alone where the rest is right, or beside a second mistake (issue 28: ChadGPT's scale).  `biased`: the
    base configuration built with qkv_bias=True too, where parameters-used found a Q/K/V bias unused."""
    try:
        if not ctx.mapping.certain:
            return None
    except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied):
        return None
    out = []
    configs = ctx.required_configs()
    if biased and ctx.accepts("qkv_bias"):  # the base again with Q/K/V biases, where parameters-used found one unused
        configs = configs + [dataclasses.replace(configs[0], qkv_bias=True)]
    for cfg in configs:
        try:
            inst = ctx.build(cfg)
            w = ctx.lesson_weights_for(inst, "diagnosis")  # a layer read without W_o: the lesson's W_o kept
            ctx.transplant(inst, w)
            x = ctx.input(cfg, "diagnosis")
            y = inst.forward(x)
        except (TargetFailure, CannotDrive, HarnessFailure):
            continue
        except WorkerDied:
            return None
        out.append(pairs.Sample(x, cfg.heads, w, y, numpy_ref.forward(x, cfg.heads, w, rope=ctx.rope)))
    return out or None


@variants.sharing_scores  # every mistake on the same input and weights (issue 27)
def _numeric(ctx, samples: list[pairs.Sample] | None, possible: list[str]) -> tuple[list[str] | None, set[str]]:
    """Mutants whose variant reproduces the target's outputs on every sample (every required configuration), under
    transplanted weights (and differs from the reference there), None when they could not be asked; and the
    mutants whose variant, asked, is not the target's output on some sample (refuted: neither the output nor the
    reference's where the output is the reference's)."""
    if samples is None:
        return None, set()
    knobs = {m: k for m, k in mutants.variants().items() if m in possible}
    matching, shown = set(knobs), set()  # shown: the mistake's own numbers seen somewhere, not only neutral
    for s in samples:
        fits = {m: _fits(s.y, s.x, s.heads, s.w, with_rope(knobs[m], ctx.rope), s.expected,
                         mutants.fitted().get(m, ())) for m in matching}
        matching = {m for m, fit in fits.items() if fit}
        shown |= {m for m, fit in fits.items() if fit == "shown"}
    return sorted(matching & shown), set(knobs) - matching


def _pairable(fits: list[str], possible: list[str], status: dict, catalogue: dict, marks: list[dict],
              report) -> list[str]:
    """The mistakes that may be half of a pair: the plausible ones, and those whose first check passed here but
    another of their checks failed.  The other half can hide what a mistake alone guarantees: an inverted mask alone
    makes the last row NaN (output-shape), a finite fill beside it makes that row a plain average, so output-shape
    passes while causal-leakage fails (torchtext's generate_square_subsequent_mask with its -1e8 fill).  The pair
    is still named only when the two together are the outputs, number for number (harness.engine.pairs).  So may a
    mistake whose mark another check's finding confirms, though its own checks pass: an output projection made and
    never applied (param-count passes: the Linear exists) beside scores scaled by sqrt(d), whose parameters-used
    finding was read as weights-under-no-grad (issue 28)."""
    confirmed = [k["mutant"] for k in marks if _confirmed(k, report)]
    return possible + [m for m in fits if m not in possible
                       and (any(status.get(k) == Status.FAIL for k in catalogue[m]["killed_by"]) or m in confirmed)]


@variants.sharing_scores  # every mistake on the same input and weights (issue 27)
def _pair(ctx, samples: list[pairs.Sample] | None, possible: list[str], marks: list[dict],
          catalogue: dict) -> tuple[str, str] | None:
    """Two mistakes at once whose composed variant reproduces the outputs (harness.engine.pairs), among those
    plausible here; None when there is none, or several the trace cannot tell apart."""
    if not samples:
        return None
    knobs = {m: k for m, k in mutants.variants().items() if m in possible}
    return pairs.choose(pairs.reproducing(samples, knobs, mutants.fitted(), ctx.rope, _named_reading(ctx)), marks,
                        catalogue)


def _named_reading(ctx) -> bool:
    """The weights are read the only way the parameters' names allow (the mapping by structure: named nn.Linear
    layers covering every parameter, nn.MultiheadAttention, --map): no mirrored reading is plausible there."""
    try:
        return ctx.mapping.how == "structure"
    except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied):
        return False


def _several(ctx, samples: list[pairs.Sample] | None, possible: list[str]) -> list[tuple[str, str]]:
    """Pairs that reproduce the outputs but that rule 3 refuses (one is the mirror of a correct layer under another
    reading): said in the report as "more than one mistake may be present", never named."""
    if not samples or _named_reading(ctx):
        return []
    knobs = {m: k for m, k in mutants.variants().items() if m in possible}
    return pairs.mirrored(samples, knobs, mutants.fitted(), ctx.rope)


def _fits(y, x, heads: int, w, knobs: dict, expected, free: tuple[str, ...] = ()) -> str:
    """"shown": the output is the mistake's, and not the reference's; "open": the mistake cannot show on this
    configuration (its numbers are the reference's there: rotary frequencies with a head width of 2; a grouped-query
    pairing with key/value heads as many as the heads, or one shared head) and the output is the reference's; ""
    otherwise.  A mistake is named only where its own numbers were shown at least once.  `free`: the knobs whose
    value is read off the output (`harness.engine.fitting`: a fill of -1e-12 is finite-fill's, not only -10)."""
    if not variants.applies(w, heads, knobs):
        narrow = set(variants.NARROW_KNOBS) & set(knobs)
        return "open" if narrow and w.wk.shape[0] == w.d_out and same(y, expected) else ""
    theirs = fitting.output(x, heads, w, knobs, free, y)
    if same(theirs, expected):
        return "open" if same(y, expected) else ""
    return "shown" if same(y, theirs) or same(y, _safe_softmax(theirs, w)) else ""


def _safe_softmax(theirs, w):
    """The mistake's numbers as torch >= 2.5 computes them where a row of scores is entirely masked: inside
    nn.MultiheadAttention and scaled_dot_product_attention's math path with autograd on, such a row's weights are 0,
    not NaN (`_safe_softmax`), so the token's output is the output projection's bias alone.  A student's trial:
    nn.MultiheadAttention given tril as its attn_mask (True = hidden) computes mask-inverted's numbers with the
    last token's NaN a zero context, and was told "no known mistake matches" while the mapping said a known mistake
    reproduced its output (under no_grad the same layer gives NaN).  Tokens whose whole output is NaN only."""
    rows = np.isnan(theirs).all(axis=-1)
    if not rows.any():
        return theirs
    out = theirs.copy()
    out[rows] = w.bias("bo")
    return out
