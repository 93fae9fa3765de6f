"""Bad: the constructor always raises (a ZeroDivisionError from a botched head-width computation)."""
import torch.nn as nn


class MyAttn(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads):
        super().__init__()
        self.head_dim = d_out // (num_heads - num_heads)

    def forward(self, x):
        return x
