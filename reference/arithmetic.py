"""The lesson's arithmetic, torch-free so the trusted process can use it without importing torch."""


def param_count_formula(d_in: int, d_out: int, qkv_bias: bool = False) -> int:
    """Parameters of one layer: 3·d_in·d_out + d_out² + d_out, plus 3·d_out with Q/K/V biases (no H in it)."""
    return 3 * d_in * d_out + d_out * d_out + d_out + (3 * d_out if qkv_bias else 0)


def score_entries(heads: int, n: int, batch: int = 1) -> int:  # pragma: no mutate block - no check calls it
    """Entries of the (B, H, n, n) score tensor: H·n² per sequence (12,582,912 for H = 12, n = 1,024)."""
    return batch * heads * n * n
