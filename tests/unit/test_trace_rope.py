"""The rotary detectors (harness.engine.trace.detect_rope): a rotation is named only where its table's values say
so (the keys left unturned, turned at other positions, a spectrum over the model width, before or after the head
split), and a correct rotation is never marked, however it is written (both turned from position 1, a head-width
table repeated for every head before the split)."""
import pytest
import torch

from harness.child.recorders import OriginRecorder, TraceRecorder
from harness.engine.trace.detect_rope import Reading, reading

ROPE_LAYER = '''
import torch
from torch import nn


def turn(t, cos, sin):
    a, b = t[..., 0::2], t[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2)


class Rope(nn.Module):
    def __init__(self, d_in, d_out, context_length, num_heads):
        super().__init__()
        assert d_out % num_heads == 0  # (the lesson's guard: without it, built-indivisible, not what this is about)
        self.H, self.dh = num_heads, d_out // num_heads
        self.q, self.k, self.v = (nn.Linear(d_in, d_out) for _ in range(3))
        self.o = nn.Linear(d_out, d_out)
        inv_freq = FREQS
        ang = torch.outer(torch.arange(context_length + 2).float(), inv_freq)
        self.register_buffer("cos", ang.cos())
        self.register_buffer("sin", ang.sin())

    def forward(self, x):
        B, n, _ = x.shape
        heads = lambda t: t.view(B, n, self.H, self.dh).transpose(1, 2)
        c, s = self.cos[:n], self.sin[:n]
        c1, s1 = self.cos[1:n + 1], self.sin[1:n + 1]
        q, k, v = ROTATE
        a = (q @ k.transpose(-1, -2) / self.dh ** 0.5).masked_fill(
            torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1), float("-inf")).softmax(-1)
        return self.o((a @ v).transpose(1, 2).reshape(B, n, self.H * self.dh))
'''
HEAD = "10000.0 ** (-torch.arange(0, self.dh, 2) / self.dh)"
MODEL = "10000.0 ** (-torch.arange(0, self.dh, 2) / d_out)"
FULL = "10000.0 ** (-torch.arange(0, d_out, 2) / d_out)"
TILED = "(10000.0 ** (-torch.arange(0, self.dh, 2) / self.dh)).repeat(num_heads)"
AFTER = "turn(heads(self.q(x)), {}, {}), turn(heads(self.k(x)), {}, {}), heads(self.v(x))"
BEFORE = "heads(turn(self.q(x), c, s)), heads(turn(self.k(x), c, s)), heads(self.v(x))"


def _marks(tmp_path, freqs: str, rotate: str) -> list[tuple[str, str]]:
    from harness.child.inprocess import InProcess
    from harness.frontends.trace import trace
    from harness.sandbox.subject import Subject
    path = tmp_path / "layer.py"
    path.write_text(ROPE_LAYER.replace("FREQS", freqs).replace("ROTATE", rotate))
    result = trace(f"{path}:Rope", make_subject=lambda spec, overrides, seed, weight_map: Subject(
        spec, overrides, seed, start=InProcess()))
    assert result.error is None
    return [(m["id"], result.where(m)[1]) for m in result.mistakes]


@pytest.mark.parametrize("freqs, rotate, marked", [
    (HEAD, AFTER.format("c", "s", "c", "s"), []),
    (HEAD, AFTER.format("c1", "s1", "c1", "s1"), []),
    (TILED, BEFORE, []),
    (HEAD, "turn(heads(self.q(x)), c, s), turn(heads(self.k(x)), c * 0.5, s), heads(self.v(x))", []),
    (HEAD, "turn(heads(self.q(x)), c, s), heads(self.k(x)), heads(self.v(x))",
     [("keys-not-rotated", "q, k, v = ROTATE")]),
    (HEAD, AFTER.format("c", "s", "c1", "s1"), [("keys-rotated-out-of-step", "q, k, v = ROTATE")]),
    (FULL, BEFORE, [("rotated-before-split", "q, k, v = ROTATE")]),
    (MODEL, AFTER.format("c", "s", "c", "s"), [("frequencies-from-model-width", f"inv_freq = {MODEL}")]),
], ids=["lesson", "both-from-1", "tiled-before-split", "keys-turned-otherwise", "keys-unturned", "keys-shifted",
        "before-split", "model-width"])
def test_a_rotation_is_marked_only_where_its_tables_say_it_is_wrong(tmp_path, freqs, rotate, marked):
    """The lesson's rotation, written two other right ways, marks nothing; keys turned by a table that is no rotary
    table are neither unturned keys nor keys out of step (a mistake of no catalogued name); each rotary mistake is
    marked at its line (the frequencies' own line in __init__ for a spectrum of the model width)."""
    got = _marks(tmp_path, freqs, rotate)
    assert got == [(i, code.replace("ROTATE", rotate)) for i, code in marked]


def test_a_table_is_read_with_its_spectrum_base_and_first_position():
    cfg = {"n": 3, "d": 8, "heads": 2}
    angles = torch.outer(torch.arange(1.0, 4.0), torch.tensor([1.0, 0.01], dtype=torch.float64))
    cos = {"shape": [3, 2], "values": angles.cos().tolist()}
    phases = {"shape": [1, 3, 1, 2], "complex": True,
              "values": torch.view_as_real(torch.polar(torch.ones_like(angles), angles))[None, :, None].tolist()}
    assert reading(cos, cfg) == reading(phases, cfg) == Reading("head", 10000.0, 1)
    assert reading({"shape": [3, 2], "values": (angles * 3).cos().tolist()}, cfg) is None  # no rotary table
    assert reading({"shape": [3, 2]}, cfg) is None  # no values kept


def test_the_trace_keeps_the_values_of_small_tensors_that_do_not_depend_on_the_input():
    """A table sliced to the tokens is kept; the input and what is computed from it, a parameter, and a tensor too
    big are not."""
    x, w, table = torch.randn(2, 3), torch.nn.Parameter(torch.randn(3, 3)), torch.randn(3, 2)
    recorder = TraceRecorder(None, {id(x): "x", id(w): "w"})
    with recorder:
        (x @ w) * 2.0
        table[:2] * 1.0
        torch.ones(9, 9) * 1.0
    ins = {(op["i"], k): t for op in recorder.ops for k, t in enumerate(op["in"])}
    assert "values" not in ins[0, 0] and "values" not in ins[0, 1] and "values" not in ins[1, 0]  # x, w, x @ w
    assert ins[3, 0]["values"] == table[:2].tolist()  # the slice of the table, multiplied
    assert "values" not in ins[5, 0]  # 81 values: more than a table of the worked example


def test_the_constructor_record_says_which_line_made_a_tables_frequencies(tmp_path):
    """Through torch.cat's list too (rotate-half tables: cat([freqs, freqs])), back to theta ** (...)."""
    path = tmp_path / "tables.py"
    path.write_text("import torch\n\n\ndef make():\n    inv = 1.0 / (10000 ** (torch.arange(0, 4, 2) / 4))\n"
                    "    freqs = torch.outer(torch.arange(6.0), inv)\n    return torch.cat([freqs, freqs], -1).cos()\n")
    namespace = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # our own test file
    recorder = OriginRecorder(str(path))
    with recorder:
        cos = namespace["make"]()
    where = recorder.origin(cos)
    assert (where["at"], where["spectrum_at"]) == ("tables.py:7", "tables.py:5")
    assert where["spectrum_code"] == "inv = 1.0 / (10000 ** (torch.arange(0, 4, 2) / 4))"
