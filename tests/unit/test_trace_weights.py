"""The detectors of the layer's weights that have a line in __init__ (harness.engine.trace.detect_params): a layer
kept in a plain list (its weights never registered), and a layer forward never uses; each told at the line that
built it, and neither set on a layer that is registered, or used in training mode only; and the attention weights
made under torch.no_grad(), told at the softmax."""
import pytest

LAYER = '''
import torch
from torch import nn


class Layer(nn.Module):
    def __init__(self, d_in, d_out, context_length, num_heads):
        super().__init__()
        assert d_out % num_heads == 0  # (the lesson's guard: without it, built-indivisible, not what this is about)
        self.H, self.dh = num_heads, d_out // num_heads
        PROJECTIONS
        self.o = nn.Linear(d_out, d_out)
        EXTRA

    def forward(self, x):
        B, n, _ = x.shape
        heads = lambda t: t.view(B, n, self.H, self.dh).transpose(1, 2)
        q, k, v = (heads(p(x)) for p in self.qkv)
        a = (q @ k.transpose(-1, -2) / self.dh ** 0.5).masked_fill(
            torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1), float("-inf")).softmax(-1)
        y = self.o((a @ v).transpose(1, 2).reshape(B, n, self.H * self.dh))
        return RETURN
'''
LISTED = "self.qkv = [nn.Linear(d_in, d_out) for _ in range(3)]"
MODULES = "self.qkv = nn.ModuleList(nn.Linear(d_in, d_out) for _ in range(3))"
GATE = "self.gate = nn.Linear(d_out, d_out)"


def _marks(tmp_path, projections: str, extra: str = "", returned: str = "y") -> list[tuple[str, str]]:
    from harness.child.inprocess import InProcess
    from harness.frontends.trace import trace
    from harness.sandbox.subject import Subject
    path = tmp_path / "layer.py"
    path.write_text(LAYER.replace("PROJECTIONS", projections).replace("EXTRA", extra).replace("RETURN", returned))
    result = trace(f"{path}:Layer", make_subject=lambda spec, overrides, seed, weight_map: Subject(
        spec, overrides, seed, start=InProcess()))
    assert result.error is None
    return [(m["id"], result.where(m)[1]) for m in result.mistakes]


@pytest.mark.parametrize("projections, extra, returned, marked", [
    (MODULES, "", "y", []),
    (MODULES, GATE, "y + 0 * self.gate(y) if self.training else y", []),
    (LISTED, "", "y", [("layer-in-plain-list", LISTED)]),
    (MODULES, GATE, "y", [("layer-never-used", GATE)]),
], ids=["registered", "gate-in-training", "plain-list", "gate-never-used"])
def test_a_layer_kept_in_a_plain_list_or_never_used_is_told_at_the_line_that_built_it(tmp_path, projections, extra,
                                                                                       returned, marked):
    assert _marks(tmp_path, projections, extra, returned) == marked


NO_GRAD_LAYER = '''
import torch
from torch import nn


class Layer(nn.Module):
    def __init__(self, d_in, d_out, context_length, num_heads):
        super().__init__()
        assert d_out % num_heads == 0  # (the lesson's guard: without it, built-indivisible, not what this is about)
        self.H, self.dh = num_heads, d_out // num_heads
        self.qkv = nn.ModuleList(nn.Linear(d_in, d_out) for _ in range(3))
        self.o = nn.Linear(d_out, d_out)
        self.register_buffer("future", torch.ones(context_length, context_length, dtype=torch.bool).triu(1))

    def forward(self, x):
        B, n, _ = x.shape
        heads = lambda t: t.view(B, n, self.H, self.dh).transpose(1, 2)
        q, k, v = (heads(p(x)) for p in self.qkv)
        with torch.no_grad():
            mask = self.future[:n, :n]
        s = (q @ k.transpose(-1, -2) / self.dh ** 0.5).masked_fill(mask, float("-inf"))
        WEIGHTS
        return self.o((a @ v).transpose(1, 2).reshape(B, n, self.H * self.dh))
'''


@pytest.mark.parametrize("weights, marked", [
    ("a = s.softmax(-1)", []),
    ("with torch.no_grad():\n            a = s.softmax(-1)", [("weights-without-grad", "a = s.softmax(-1)")]),
], ids=["with-autograd", "under-no-grad"])
def test_attention_weights_made_under_no_grad_are_marked_at_the_softmax(tmp_path, weights, marked):
    """The trace runs with autograd on, so the student's own torch.no_grad() shows; a mask sliced under no_grad
    (a constant) is no mistake."""
    from harness.child.inprocess import InProcess
    from harness.frontends.trace import trace
    from harness.sandbox.subject import Subject
    path = tmp_path / "layer.py"
    path.write_text(NO_GRAD_LAYER.replace("WEIGHTS", weights))
    result = trace(f"{path}:Layer", make_subject=lambda spec, overrides, seed, weight_map: Subject(
        spec, overrides, seed, start=InProcess()))
    assert result.error is None
    assert [(m["id"], result.where(m)[1]) for m in result.mistakes] == marked
