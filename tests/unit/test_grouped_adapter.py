"""The adapter for grouped-query attention: key/value-heads and group-size parameters are bound per configuration,
the narrower K/V projections (and a fused q/k/v of height d + 2·kv·dh) are read, and the trusted side builds grouped
configurations for a layer that takes a number of key/value heads."""
import torch
import torch.nn as nn

from harness.child import construct, layouts
from harness.engine import grouped
from harness.wire.config import Config
from reference.grouped_mha import GroupedMHA, gqa_forward


class Rasbt(nn.Module):
    def __init__(self, d_in, d_out, context_length, num_heads, num_kv_groups):
        super().__init__()


class Llama(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads=None, n_rep=None, max_seq_len=16):
        super().__init__()


class Plain(nn.Module):
    def __init__(self, d_model, n_heads, block_size):
        super().__init__()


def test_kv_heads_and_group_size_parameters_are_derived_from_the_configuration():
    sig = construct.read_signature(Rasbt, {})
    assert sig.derived == {"num_kv_groups": "kv_heads"} and not sig.unfillable and grouped.is_grouped(sig)
    llama = construct.read_signature(Llama, {})  # a kv parameter defaulting to None is bound all the same
    assert llama.derived == {"n_kv_heads": "kv_heads", "n_rep": "kv_group"}
    assert not grouped.is_grouped(construct.read_signature(Plain, {}))
    cfg = Config(d_in=8, d_out=8, heads=4, context_length=7, kv_heads=2)
    assert (cfg.value("kv_heads"), cfg.value("kv_group")) == (2, 2)
    assert Config(d_in=8, d_out=8, heads=4, context_length=7).value("kv_heads") == 4


def test_an_arg_for_the_kv_heads_is_a_preference_not_a_literal():
    sig = construct.read_signature(Rasbt, {"num_kv_groups": 2})
    assert sig.derived == {"num_kv_groups": "kv_heads"} and grouped.preferred_kv(sig, {"num_kv_groups": 2}) == 2
    configs = grouped.configs(separate=True, preferred=2)
    assert [(c.heads, c.kv_heads) for c in configs] == [(4, 2), (3, None), (4, 2)]
    built = {}

    class Spy(Rasbt):
        def __init__(self, d_in, d_out, context_length, num_heads, num_kv_groups):
            built.update(num_heads=num_heads, num_kv_groups=num_kv_groups)
            super().__init__(d_in, d_out, context_length, num_heads, num_kv_groups)

    construct.build(Spy, configs[1], {"num_kv_groups": 2}, construct.read_signature(Spy, {"num_kv_groups": 2}))
    assert built["num_kv_groups"] == 3  # 2 does not divide 3 heads: as many as the heads


def test_grouped_required_configurations_divide_and_cover_gqa_mqa_and_plain():
    configs = grouped.configs(separate=False)
    assert [(c.heads, c.value("kv_heads")) for c in configs] == [(4, 2), (3, 1), (4, 4)]
    assert all(c.heads % c.value("kv_heads") == 0 and c.d_out % c.heads == 0 for c in configs)
    assert "kv_heads" not in Config(d_in=8, d_out=8, heads=2, context_length=4).to_dict()  # reports unchanged


def test_narrow_key_value_projections_are_read():
    m = GroupedMHA(8, 4, 7, 2)
    found, problem = layouts.discover(m, 8, 8, 4, kv_heads=2)
    assert problem == "" and len(found) == 1 and found[0].kv_width == 4 and found[0].certain
    assert found[0].read()["wk"].shape == (4, 8)
    mqa = GroupedMHA(6, 3, 4, 1)  # one shared key/value head, even when the configuration does not say so
    found, _ = layouts.discover(mqa, 6, 6, 3)
    assert found and found[0].kv_width == 2
    found, _ = layouts.discover(GroupedMHA(8, 4, 7, 4), 8, 8, 4)
    assert found and found[0].kv_width is None  # plain multi-head


