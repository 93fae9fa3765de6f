"""Bad: kills its own process with os._exit(3) while being imported (no exception to catch: the child just dies)."""
import os

import torch.nn as nn

os._exit(3)


class MyAttn(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads):
        super().__init__()

    def forward(self, x):
        return x
