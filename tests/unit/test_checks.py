"""Each check on its own, in this process: it passes the lesson's layer and fails the mutant made for it (the first
check the mutant declares), with a message; and the engine's rules around checks (prerequisites, undecided
outcomes, the registry) hold.  The end-to-end kill matrix (tests/e2e/) runs every mutant through a real child."""
from __future__ import annotations

import pytest

import checks
import mutants
from conftest import ROOT
from checks.divisibility import own_fix
from checks.mask_buffer import _mask_like
from checks.view_order import mistakes as view_order_mistakes
from harness.engine.runner import Options, run_checks
from harness.child.inprocess import InProcess
from harness.sandbox.subject import Subject
from harness.wire.messages import Signature
from harness.wire.config import Config
from harness.wire.messages import Mix

REFERENCE = f"{ROOT / 'reference' / 'causal_mha.py'}:CausalMHA"
CHECKS = checks.all_checks()
MADE_FOR = {c.id: sorted(m for m, e in mutants.catalogue().items() if e["killed_by"][0] == c.id) for c in CHECKS}


def run(target: str, only: list[str], **options):
    opts = Options(only=only, examples=2, diagnose=False, **options)
    return run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))


@pytest.mark.parametrize("check", CHECKS, ids=[c.id for c in CHECKS])
def test_the_reference_passes(check):
    result = run(REFERENCE, [check.id])[check.id]
    assert (result.status, result.message) == ("pass", result.message) and result.message


@pytest.mark.parametrize("check", [c for c in CHECKS if MADE_FOR[c.id]], ids=[c.id for c in CHECKS if MADE_FOR[c.id]])
def test_the_mutant_made_for_it_fails(check):
    mid = MADE_FOR[check.id][0]
    result = run(f"{mutants.source_path(mid)}:{mutants.class_name(mid)}", [check.id])[check.id]
    assert result.status == "fail" and len(result.message) > 20, (mid, result.status, result.message)


def test_every_check_is_made_for_some_mutant():
    assert [c.id for c in CHECKS if not MADE_FOR[c.id]] == []


def test_a_check_whose_prerequisite_fails_is_skipped_with_the_reason():
    report = run(f"{mutants.source_path('keys-wrong-transpose')}:CausalMHA", ["reference-match"])
    assert report["output-shape"].status == "fail"
    assert report["reference-match"].status == "skip" and "needs output-shape" in report["reference-match"].message


def test_a_skip_behind_a_skip_names_the_check_that_stopped_both():
    """A skip that only said "needs output-shape, which did not pass" sent the student to a check that had not run."""
    report = run(f"{mutants.source_path('view-without-contiguous')}:CausalMHA", ["reference-match"])
    assert report["contiguity"].status == "fail" and report["output-shape"].status == "skip"
    assert report["reference-match"].message == ("skipped: needs output-shape, which needs contiguity, which did not "
                                                 "pass")


def test_a_constructor_argument_mha_check_cannot_bind_is_cannot_tell_not_fail(tmp_path):
    src = (ROOT / "reference" / "causal_mha.py").read_text().replace(
        "def __init__(self, d, nheads, context_length,", "def __init__(self, d, nheads, context_length, vocab_size,")
    path = tmp_path / "attn.py"
    path.write_text(src)  # (a required rotary base such as rope_base is bound to 10000: tests/unit/test_rotary.py)
    report = run(f"{path}:CausalMHA", ["construct"])
    assert report["construct"].status == "cannot_tell" and "vocab_size" in report["construct"].message
    assert "--arg" in report["construct"].help and not report.passed
    bound = run(f"{path}:CausalMHA", ["construct"], overrides={"vocab_size": 10000})
    assert bound["construct"].status == "pass"


