"""harness.child.references: a layer the trace never saw used is dead code only if nothing but __init__ reads it.
Realzoo22's Compressive Transformer: ConvCompress.conv, run once the memories overflow, had been named
unused-projection ("delete the layer"), which would break it."""
import torch.nn as nn

from harness.child.references import referenced


class Compress(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 4, 2, stride=2)

    def forward(self, mem):
        return self.conv(mem)


class WithMemory(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.compress = Compress()
        self.extra = nn.Linear(4, 4)  # made and never read again: the lesson's mistake
        self.kept = Compress()  # its own class reads its conv, but nothing reads self.kept

    def forward(self, x, overflow=False):
        if overflow:
            x = self.compress(x)
        return self.proj(x)


def test_a_layer_read_on_a_branch_not_taken_is_referenced_where_its_class_reads_it():
    where = referenced(WithMemory(), "compress.conv")
    assert where is not None and where["at"].endswith("test_references.py:15"), where
    assert where["code"] == "return self.conv(mem)"


def test_a_layer_only_init_names_is_not_referenced():
    assert referenced(WithMemory(), "extra") is None


def test_a_layer_whose_owner_nothing_reads_is_not_referenced():
    assert referenced(WithMemory(), "kept.conv") is None
