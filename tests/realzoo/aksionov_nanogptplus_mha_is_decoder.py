"""nanoGPTplus MultiHeadAttention: per-head SelfAttentionHead modules with a required keyword-only `is_decoder` flag.

Source: https://github.com/Andrei-Aksionov/nanoGPTplus/blob/3fb01c368db28f905904feed962cc0468771ed5c/src/model/gpt_language_model/attention.py (classes SelfAttentionHead and MultiHeadAttention; the file's third class, CausalSelfAttention, is not copied). Commit as stored in the search index (read with read_file at that commit); not cross-checked against a fetched git history.
Licence: MIT (Copyright (c) 2023 Andrei-Aksionov), LICENSE at the repository root (index commit 36f90e6).
Copied: verbatim (classes SelfAttentionHead and MultiHeadAttention with their full docstrings and comments, character for character); imports as in the original (torch, torch.nn.functional as F, Tensor and nn from torch). Added below the copied block: a factory build(d, heads, context_length, p_drop=0.0) = MultiHeadAttention(embeddings_size=d, context_size=context_length, head_size=None, num_heads=heads, dropout=p_drop, is_decoder=True), because the constructor needs is_decoder=True to be causal and names its width `embeddings_size`.
Truth: correct causal MHA (with is_decoder=True): each head has key/query/value Linear(embeddings_size, head_size, bias=False), registered tril buffer, scores = query @ key.mT * head_size**-0.5, masked_fill(tril == 0, -inf) only when is_decoder, softmax(-1), dropout; heads in nn.ModuleList, concatenated, projection Linear(head_size*num_heads, embeddings_size) WITH bias, dropout. With head_size=None the constructor refuses a width not divisible by the heads (ValueError) and uses head_size = embeddings_size // num_heads; an explicit head_size skips that check (then the layer is H heads of any width projected back to embeddings_size). With is_decoder=False it is bidirectional (an encoder layer), by design.
"""
import torch
import torch.nn.functional as F
from torch import Tensor, nn

TARGET = "build"
TRUTH = "correct"
BUG = None
RULE_GAPS = ()
FORWARD = "x"
NOTES = "Constructor MultiHeadAttention(embeddings_size, context_size, head_size: int | None, num_heads, dropout, *, is_decoder) - is_decoder is REQUIRED and keyword-only, and must be True for a causal layer; TARGET is the added factory build(d, heads, context_length, p_drop=0.0), which passes head_size=None (the class then checks divisibility and derives head_size = d // heads) and is_decoder=True. Per-head weights: heads[h].query_weights/key_weights/value_weights.weight (head_size, d), no bias; lesson W_q = cat over heads along dim 0. projection = Linear(H*head_size, d) with bias. Dropout on the attention weights and after the projection."
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None


class SelfAttentionHead(nn.Module):
    def __init__(
        self,
        embeddings_size: int,
        context_size: int,
        head_size: int,
        dropout: float,
        *,
        is_decoder: bool,
    ) -> None:
        """Single self-attention head.

        Parameters
        ----------
        embeddings_size : int
            size of the embeddings - the size of input of self-attention
        context_size : int
            the number of tokens that will be used during calculation attention map and
            weighted averaging of value of each token
        head_size : int
            the size of output of self-attention
        dropout : float
            how many connection between tokens are dropped during each forward pass
        is_decoder : bool
            if it's a decoder masking of 'future' tokens will be applied
        """
        super().__init__()

        self.embeddings_size = embeddings_size
        self.context_size = context_size
        self.head_size = head_size
        self.is_decoder = is_decoder

        # what don't need `bias` because we simply want to do matrix multiplications
        self.key_weights = nn.Linear(embeddings_size, head_size, bias=False)
        self.query_weights = nn.Linear(embeddings_size, head_size, bias=False)
        self.value_weights = nn.Linear(embeddings_size, head_size, bias=False)
        # If you have parameters in your model, which should be saved and restored in the state_dict,
        # but not trained by the optimizer, you should register them as buffers.
        # Buffers won't be returned in model.parameters(), so that the optimizer won't have a change to update them.
        self.register_buffer("tril", torch.tril(torch.ones(self.context_size, self.context_size)))

        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """Forward method for Self-Attention.

        Self-attention does these 6 steps:

        1. takes information from the token x
        2. encodes it into vectors key, query and value, where (intuitively):
            a. key - information of what the token has
            b. query - what the token is interested in
            c. value - if some token finds current token 'interesting' then this value should be used
        3. calculate attention scores by doing dot product between key and query
        4. [optional for decoder] creates triangular matrix that will help to mask tokens from the 'future', in other
        words token at position 4 should not communicate with token at position 5 and above, only with the previous
        tokens (3 and below)
        5. mask token from the 'future' with -inf value, which after softmax operation becomes 0
        6. does weighted sum by multiplying obtained attention scores and value matrix

        Parameters
        ----------
        x : Tensor
            input tensor containing vector representation of x

        Returns
        -------
        Tensor
            output vector representation of x of size (batch, time-step, head_size)
        """
        # batch, time-step, channels
        B, T, _ = x.shape  # noqa: N806

        # here and below `C` means `head_size`, not channels of input
        key = self.key_weights(x)  # (B, T, C)
        query = self.query_weights(x)  # (B, T, C)
        value = self.value_weights(x)  # (B, T, C)

        # first to obtaining attention scores: dot product of key and query
        attention_scores = query @ key.mT  # (B, T, C) @ (B, C, T) -> (B, T, T)

        # In order to preserve 1 unit variance of the product of multiplication of two vectors
        # we need to divide by square root of the features size (in our case - attention head size)
        # We need it to make sure that the values after softmax are well spread out, otherwise in worst
        # case scenario the values after the softmax will converge to one-hot encoding (like [0, 0, 1]) and
        # that will mean that the attention will be on a single (or couple of) tokens, and we want it to be
        # spread out (like [0.2, 0.1, 0.7])
        # we want to aggregate information not from a single node
        head_size = key.shape[-1]
        attention_scores *= head_size**-0.5

        # if it's a decoder we need to mask 'future' tokens with '-inf' value
        if self.is_decoder:
            # [0.9, -0.6, 0.3] -> [0.9, -inf, -inf]
            # [0.1, 0.5, -0.1] -> [0.1, 0.5, -inf]
            # [0.1, 0.2, 0.3]  -> [0.1, 0.2, 0.3]
            # and after softmax `-inf` becomes 0
            # this doesn't allow current token communicate with future ones
            attention_scores = attention_scores.masked_fill(self.tril[:T, :T] == 0, float("-inf"))  # (B, T, T)

        # since we want to do weighted averaging we need to transform attention scores into range [0, 1]
        # and sum of all scores should be equal to 1; softmax is a good tool for it
        attention_scores = F.softmax(attention_scores, dim=-1)  # (B, T, T)

        # randomly prevent some nodes from communicating, some of theme randomly are set to zero
        # helps prevent overfitting
        attention_scores = self.dropout(attention_scores)

        # perform the weighted aggregation of the values
        return attention_scores @ value  # (B, T, T) @ (B, T, C) -> (B, T, C)