def test_weight_checks_say_cannot_tell_when_the_mapping_is_not_certain(tmp_path):
    src = (ROOT / "reference" / "causal_mha.py").read_text()
    for old, new in [("self.q, self.k, self.v", "self.a, self.b, self.c"),
                     ("split(self.q(x)), split(self.k(x)), split(self.v(x))",
                      "split(self.a(x)), split(self.b(x)), split(self.c(x))"),
                     ("self.out = nn.Linear(d_out, d_out)", "self.mix = nn.Linear(d_out, d_out)"),
                     ("self.out(ctx)", "self.mix(ctx)")]:
        src = src.replace(old, new)
    path = tmp_path / "odd.py"
    path.write_text(src)
    report = run(f"{path}:CausalMHA", ["reference-match"])
    assert report["reference-match"].status in ("pass", "cannot_tell")  # by position it may still be reproduced
    mapped = run(f"{path}:CausalMHA", ["reference-match"], weight_map={"q": "a", "k": "b", "v": "c", "o": "mix"})
    assert mapped["reference-match"].status == "pass"


def test_the_registry_refuses_a_duplicate_id_and_an_unknown_prerequisite():
    with pytest.raises(checks.RegistryError, match="already registered"):
        checks.check("construct", "c", "e", "f")(lambda ctx: None)
    with pytest.raises(checks.RegistryError, match="not a registered check"):
        checks.check("my-check", "c", "e", "f", needs=("construct",))(lambda ctx: None)
    with pytest.raises(checks.RegistryError, match="kebab-case"):
        checks.check("My_Check", "c", "e", "f")


def test_checks_are_discovered_whatever_was_imported_first():
    import checks.view_order  # importing one check module first must not hide the others

    assert {c.id for c in checks.all_checks()} >= {"construct", "causal-leakage", "view-order", "divisibility"}
    order = [c.id for c in checks.all_checks()]
    for c in checks.all_checks():  # prerequisites come first
        assert all(order.index(n.id) < order.index(c.id) for n in c.needs)


@pytest.mark.parametrize("mutant_id", ["split-view-order-queries", "split-view-order-keys", "split-view-order-values"])
def test_view_order_names_the_one_projection_split_wrongly(mutant_id):
    """A split mistake on one projection alone used to pass view-order: it fails now, naming that projection and
    (from the random weights) that the other two are split the lesson's way."""
    role = mutant_id.rsplit("-", 1)[1]
    result = run(f"{mutants.source_path(mutant_id)}:CausalMHA", ["view-order"])["view-order"]
    assert result.status == "fail", result.message
    assert result.message.startswith(f"the {role} are split into heads with view(B, H, n, dh)")
    assert result.details["finding"] == f"view:view-bhnd:{role[0]}/lesson"


@pytest.mark.parametrize("mutant_id,finding,start", [
    ("split-strided", "view:strided/lesson", "heads are split on strided features with view(B, n, dh, H)"),
    ("merge-strided", "view:lesson/strided", "heads are merged back strided"),
    ("split-strided-values", "view:strided:v/lesson", "the values are split into heads on strided features")])
def test_view_order_names_a_strided_split_or_merge_that_the_rest_does_not_undo(mutant_id, finding, start):
    """Heads that take every H-th feature (view(B, n, dh, H).permute(0, 3, 1, 2)) with a merge that does not put
    them back there, or on one projection only, passed view-order: "no known mistake matches" (a student's trial).
    It fails now, naming the strided split or merge, computed by the reference itself."""
    result = run(f"{mutants.source_path(mutant_id)}:CausalMHA", ["view-order"])["view-order"]
    assert result.status == "fail", result.message
    assert result.message.startswith(start), result.message
    assert result.details["finding"] == finding


def test_view_order_with_zero_queries_and_keys_claims_no_more_than_it_sees():
    """With W_q = W_k = 0 the split of the queries and keys leaves no trace: only the values' split and the merge are
    compared there, and a mistake found there says nothing about the queries and keys."""
    seen = view_order_mistakes()
    assert len(seen) == 43  # (none; view(B, H, n, dh) or strided on all, q, k, v, qk, qv, kv) x (merge right,
    # without the transpose, strided), less the reference and the strided split merged alike (a reading)
    assert ("strided", "strided") not in seen  # (without W_o the merged heads are the output: there it is one)
    assert ("strided", "strided") in view_order_mistakes(without_out_proj=True)
    blind = view_order_mistakes(qk_seen=False)
    assert set(blind) == {("lesson", "no-transpose"), ("view-bhnd:v", "lesson"), ("view-bhnd:v", "no-transpose"),
                          ("lesson", "strided"), ("view-bhnd:v", "strided"), ("strided:v", "lesson"),
                          ("strided:v", "no-transpose")}  # (strided:v merged strided is the reference there)
    assert all("queries" not in text and "keys" not in text for text, _ in blind.values())
    assert "(the keys and values the lesson's way)" in seen["view-bhnd:q", "lesson"][0]


