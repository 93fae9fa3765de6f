"""MultiHeadAttention of hyunwoongko/transformer before "Update scale_dot_product_attention.py" (9c5515d): masked scores are filled with -e = -1e-12, i.e. set to about zero, so the mask does nothing useful.

Source: https://github.com/hyunwoongko/transformer/blob/391c9cd469cd17ce3af26cb10078978e6a44c142/models/layers/scale_dot_product_attention.py and https://github.com/hyunwoongko/transformer/blob/391c9cd469cd17ce3af26cb10078978e6a44c142/models/layers/multi_head_attention.py (commit "modify transpose", 2021-11-30; the MultiHeadAttention text is unchanged from there to HEAD, the index stores it at 8f7aaa1). The decoder's causal mask is models/model/transformer.py make_no_peak_mask: torch.tril(torch.ones(len_q, len_k)) as bool, 1/True = keep.
Licence: Apache-2.0 ("Copyright 2019 Hyunwoong Go." followed by the Apache License 2.0 notice, section "## 4. Licence" of the repository README; the repository has no LICENSE file in the index or in the fetched history).
Copied: verbatim (class ScaleDotProductAttention from models/layers/scale_dot_product_attention.py and class MultiHeadAttention from models/layers/multi_head_attention.py, in that order in one file; `import math` and `from torch import nn` as in the originals; the originals' header docstrings (@author : Hyunwoong, @when, @homepage) are not repeated, and `from models.layers.scale_dot_product_attention import ScaleDotProductAttention` is replaced by the copied class). Each class compared character for character with the index's copy (read_file at the cited commit) and with `git show <commit>:<path>` in the fetched history (mirror HEAD 6328654, 2025-07-15).
Truth: BUG, the mask fills with a tiny finite value: `score.masked_fill(mask == 0, -e)` with e=1e-12 replaces every future score by -1e-12 (about 0) instead of -inf, so every future token keeps a weight of about exp(-max score) - the future leaks into every earlier position with or without the mask. Everything else is the lesson's layer (w_q/w_k/w_v/w_concat Linear(d_model, d_model) WITH bias, view(B, n, H, dh).transpose(1, 2), q @ k.transpose(2, 3) / sqrt(d_tensor), softmax(-1), transpose(1, 2).contiguous().view(B, n, d_model), w_concat). No divisibility check. Causal only through the mask argument (forward(q, k, v, mask=None)). Evidence: fix commit https://github.com/hyunwoongko/transformer/commit/9c5515deafd0b224b50ea7500d38f6c370682633 (2022-12-08: `-e` -> `-10000`), and _truth.py (with the keep-mask the layer equals the lesson's layer whose future scores are set to -1e-12, and differs from the causal reference).
"""
import math

from torch import nn

TARGET = "MultiHeadAttention"
TRUTH = "bug"
BUG = "fill-minus-1e-12"
RULE_GAPS = ("causal-only-with-mask-argument", "no-divisibility-check")
FORWARD = "q, k, v, mask=None"
NOTES = ("Constructor MultiHeadAttention(d_model, n_head). forward(q, k, v, mask=None): mask 1/True = keep, broadcastable "
         "to (B, H, n, n) (the model passes (B, 1, n, n)); masked scores become -1e-12, not -inf. Weights w_q, w_k, w_v, "
         "w_concat, all with bias.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'finite-fill'
EXPECTED_BECAUSE = ('the future leaks visibly under every calling convention (the mask sets future scores to -1e-12, not -inf): '
                    'a finite fill, fixed upstream by filling with a large negative number; named from the numbers: '
                    'with the keep-mask, finite-fill with its fill read off the output (-1e-12) is the module, number '
                    'for number (issue 28)')


class ScaleDotProductAttention(nn.Module):
    """
    compute scale dot product attention

    Query : given sentence that we focused on (decoder)
    Key : every sentence to check relationship with Qeury(encoder)
    Value : every sentence same with Key (encoder)
    """

    def __init__(self):
        super(ScaleDotProductAttention, self).__init__()
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, q, k, v, mask=None, e=1e-12):
        # input is 4 dimension tensor
        # [batch_size, head, length, d_tensor]
        batch_size, head, length, d_tensor = k.size()

        # 1. dot product Query with Key^T to compute similarity
        k_t = k.transpose(2, 3)  # transpose
        score = (q @ k_t) / math.sqrt(d_tensor)  # scaled dot product

        # 2. apply masking (opt)
        if mask is not None:
            score = score.masked_fill(mask == 0, -e)

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
        self.w_concat = nn.Linear(d_model, d_model)

    def forward(self, q, k, v, mask=None):
        # 1. dot product with weight matrices
        q, k, v = self.w_q(q), self.w_k(k), self.w_v(v)

        # 2. split tensor by number of heads
        q, k, v = self.split(q), self.split(k), self.split(v)

        # 3. do scale dot product to compute similarity
        out, attention = self.attention(q, k, v, mask=mask)

        # 4. concat and pass to linear layer
        out = self.concat(out)
        out = self.w_concat(out)

        # 5. visualize attention map
        # TODO : we should implement visualization

        return out

    def split(self, tensor):
        """
        split tensor by number of head

        :param tensor: [batch_size, length, d_model]
        :return: [batch_size, head, length, d_tensor]
        """
        batch_size, length, d_model = tensor.size()

        d_tensor = d_model // self.n_head
        tensor = tensor.view(batch_size, length, self.n_head, d_tensor).transpose(1, 2)
        # it is similar with group convolution (split by number of heads)

        return tensor

    def concat(self, tensor):
        """
        inverse function of self.split(tensor : torch.Tensor)

        :param tensor: [batch_size, head, length, d_tensor]
        :return: [batch_size, length, d_model]
        """
        batch_size, head, length, d_tensor = tensor.size()
        d_model = head * d_tensor

        tensor = tensor.transpose(1, 2).contiguous().view(batch_size, length, d_model)
        return tensor
