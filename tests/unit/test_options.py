"""One option set for every front end (issue 30 item 5): a single run, grade and the autograder turn the same words
into the same `Options`, through one function (harness.frontends.options.from_args), and a run is built by keyword
only."""
from __future__ import annotations

import pytest

from harness.engine.options import Options
from harness.frontends import autograder, cli, grade
from harness.frontends import options as option_rules
from harness.sandbox.limits import Limits

SHARED = ["--seed", "7", "--examples", "3", "--arg", "widget=3", "--arg", "name=@d_out", "--map", "q=wq.T",
          "--time-limit", "12.5", "--memory-mb", "2048", "--output-limit", "48"]


def test_a_run_is_built_by_keyword_only():
    """Options(only, skip, seed, examples, overrides, ...) by position meant something else as soon as a field was
    added between them; now it is refused."""
    with pytest.raises(TypeError):
        Options(["construct"], [], 3)
    assert Options(seed=3).seed == 3


def test_every_front_end_reads_the_shared_options_into_the_same_run():
    single = option_rules.from_args(cli._parser().parse_args(["attn.py", *SHARED]))
    graded = option_rules.from_args(grade._parser().parse_args(["subs", *SHARED]))
    instructor = autograder._parser().parse_args(SHARED)
    assert single == graded == option_rules.from_args(instructor)
    assert single.seed == 7 and single.examples == 3 and single.overrides == {"widget": 3, "name": "@d_out"}
    assert single.weight_map == {"q": "wq.T"}
    assert single.limits == Limits(call_seconds=12.5, total_seconds=12.5, memory_mb=2048, file_mb=48)
    # what the autograder passes on to each submission's run is read back into that same run
    passed_on = autograder._check_options(instructor, autograder._parser())
    assert option_rules.from_args(cli._parser().parse_args(["attn.py", *passed_on])) == single


def test_the_defaults_are_a_default_run():
    parsed = option_rules.from_args(cli._parser().parse_args(["attn.py"]))
    assert parsed == Options(limits=Limits(call_seconds=30.0, total_seconds=Limits.total_seconds))


@pytest.mark.parametrize(("words", "named"), [(["--arg", "3"], "--arg expects NAME=VALUE"),
                                              (["--map", "z=w"], "--map expects ROLE=NAME"),
                                              (["--examples", "0"], "--examples must be at least 1"),
                                              (["--memory-mb", "10"], "--memory-mb must be at least"),
                                              (["--time-limit", "nan"], "--time-limit must be a positive"),
                                              (["--output-limit", "0"], "--output-limit must be between 1 and 1024"),
                                              (["--output-limit", "4096"], "--output-limit must be between 1 and")])
def test_a_bad_value_names_its_option(words, named):
    with pytest.raises(option_rules.OptionError, match=named):
        option_rules.from_args(autograder._parser().parse_args(words))