class MultiHeadAttention(nn.Module):
    def __init__(
        self,
        embeddings_size: int,
        context_size: int,
        head_size: int | None,
        num_heads: int,
        dropout: float,
        *,
        is_decoder: bool,
    ) -> None:
        """Multiple self-attention heads run in parallel.

        Multi head attention is simply applying multiple self-attention heads in parallel and concatenation results.
        That helps to add more parallelization plus each head has it's own set of K, Q an V weights, which means
        that each head might learn something new; it allows the model to focus on different positions, maybe
        one head will focus more on near tokens, while others will focus on tokens that are far away.

        Parameters
        ----------
        embeddings_size : int
            size of the embeddings - the size of input of self-attention
        context_size : int
            the number of tokens that will be used during calculation attention map and
            weighted averaging of value of each token
        head_size : int | None
            the size of output of self-attention;
            if not provided `head_size` will be equal to `embeddings_size` // `num_heads`, so it should be divisible
            without residual
        num_heads : int
            how many self-attention heads to use
        dropout : float
            how many connection between tokens are dropped during each forward pass
        is_decoder : bool
            if it's a decoder masking of 'future' tokens will be applied

        Raises
        ------
        ValueError
            if `embeddings_size` cannot be divided by `num_heads` without residual
        """
        super().__init__()

        if not head_size:
            if embeddings_size % num_heads != 0:
                msg = "Embeddings size should be divisible by number of heads without residual, "
                f"but was provided: embeddings_size={embeddings_size}; num_heads={num_heads}"
                raise ValueError(msg)
            head_size = embeddings_size // num_heads

        self.embeddings_size = embeddings_size
        self.context_size = context_size
        self.head_size = head_size
        self.num_heads = num_heads
        self.dropout = dropout
        self.is_decoder = is_decoder

        self.heads = nn.ModuleList(
            [
                SelfAttentionHead(
                    embeddings_size=self.embeddings_size,
                    context_size=self.context_size,
                    head_size=self.head_size,
                    dropout=self.dropout,
                    is_decoder=self.is_decoder,
                )
                for _ in range(self.num_heads)
            ],
        )

        # if after concatenation the size of channels is bigger than embeddings size
        # projection will scaled it down
        self.projection = nn.Linear(self.head_size * self.num_heads, self.embeddings_size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        """Apply multiple self-attention heads in parallel and concatenate the result.

        Parameters
        ----------
        x : Tensor
            vector representation of input token of size (batch, time-step, channels)

        Returns
        -------
        Tensor
            output vector of the same size as input
        """
        # concatenate over channel dimension
        out = torch.cat([h(x) for h in self.heads], dim=-1)
        out = self.projection(out)
        return self.dropout(out)


# --- added factory (not part of the original): is_decoder=True is required for a causal layer, the width is `embeddings_size` ---
def build(d, heads, context_length, p_drop=0.0):
    return MultiHeadAttention(embeddings_size=d, context_size=context_length, head_size=None, num_heads=heads,
                              dropout=p_drop, is_decoder=True)
