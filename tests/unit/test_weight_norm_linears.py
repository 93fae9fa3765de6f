"""Weight-normalised projections (fairseq's `Linear` = nn.utils.weight_norm(nn.Linear(...)); the parametrize form
too): the layer computes with W = g * v / ||v||, which the legacy hook recomputes into a plain attribute `weight`
before every call.  mha-check read that attribute as an unregistered tensor (registered failed), counted g and v
(param-count failed: d_out more per projection) and could neither take W's gradient nor write W, so a layer whose
only mistake was a known one was left unnamed (tests/realzoo/fairseq_downsampled_mha_single_head_module_weight_norm_
hides_diagonal.py: "no known mistake matches").  The child now bakes weight normalisation into the weight it makes
(the forward unchanged): a correct weight-normalised layer passes, and the same layer with a mask that hides the
diagonal is named."""
import pytest

from harness.child.inprocess import InProcess
from harness.engine.runner import Options, run_checks
from harness.sandbox.subject import Subject

LAYER = '''
import torch
import torch.nn as nn


def Linear(d_in, d_out):
    return NORM(nn.Linear(d_in, d_out))


class NormedAttention(nn.Module):
    def __init__(self, d_model, num_heads, context_length):
        super().__init__()
        assert d_model % num_heads == 0
        self.h = num_heads
        self.q, self.k, self.v, self.o = (Linear(d_model, d_model) for _ in range(4))
        self.register_buffer("mask", torch.ones(context_length, context_length).triu(DIAGONAL).bool())

    def forward(self, x):
        B, n, d = x.shape
        q, k, v = (f(x).view(B, n, self.h, -1).transpose(1, 2) for f in (self.q, self.k, self.v))
        s = q @ k.transpose(-2, -1) / (d // self.h) ** 0.5
        s = s.masked_fill(self.mask[:n, :n], float("-inf"))
        y = torch.softmax(s, dim=-1) @ v
        return self.o(y.transpose(1, 2).reshape(B, n, d))
'''
NORMS = {"legacy": "nn.utils.weight_norm", "parametrize": "nn.utils.parametrizations.weight_norm"}


def _report(tmp_path, norm: str, diagonal: int):
    path = tmp_path / f"normed_{norm}_{diagonal}.py"
    path.write_text(LAYER.replace("NORM", NORMS[norm]).replace("DIAGONAL", str(diagonal)))
    target = f"{path}:NormedAttention"
    opts = Options(examples=2)
    return run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("norm", sorted(NORMS))
def test_a_correct_weight_normalised_layer_passes(tmp_path, norm):
    report = _report(tmp_path, norm, 1)
    failed = [(c.id, c.message[:160]) for c in report.checks if c.status != "pass"]
    assert report.passed, failed


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_a_known_mistake_behind_weight_normalised_linears_is_named(tmp_path):
    report = _report(tmp_path, "legacy", 0)
    assert report.diagnosis is not None and report.diagnosis.mutant == "mask-hides-diagonal", report.diagnosis


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("norm", sorted(NORMS))
def test_the_report_says_which_weights_had_their_normalisation_folded(tmp_path, norm):
    """The child checks the layer with each W = g * v / ||v|| folded into one plain parameter: the report's reading
    of the parameters says so, by name (it named q, k, v, o as if plain Linears, realzoo18 open 2); a layer without
    weight normalisation is told nothing of it."""
    note = _report(tmp_path, norm, 1).adapter.mapping["note"]
    assert "the weight normalisation of q.weight, k.weight, v.weight, o.weight (W = g · v / ||v||) was folded" in note
    plain = tmp_path / "plain.py"
    plain.write_text(LAYER.replace("NORM", "").replace("DIAGONAL", "1"))
    opts = Options(examples=2)
    report = run_checks(f"{plain}:NormedAttention", opts,
                        subject=Subject(f"{plain}:NormedAttention", opts.overrides, opts.seed, start=InProcess()))
    assert report.passed and "weight normalisation" not in report.adapter.mapping.get("note", "")
