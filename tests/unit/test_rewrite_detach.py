"""rewrite's "detach" (weights-under-no-grad told by a `.detach()` line): the one .detach() left out, in the
student's own line; a line that is nothing but the detach, or has none, is no one-call fix."""
import pytest

from harness.engine import rewrite


@pytest.mark.parametrize(("line", "fixed"), [
    ("k = self.W_k(x).detach()", "k = self.W_k(x)"),
    ("q = F.linear(x, self.W_q.weight.detach())", "q = F.linear(x, self.W_q.weight)"),
    ("attn = torch.softmax(scores, dim=-1).detach()", "attn = torch.softmax(scores, dim=-1)"),
    ("scores = (q @ k.transpose(-2, -1)).detach() / math.sqrt(self.d_k)",
     "scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.d_k)"),
    ("k = k.detach()", None),  # undone it is `k = k`: the line goes, which the remedy's words say
    ("attn = logits.softmax(dim=-1)", None),  # computed under torch.no_grad(): no line of the kind
    ("q, k = self.q(x).detach(), self.k(x).detach()", None),  # two: not one call's change
])
def test_the_detach_is_left_out_of_the_students_line(line, fixed):
    assert rewrite.own_line_fix("detach", line) == fixed