def test_gradient_match_blames_detaching_only_when_the_outputs_are_right():
    """Wrong gradients of a wrong forward once got "keep the forward differentiable: no torch.no_grad() ..."."""
    different = run(f"{mutants.source_path('no-scaling')}:CausalMHA", ["gradient-match"])["gradient-match"]
    assert different.status == "fail" and "the outputs differ too" in different.message
    assert different.fix.startswith("Make the outputs right first")
    detached = run(f"{mutants.source_path('weights-under-no-grad')}:CausalMHA", ["gradient-match"])["gradient-match"]
    assert detached.status == "fail" and "the outputs differ too" not in detached.message
    assert detached.fix.startswith("Keep the whole forward differentiable")


def test_a_tensor_left_on_the_cpu_is_the_mask_mistake_only_when_it_masks():
    """Positions or rotary tables made without device= once got "Mask created in forward ... no device=" and a fix
    adding a mask the layer does not have."""
    cfg = Config(d_in=8, d_out=8, heads=2, context_length=7, batch=2, n=5)
    assert _mask_like([Mix("masked_fill", [5, 5], "a.py:3")], cfg)
    assert _mask_like([Mix("__add__", [1, 1, 5, 5], "a.py:3")], cfg)  # an additive -inf matrix
    assert not _mask_like([Mix("mul", [5, 5], "a.py:3")], cfg)  # ALiBi's relative positions times the slopes
    assert not _mask_like([Mix("__mul__", [5, 4], "a.py:3")], cfg)  # a rotary table


@pytest.mark.parametrize("device, verdict", [
    ("x.device", "pass"), ("self.out.weight.device", "pass"), ("q.device", "pass"),
    ('"cpu"', "fail"), ("None", "fail"), ("self.where", "fail")])  # self.where: "cpu", stored in __init__
def test_a_mask_made_in_forward_moves_only_with_a_device_that_moves(tmp_path, device, verdict):
    """Found by an attacker helper: any device= argument once counted as moving with the module, so a mask made
    with device="cpu", device=None or a device stored in __init__ passed without a run on the meta device, where it
    stays behind and fails as it would on a GPU."""
    src = (ROOT / "reference" / "causal_mha.py").read_text().replace(
        "scores = scores.masked_fill(self.mask[:n, :n], float(\"-inf\"))",
        f"mask = torch.triu(torch.ones(n, n, device={device}), 1).bool(); "
        "scores = scores.masked_fill(mask, float(\"-inf\"))").replace(
        "        super().__init__()\n", "        super().__init__()\n        self.where = \"cpu\"\n", 1)
    assert "self.where" in src and "device=" in src
    path = tmp_path / "made_in_forward.py"
    path.write_text(src)
    result = run(f"{path}:CausalMHA", ["mask-buffer"])["mask-buffer"]
    assert result.status == verdict, result.message
    if verdict == "fail":
        assert f"with device={'None' if device == 'None' else repr('cpu')}, not the input's device" in result.message


def _masks_only_the_first(tmp_path, positions: int) -> str:
    """The lesson's layer whose mask stops at row `positions`: from there on, every token sees the whole future."""
    src = (ROOT / "reference" / "causal_mha.py").read_text().replace(
        "scores = scores.masked_fill(self.mask[:n, :n], float(\"-inf\"))",
        f"mask = self.mask[:n, :n].clone(); mask[{positions}:] = False; "
        "scores = scores.masked_fill(mask, float(\"-inf\"))")
    assert "clone()" in src
    path = tmp_path / "partial_mask.py"
    path.write_text(src)
    return f"{path}:CausalMHA"


