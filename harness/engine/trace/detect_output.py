"""The detector of the output projection: after the heads are merged, one more linear layer lets them exchange
information.  It runs last, so its mark on the forward as a whole comes after the mask's."""
from __future__ import annotations

from harness.engine.trace.registry import Findings, detector


@detector("heads-not-projected")
def heads_not_projected(f: Findings) -> None:
    """A complete forward with an attention of its own (not nn.MultiheadAttention) and no output projection: told
    at the student's `return` line, where the projection is to be applied (what is missing has no step of its
    own, but it has a place)."""
    labels = f.namer.labels
    if f.complete and f.cfg.get("out_proj", True) and (f.named("softmax") or f.fused_sdpa) and not f.fused_mha and \
            not any(labels[i] == "output projection" for i in range(len(f.ops))):
        f.mark_whole("heads-not-projected", (
            "no output projection after the heads are merged: the heads cannot exchange information; add "
            "self.out_proj = nn.Linear(d_out, d_out) in __init__ and apply it to the merged heads where forward "
            "returns them"), f.returned_at)
