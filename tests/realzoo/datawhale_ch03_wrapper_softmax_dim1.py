"""MultiHeadAttentionWrapper + CausalAttention from the Chinese edition of "Build a LLM from Scratch" (datawhalechina/llms-from-scratch-cn), before the "bug fix" commit: softmax over dim=1 (the QUERY axis).

Source: https://github.com/datawhalechina/llms-from-scratch-cn/blob/980692833b473c1ca6afb7a3e8d3b1e6ac8dbe92/Codes/ch03/01_main-chapter-code/ch03.ipynb (code cell id 60d8c2eb-2d8e-4d2c-99bc-9eef8cc53ca0: class CausalAttention; code cell id b9a66e11-7105-4bb4-be84-041f1a1f3bd2: class MultiHeadAttentionWrapper); merge commit of PR #39 on refs/heads/main.
Licence: MIT (Copyright (c) 2023-2024 Sebastian Raschka), LICENSE.txt at the repository root (the translation keeps the original book code's licence).
Copied: verbatim (the two classes, with their Chinese comments; the demo lines below each class in the cells are not copied); `import torch` and `import torch.nn as nn` added above (the notebook imports them in earlier cells). File saved as UTF-8.
Truth: BUG, softmax over the wrong axis: CausalAttention computes attn_scores (B, n, n), masks the future with -inf (registered triu(1) buffer, sliced), then torch.softmax(attn_scores / sqrt(d_out), dim=1) - dim=1 is the QUERY axis, so each COLUMN is normalised over the queries i >= j instead of each row over the keys. Rows no longer sum to 1 and the weight of key j for query i depends on the scores of LATER queries i' > i, so earlier outputs change when future tokens change (a causal leak through the normaliser, although no weight above the diagonal is non-zero). The wrapper concatenates num_heads independent CausalAttention heads (nn.ModuleList, each d_in -> d_out) with NO output projection (output width num_heads*d_out, as in the book's MultiHeadAttentionWrapper). Evidence: issue https://github.com/datawhalechina/llms-from-scratch-cn/issues/54 ("Coding mistake": dim=1 cannot handle the batched case, should be dim=-1; acknowledged) and fix commit https://github.com/datawhalechina/llms-from-scratch-cn/commit/5e6ec490bdaa1963ce23d8064cf2ff880e390c2e ("bug fix": dim=1 -> dim=-1 in ch03.ipynb, exercise-solutions.ipynb and multihead-attention.ipynb).
"""
import torch
import torch.nn as nn

TARGET = "MultiHeadAttentionWrapper"
TRUTH = "bug"
BUG = "softmax-wrong-axis"
RULE_GAPS = ("no-output-projection", "per-head-d-out", "no-divisibility-check")
FORWARD = "x"
NOTES = ("Constructor MultiHeadAttentionWrapper(d_in, d_out, block_size, dropout, num_heads, qkv_bias=False): d_out is the width of ONE "
         "head, the output width is num_heads*d_out, and there is no output projection (heads concatenated). Per-head modules in "
         "heads[h].W_query/W_key/W_value (Linear(d_in, d_out, bias=qkv_bias)); the lesson's W_q is their concatenation along dim 0 and "
         "W_o = identity. Mask: registered float triu(1) buffer 'mask' in each head, .bool() and sliced in forward. dropout is REQUIRED "
         "positionally. The softmax bug shows for every n >= 2 (with n = 1 there is nothing to normalise).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'softmax-wrong-axis'
ALSO = 'full-width-heads-no-projection'  # the second mistake named with it (Diagnosis.also)
EXPECTED_BECAUSE = ("the reported softmax-axis bug, measured along the token axis of the output of the wrong width (the "
                    "book's first wrapper: full-width heads, no projection, named beside it); before, the wrong width "
                    "skipped causal-leakage and hid the bug")


# 定义一个带 dropout 的因果自注意力层
class CausalAttention(nn.Module):

    def __init__(self, d_in, d_out, block_size, dropout, qkv_bias=False):
        '''
        构造函数，输入参数如下：
        d_in: 输入的维度
        d_out: 输出的维度
        block_size: 注意力权重矩阵的大小
        dropout: dropout 比例
        qkv_bias: 是否对 query、key 和 value 加偏置
        '''
        super().__init__()
        self.d_out = d_out
        # 根据前文，每一个权重矩阵都是 d_in x d_out 的线性层
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key   = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        # 一个 dropout 层
        self.dropout = nn.Dropout(dropout) 
        # 一个掩码矩阵，下三角为 1，其余为 0
        self.register_buffer('mask', torch.triu(torch.ones(block_size, block_size), diagonal=1)) # New

    def forward(self, x):
        '''
        前向传播函数，输入参数为 x，维度为 b x num_tokens x d_in，输出维度为 b x num_tokens x d_out
        '''
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        # transpose 是为了实现矩阵乘法
        attn_scores = queries @ keys.transpose(1, 2)
        # 即上文说过的，将掩码从 0 修改为 -inf，再进行遮蔽操作
        attn_scores.masked_fill_(  # New, _ ops are in-place
            self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        # 经过 softmax 
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=1)
        # 进行 dropout
        attn_weights = self.dropout(attn_weights) # New
        # 得到最后结果
        context_vec = attn_weights @ values
        return context_vec


# 定义一个多头注意力层
class MultiHeadAttentionWrapper(nn.Module):

    def __init__(self, d_in, d_out, block_size, dropout, num_heads, qkv_bias=False):
        super().__init__()
            # 将 num_heads 个单头注意力层组合在一起来实现多头
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, block_size, dropout, qkv_bias) 
             for _ in range(num_heads)]
        )

    def forward(self, x):
        # 前向计算时将多个头的输出拼接在一起
        return torch.cat([head(x) for head in self.heads], dim=-1)