def test_a_fused_grouped_projection_is_read_as_q_k_v_rows():
    class Fused(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(8, 8 + 2 * 4)
            self.proj = nn.Linear(8, 8)

    found, problem = layouts.discover(Fused(), 8, 8, 4, kv_heads=2)
    assert problem == "" and found
    assert found[0].describe()["wk"] == "qkv.weight[8:12]" and found[0].describe()["wv"] == "qkv.weight[12:16]"
    with torch.no_grad():
        assert found[0].read()["wq"].shape == (8, 8)


class _PerGroupFused(nn.Module):
    """litgpt's CausalSelfAttention (tests/realzoo/litgpt_causal_self_attention_grouped_qkv.py): one fused projection
    whose rows are, group after group, [the group's query heads; its key head; its value head]."""

    def __init__(self, d, heads, kv):
        super().__init__()
        self.heads, self.kv, self.dh = heads, kv, d // heads
        self.qkv = nn.Linear(d, d + 2 * kv * self.dh)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        B, T, _ = x.shape
        g = self.heads // self.kv
        q, k, v = self.qkv(x).view(B, T, self.kv, g + 2, self.dh).permute(0, 2, 3, 1, 4).split((g, 1, 1), dim=2)
        k, v = k.expand(B, self.kv, g, T, self.dh), v.expand(B, self.kv, g, T, self.dh)
        q, k, v = (t.reshape(B, -1, T, self.dh) for t in (q, k, v))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, -1))


def test_a_fused_projection_laid_out_per_key_value_group_is_read():
    """Before, only [Q; K; V] blocks were read for a grouped fused projection: no reading reproduced litgpt's layer
    and it was "cannot tell" (blaming its rotary embedding)."""
    torch.manual_seed(0)
    m = _PerGroupFused(16, 4, 2).double()
    found, _ = layouts.discover(m, 16, 16, 4, kv_heads=2)
    per_group = [lay for lay in found if "per group" in lay.how]
    assert len(per_group) == 1
    w = lambda role: torch.cat([p.param[p.rows] for p in per_group[0].roles[role]])
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    with torch.no_grad():
        ref = gqa_forward(x, 4, w("wq"), w("wk"), w("wv"), m.proj.weight, w("bq"), w("bk"), w("bv"), m.proj.bias)
        assert torch.allclose(m(x), ref, atol=1e-12)


def test_the_grouped_proof_configuration_tells_the_rotary_conventions_apart():
    """Heads of width 2 hold one rotary pair, where rotating pairs (2i, 2i+1) and halves are the same rotation: the
    convention proven there failed litgpt's rotate-half layer at every wider head (reference-match, gradient-match)."""
    assert grouped.configs(False)[0].head_width >= 4 and grouped.configs(True)[0].head_width >= 4


def test_a_per_group_layout_is_found_again_as_the_per_head_one_where_groups_are_heads():
    """kv_heads = heads is a plain layer, whose fused readings are named [Q; K; V] and per head: the per-group layout
    proven on the grouped configuration is the per-head one there (litgpt failed reference-match at heads = 2)."""
    from harness.engine.context import _row_family
    group = "by position of the nn.Linear layers (names not recognised) (fused q/k/v, grouped, per group [q..; k; v])"
    assert _row_family(group) == _row_family("by parameter names (fused q/k/v, per head)")
    assert _row_family(group) != _row_family("by parameter names (fused q/k/v)")


class TinyLlamaHeads(nn.Module):  # tinyllama's roPEMultiAttentionHead(context_window, emb_dim, n_heads, gq_ratio)
    def __init__(self, context_window, emb_dim, n_heads, gq_ratio):
        super().__init__()


def test_a_grouped_query_ratio_is_a_group_size():
    """tinyllama's gq_ratio (query heads per group) was a required parameter with no value: cannot tell at
    construct.  It is a group size like Llama's n_rep: heads // kv_heads, 1 where every head has its own."""
    sig = construct.read_signature(TinyLlamaHeads, {})
    assert sig.derived == {"gq_ratio": "kv_group"} and not sig.unfillable
