"""harness.engine.search without a child: which configurations a property is asked about, and the smallest failing
one it reports (a greedy descent from a failing configuration, required or drawn), and the draws themselves."""
import pytest

from checks import Outcome, failed
from harness.engine.search import _FIELDS, _get, _Lows, _with, draws, find_failure
from harness.wire.config import Config

REQUIRED = [Config(d_in=8, d_out=8, heads=2, context_length=7, batch=2, n=5),
            Config(d_in=6, d_out=6, heads=3, context_length=4, batch=2, n=4),
            Config(d_in=8, d_out=8, heads=4, context_length=64, batch=1, n=64)]


class Ctx:
    """What find_failure reads of a CheckContext."""
    separate_widths = False
    examples = 6

    def __init__(self, required=REQUIRED):
        self.required = required

    def required_configs(self):
        return list(self.required)

    def accepts(self, key):
        return False


def recording(broken):
    """A property that fails where `broken(cfg)` holds, and the configurations it was asked about."""
    asked = []

    def prop(cfg):
        asked.append(cfg)
        return failed("broken", finding=f"seen at n={cfg.n}") if broken(cfg) else None
    return prop, asked


def one_step_down(cfg: Config, min_heads=1, min_n=1, separate=False):
    """Every configuration one field one step below `cfg`, where configurations are drawn."""
    low = _Lows(min_heads, min_n, separate)
    for field in _FIELDS:
        value = _get(cfg, field, separate)
        if value is not None and value > low.of(field, cfg):
            smaller = _with(cfg, separate, **{field: value - (2 if field == "width" else 1)})
            if smaller is not None and low.allows(smaller):
                yield smaller


def test_a_mistake_two_tokens_show_is_reported_on_the_smallest_configuration_in_a_few_calls():
    prop, asked = recording(lambda cfg: cfg.n >= 2)
    out = find_failure(Ctx(), prop)
    assert out.status == "fail"
    assert out.config == Config(d_in=2, d_out=2, heads=1, context_length=2, batch=2, n=2).to_dict()
    assert len(asked) == 3  # the required configuration, the smallest with two tokens, and one token (fine)


def test_the_descent_stops_where_the_mistake_stops_showing():
    prop, asked = recording(lambda cfg: cfg.heads >= 2 and cfg.n >= 3)
    out = find_failure(Ctx(), prop, min_heads=2, min_n=2)
    assert (out.config["heads"], out.config["n"], out.config["batch"]) == (2, 3, 2)
    assert out.config["d_out"] == 4 and out.config["context_length"] == 3
    for smaller in one_step_down(Config(**out.config), 2, 2):  # a local minimum: every step down passes
        assert not (smaller.heads >= 2 and smaller.n >= 3)
    assert len(asked) == len(set(asked)) <= 10  # never the same configuration twice


def test_the_finding_is_named_as_the_larger_configuration_showed_it():
    prop, _ = recording(lambda cfg: cfg.n >= 2)
    out = find_failure(Ctx(), prop)
    assert out.config["n"] == 2 and out.details["finding"] == "seen at n=5"


def test_a_mistake_only_a_long_sequence_shows_keeps_the_long_sequence():
    prop, asked = recording(lambda cfg: cfg.n > 10)
    out = find_failure(Ctx(), prop)
    assert out.config["n"] == out.config["context_length"] == 11 and out.config["batch"] == 1  # bisected
    assert len(asked) <= 20  # 3 required, then bisections: token by token would take over 50


def test_a_mistake_that_needs_fewer_tokens_than_the_context_keeps_them_apart():
    prop, _ = recording(lambda cfg: cfg.n < cfg.context_length)
    out = find_failure(Ctx(), prop)
    assert (out.config["n"], out.config["context_length"]) == (1, 2)


def test_separate_widths_shrink_to_the_smallest_that_still_differ():
    ctx = Ctx([Config(d_in=6, d_out=8, heads=2, context_length=7, batch=2, n=5, qkv_bias=True)])
    ctx.separate_widths = True
    prop, asked = recording(lambda cfg: cfg.d_in != cfg.d_out and cfg.qkv_bias)
    out = find_failure(ctx, prop)
    assert out.config == Config(d_in=1, d_out=2, heads=1, context_length=2, batch=2, n=1, qkv_bias=True).to_dict()
    for cfg in asked:  # everything asked about is a configuration the layer could have been drawn with
        assert cfg.d_in % cfg.heads == 0 and cfg.head_width % 2 == 0 and 1 <= cfg.n <= cfg.context_length


