"""MultiHeadedAttention from Aleksa Gordić's pytorch-original-transformer: spelled-out names (model_dimension, number_of_heads, dropout_probability), causal through the mask argument.

Source: https://github.com/gordicaleksa/pytorch-original-transformer/blob/03bf484df967a1f9945229f13d5c6e6b252af139/models/definitions/transformer_model.py (class MultiHeadedAttention and function get_clones; the decoder builds its self-attention mask in utils/data_utils.py as torch.triu(torch.ones((1, 1, T, T)) == 1).transpose(2, 3), a (1, 1, T, T) boolean keep-mask).
Licence: MIT (Copyright (c) 2020 Aleksa Gordić), file LICENCE at the repository root (read in the fetched git history; the search index holds no copy of it), also declared in the README ("## Licence").
Copied: verbatim (class MultiHeadedAttention and function get_clones, character for character with the index's copy at the cited commit (read_file) and with `git show 03bf484:models/definitions/transformer_model.py` in the fetched history (mirror HEAD d5b29a4, 2020-12-27, where the class is unchanged)); `import math`, `import copy`, `import torch`, `import torch.nn as nn` as in the original module, whose `from utils.constants import *` is left out (the copied code uses none of its names). ADDED below the copied block: the factory build(model_dimension, number_of_heads, dropout_probability) (TARGET), which passes log_attention_weights=False: that argument has no default and no meaning mha-check can guess, so the bare class is rightly "cannot tell" (construct names --arg log_attention_weights=...).
Truth: correct causal MHA when called as m(x, x, x, mask) with a boolean keep-mask (True on and below the diagonal) of shape (1, 1, n, n): three Linear(model_dimension, model_dimension) WITH bias in qkv_nets (q, k, v in that order), view(B, -1, H, dh).transpose(1, 2), scores / sqrt(head_dimension), masked_fill_(mask == False, -inf), softmax(-1), dropout, transpose(1, 2).reshape(B, -1, H * dh), out_projection_net Linear WITH bias. Divisibility asserted. Not causal by itself: the mask argument is REQUIRED (no default), and all four constructor arguments are required (log_attention_weights too).
"""
import math
import copy

import torch
import torch.nn as nn

TARGET = "build"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("causal-only-with-mask-argument", "spelled-out-names", "required-mask-argument")
FORWARD = "query, key, value, mask"
NOTES = ("Constructor MultiHeadedAttention(model_dimension, number_of_heads, dropout_probability, log_attention_weights): "
         "no defaults at all; TARGET is the added build(model_dimension, number_of_heads, dropout_probability). forward(query, key, value, mask) with mask REQUIRED: a bool keep-mask broadcastable to "
         "(B, H, n, n), e.g. (1, 1, n, n) tril; it is compared with torch.tensor(False), so a 0/1 float tril works too. "
         "Weights in qkv_nets[0..2] = q, k, v (all with bias), out_projection_net (with bias).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ('correct and follows the lesson rules (bias on the output projection, divisibility asserted, -inf fill); '
                    'causal once called with a (1, 1, n, n) keep-mask, as the harvardnlp entry')


