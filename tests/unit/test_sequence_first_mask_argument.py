"""A sequence-first layer, (n, B, d), whose causal mask is a forward argument (issue 28 item 7: torchtext's
container and ESM's rotary layer, realzoo6 and realzoo7).  Called the usual way, (B, n, d), a mask for the n tokens
cannot fit the scores of a layer that reads the batch axis as its tokens, so every masked call raised and only the
unmasked one (when there was one) ran: the masked calls were never tried sequence first, and a layer whose mask is
required ran no way at all and was failed for raising.  Every call is now tried sequence first once the layer shows
it reads its input so (or runs no other way), under the rotary conventions too; what runs only so must still be
reproduced, by the reference or by a known mistake."""
import pytest

from conftest import ZOO
from harness.child.inprocess import InProcess
from harness.engine.runner import Options, run_checks
from harness.sandbox.subject import Subject

SEQ_FIRST = "x given as (n, B, d), sequence first"


def _report(path, cls, only=("output-shape", "reference-match", "causal-leakage")):
    target = f"{path}:{cls}"
    opts = Options(only=list(only), examples=2)
    return run_checks(target, opts, subject=Subject(target, opts.overrides, opts.seed, start=InProcess()))


@pytest.mark.parametrize("name, cls, mask", [
    ("seq_first_causal_mask_argument.py", "SeqFirstMaskedAttention", "causal_mask="),  # required bool keep-mask
    ("seq_first_rope_additive_mask_argument.py", "RotarySeqFirstAttention", "attn_bias="),  # optional, additive, RoPE
])
def test_a_sequence_first_layer_is_driven_with_its_mask_argument(name, cls, mask):
    report = _report(ZOO / "correct" / name, cls)
    mapping = report.adapter.mapping
    assert mapping["proof"] == "reference" and SEQ_FIRST in mapping["call"] and mask in mapping["call"], mapping
    statuses = {c.id: c.status.value for c in report.checks}
    assert {"output-shape", "reference-match", "causal-leakage"} <= set(statuses)
    assert set(statuses.values()) == {"pass"}, statuses


def test_its_mistake_is_found_sequence_first_not_turned_into_a_failure_to_run():
    report = _report(ZOO / "buggy" / "seq_first_mask_argument_no_scaling.py", "SeqFirstNoScale")
    assert report.adapter.mapping["proof"] == "mistake" and SEQ_FIRST in report.adapter.mapping["call"]
    statuses = {c.id: c.status.value for c in report.checks}
    assert statuses["output-shape"] == "pass" and statuses["reference-match"] == "fail"
    assert report.diagnosis is not None and report.diagnosis.mutant == "no-scaling"
