"""A rehearsal in the warm template: a causal layer served once through every request a submission gets.

Why: every submission's child is a fresh fork of the template, and whatever torch, numpy and our own code set up
lazily on first use (operator dispatch, autograd's engine paths, the tracing and device recorders, the wire's
encoders) is set up again in every child and thrown away with it, while the first writes to each inherited page
cost a copy-on-write fault.  Done once here, before any zygote is forked, each child inherits it.  Measured on
the test zoo (children forked from a warm process, 50 submissions): about 13,100 -> 11,000 page faults per child,
for about 60 ms once.

It runs a small causal layer of its own (`_rehearsal_layer()`, not the lesson's reference, which the child side never
imports), never a submission, on inputs from a generator seeded for the rehearsal alone: nothing it computes is an
expected value of any check, and all of it is dropped before the first fork.  It does not load a file (that would
put a module in sys.modules and a folder on sys.path that a submission would then find).

That layer is deliberately WRONG (its scores are divided by the head width, not its square root: the same
operations, so the same code is warmed), because a submission once subclassed it and got full marks; and since a red
team then read this file and changed that one token, it is out of the child's reach as well: this package is hidden
from a submission's view (`harness.warmup`), it is not importable from a submission (`harness.child.target.
_SubmissionsOwn` refuses harness modules not imported yet), and its module and the class, made anew for each
rehearsal, are forgotten and collected before the template forks (`harness.child.zygote._forget_rehearsal`).  Where
neither Landlock nor a mount namespace exists, every file of mha-check is readable by its permissions, this one too
(docs/threat-model.md says so); the layer it makes still fails reference-match.
"""
from __future__ import annotations

import io

import numpy as np
import torch
from torch import nn

from harness.child import construct
from harness.child.target import LoadedTarget
from harness.child.worker import Worker
from harness.wire import messages as m
from harness.wire import protocol


def _rehearsal_layer() -> type:
    """A new class each time (none is kept at module level, so none outlives its rehearsal): causal attention written
    the way most students write it: a fused q/k/v projection split by chunk, heads by view and transpose, a
    registered triangular mask, softmax, dropout, heads merged by transpose, contiguous and view, an output
    projection; with the scores divided by the head width instead of its square root (see the module's docstring)."""

    class _RehearsalLayer(nn.Module):
        def __init__(self, d_in: int, d_out: int, context_length: int, num_heads: int, dropout: float = 0.0):
            super().__init__()
            self.heads, self.head_dim = num_heads, d_out // num_heads
            self.qkv = nn.Linear(d_in, 3 * d_out)
            self.out_proj = nn.Linear(d_out, d_out)
            self.dropout = nn.Dropout(dropout)
            self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1).bool())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, n, _ = x.shape
            q, k, v = (t.view(b, n, self.heads, self.head_dim).transpose(1, 2) for t in self.qkv(x).chunk(3, dim=-1))
            scores = (q @ k.transpose(2, 3)).masked_fill(self.mask[:n, :n], float("-inf")) / self.head_dim  # WRONG
            context = self.dropout(torch.softmax(scores, dim=-1)) @ v
            return self.out_proj(context.transpose(1, 2).contiguous().view(b, n, self.heads * self.head_dim))

    return _RehearsalLayer


# the shapes of the checks' required configurations: a short sequence with two heads, a 64-token one with four
CONFIGS = ({"d_in": 8, "d_out": 8, "heads": 2, "context_length": 7, "batch": 2, "n": 5},
           {"d_in": 8, "d_out": 8, "heads": 4, "context_length": 64, "batch": 1, "n": 64})


def _requests(worker: Worker, cfg: dict, rng: np.random.Generator) -> list[m.Request]:
    handle = worker.answer(m.Build(cfg)).handle
    x = rng.standard_normal((cfg["batch"], cfg["n"], cfg["d_in"]))
    weights = worker.answer(m.ReadWeights(handle, 0)).weights
    return [m.WriteWeights(handle, 0, weights), m.Forward(handle, x), m.Forward(handle, x, "train"),
            m.Forward(handle, x, noncontig=True, want_x_after=True),
            m.Jacobian(handle, x, rng.standard_normal(cfg["d_out"])),
            m.Vjp(handle, x, rng.standard_normal((cfg["batch"], cfg["n"], cfg["d_out"])), layout=0),
            m.Devices(handle, x), m.Trace(handle, x), m.CacheRun(handle, x, [cfg["n"]])]


def _worker() -> Worker:
    """A worker whose loaded target is the rehearsal layer, as if a Load had named it (no file is loaded)."""
    worker, layer = Worker(), _rehearsal_layer()
    worker.target = LoadedTarget(layer, layer.__name__, __file__)  # not inspect's: the module may be gone
    worker.signature = construct.read_signature(layer, {})
    return worker


def rehearse() -> list[m.Reply]:
    """Serve the rehearsal layer every kind of request once, through the wire's encoding both ways; returns the replies
    (a test checks that none failed: a rehearsal that fails silently would warm nothing)."""
    worker = _worker()
    rng = np.random.default_rng([0x5EED, 0xC0FFEE])  # the rehearsal's own stream, used by nothing else
    replies = []
    for cfg in CONFIGS:
        header, arrays = protocol.decode(io.BytesIO(m.encode_batch(_requests(worker, cfg, rng))))
        answered = [worker.answer(request) for request in m.decode_requests(header, arrays)]
        replies += m.decode_replies(*protocol.decode(io.BytesIO(m.encode_batch(answered))))
    return replies


def rehearse_meta() -> m.Reply:
    """Serve the rehearsal layer one MetaForward: what the meta device needs on first use (torch._dynamo, imported
    by the first meta kernel that runs, about 0.7 s) is then in the process.  Only the meta template does this
    (`harness.child.zygote`): in the template every later fork would cost more (a larger heap to copy page tables
    for), for the few submissions that need it."""
    worker = _worker()
    cfg = CONFIGS[0]
    handle = worker.answer(m.Build(cfg)).handle
    return worker.answer(m.MetaForward(handle, [cfg["batch"], cfg["n"], cfg["d_in"]]))
