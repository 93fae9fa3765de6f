"""The first MultiHeadAttention of hyunwoongko/transformer ("implement encoder", 2019-12-18): seven mistakes at once, fixed upstream over two years.

Source: https://github.com/hyunwoongko/transformer/blob/10c0a9d72672c558964c8a8ec518ef2b93144ca3/models/layers/scale_dot_product_attention.py and https://github.com/hyunwoongko/transformer/blob/10c0a9d72672c558964c8a8ec518ef2b93144ca3/models/layers/multi_head_attention.py (commit "implement encoder", 2019-12-18; the README of that time shows the same two classes).
Licence: Apache-2.0 ("Copyright 2019 Hyunwoong Go." followed by the Apache License 2.0 notice, section "## 4. Licence" of the repository README; the repository has no LICENSE file in the index or in the fetched history).
Copied: verbatim (class ScaleDotProductAttention from models/layers/scale_dot_product_attention.py and class MultiHeadAttention from models/layers/multi_head_attention.py, in that order in one file; `import math` and `from torch import nn` as in the originals; the originals' header docstrings (@author : Hyunwoong, @when, @homepage) are not repeated, and `from models.layers.scale_dot_product_attention import ScaleDotProductAttention` is replaced by the copied class). Each class compared character for character with the index's copy (read_file at the cited commit) and with `git show <commit>:<path>` in the fetched history (mirror HEAD 6328654, 2025-07-15).
Truth: BUG, several: (1) no output projection (fixed by 91368af "fix wrong codes : add linaer layer at multihead attention"); (2) scores scaled by sqrt(d_model) instead of sqrt(d_tensor) (fixed by ee92100 "fix wrong codes : change scale factor d_model -> d_k"); (3) heads split by view(B, H, n, dh) without a transpose, (4) keys "transposed" by view(B, H, dh, n), (5) nn.Softmax() without dim, which for 4-D scores is dim=1, the HEADS axis, and (6) the merge by view(B, n, d_model) without a transpose (all four fixed by 391c9cd "modify transpose"); (7) masked scores filled with -e = -1e-12 (fixed by 9c5515d). The ScaleDotProductAttention also builds an unused nn.Dropout() (removed by 09c74b8). Causal only through the mask argument, and not even then (7). Evidence: the fix commits above, https://github.com/hyunwoongko/transformer/commit/ + 91368afda73649b9aa9d7c3f4b3a7c44cae3182f, ee92100e496e53ee58190b4a746661a2fb59d246, 391c9cd469cd17ce3af26cb10078978e6a44c142, 9c5515deafd0b224b50ea7500d38f6c370682633, 09c74b80162ac571584ca29379236e95453fe43b; _truth.py shows the output equals an independent re-implementation of all seven mistakes and differs from the causal reference.
"""
import math

from torch import nn

TARGET = "MultiHeadAttention"
TRUTH = "bug"
BUG = "seven-mistakes"
RULE_GAPS = ("causal-only-with-mask-argument", "no-divisibility-check", "no-output-projection")
FORWARD = "q, k, v, mask=None"
NOTES = ("Constructor MultiHeadAttention(d_model, n_head). forward(q, k, v, mask=None): mask 1/True = keep. Weights w_q, "
         "w_k, w_v (with bias), no output projection. nn.Softmax() without dim warns (implicit dim=1 for 4-D input).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'no-mask'
EXPECTED_BECAUSE = ('seven mistakes at once (no projection, sqrt(d_model), split and key views without transpose, softmax '
                    'over the heads, merge without transpose, -1e-12 fill): it must fail; no single catalogued mistake '
                    'reproduces the output. The future leaks under every way of calling forward (the -1e-12 fill leaves '
                    'the future\'s scores as they are, so the mask is in effect never applied: mistake 7, fixed by '
                    '9c5515d), and the leak is the root cause named; param-count also fails in the pattern of '
                    'no-output-projection (91368af)')


class ScaleDotProductAttention(nn.Module):
    """
    compute scale dot product attention

    Query : given sentence that we focused on (decoder)
    Key : every sentence to check relationship with Qeury(encoder)
    Value : every sentence same with Key (encoder)
    """

    def __init__(self):
        super(ScaleDotProductAttention, self).__init__()
        self.softmax = nn.Softmax()
        self.dropout = nn.Dropout()

    def forward(self, q, k, v, mask=None, e=1e-12):
        # input is 4 dimension tensor
        # [batch_size, head, length, d_tensor]
        batch_size, head, length, d_tensor = k.size()
        d_model = head * d_tensor

        # 1. dot product Query with Key^T to compute similarity
        k_t = k.view(batch_size, head, d_tensor, length)
        score = (q @ k_t) / math.sqrt(d_model)

        # 2. apply masking (opt)
        if mask is not None: score = score.masked_fill(mask == 0, -e)

        # 3. pass them softmax to make [0, 1] range
        score = self.softmax(score)

        # 4. multiply with Value
        v = score @ v

        return v, score


class MultiHeadAttention(nn.Module):

    def __init__(self, d_model, n_head):
        super(MultiHeadAttention, self).__init__()
        self.n_head = n_head
        self.attention = ScaleDotProductAttention()
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)

    def forward(self, q, k, v, mask=None):
        # 1. dot product with weight matrices
        q, k, v = self.w_q(q), self.w_k(k), self.w_v(v)

        # 2. split tensor by number of heads
        q, k, v = self.project(q), self.project(k), self.project(v)

        # 3, do scale dot product to compute similarity
        out, attention = self.attention(q, k, v, mask=mask)
        out = self.concat(out)

        # 4. visualize attention map
        # TODO : we should implement visualization

        return out

    def project(self, tensor):
        """
        split tensor by number of head

        :param tensor: [batch_size, length, d_model]
        :return: [batch_size, length, d_tensor, head]
        """
        batch_size, length, d_model = tensor.size()

        d_tensor = d_model // self.n_head
        tensor = tensor.view(batch_size, self.n_head, length, d_tensor)
        # it is similar with group convolution (split by number of heads)

        return tensor

    def concat(self, tensor):
        """
        inverse function of self.project(tensor : torch.Tensor)

        :param tensor: [batch_size, length, d_tensor, head]
        :return: [batch_size, length, d_model]
        """
        batch_size, head, length, d_tensor = tensor.size()
        d_model = head * d_tensor

        tensor = tensor.view(batch_size, length, d_model)
        return tensor
