"""sign-language-translator 0.8.1's CausalMultiHeadSelfAttention (its decoder-only language model's attention): the
number of heads FIRST, CausalMultiHeadSelfAttention(n_heads, embed_size, dropout=0.25, max_seq_len=64,
attention_bias=False) with an assert on divisibility; spelled-out names (all_queries_keys_values, querys, keys,
values, dot_product_scalar, projection, final_dropout); one fused Linear(embed_size, 3 * embed_size,
bias=attention_bias) split by width into [Q; K; V]; the output projection ALWAYS with a bias (attention_bias is the
Q/K/V projections' alone); F.scaled_dot_product_attention(is_causal=True) with dropout_p gated on self.training
wherever PyTorch has it, else a manual path reading a "fill_mask" buffer; an input without batch axis accepted.

Source: https://github.com/sign-language-translator/sign-language-translator (the wheel's METADATA Home-page and
Project-URL Repository), file sign_language_translator/models/language_models/transformer_language_model/layers.py
as released in sign-language-translator 0.8.1 on PyPI; DecoderBlock (same file) builds it with n_heads, embed_size,
dropout and max_seq_len.
Licence: Apache-2.0 (LICENSE in the wheel's dist-info, "Copyright 2023 Mudassar Iqbal"; METADATA "License:
Apache-2.0").
Copied: verbatim from the PyPI wheel sign-language-translator==0.8.1 (pip download --no-deps), every copied line
compared by program with the unpacked wheel: line 33 (import torch) and 36-184 (class CausalMultiHeadSelfAttention,
whole).  Left out: lines 1-32 (the module docstring) and 185-end (FeedForward, DecoderBlock).
ADDED: this docstring and the entry's constants.
Evidence of a latent bug (not exercised here: PyTorch >= 2.0 always takes the SDPA path): the manual path's buffer
is made by `torch.tril(torch.ones(max_seq_len, max_seq_len)).view(-1, -1, max_seq_len, max_seq_len)`, a view with
two inferred dimensions, which raises "only one dimension can be inferred" - the class cannot even be built where
scaled_dot_product_attention is missing (shown in _truth.py by building it with the attribute hidden).
Truth: correct (in _truth.py): CausalMultiHeadSelfAttention(3, 12, dropout=0.0, attention_bias=True) in eval() =
mha_forward (all_queries_keys_values' row blocks, projection, with their biases) and the per-head loop to 1e-15, no
leak; attention_bias=False leaves the Q/K/V projections without bias and the projection with one; a 2-D input
(n, d) gives the batched output's row.
"""
import torch


