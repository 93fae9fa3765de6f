"""The child side's Jacobian (harness.child.worker): the vectorised path gives the loop over output positions' exact
zeros and NaNs (causal-leakage judges "zero for s > t" on them) and its other numbers to rounding, and falls back to
the loop for whatever it cannot vectorise; and the template's rehearsal."""
import os
import subprocess
import sys

import pytest
import torch

_DTYPE = torch.get_default_dtype()
from harness.child import calling, layouts, worker  # noqa: E402 - sets float64 as the process's default dtype...

torch.set_default_dtype(_DTYPE)  # ...which the rest of the suite does not expect

import mutants  # noqa: E402
from harness import PACKAGES_ROOT  # noqa: E402
from harness.warmup import rehearsal  # noqa: E402
from harness.wire import messages as m  # noqa: E402
from reference.causal_mha import CausalMHA  # noqa: E402


def _loop(proj, x):
    B, n = proj.shape
    jac = torch.zeros((B, n) + tuple(x.shape), dtype=torch.float64)
    for b in range(B):
        for t in range(n):
            (g,) = torch.autograd.grad(proj[b, t], x, retain_graph=True, allow_unused=True)
            jac[b, t] = 0 if g is None else g
    return jac


def _proj(module, B=3, n=6, d=8, seed=0):
    torch.manual_seed(seed)
    x = torch.randn(B, n, d, dtype=torch.float64, requires_grad=True)
    y = module.double().eval()(x)
    return (y * torch.randn(d, dtype=torch.float64)).sum(-1), x


@pytest.mark.parametrize("mutant_id", ["no-mask", "softmax-wrong-axis", "split-view-order", "finite-fill",
                                       "batch-seq-swap", "mask-hides-diagonal"])
@pytest.mark.parametrize("n", [6, 13])  # 3 x 13 = 39 output positions: two full calls of JACOBIAN_ROWS and a rest
def test_vectorised_jacobian_equals_the_loop(mutant_id, n):
    """What the verdict reads, exact zeros and NaNs, is the loop's exactly; the other values to rounding (on longer
    sequences the batched kernels add in another order: a relative 1e-13 at most, measured)."""
    assert 3 * n > worker.JACOBIAN_ROWS or n == 6
    for module in (CausalMHA(8, 2, 16), mutants.get(mutant_id).CausalMHA(8, 2, 16)):
        proj, x = _proj(module, n=n)
        fast = worker.Worker._batched_jacobian(proj, x)
        slow = _loop(proj, x)
        assert fast is not None and torch.equal(fast == 0, slow == 0) and torch.equal(fast.isnan(), slow.isnan())
        torch.testing.assert_close(fast, slow, rtol=1e-12, atol=0, equal_nan=True)


