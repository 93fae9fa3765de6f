"""A class built from a config dataclass of its own (`def __init__(self, config: EKAConfig)`) whose __post_init__
refuses a width the heads do not divide: mha-check passes its own stand-in config object (a ConfigBag), so the
dataclass's check never ran and divisibility failed a layer whose config refuses the width before the layer is
built (tests/realzoo/eka_ai_causal_self_attention_gqa_rope_config.py).  For an indivisible configuration the
annotated dataclass is now built from the stand-in's values first, and what it raises is the constructor's answer."""
from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch.nn as nn

from harness.child import construct
from harness.wire.config import Config


@dataclass
class CheckingConfig:
    d_model: int = 16
    n_heads: int = 4
    context_length: int = 8
    vocab_size: int = 100  # a setting mha-check does not know keeps its default

    def __post_init__(self):
        if self.d_model % self.n_heads != 0:
            raise ValueError("d_model must be divisible by n_heads")


@dataclass
class PlainConfig:
    d_model: int = 16
    n_heads: int = 4
    context_length: int = 8


class Checked(nn.Module):
    def __init__(self, config: CheckingConfig):
        super().__init__()
        self.proj = nn.Linear(config.d_model, config.d_model)


class Unchecked(nn.Module):
    def __init__(self, config: PlainConfig):
        super().__init__()
        self.proj = nn.Linear(config.d_model, config.d_model)


def _build(cls, cfg):
    return construct.build(cls, cfg, {}, construct.read_signature(cls, {}))


def test_the_config_dataclass_refusing_the_width_is_the_constructor_refusing_it():
    with pytest.raises(ValueError, match="divisible"):
        _build(Checked, Config(d_in=8, d_out=8, heads=3, context_length=6))


def test_a_divisible_configuration_and_a_config_without_a_check_build_as_before():
    assert isinstance(_build(Checked, Config(d_in=8, d_out=8, heads=4, context_length=6)), Checked)
    assert isinstance(_build(Unchecked, Config(d_in=8, d_out=8, heads=3, context_length=6)), Unchecked)
