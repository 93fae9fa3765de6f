"""Which of the lesson's projections get no gradient (issue 28): parameters-used's plain "unused parameter" was one
signature for every parameter without a gradient, so an output projection made and never applied, beside a second
mistake, was named weights-under-no-grad.  The finding now says which projection, read off the proven mapping, and
the fix of a projection made and never applied is the student's return line with it applied."""
import pytest

from checks.parameters_used import output_module, parameters_of, projections_fix, roles_finding, unused_roles
from harness.engine.rewrite import own_line_fix

NANOGPT = {"wq": "c_attn.weight[0:8]", "wk": "c_attn.weight[8:16]", "wv": "c_attn.weight[16:24]",
           "bq": "c_attn.bias[0:8]", "bk": "c_attn.bias[8:16]", "bv": "c_attn.bias[16:24]",
           "wo": "c_proj.weight", "bo": "c_proj.bias"}
SEPARATE = {"wq": "W_query.weight", "wk": "W_key.weight", "wv": "W_value.weight", "wo": "out_proj.weight",
            "bo": "out_proj.bias"}


def test_a_reading_names_its_parameters_without_slices_or_transposes():
    assert parameters_of("c_attn.weight.T[0:8]") == {"c_attn.weight"}
    assert parameters_of("heads.0.key.weight + heads.1.key.weight") == {"heads.0.key.weight", "heads.1.key.weight"}


@pytest.mark.parametrize("reading,unused,finding", [
    (NANOGPT, ["c_proj.weight", "c_proj.bias"], "unused output projection"),
    (SEPARATE, ["W_query.weight", "W_key.weight"], "unused query and key projections"),  # weights-under-no-grad
    (SEPARATE, ["W_key.weight"], "unused key projection"),  # query-for-keys
    (SEPARATE, ["extra.weight", "extra.bias"], "unused parameter"),  # in no role: an extra projection
    (SEPARATE, ["out_proj.weight", "extra.weight"], "unused parameter"),  # one unused parameter is in no role
    ({}, ["c_proj.weight", "c_proj.bias"], "unused parameter"),  # no proven reading: the roles are not known
    (NANOGPT, ["c_attn.bias"], "unused query, key and value biases"),  # a fused bias all of whose rows go unused
    (SEPARATE | {"bq": "W_query.bias"}, ["W_query.bias"], "unused query bias"),  # F.linear(x, W_query.weight)
])
def test_the_finding_names_the_projections_that_get_no_gradient(reading, unused, finding):
    roles = unused_roles(reading, unused)
    assert (roles_finding(roles) if roles else "unused parameter") == finding


def test_the_output_projection_is_named_as_the_student_wrote_it():
    assert output_module(NANOGPT, ["c_proj.weight", "c_proj.bias"]) == "self.c_proj"
    assert output_module({"wo": "W_o"}, ["W_o"]) == "self.W_o"


TOLD = ("self.c_proj (read as W_o) is made in __init__ but forward never applies it: the merged heads are returned "
        "without the output projection, so the heads cannot exchange information; apply self.c_proj to the merged "
        "heads where forward returns them")


@pytest.mark.parametrize("line,fixed", [
    ("return self.resid_dropout(y)", "return self.resid_dropout(self.c_proj(y))"),  # dropout stays outermost
    ("return y", "return self.c_proj(y)"),
    ("return y, att", "return self.c_proj(y), att"),
    ("return torch.cat([h(x) for h in self.heads], dim=-1)",
     "return self.c_proj(torch.cat([h(x) for h in self.heads], dim=-1))"),
])
def test_the_return_line_gets_the_projection_applied(line, fixed):
    assert own_line_fix("out-projection", line, TOLD) == fixed


def test_no_rewrite_without_a_projection_named_or_off_a_return_line():
    assert own_line_fix("out-projection", "return y", "no output projection after the heads are merged") is None
    assert own_line_fix("out-projection", "y = self.drop(y)", TOLD) is None


def test_a_query_key_or_value_projection_without_gradient_is_to_be_used_never_deleted():
    """A student's trial (trials/18 f09, `probs @ k`) followed the check's own fix, "or delete the ones you do not
    need", deleted W_v, and the next report was worse: the lesson's projections are to be used as the lesson does."""
    fix = projections_fix(["wv"], "wv.weight")
    assert fix.startswith("Use wv.weight in forward as the lesson does") and "(weights @ v)" in fix
    assert "deleting it would not make the layer right" in fix and "delete the ones" not in fix
    assert projections_fix(["bq"], "q.bias") == ""  # a bias has its own fix (bias_fix)
