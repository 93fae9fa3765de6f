"""The layer built with dropout on, for the checks that probe train() mode with dropout > 0 (causal-leakage's
finiteness and future, contiguity's views): scaled_dot_product_attention with dropout_p > 0 takes another path on
the CPU, whose output is laid out otherwise, and a mask or a dropout misplaced shows only there."""
from harness.wire.config import Config

TRAIN_DROPOUT = 0.5  # the train-mode probe's dropout: a causal layer's output stays finite and blind to the future


def dropout_instance(ctx, inst, cfg, fresh: str):
    """The module for `cfg` with dropout TRAIN_DROPOUT, built afresh (under the name `fresh`) so that its draws follow
    from the seed alone: through its dropout argument where it takes one, and every nn.Dropout set to it (a rate
    hard-coded in a module too).  None where it has neither (train() mode with dropout 0 shows all there is)."""
    by_arg = ctx.accepts("dropout")
    if not by_arg and not inst.info.dropout_modules:
        return None
    with_dropout = Config(**{**cfg.to_dict(), "dropout": TRAIN_DROPOUT}) if by_arg else cfg
    return ctx.build(with_dropout, force_dropout=TRAIN_DROPOUT, fresh=fresh)
