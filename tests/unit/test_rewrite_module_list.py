"""Layers kept in a plain list or dict, registered (harness.engine.rewrite, kind "module-list"): trace points at the
line that built the container for plain-list-projections, and the fix is that line with the same list in
nn.ModuleList (a dict in nn.ModuleDict), spelt as the student's own layers are (`nn.`, `torch.nn.`)."""
import pytest

from harness.engine.rewrite import own_line_fix


@pytest.mark.parametrize("line, fixed", [
    ("self.projections = [nn.Linear(d_model, d_model) for _ in range(3)]",
     "self.projections = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(3)])"),
    ("self.qkv = [nn.Linear(d, d_out, bias=qkv_bias) for _ in range(3)]  # BUG: a plain list",
     "self.qkv = nn.ModuleList([nn.Linear(d, d_out, bias=qkv_bias) for _ in range(3)])"),
    ("self.heads = [torch.nn.Linear(d, hs), torch.nn.Linear(d, hs)]",
     "self.heads = torch.nn.ModuleList([torch.nn.Linear(d, hs), torch.nn.Linear(d, hs)])"),
    ('self.proj = {"q": nn.Linear(d, d), "k": nn.Linear(d, d)}',
     'self.proj = nn.ModuleDict({"q": nn.Linear(d, d), "k": nn.Linear(d, d)})'),
])
def test_a_plain_container_of_layers_is_registered(line, fixed):
    assert own_line_fix("module-list", line) == fixed


@pytest.mark.parametrize("line", [
    "self.heads = [Linear(d, d) for _ in range(3)]",  # bare names: whether ModuleList is imported is not known
    "self.heads = nn.ModuleList([nn.Linear(d, d)])",  # registered already
    "q, k, v = [p(x) for p in self.projections]",  # the list is used here, not built
])
def test_no_rewrite_where_the_line_leaves_it_open(line):
    assert own_line_fix("module-list", line) is None
