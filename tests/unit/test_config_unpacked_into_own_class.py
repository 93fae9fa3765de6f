"""A class that takes a config dict or its own config dataclass and turns a dict into the dataclass with
`Config(**cfg)` (TransformerLens 1.0.0's Attention: `if isinstance(cfg, Dict): cfg =
HookedTransformerConfig.from_dict(cfg)`, tests/realzoo/transformer_lens_attention_per_head_weights_ignore_1e5.py):
mha-check's stand-in config object is a dict holding every usual spelling, so the dataclass refused one of them
(`unexpected keyword argument 'd_out'`) and the report said "FAIL: your code raised TypeError" of a layer that
builds from its own config. The keyword is mha-check's, not the student's: construction is now mha-check's limit
(cannot tell), and its usual advice (a factory function) follows; a TypeError about a keyword the student's code
spells out itself stays theirs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Union

import pytest
import torch.nn as nn

from harness.child import construct
from harness.wire.config import Config


@dataclass
class OwnConfig:
    d_model: int
    n_heads: int
    n_ctx: int


class Unpacks(nn.Module):
    def __init__(self, cfg: Union[Dict, OwnConfig]):
        super().__init__()
        if isinstance(cfg, Dict):
            cfg = OwnConfig(**cfg)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)


class MisspellsItsOwnCall(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.proj = nn.Linear(in_features=config.d_model, out_feature=config.d_model)


CFG = Config(d_in=8, d_out=8, heads=2, context_length=6)


def _why(cls):
    signature = construct.read_signature(cls, {})
    with pytest.raises(TypeError) as raised:
        construct.build(cls, CFG, {}, signature)
    return construct.ours(cls, CFG, {}, signature, raised.value, str(raised.value))


def test_a_stand_in_unpacked_into_the_class_own_config_is_mha_checks_limit():
    why = _why(Unpacks)
    assert why is not None and "unpacks its config object" in why and "'d_out'" in why


def test_a_keyword_the_student_spells_out_is_still_their_error():
    assert _why(MisspellsItsOwnCall) is None
