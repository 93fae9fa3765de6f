"""The keys projected with the queries' weight, corrected on the student's own line (issue 28, a student trial: the
report's fix said "Compute the keys with the key projection, not the query projection" while the layer's key
projection was `k_lin`).  The names come from the trace mark, which names the key projection only when that parameter
exists and the forward never uses it."""
import pytest

from harness.engine.rewrite import own_line_fix


def told(queries: str, keys: str | None) -> str:
    return (f"the keys are projected with {queries}, the weight the queries are projected with: the key projection"
            + (f" {keys} is never used (it gets no gradient); project the keys with {keys}" if keys else
               " is never used (it gets no gradient); project the keys with their own projection"))


@pytest.mark.parametrize("line,queries,keys,fixed", [
    ('k = torch.einsum("bnd,ed->bne", x, self.q_lin.weight).view(b, n, self.h, dh)', "q_lin.weight",
     "k_lin.weight", 'k = torch.einsum("bnd,ed->bne", x, self.k_lin.weight).view(b, n, self.h, dh)'),
    ("K = heads(self.W_Q(x))", "W_Q.weight", "W_K.weight", "K = heads(self.W_K(x))"),
    ("keys = x @ self.W_query", "W_query", "W_key", "keys = x @ self.W_key"),
    ('k = self._heads(self.proj["query"](x))', "proj.query.weight", "proj.key.weight",
     'k = self._heads(self.proj["key"](x))'),
])
def test_the_queries_weight_on_the_keys_line_becomes_the_key_projection(line, queries, keys, fixed):
    assert own_line_fix("key-projection", line, told(queries, keys)) == fixed


@pytest.mark.parametrize("line,queries,keys", [
    ("q, k, v = split(self.q(x)), split(self.q(x)), split(self.v(x))", "q.weight", "k.weight"),  # which one?
    ("k = heads(self.W_Q(x))", "W_Q.weight", None),  # no key projection named: words
    ("k = x @ self.mats[0]", "mats.0", "mats.1"),  # no name to write: the index is not the role
])
def test_no_rewrite_where_the_line_or_the_names_leave_it_open(line, queries, keys):
    assert own_line_fix("key-projection", line, told(queries, keys)) is None
