"""Ch03_MHA_Wrapper (+ its CausalAttention head) from the book's bonus notebook: a list of full single-head layers.

Source: https://github.com/rasbt/LLMs-from-scratch/blob/00c240ff87163731b336d97f91aeb2943f5b452d/ch03/02_bonus_efficient-multihead-attention/mha-implementations.ipynb (code cell id 297c93ed-aec0-4896-bb89-42c4b294d3d1, classes CausalAttention and Ch03_MHA_Wrapper)
Licence: MIT (Copyright (c) 2023-2024 Sebastian Raschka)
Copied: verbatim (both classes; `import torch` / `import torch.nn as nn` added above; demo lines not copied)
Truth: correct, but with a different meaning of d_out: every head is a CausalAttention with its own Linear(d_in, d_out) Q/K/V, scaled by sqrt(d_out) (= the head width), causal -inf mask; the heads are concatenated (width num_heads*d_out) and mixed by out_proj Linear(d_out*num_heads, d_out*num_heads) with bias. This equals the lesson's MHA with total width D = num_heads*d_out and dh = d_out, where the lesson's W_q is the row-stack of the heads' W_query weights. (This wrapper got its out_proj in commit f1fa9df, see rasbt_bonus_wrapper_no_proj.py for the version before.)
"""
import torch
import torch.nn as nn

TARGET = "Ch03_MHA_Wrapper"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("no-divisibility-check",)
FORWARD = "x"
NOTES = "Constructor Ch03_MHA_Wrapper(d_in, d_out, context_length, dropout, num_heads, qkv_bias=False). d_out is the PER-HEAD width; output width is d_out*num_heads (the notebook calls it with d_out=embed_dim//12). Heads in nn.ModuleList self.heads[h].W_query/W_key/W_value; out_proj is Linear(H*d_out, H*d_out). A checker that passes d_out=D gets a layer of width H*D: map by stacking per-head weights. No divisibility to check."
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = None
EXPECTED_BECAUSE = "the book's wrapper reads d_out as the width of one head: its output is heads x d_out wide, not the lesson's d_out"


class CausalAttention(nn.Module):

    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)  # New
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))  # New

    def forward(self, x):
        b, num_tokens, d_in = x.shape  # New batch dimension b
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)

        attn_scores = queries @ keys.transpose(1, 2)  # Changed transpose
        attn_scores.masked_fill_(  # New, _ ops are in-place
            self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)  # New

        context_vec = attn_weights @ values
        return context_vec


class Ch03_MHA_Wrapper(nn.Module):

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
             for _ in range(num_heads)]
        )
        self.out_proj = nn.Linear(d_out*num_heads, d_out*num_heads)

    def forward(self, x):
        context_vec = torch.cat([head(x) for head in self.heads], dim=-1)
        return self.out_proj(context_vec)
