"""Bad: calls sys.exit(0) while being imported (a leftover `if True: sys.exit()` from a script)."""
import sys

import torch.nn as nn

sys.exit(0)


class MyAttn(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads):
        super().__init__()

    def forward(self, x):
        return x