class _NoVmap(torch.autograd.Function):
    """A custom backward that vmap cannot batch: the vectorised call raises, the loop works."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2 + float(g.sum()) * 0  # .item()-like: data-dependent Python number, not batchable


def test_what_cannot_be_vectorised_falls_back_to_the_loop():
    x = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    proj = _NoVmap.apply(x).sum(-1)
    assert worker.Worker._batched_jacobian(proj, x) is None
    assert _loop(proj, x).abs().sum() > 0


def test_the_warm_up_turns_vectorised_jacobians_on():
    worker.warm_batched_jacobian()
    assert worker.BATCHED_JACOBIAN


def test_the_templates_rehearsal_answers_every_kind_of_request_and_leaves_nothing_a_submission_would_find():
    """A rehearsal that failed would warm nothing, silently; one that loaded a file would leave a module name taken
    and a folder on sys.path for the first submission to meet."""
    before, path = set(sys.modules), list(sys.path)
    replies = rehearsal.rehearse()
    assert [r for r in replies if isinstance(r, m.Failed)] == []
    assert {"Done", "Output", "JacobianResult", "Gradients", "DevicesResult", "TraceResult"} <= \
        {type(r).__name__ for r in replies}
    assert sys.path == path
    roots = (sys.prefix, sys.base_prefix, os.path.dirname(os.__file__), PACKAGES_ROOT)
    strays = [name for name in set(sys.modules) - before
              if getattr(sys.modules[name], "__file__", None) and
              not os.path.abspath(sys.modules[name].__file__).startswith(roots)]
    assert strays == []



def test_the_warm_up_layer_is_wrong_and_gone_before_any_fork():
    """A submission subclassing the template's warm-up layer got full marks: that layer is deliberately wrong (scores
    divided by the head width), and after the warm-up neither its class (made anew for the rehearsal and
    collected) nor its module in sys.modules is left for a forked child to find."""
    code = ("import sys, torch.nn as nn; from harness.child import zygote; zygote._warm_up()\n"
            "def subs(c):\n    for s in c.__subclasses__():\n        yield s\n        yield from subs(s)\n"
            "print([c.__qualname__ for c in subs(nn.Module) if c.__module__.startswith('harness')], "
            "any(n.startswith('harness.warmup') for n in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=PACKAGES_ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["[]", "False"], out.stderr[-2000:]
    layer = rehearsal._rehearsal_layer()(8, 8, 4, 2).double().eval()
    lesson = CausalMHA(8, 2, 4, qkv_bias=True).double().eval()
    with torch.no_grad():
        for i, proj in enumerate((lesson.q, lesson.k, lesson.v)):
            proj.weight.copy_(layer.qkv.weight[8 * i: 8 * (i + 1)])
            proj.bias.copy_(layer.qkv.bias[8 * i: 8 * (i + 1)])
        lesson.out.load_state_dict(layer.out_proj.state_dict())
        x = torch.randn(1, 3, 8, dtype=torch.float64)
        assert not torch.allclose(layer(x), lesson(x), rtol=1e-3)  # wrong, by design


@pytest.mark.slow
def test_the_warm_template_freezes_its_heap_and_only_the_meta_template_warms_the_meta_device():
    """A child's full collection would otherwise walk (and, forked, copy page by page) the template's whole heap:
    a submission that needs the meta device imports enough of torch to trigger several.  That import is the meta
    template's (harness.child.zygote._meta_template), never the template's: every fork of a larger process costs
    more."""
    code = ("import gc, sys; from harness.child import zygote; zygote._warm_up(); "
            "from harness.warmup import rehearsal; "
            "print(gc.get_freeze_count(), len(gc.get_objects()), 'torch._dynamo' in sys.modules); "
            "r = rehearsal.rehearse_meta(); print(type(r).__name__, r.device, 'torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=PACKAGES_ROOT, capture_output=True, text=True, timeout=120)
    (frozen, still_tracked, dynamo), meta = (line.split() for line in out.stdout.splitlines())
    assert int(frozen) > 100_000 and int(still_tracked) < 1_000, out.stderr[-2000:]
    assert dynamo == "False" and meta == ["MetaResult", "meta", "True"]


def test_a_worker_offers_no_more_readings_than_the_trusted_side_accepts():
    """Past the bounds of harness.wire.messages the parent refuses a Built as a corrupted channel: an honest worker
    cuts its offer first, so a layer with very many same-shaped parameters is never told its code corrupted the
    channel (readings28's 216 readings of one --map did exactly that)."""
    many = [layouts.Layout({}, f"reading {i}") for i in range(300)]
    ways = calling.Calling([calling.Style(((f"x{i}", False),), None) for i in range(40)])
    kept = worker._within_bounds(many, ways)
    assert len(ways.styles) == 40 and len(kept) * len(ways.styles) <= m.MAX_READINGS_TRIED
    assert len(kept) == m.MAX_READINGS_TRIED // 40 and not any(lay.certain for lay in kept)
    assert "only the first 51 of 300 readings" in kept[0].notes[-1]
    long = layouts.Layout({}, "long")
    long.describe = lambda: {"wq": "w" * (m.MAX_ROLE_TEXT + 1)}  # past what the parent accepts (red team 15)
    assert worker._within_bounds([long], calling.Calling([calling.Style((("x", False),), None)])) == []
    kept = worker._within_bounds([layouts.Layout({}, "short"), long], calling.Calling([]))
    assert [lay.how for lay in kept] == ["short"] and "1 reading(s)" in kept[0].notes[-1]
    few = [layouts.Layout({}, "one")]
    styles = calling.Calling([calling.Style(((f"x{i}", False),), None) for i in range(300)])
    assert worker._within_bounds(few, styles) == few and len(styles.styles) == m.MAX_CALL_STYLES