def test_a_mask_that_stops_short_of_the_long_sequence_leaks_there_and_is_caught(tmp_path, monkeypatch):
    """Only the 64-token configuration is longer than 20 positions: the gradient sees the leak, and so do the
    parent's perturbations after every fourth position of it, even with the child's gradient forged to no leak."""
    target = _masks_only_the_first(tmp_path, 21)
    result = run(target, ["causal-leakage"])["causal-leakage"]
    assert result.status == "fail" and "future" in result.message, result.message
    monkeypatch.setattr("checks.causal_leakage._leak_verdict", lambda *args, **kwargs: None)  # a forged Jacobian
    result = run(target, ["causal-leakage"])["causal-leakage"]
    assert result.status == "fail" and "changing the tokens after position" in result.message, result.message
    assert int(result.message.split("after position ")[1].split()[0]) >= 21  # (shrunk: n down to 23)


def test_the_divisibility_fix_is_written_in_the_constructors_own_names():
    """A student pasted the lesson's `if d_out % num_heads: ...` into a class taking d_model and n_head: NameError."""
    def signature(accepts, config_param=None):
        return Signature(params=list(accepts.values()), separate_widths=False, accepts=accepts,
                         config_param=config_param, unfillable=[])

    assert "`if d_model % n_head: raise ValueError(f\"d_model={d_model}" in own_fix(
        signature({"width": "d_model", "heads": "n_head"}))
    assert "`if d_out % num_heads:" in own_fix(signature({"d_in": "d_in", "d_out": "d_out", "heads": "num_heads"}))
    assert "`if cfg.n_embd % cfg.n_head:" in own_fix(signature({"width": "n_embd", "heads": "n_head"}, "cfg"))
    assert "`" not in own_fix(signature({"width": "d_model"}))  # the heads' name unknown: words, no code


def test_an_output_that_turns_nan_at_large_scores_is_not_called_a_leak(tmp_path):
    """lucidrains' first plain-PyTorch flash attention (tests/realzoo/lucidrains_flash_attention_backward_double_scale
    .py) shifts its online softmax by max(row max, 0): a row whose scores all lie below about -745 gives 0 / 0.  The
    probe with real scores near -5e4 then sees nan at position 0 whatever the later tokens are: the outputs did not
    move, and no masked position got weight; causal-leakage must say what it saw, not name a finite fill."""
    src = (ROOT / "reference" / "causal_mha.py").read_text()
    old = "        w = torch.softmax(scores, dim=-1)\n"
    assert old in src
    src = src.replace(old, "        e = torch.exp(scores - scores.amax(-1, keepdim=True).clamp(min=0))\n"
                           "        w = e / e.sum(-1, keepdim=True)\n")
    path = tmp_path / "shift.py"
    path.write_text(src)
    result = run(f"{path}:CausalMHA", ["causal-leakage"])["causal-leakage"]
    assert result.status == "fail", result.message
    assert "leak" not in result.details.get("finding", "").split(":")[-1] and "finite fill" not in result.message
    assert "nan" in result.message and "not finite" in result.message, result.message
    assert "maximum" in result.fix and "masked_fill" not in result.fix


def _jacobian(influence):
    """A (1, n, 1, n, 1) Jacobian whose gradient norms are `influence` (one sequence, one input feature)."""
    import numpy as np

    G = np.asarray(influence, float)
    return G.reshape(1, *G.shape[:1], 1, G.shape[1], 1)


def test_a_tiny_influence_of_an_allowed_position_is_present_and_only_none_is_dead():
    """A softmax saturated by large scores (a layer without scaling, at a grading seed whose inputs are larger)
    leaves an earlier token a weight of about e^-30: its gradient, 1e-13 of the largest, was read as no influence,
    and a causal layer failed causal-leakage with "is the mask or the softmax axis wrong?" at that seed only.  An
    influence of exactly zero (a mask hiding an allowed position, a detach) still fails."""
    from types import SimpleNamespace

    from checks.causal_leakage import _leak_verdict

    cfg = Config(d_in=1, d_out=1, heads=1, context_length=3, batch=1, n=3)
    saturated = [[1.0, 0, 0], [1e-13, 1.0, 0], [1e-20, 0.5, 1.0]]
    assert _leak_verdict(SimpleNamespace(jac=_jacobian(saturated), no_graph=False), cfg) is None
    hidden = [[1.0, 0, 0], [0.0, 1.0, 0], [0.3, 0.5, 1.0]]
    outcome = _leak_verdict(SimpleNamespace(jac=_jacobian(hidden), no_graph=False), cfg)
    assert outcome.status == "fail" and "output position 1 does not depend on input position 0" in outcome.message


