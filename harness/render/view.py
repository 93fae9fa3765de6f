"""One view of a report, shared by every renderer (text, HTML, Gradescope, JUnit, pytest): the order, the words and
the scoring rule are decided here once.

Order: the verdict; the root cause when a mistake is identified (the mistake, the file and line where it happens,
the line as written and as it should be, the fix); then the checks, correctness first and the lesson's rules in a
section of their own; failing checks that follow from the root cause are listed under it in one line each.

Scoring rule (every format): a check earns its points only when it passed.  A failed, skipped or cannot-tell check
earns nothing and is shown as not passed; cannot-tell and process failures mark the report for a person to look.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from harness import OUTPUT_CUT_MARK
from harness.wire import raised
from harness.wire.config import Config
from harness.wire.status import Status
from harness.wire.target import Target

LABELS = {Status.PASS: "PASS", Status.FAIL: "FAIL", Status.CANNOT_TELL: "CAN'T TELL", Status.SKIP: "SKIP"}
NOT_APPLICABLE_LABEL = "N/A"  # a pass with nothing to judge (no KV cache to check): its own mark, counted apart
ROLE_WORDS = {"wq": "W_q", "wk": "W_k", "wv": "W_v", "wo": "W_o", "bq": "b_q", "bk": "b_k", "bv": "b_v",
              "bo": "b_o"}


@dataclass
class CheckLine:
    id: str
    kind: str
    status: Status
    label: str
    text: str  # the finding (or the claim, for a pass)
    claim: str
    config: str = ""  # the smallest failing configuration, in words
    observed: str = ""
    why: str = ""
    fix: str = ""
    help: str = ""  # cannot tell: what would help
    follows_root: bool = False  # explained by the identified mistake: listed under it in one line
    not_applicable: bool = False  # passed with nothing to judge: marked NOT_APPLICABLE_LABEL and counted apart,
    # with a pass's points (`passed` stays true: what the layer need not do is never the student's loss)
    where: str = ""  # a failing lesson rule: the student's line the trace marks for it ("attn.py:12: self.o = ...")

    @property
    def passed(self) -> bool:
        return self.status == Status.PASS

    @property
    def verified(self) -> bool:
        """Passed, and had something to judge."""
        return self.passed and not self.not_applicable


@dataclass
class RootCause:
    mutant: str
    title: str
    evidence: str
    fix: str
    symptom: str
    lesson: str
    at: str | None = None  # "examples/attention.py:30": the file as the student named it, and the line
    code: str | None = None  # that line as written
    follows: list[str] = field(default_factory=list)  # ids of the failing checks it explains
    commands: list[tuple[str, str]] = field(default_factory=list)  # (command, what it shows): where to look next
    fix_is_code: bool = True  # the student's line corrected (shown as code), or a remedy in words (shown as words)
    also: RootCause | None = None  # a second mistake made together with this one, with its own line and fix; its
    # `follows` are the failing checks it explains and this one does not

    def owner(self, check_id: str) -> RootCause | None:
        """The mistake a failing check follows from (this one first), whose fix it shows; None: neither."""
        return self if check_id in self.follows else self.also.owner(check_id) if self.also else None

    @property
    def explains(self) -> list[str]:
        """Every failing check the mistake(s) explain: this one's, then the second's."""
        return self.follows + (self.also.explains if self.also else [])


@dataclass
class ReportView:
    target: str
    verdict: str  # one line, e.g. "FAIL: 4 checks find a bug"
    passed: bool
    construction: str
    mapping: str  # how mha-check read the parameters, in plain words ("" when there was nothing to say)
    root: RootCause | None
    follows: list[CheckLine]  # the failing checks the root cause explains, the most specific first
    unmatched: str  # "no known mistake matches" (when checks fail and nothing is named)
    correctness: list[CheckLine]
    rules: list[CheckLine]
    summary: str
    notes: list[str]
    needs_review: bool
    isolation: str = ""  # "isolation: ..." (what confined the child), "" when nothing ran the code
    isolation_weak: bool = True  # less than the full policy confined it (or the report does not say): worth showing
    instructor: list[CheckLine] = field(default_factory=list)  # the instructor's own tests (--tests), after the rules
    review: list[str] = field(default_factory=list)  # why a person should look, where the notes do not say it

    @property
    def lines(self) -> list[CheckLine]:
        return self.correctness + self.rules + self.instructor

    @property
    def sections(self) -> list[tuple[str, list[CheckLine]]]:
        """The checks by section, without those listed under the root cause."""
        return [(title, [ln for ln in lines if not ln.follows_root])
                for title, lines in (("The math", self.correctness), ("The lesson's rules", self.rules),
                                     ("Your instructor's tests", self.instructor))
                if any(not ln.follows_root for ln in lines)]


def mapping_words(adapter, differs: bool = False, neutral: bool = False) -> str:
    """mha-check's reading of the student's parameters (the adapter's mapping), for a student: no arrows, no
    internal ids.  `differs`: reference-match failed, so the proof's words say what they rest on (the weights the
    module holds, on one configuration), not "reproduces your output" alone beside a failing comparison (heads
    sharing one module reproduce the reference as they hold their weights, and not once mha-check writes its own)."""
    mapping = adapter.mapping or {}
    layout = mapping.get("layout") or {}
    if not layout:  # and how forward was called without a proof (engine/unproven_call), in the note
        problem = mapping.get("problem")
        said = f"mha-check could not tell which of your parameters are W_q, W_k, W_v, W_o: {problem}" if problem \
            else ""
        return "; ".join(t for t in (said, mapping.get("note")) if t)
    weights = [r for r in ("wq", "wk", "wv", "wo") if r in layout]
    words = [parameter_words(layout[r]) for r in weights]
    yours = ("; " if any(", " in w for w in words) else ", ").join(words)  # a role in blocks has commas of its own
    lesson = ", ".join(ROLE_WORDS[r] for r in weights)
    if any(".T" in layout[r] for r in weights):
        yours += " (matrices used as x @ W)"
    rope = f", with your {mapping['rope']} on q and k," if mapping.get("rope") else ""
    proof = {"reference": f"checked: with them the lesson's layer{rope} reproduces your output" + (
        " as your module holds them, though not with the weights and configurations reference-match writes into "
        "them" if differs else ""),
             "mistake": "checked: with them a known mistake reproduces your output",
             "mixed-rotary": "checked: with them your rotary layer, its pairs and its tables as you wrote them, "
                             "reproduces your output",
             "structure": "the only way to read them"}.get(mapping.get("proof"), "")
    if neutral and mapping.get("proof") in ("reference", "mistake", "mixed-rotary"):  # checks are hidden: whether
        proof = "checked: with them mha-check reproduces your output"  # the lesson's layer or a mistake did would tell
    call = mapping.get("call", "")
    text = f"mha-check matched your parameters {yours} to the lesson's {lesson}" + (f" ({proof})" if proof else "")
    if call and call not in ("forward(x)",):
        text += f"; it calls your layer as {call}"
    if mapping.get("note"):
        text += f"; {mapping['note']}"
    return text


def parameter_words(reading: str) -> str:
    """One role's reading of the student's parameters in their own names: `W_query.weight` is W_query,
    `qkv.weight[0:8]` is rows 0-7 of qkv, `W_q.T` is W_q (the orientation is said once for all)."""
    words, names, spans = [], set(), []
    for piece in reading.split(" + "):
        rows = re.search(r"\[(\d+):(\d+)\]$", piece)
        piece = piece[:rows.start()] if rows else piece
        piece = re.sub(r"\.T$", "", piece)
        piece = re.sub(r"\.weight(?=$|\[)", "", piece)
        words.append(f"{piece} (rows {rows[1]}-{int(rows[2]) - 1})" if rows else piece)
        names.add(piece)
        spans.append(f"{rows[1]}-{int(rows[2]) - 1}" if rows else None)
    if len(words) == 1:
        return words[0]
    if len(names) == 1 and None not in spans:  # one fused matrix read per head: its blocks in one phrase ("rows 0-3
        # and 12-15"), not the parameter named once a block (student trial 20 could not tell which group was W_q)
        return f"{names.pop()} (rows {', '.join(spans[:-1])} and {spans[-1]}, stacked)"
    joined = " and ".join([", ".join(words[:-1]), words[-1]])  # one matrix made of blocks: "Wq[0] + Wq[1]" read as
    # a sum (a student's trial); rows of a matrix are stacked, per-head matrices (x @ Wq[h]) side by side
    return joined + (", stacked" if "(rows " in joined else " side by side")


def where(at: str | None, target: str) -> str | None:
    """The student's file:line as the student named the file: the trace records only the file's name, and the
    target says which folder it is in (`examples/attention.py:30` for `attention.py:30`; for a notebook
    `labs/lab.ipynb, code cell 2, line 16` for `lab.ipynb, code cell 2, line 16`)."""
    path = Target.parse(target).where
    if not at or not path.lower().endswith((".py", ".ipynb")):
        return at
    if ", code cell " in at:
        name, sep, rest = at.partition(", code cell ")
    else:
        name, sep, rest = at.rpartition(":")
    return f"{path}{sep}{rest}" if sep and os.path.basename(path) == name else at


# Characters a report never carries as they are, from whatever side: C0 controls but newline and tab, DEL and C1
# (a terminal obeys them); the bidi controls (U+202A-202E embeddings and overrides, U+2066-2069 isolates, the marks
# U+200E, U+200F, U+061C) and the line and paragraph separators U+2028/2029, with which a line shows other than what
# it holds ("exe.png" reads "gnp.exe"); lone surrogates (no UTF-8 encoder writes them: the whole report would be
# lost) and U+FFFE, U+FFFF (XML 1.0 forbids them, as it does the C0 controls: one would make a JUnit file unreadable).
UNSHOWABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
                        "\ud800-\udfff\ufffe\uffff]")


def _escaped(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text) -> str:
    """Text from the student's side (messages, exception texts, names, what the code printed) with every character
    in UNSHOWABLE shown as an escape (\\x1b, \\u202e, \\ud800) instead of obeyed: an escape sequence in an exception
    message must not repaint a grader's terminal, a bidi override reverse what a grader reads, nor a lone surrogate
    or U+FFFF cost the report its JUnit file or its UTF-8 output.  The one rule every renderer applies (the view
    cleans each text it takes from a report); applying it twice changes nothing."""
    return UNSHOWABLE.sub(_escaped, str(text))


def _config_text(config: dict | None) -> str:
    if not config:
        return ""
    try:
        return Config(**config).describe()
    except TypeError:
        return str(config)


NOT_SHOWN = "a check not shown yet"


def unnamed(text: str, hidden) -> str:
    """`text` with every check in `hidden` named as NOT_SHOWN: a skip that needs a hidden check ("skipped: needs
    output-shape, which did not pass"), or the evidence of a root cause a visible check also supports, must not tell
    a student which check that is (its failing is what the verdict already says)."""
    if not hidden:
        return text
    names = "|".join(re.escape(h) for h in sorted(hidden, key=len, reverse=True))
    return re.sub(rf"(?<![\w-])(?:{names})(?![\w-])", NOT_SHOWN, text)


def _where(line: dict | None, target: str) -> str:
    """A rule's line as shown: "attn.py:12: self.o = nn.Linear(d, d, bias=False)", where a missing step belongs
    said so."""
    if not line or not line.get("at"):
        return ""
    at = where(clean(line["at"]), target)
    code = clean(line.get("code") or "").strip()
    return f"{at}{' (where it belongs)' if line.get('missing') else ''}" + (f": {code}" if code else "")


def _line(c, root: RootCause | None, hidden: frozenset = frozenset(), rule_line: str = "") -> CheckLine:
    owner = root.owner(c.id) if root is not None and c.status == Status.FAIL else None  # its fix is the mistake's
    follows = owner is not None
    text = c.message or c.claim
    if c.status == Status.SKIP:  # the engine's words name the check it needs (failed and cannot-tell messages are
        # the checks' own findings, and a hidden check's name in them would be a student's word)
        text = unnamed(text, hidden)
    help_ = clean(c.help)
    if root is not None and help_:  # one thing to do first, not a second, contradicting fix
        help_ = f"fix the root cause above first; if this is still undecided then: {help_}"
    not_applicable = c.status == Status.PASS and bool(getattr(c, "not_applicable", False))
    claim = c.message if c.status == Status.PASS and (c.details.get("form") or not_applicable or
                                                      c.message.startswith(NOT_APPLICABLE)) \
        else c.claim  # judged as the layer's form (a single head), or not at all (no KV cache): what was judged, or
    # why the claim does not apply, in place of a claim the report would otherwise seem to have checked
    return CheckLine(c.id, c.kind, c.status, NOT_APPLICABLE_LABEL if not_applicable else LABELS[c.status], clean(text),
                     clean(claim), _config_text(c.config),
                     clean(f"{c.observed}; expected: {c.expected}") if (c.observed or c.expected) else "",
                     c.explanation, owner.fix if owner else c.fix, help_, follows, not_applicable,
                     rule_line if c.status == Status.FAIL else "")


NOT_APPLICABLE = "does not apply"  # how a check that had nothing to judge begins its pass message


CRASH_WORDS = 200  # the exception's words in a verdict, at most (a torch message runs to pages)


def crash(report, hidden: frozenset = frozenset()) -> str:
    """"FAIL: your code raised AttributeError at typo.py:38: ...; did you mean 'W_query'?" when the student's code
    raised while being imported, built or called and no known mistake explains it (one that does is the root cause,
    said first); "" otherwise.  Read from the failing check's `raised` record (see harness.wire.raised)."""
    if report.diagnosis is not None and report.diagnosis.named:
        return ""
    c = next((c for c in report.checks if c.status == Status.FAIL and c.id not in hidden and
              isinstance(c.details.get("raised"), dict)), None)
    if c is None:
        return ""
    r = raised.Raised(**{k: str(v) for k, v in c.details["raised"].items() if k in raised.Raised.__dataclass_fields__})
    words = r.text if len(r.text) <= CRASH_WORDS else r.text[:CRASH_WORDS].rsplit(" ", 1)[0] + " ..."
    at = where(r.at, report.target) if r.at else ""
    others = sum(o.status == Status.FAIL and o.id not in hidden and o is not c for o in report.checks)
    return clean(f"FAIL: your code raised {r.kind}" + (f" at {at}" if at else "") + f": {words}" +
                 (f"; did you mean '{r.meant}'?" if r.meant else "") +
                 (f" ({others} other check{'s' if others != 1 else ''} also fail{'s' if others == 1 else ''})"
                  if others else ""))


def verdict(report, hidden: frozenset = frozenset()) -> str:
    """One line.  With `hidden` checks (a rubric's, for what students see) only the shown ones are counted."""
    s = {k: sum(c.status == k for c in report.checks if c.id not in hidden) for k in LABELS}
    construct = next((c for c in report.checks if c.id == "construct"), None)
    if crash(report, hidden):
        return crash(report, hidden)
    if construct is not None and construct.status == Status.CANNOT_TELL and construct.details.get("stage") == "import":
        return "CANNOT TELL: " + clean(construct.message).removeprefix("time limit: ")  # a hang at import
    if construct is not None and construct.status == Status.FAIL:
        return "FAIL: your file could not be loaded, or your class could not be built (see construct)"
    if construct is not None and construct.status == Status.CANNOT_TELL:
        return "CANNOT TELL: mha-check could not build your class (see construct for what would help)"
    math = [c for c in report.checks if c.kind == "correctness" and c.id not in hidden]
    rules = [c for c in report.checks if c.kind == "rule" and c.id not in hidden]
    broken_rules = sum(c.status == Status.FAIL for c in rules)
    tests = [c for c in report.checks if c.kind == "instructor" and c.id not in hidden]
    failing_tests = sum(c.status == Status.FAIL for c in tests)
    tests_words = f"; {failing_tests} of your instructor's tests fail{'s' if failing_tests == 1 else ''}" \
        if failing_tests else ""
    partial = len(report.not_selected)
    if hidden:  # what a student may see: nothing in it may depend on a hidden check's result (red team 12: "PASS"
        # for a correct layer, "FAIL: every check shown here passes" for one wrong only where the rubric hides).  A
        # shown check skipped for a hidden one already says that one did not pass: the lines below then stand.
        if not any(c.status in (Status.FAIL, Status.CANNOT_TELL, Status.SKIP) for c in math + rules + tests):
            return "PASS SO FAR: every check shown here passes; checks not shown yet count toward the score"
        if all(c.status == Status.PASS for c in math) and not any(c.status in (Status.CANNOT_TELL, Status.SKIP)
                                                                  for c in rules + tests):
            return ("FAIL: the math checks shown here pass" + (f", but {broken_rules} lesson rule"
                    f"{'s are' if broken_rules != 1 else ' is'} not followed" if broken_rules else "") + tests_words)
        skipped_for_hidden = any(c.status == Status.SKIP and any(h in (c.message or "") for h in hidden)
                                 for c in math + rules + tests)
        if not skipped_for_hidden and not any(c.status == Status.FAIL for c in math):
            undecided = s[Status.CANNOT_TELL] + s[Status.SKIP]
            return (f"CANNOT TELL: mha-check could not check {undecided} claim{'s' if undecided != 1 else ''} shown "
                    "here; nothing shown here is wrong" + (f"; {broken_rules} lesson rule(s) not followed"
                                                          if broken_rules else ""))
    if report.passed and partial:
        return (f"PASS: the {len(report.checks)} checks run pass; {partial} others were not run (--only/--skip), so "
                "this is not the whole verdict")
    if report.passed:
        return "PASS: the math is correct" + (" and every lesson rule is followed" if rules and
                                              report.rules_counted else "") + (
            " and your instructor's tests pass" if tests else "")
    failing_math = sum(c.status == Status.FAIL for c in math)
    rules_words = f"; {broken_rules} lesson rule{'s' if broken_rules != 1 else ''} not followed" if broken_rules \
        else ""
    if failing_math:
        return f"FAIL: {failing_math} check{'s find' if failing_math != 1 else ' finds'} a bug in the math" + \
            rules_words + tests_words
    if hidden and not any(c.status in (Status.FAIL, Status.CANNOT_TELL, Status.SKIP) for c in math + rules + tests):
        return "FAIL: every check shown here passes; checks not shown yet count toward the score"
    if any(c.status == Status.FAIL and c.id in hidden for c in report.counted()):  # never "nothing is wrong" then
        undecided = s[Status.CANNOT_TELL] + s[Status.SKIP]
        return ("FAIL: checks not shown yet find a problem, and they count toward the score" +
                (f"; {undecided} shown here could not be decided or run" if undecided else "") + rules_words)
    if report.math_correct and broken_rules:
        return (f"FAIL: {'the math checks run pass' if partial else 'the math is correct'}, but {broken_rules} "
                f"lesson rule{'s are' if broken_rules != 1 else ' is'} not followed" + tests_words)  # the exit
        # status is 1: the verdict word says so (two students' trials read a verdict line without one)
    if report.math_correct and failing_tests:
        return f"FAIL: {'the math checks run pass' if partial else 'the math is correct'}" + tests_words
    undecided = s[Status.CANNOT_TELL] + s[Status.SKIP]
    return (f"CANNOT TELL: mha-check could not check {undecided} claim{'s' if undecided != 1 else ''}; nothing "
            "it could check is wrong" + (f"; {broken_rules} lesson rule(s) not followed" if broken_rules else ""))


def _root(d, hidden, target: str, options: str = "") -> RootCause | None:
    """The named mistake as the view shows it (and the second one made with it), or None when only a hidden check
    would tell it; hiding a check never takes away a root cause that a visible check supports.  `options`: the
    run's --arg and --map (Report.command_options), which the trace needs as much as the run did."""
    supported = [f for f in d.follows if f not in hidden]  # the visible checks it explains
    if not supported and set(d.follows) & set(hidden):
        return None
    return RootCause(d.mutant, clean(d.title), clean(unnamed(d.evidence, hidden)),
                     clean(d.fix), clean(d.symptom), clean(d.lesson),
                     where(clean(d.at) if d.at else None, target),
                     clean(d.code).strip() if d.code else None,
                     supported,
                     [(f"mha-check explain {d.mutant}", "a worked example of the mistake")]
                     + ([(f"mha-check trace {target}{options}{d.trace_options}", "every step of your forward")]
                        if "(" not in target else []),  # "(from its source)": no command line reaches it
                     d.fix_is_code,
                     _root(d.also, hidden, target, options) if d.also and d.also.named else None)


def counts(checks) -> str:
    """"18 passed, 0 failed, 1 does not apply": a check that passed with nothing to judge is counted apart from the
    verified passes, and only when there is one (as the undecided and the skipped are)."""
    apart = sum(c.status == Status.PASS and bool(getattr(c, "not_applicable", False)) for c in checks)
    s = {k: sum(c.status == k for c in checks) for k in LABELS}
    return ", ".join(f"{n} {w}" for n, w in ((s[Status.PASS] - apart, "passed"), (s[Status.FAIL], "failed"),
                                             (s[Status.CANNOT_TELL], "could not be decided"),
                                             (s[Status.SKIP], "skipped"),
                                             (apart, "does not apply" if apart == 1 else "do not apply"))
                     if n or w in ("passed", "failed"))


def build(report, hidden: frozenset = frozenset()) -> ReportView:
    """The view of `report`; checks in `hidden` (a rubric's hidden checks) are left out entirely, and so is a
    diagnosis that only they would reveal."""
    d = report.diagnosis
    shown = [c for c in report.checks if c.id not in hidden]
    target = clean(report.target)
    root = _root(d, hidden, target, clean(getattr(report, "command_options", ""))) if d and d.named else None
    unmatched = clean(d.message) if d and not d.named and (  # what failing checks say: shown ones, or nobody
        not hidden or any(c.status == Status.FAIL and c.kind == "correctness" for c in shown)) else ""
    rule_lines = getattr(d, "rule_lines", None) or {}
    lines = [_line(c, root, frozenset(hidden), _where(rule_lines.get(c.id), target)) for c in shown]
    summary = counts(shown)
    mapping = clean(mapping_words(report.adapter, any(c.id == "reference-match" and c.status == Status.FAIL
                                                      for c in shown), neutral=bool(hidden)))
    unmapped = report.adapter.mapping or {}
    problem = clean(unmapped.get("problem") or "")
    if problem and any(problem in ln.text for ln in lines):  # the checks that could not be decided already say it
        mapping = clean(unmapped.get("note") or "") if not unmapped.get("layout") else ""
    notes = [clean(n) for n in report.adapter.notes]
    if root is None and any(ln.where for ln in lines) and "(" not in target:  # the rules' lines without a root
        # cause: where to see them marked (a student's trial found no trace command printed then)
        notes.append(f"mha-check trace {target}{clean(getattr(report, 'command_options', ''))}: every step of your "
                     "forward, the lines of the rules not followed marked")
    if report.adapter.form and report.adapter.form.evidence:  # checked as another member of the family: say so
        notes.insert(0, clean(report.adapter.form.evidence))
    if report.student_output.strip() and not hidden:  # how much it printed follows the checks that ran, mask-fill
        head = report.student_output.split("\n", 1)[0]
        amount = head[len(OUTPUT_CUT_MARK):].split(" of ")[-1].rstrip("]") \
            if head.startswith(OUTPUT_CUT_MARK) else f"{len(report.student_output)} characters"
        notes.append(f"your code printed {amount} (see --show-output)")
    # marked for review by the shown checks alone: a hidden check's cannot tell, or a limit its requests ran into,
    # told its result (red team 13: a layer that slept at a forward only a leak's search asks for)
    review = report.needs_review if not hidden else \
        any(c.status == Status.CANNOT_TELL for c in shown) or bool(report.adapter.review)
    isolation = f"isolation: {clean(report.isolation.summary)}" if report.isolation and report.isolation.summary \
        else ""
    return ReportView(target, verdict(report, frozenset(hidden)), report.passed and not hidden,  # the layout too
                      clean(report.adapter.construction or ""), mapping, root,
                      sorted((ln for ln in lines if ln.follows_root), key=lambda ln: root.explains.index(ln.id)),
                      unmatched,
                      [ln for ln in lines if ln.kind == "correctness"], [ln for ln in lines if ln.kind == "rule"],
                      summary, notes, review, isolation,
                      not (report.isolation and report.isolation.full_policy),
                      [ln for ln in lines if ln.kind == "instructor"],
                      [clean(r) for r in report.adapter.review if clean(r) not in notes])
