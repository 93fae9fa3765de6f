"""Correct: attention configured by a plain dict `cfg`, the book's chapter-4 GPT_CONFIG_124M convention.

Style: a student who moved the book's MultiHeadAttention into a model taking `cfg` and indexes it with
cfg["emb_dim"], cfg["n_heads"], cfg["context_length"], cfg["drop_rate"], cfg["qkv_bias"] (item access, not
attributes). Projections are named query / key / value / proj. The causal mask is built in forward on x.device
and filled with -1e9 (not -inf; it still underflows to exactly 0 after softmax). reshape + permute for the split,
permute + reshape for the merge. Sequences longer than context_length are rejected.
"""
import torch
import torch.nn as nn

GPT_CONFIG_124M = {
    "vocab_size": 50257,     # Vocabulary size
    "context_length": 1024,  # Context length
    "emb_dim": 768,          # Embedding dimension
    "n_heads": 12,           # Number of attention heads
    "n_layers": 12,          # Number of layers
    "drop_rate": 0.1,        # Dropout rate
    "qkv_bias": False,       # Query-Key-Value bias
}


class CausalAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        emb = cfg["emb_dim"]
        self.n_heads = cfg["n_heads"]
        assert emb % self.n_heads == 0, "emb_dim must be divisible by n_heads"
        self.hd = emb // self.n_heads
        self.ctx_len = cfg["context_length"]

        self.query = nn.Linear(emb, emb, bias=cfg["qkv_bias"])
        self.key = nn.Linear(emb, emb, bias=cfg["qkv_bias"])
        self.value = nn.Linear(emb, emb, bias=cfg["qkv_bias"])
        self.proj = nn.Linear(emb, emb)
        self.drop = nn.Dropout(cfg["drop_rate"])

    def forward(self, x):
        b, T, emb = x.shape
        assert T <= self.ctx_len, f"got {T} tokens, context length is {self.ctx_len}"

        q = self.query(x).reshape(b, T, self.n_heads, self.hd).permute(0, 2, 1, 3)
        k = self.key(x).reshape(b, T, self.n_heads, self.hd).permute(0, 2, 1, 3)
        v = self.value(x).reshape(b, T, self.n_heads, self.hd).permute(0, 2, 1, 3)

        att = torch.matmul(q, k.permute(0, 1, 3, 2)) / (self.hd ** 0.5)
        upper = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
        att = att.masked_fill(upper, -1e9)
        att = self.drop(torch.softmax(att, dim=-1))

        y = torch.matmul(att, v).permute(0, 2, 1, 3).reshape(b, T, emb)
        return self.proj(y)


TARGET = "CausalAttention"
EXPECT = ()
RULES_BROKEN = ("mask-fill",)  # the math is right; its -1e9 fill is not the lesson's -inf, which the rule holds
RULE_MISTAKE = "fill-minus-1e9"  # the rule broken, named at its masked_fill (-1e9)
