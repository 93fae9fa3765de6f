"""eval-determinism says what it verified for the layer it checked: "with dropout > 0" only where mha-check could
build the layer with dropout (a dropout argument, or nn.Dropout modules to set); a layer with neither is checked as
built, and its claim and message say so, with what was still verified (deterministic, equal to the reference)."""
import pytest

from conftest import ROOT, ZOO
from harness.render import text, view

NO_DROPOUT = f"{ZOO / 'correct' / 'baddbmm_additive_mask.py'}:BaddAttn"  # no dropout argument, nn.Dropout, F.dropout
WITH_DROPOUT = f"{ROOT / 'examples' / 'correct_attention.py'}:MultiHeadAttention"  # dropout=... and nn.Dropout


@pytest.fixture(scope="module", autouse=True)
def _want(reports):
    reports.want([NO_DROPOUT, WITH_DROPOUT])


def test_a_layer_without_dropout_is_not_said_to_be_checked_with_dropout(reports):
    source = (ZOO / "correct" / "baddbmm_additive_mask.py").read_text()
    assert "dropout" not in source.lower()  # the premise: nothing to set a rate with
    c = reports(NO_DROPOUT)["eval-determinism"]
    assert c.status == "pass" and not c.not_applicable  # verified: deterministic, and equal to the reference
    assert "in eval() mode, with dropout > 0" not in c.claim and "dropout is off" not in c.claim
    assert "could not be built with dropout > 0" in c.claim
    assert "deterministic" in c.claim and "reference" in c.claim  # what it did verify, where the weights map
    assert "no dropout argument nor nn.Dropout" in c.claim
    assert "determinism only" not in c.message  # it was compared with the reference too
    shown = text.render(view.build(reports(NO_DROPOUT)), cols=80)
    block = shown[shown.index("eval-determinism"):shown.index("gradient-match")]
    block = " ".join(block.split())
    assert "with dropout > 0, the output" not in block and "could not be built with dropout > 0" in block


def test_a_layer_with_dropout_keeps_the_claim(reports):
    c = reports(WITH_DROPOUT)["eval-determinism"]
    assert c.status == "pass"
    assert c.claim == "in eval() mode, with dropout > 0, the output is deterministic and dropout is off"
    assert "dropout=0.5" in c.message