class MultiHeadedAttention(nn.Module):
    """
        This module already exists in PyTorch. The reason I implemented it here from scratch is that
        PyTorch implementation is super complicated as they made it as generic/robust as possible whereas
        on the other hand I only want to support a limited use-case.

        Also this is arguable the most important architectural component in the Transformer model.

        Additional note:
        This is conceptually super easy stuff. It's just that matrix implementation makes things a bit less intuitive.
        If you take your time and go through the code and figure out all of the dimensions + write stuff down on paper
        you'll understand everything. Also do check out this amazing blog for conceptual understanding:

        https://jalammar.github.io/illustrated-transformer/

        Optimization notes:

        qkv_nets could be replaced by Parameter(torch.empty(3 * model_dimension, model_dimension)) and one more matrix
        for bias, which would make the implementation a bit more optimized. For the sake of easier understanding though,
        I'm doing it like this - using 3 "feed forward nets" (without activation/identity hence the quotation marks).
        Conceptually both implementations are the same.

        PyTorch's query/key/value are of different shape namely (max token sequence length, batch size, model dimension)
        whereas I'm using (batch size, max token sequence length, model dimension) because it's easier to understand
        and consistent with computer vision apps (batch dimension is always first followed by the number of channels (C)
        and image's spatial dimensions height (H) and width (W) -> (B, C, H, W).

        This has an important optimization implication, they can reshape their matrix into (B*NH, S/T, HD)
        (where B - batch size, S/T - max src/trg sequence length, NH - number of heads, HD - head dimension)
        in a single step and I can only get to (B, NH, S/T, HD) in single step
        (I could call contiguous() followed by view but that's expensive as it would incur additional matrix copy)

    """

    def __init__(self, model_dimension, number_of_heads, dropout_probability, log_attention_weights):
        super().__init__()
        assert model_dimension % number_of_heads == 0, f'Model dimension must be divisible by the number of heads.'

        self.head_dimension = int(model_dimension / number_of_heads)
        self.number_of_heads = number_of_heads

        self.qkv_nets = get_clones(nn.Linear(model_dimension, model_dimension), 3)  # identity activation hence "nets"
        self.out_projection_net = nn.Linear(model_dimension, model_dimension)

        self.attention_dropout = nn.Dropout(p=dropout_probability)  # no pun intended, not explicitly mentioned in paper
        self.softmax = nn.Softmax(dim=-1)  # -1 stands for apply the softmax along the last dimension

        self.log_attention_weights = log_attention_weights  # should we log attention weights
        self.attention_weights = None  # for visualization purposes, I cache the weights here (translation_script.py)

    def attention(self, query, key, value, mask):
        # Step 1: Scaled dot-product attention, Page 4, Chapter 3.2.1 "Scaled Dot-Product Attention"
        # Notation: B - batch size, S/T max src/trg token-sequence length, NH - number of heads, HD - head dimension
        # query/key/value shape = (B, NH, S/T, HD), scores shape = (B, NH, S, S), (B, NH, T, T) or (B, NH, T, S)
        # scores have different shapes as MHA is used in 3 contexts, self attention for src/trg and source attending MHA
        scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(self.head_dimension)

        # Step 2: Optionally mask tokens whose representations we want to ignore by setting a big negative number
        # to locations corresponding to those tokens (force softmax to output 0 probability on those locations).
        # mask shape = (B, 1, 1, S) or (B, 1, T, T) will get broad-casted (copied) as needed to match scores shape
        if mask is not None:
            scores.masked_fill_(mask == torch.tensor(False), float("-inf"))

        # Step 3: Calculate the attention weights - how much should we attend to surrounding token representations
        attention_weights = self.softmax(scores)

        # Step 4: Not defined in the original paper apply dropout to attention weights as well
        attention_weights = self.attention_dropout(attention_weights)

        # Step 5: based on attention weights calculate new token representations
        # attention_weights shape = (B, NH, S, S)/(B, NH, T, T) or (B, NH, T, S), value shape = (B, NH, S/T, HD)
        # Final shape (B, NH, S, HD) for source MHAs or (B, NH, T, HD) target MHAs (again MHAs are used in 3 contexts)
        intermediate_token_representations = torch.matmul(attention_weights, value)

        return intermediate_token_representations, attention_weights  # attention weights for visualization purposes

    def forward(self, query, key, value, mask):
        batch_size = query.shape[0]

        # Step 1: Input linear projection
        # Notation: B - batch size, NH - number of heads, S/T - max src/trg token-sequence length, HD - head dimension
        # Shape goes from (B, S/T, NH*HD) over (B, S/T, NH, HD) to (B, NH, S/T, HD) (NH*HD=D where D is model dimension)
        query, key, value = [net(x).view(batch_size, -1, self.number_of_heads, self.head_dimension).transpose(1, 2)
                             for net, x in zip(self.qkv_nets, (query, key, value))]

        # Step 2: Apply attention - compare query with key and use that to combine values (see the function for details)
        intermediate_token_representations, attention_weights = self.attention(query, key, value, mask)

        # Potentially, for visualization purposes, log the attention weights, turn off during training though!
        # I had memory problems when I leave this on by default
        if self.log_attention_weights:
            self.attention_weights = attention_weights

        # Step 3: Reshape from (B, NH, S/T, HD) over (B, S/T, NH, HD) (via transpose) into (B, S/T, NHxHD) which is
        # the same shape as in the beginning of this forward function i.e. input to MHA (multi-head attention) module
        reshaped = intermediate_token_representations.transpose(1, 2).reshape(batch_size, -1, self.number_of_heads * self.head_dimension)

        # Step 4: Output linear projection
        token_representations = self.out_projection_net(reshaped)

        return token_representations


def get_clones(module, num_of_deep_copies):
    # Create deep copies so that we can tweak each module's weights independently
    return nn.ModuleList([copy.deepcopy(module) for _ in range(num_of_deep_copies)])


# ---------------------------------------------------------------------------------------------- added for the zoo
def build(model_dimension, number_of_heads, dropout_probability):
    return MultiHeadedAttention(model_dimension, number_of_heads, dropout_probability, log_attention_weights=False)