def test_a_failure_only_a_draw_finds_is_found_and_shrunk():
    prop, asked = recording(lambda cfg: cfg.batch == 3)  # no required configuration has a batch of three
    out = find_failure(Ctx(), prop)
    assert out is not None and out.config["batch"] == 3
    assert out.config["heads"] == 1 and out.config["n"] == 1  # shrunk
    for smaller in one_step_down(Config(**out.config)):
        assert smaller.batch != 3  # a local minimum
    assert len(asked) == len(set(asked))


@pytest.mark.parametrize("separate", [False, True])
@pytest.mark.parametrize("qkv_bias", [False, True])
@pytest.mark.parametrize("min_heads,min_n", [(1, 1), (2, 2), (1, 3)])
def test_draws_are_distinct_drawable_the_smallest_first_and_the_same_every_time(separate, qkv_bias, min_heads,
                                                                                   min_n):
    drawn = draws(separate, qkv_bias, min_heads, min_n, examples=12)
    assert drawn == draws(separate, qkv_bias, min_heads, min_n, examples=12)
    assert len(drawn) == len(set(drawn)) == 12
    low = _Lows(min_heads, min_n, separate)
    assert all(low.allows(cfg) and cfg.heads <= max(4, min_heads) and cfg.context_length <= 10 for cfg in drawn)
    assert all(cfg.batch in (2, 3) and (qkv_bias or not cfg.qkv_bias) for cfg in drawn)
    smallest = drawn[0]
    assert (smallest.heads, smallest.head_width, smallest.n, smallest.batch) == (min_heads, 2, min_n, 2)
    assert {cfg.heads for cfg in drawn[1:]} != {min_heads} and {cfg.n for cfg in drawn[1:]} != {min_n}  # they vary


def test_same_calls_same_answer():
    answers = []
    for _ in range(2):
        prop, asked = recording(lambda cfg: cfg.heads * cfg.n >= 6)
        answers.append((find_failure(Ctx(), prop).config, asked))
    assert answers[0] == answers[1]


def test_all_fine_is_none_and_required_only_never_draws():
    prop, asked = recording(lambda cfg: False)
    assert find_failure(Ctx(), prop) is None and len(asked) == len(REQUIRED) + Ctx.examples
    prop, asked = recording(lambda cfg: cfg.n >= 5)
    out = find_failure(Ctx(), prop, generated=False)
    assert out.config == REQUIRED[0].to_dict() and asked == REQUIRED[:1]


def test_an_outcome_that_names_its_own_configuration_keeps_it():
    def prop(cfg):
        return Outcome("fail", "broken", config={"shown": cfg.n})
    out = find_failure(Ctx(), prop, generated=False)
    assert out.config == {"shown": 5}


class WideCtx(Ctx):
    """A class that refuses heads narrower than 8 by design (Context.head_width, found by construct)."""
    head_width = 8


def test_a_class_refusing_narrow_heads_is_asked_and_shrunk_only_at_head_widths_it_accepts():
    wide = [Config(d_in=16, d_out=16, heads=2, context_length=7, batch=2, n=5)]
    prop, asked = recording(lambda cfg: cfg.n >= 2)
    out = find_failure(WideCtx(wide), prop)
    assert all(cfg.head_width in (8, 16) for cfg in asked), asked  # never a head the class refuses
    assert out.config == Config(d_in=8, d_out=8, heads=1, context_length=2, batch=2, n=2).to_dict()
    drawn = draws(False, False, head_width=8)
    assert drawn[0].head_width == 8 and {cfg.head_width for cfg in drawn} <= {8, 16}


def test_draws_are_unchanged_for_every_class_that_accepts_narrow_heads():
    drawn = draws(False, True, 2, 2)
    assert drawn[0] == Config(d_in=4, d_out=4, heads=2, context_length=2, batch=2, n=2)  # the smallest, as always
    assert {cfg.head_width for cfg in drawn} <= {2, 4}