def test_an_output_that_moves_with_no_input_says_nothing_of_the_mask():
    """A ReLU after the output projection clamps every feature of some tokens at 0: their rows of the Jacobian are
    zero everywhere, and a student's layer with a right mask was told "output position 0 does not depend on input
    position 0: is the mask or the softmax axis wrong?" (then, where every row was clamped, "detached, or
    no_grad?").  A row without any influence is no evidence about the mask (reference-match reports the output);
    an allowed position hidden in a row that depends on other inputs still fails."""
    from types import SimpleNamespace

    from checks.causal_leakage import _leak_verdict

    cfg = Config(d_in=1, d_out=1, heads=1, context_length=3, batch=1, n=3)
    clamped = [[0.0, 0, 0], [0.4, 1.0, 0], [0.0, 0.0, 0.0]]
    assert _leak_verdict(SimpleNamespace(jac=_jacobian(clamped), no_graph=False), cfg) is None
    assert _leak_verdict(SimpleNamespace(jac=_jacobian([[0.0] * 3] * 3), no_graph=False), cfg) is None
    hidden = [[0.0, 0, 0], [0.0, 1.0, 0], [0.3, 0.5, 1.0]]
    outcome = _leak_verdict(SimpleNamespace(jac=_jacobian(hidden), no_graph=False), cfg)
    assert outcome.status == "fail" and "output position 1 does not depend on input position 0" in outcome.message
    assert _leak_verdict(SimpleNamespace(jac=None, no_graph=True), cfg).details["finding"] == "leak:no-gradient"


def test_mask_fill_on_a_layer_random_in_eval_says_so_not_that_the_weights_could_not_be_set(tmp_path):
    """Instructor trial 9: dropout hard-coded on (F.dropout(w, 0.1, training=True)) and a -inf fill: mask-fill said
    it "could not tell which of your parameters are W_q, W_k, W_v and W_o" while the same report matched them and
    named dropout-in-eval as the root cause, and the row went to a person for that.  The layer answers differently
    twice on one input, so no fill can be told from noise: mask-fill is not judged (skip, eval-determinism's to say),
    never a claim about the weights."""
    src = (ROOT / "reference" / "causal_mha.py").read_text()
    old = "w = self.dropout(w)"
    assert old in src
    path = tmp_path / "noisy.py"
    path.write_text(src.replace(old, "w = torch.nn.functional.dropout(w, 0.1, training=True)"))
    result = run(f"{path}:CausalMHA", ["mask-fill"])["mask-fill"]
    assert result.status == "skip", (result.status, result.message)
    assert "could not tell which of your parameters" not in result.message
    assert "eval-determinism" in result.message, result.message


def test_contiguity_fails_only_on_outputs_that_strides_change_every_time_not_on_one_odd_call(tmp_path):
    """Instructor trial 9: a layer with dropout always on (p = 0.1) failed contiguity ("the output changes when the
    same input is given with non-contiguous strides") under one seed and passed under another, a point of the
    grade drawn at random: a contiguous call that happened to drop nothing twice, between them one that dropped
    something, read as the strides' doing.  Here the first call on a non-contiguous input differs and no later one:
    that is an output that moves from call to call (eval-determinism's), not evidence about strides."""
    src = (ROOT / "reference" / "causal_mha.py").read_text()
    old = "    def forward(self, x):\n"
    assert old in src
    path = tmp_path / "odd_call.py"
    path.write_text(src.replace(old, old + "        if not x.is_contiguous() and not getattr(self, '_seen', False):\n"
                                      "            self._seen = True\n"
                                      "            return self.forward(x.contiguous()) + 1.0\n", 1))
    result = run(f"{path}:CausalMHA", ["contiguity"])["contiguity"]
    assert result.status != "fail", result.message
