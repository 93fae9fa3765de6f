"""The causal mask conventions and shapes mha-check offers a forward that takes a mask (harness.child.calling builds
them; checks.causal_leakage names one by its index without the child side, which imports torch)."""

CONVENTIONS = ("bool, True = masked", "bool, True = keep", "additive, -inf = masked", "float, 1 = keep, 0 = masked")
SHAPES = ("(n, n)", "(1, n, n)", "(1, 1, n, n)", "(B, n, n)")  # (B, n, n): one mask per sequence, as a layer that
# reshapes it with the batch (mask.unsqueeze(1).repeat(1, H, 1, 1).view(B * H, n, n)) needs