class CausalMultiHeadSelfAttention(torch.nn.Module):
    """
    Causal Multi-Head Self-Attention Module.

    This class implements the causal multi-head self-attention mechanism. It takes an input tensor of shape
    (batch_size, seq_len, embed_size) and applies causal attention, where each token can attend only to
    itself and the previous tokens in the sequence. The input tensor is transformed into queries, keys,
    and values, and then passed through the scaled dot-product attention mechanism. The final output tensor
    is obtained by concatenating the heads and applying a linear projection with dropout.

    Parameters:
        n_heads (int): The number of attention heads.
        embed_size (int): The size of the input embedding dimension. Must be divisible by n_heads.
        dropout (float, optional): The dropout probability applied in the attention and projection layers. Default is 0.25.
        max_seq_len (int, optional): The maximum input sequence length (used only in custom dot-product attention (pytorch<2.0.0)). Default is 64.
        attention_bias (bool, optional): If True, enables trainable bias parameter in the query, key & value layer. Default is False.

    Inputs:
        x (torch.Tensor): Input tensor of shape (batch_size, seq_len, embed_size).

    Returns:
        torch.Tensor: Output tensor of shape (batch_size, seq_len, embed_size).

    Example:

    .. code-block:: python

        model = CausalMultiHeadSelfAttention(n_heads=8, embed_size=256, dropout=0.2)
        input_tensor = torch.randn(16, 32, 256)
        output_tensor = model(input_tensor)
    """

    def __init__(
        self,
        n_heads,
        embed_size,
        dropout=0.25,
        max_seq_len: int = 64,
        attention_bias=False,
    ):
        assert embed_size % n_heads == 0, "embed_dim must be divisible by num_heads"
        super().__init__()

        # save hyper parameters
        self.n_heads = n_heads
        self.embed_size = embed_size
        self.dropout_probability = dropout

        # causal attention mechanism
        self.use_flash_attention = hasattr(
            torch.nn.functional, "scaled_dot_product_attention"
        )
        if not self.use_flash_attention:
            # TODO: this layer should be agnostic of max_seq_len (auto grow)
            self.register_buffer(
                "fill_mask",
                torch.tril(torch.ones(max_seq_len, max_seq_len)).view(
                    -1, -1, max_seq_len, max_seq_len
                )
                == 0,
            )
        self.dot_product_scalar = (embed_size // n_heads) ** -0.5

        # learnable parameters
        self.all_queries_keys_values = torch.nn.Linear(
            embed_size, embed_size * 3, bias=attention_bias
        )
        self.attention_dropout = torch.nn.Dropout(dropout)
        self.projection = torch.nn.Linear(embed_size, embed_size)
        self.final_dropout = torch.nn.Dropout(dropout)

    def forward(self, x: torch.Tensor):
        """
        Forward pass of the Causal Multi-Head Self-Attention.

        This method applies the forward pass of the causal multi-head self-attention to the input tensor x.
        The input tensor is transformed into queries, keys, and values, which are then passed through the
        scaled dot-product attention mechanism. The final output tensor is obtained by concatenating the
        attention heads and applying a linear projection with dropout.

        Parameters:
            x (torch.Tensor): Input tensor of shape (batch_size, seq_len, embed_size).

        Returns:
            torch.Tensor: Output tensor of shape (batch_size, seq_len, embed_size).

        Example:

        .. code-block:: python

            model = CausalMultiHeadSelfAttention(n_heads=8, embed_size=256, dropout=0.2)
            input_tensor = torch.randn(16, 32, 256)
            output_tensor = model.forward(input_tensor)
        """

        # ([batch,] seq_len, embed_size)
        seq_len = x.shape[-2]
        input_had_batch_dim = x.dim() == 2

        # get Q, K, V matrices ([batch,] seq_len, embed_size)
        x = self.all_queries_keys_values(x)  # ([batch,] seq_len, 3 * embed_size)
        querys, keys, values = x.split(self.embed_size, dim=-1)

        # break up embedding dimension ([batch,] seq_len,     n_heads, head_size)
        querys = querys.view(-1, seq_len, self.n_heads, self.embed_size // self.n_heads)
        keys = keys.view(-1, seq_len, self.n_heads, self.embed_size // self.n_heads)
        values = values.view(-1, seq_len, self.n_heads, self.embed_size // self.n_heads)

        # move n_heads dim to batch dim by swapping seq_len & n_heads using transpose
        querys = querys.transpose(-3, -2)  # (batch, n_head, seq_len, head_size)
        keys = keys.transpose(-3, -2)  #   (batch, n_head, seq_len, head_size)
        values = values.transpose(-3, -2)  # (batch, n_head, seq_len, head_size)

        if self.use_flash_attention:
            # GPU go Brrrrrr
            x = torch.nn.functional.scaled_dot_product_attention(
                querys,
                keys,
                values,
                attn_mask=None,
                dropout_p=self.dropout_probability if self.training else 0,
                is_causal=True,
            )  # (batch, n_head, seq_len, head_size)
        else:
            # Manual attention implementation
            # Q @ K = (B, nH, T, HS) @ (B, nH, HS, T) -> (B, nH, T, T)
            attentions = querys @ keys.transpose(-2, -1)
            # normalize the variance to 1
            attentions = attentions * self.dot_product_scalar
            # don't look at future tokens
            attentions = attentions.masked_fill(
                self.fill_mask[..., :seq_len, :seq_len], float("-inf")  # type: ignore
            )
            attentions = torch.nn.functional.softmax(attentions, dim=-1)
            attentions = self.attention_dropout(attentions)

            x = attentions @ values  # (B, nH, T, T) @ (B, nH, T, HS) -> (B, nH, T, HS)

        # concatenate heads
        x = x.transpose(-3, -2).contiguous()  #     (batch, seq_len, n_head, head_size)
        x = x.view(-1, seq_len, self.embed_size)  # (batch, seq_len, embed_size)

        x = self.projection(x)
        x = self.final_dropout(x)

        if input_had_batch_dim and x.shape[0] == 1:
            x = x.squeeze(0)

        return x


# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "CausalMultiHeadSelfAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("heads-first-constructor", "spelled-out-names", "attention-bias-is-qkv-only", "sdpa-is-causal",
             "unbatched-input-accepted")
FORWARD = "x"
NOTES = ("CausalMultiHeadSelfAttention(n_heads, embed_size, dropout=0.25, max_seq_len=64, attention_bias=False); "
         "SDPA is_causal=True; the manual path (PyTorch < 2.0) cannot be built.")
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("heads first, a fused [Q; K; V] split by width, SDPA is_causal=True with dropout gated on training, "
                    "an output projection with bias and an assert on divisibility: the lesson's layer; the manual "
                    "path's unbuildable buffer is never reached with PyTorch >= 2.0")
