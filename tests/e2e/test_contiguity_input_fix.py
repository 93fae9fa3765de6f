"""contiguity's fix where the view that raises is on the layer's input, not after a transpose of its own: the fix
tells to read the input with .reshape (or make it contiguous first), never of a transpose the line does not have
(realzoo20: OpenAI GPT's Conv1D views its input, `x.view(-1, x.size(-1))`, and was told to call .contiguous()
"after a transpose")."""
from conftest import ROOT, report_for

INPUT_VIEW = f"{ROOT / 'tests' / 'zoo' / 'buggy' / 'input_view_noncontig.py'}"


def test_a_view_on_the_input_is_told_to_reshape_the_input():
    check = next(c for c in report_for(INPUT_VIEW).checks if c.id == "contiguity")
    assert check.status == "fail" and "on its (non-contiguous) input" in check.message
    assert "after a transpose" not in check.fix and "reshape" in check.fix and "x.contiguous()" in check.fix
