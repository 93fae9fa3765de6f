"""AttentionSmithy 1.3.0's MultiheadAttention with its StandardAttentionMethod: a "transformer building blocks"
package whose attention keeps the projections and the scoring apart - MultiheadAttention(embedding_dimension,
number_of_heads, attention_method) with SPELLED-OUT names (query_weights, key_weights, value_weights, out_weights,
nn.Linear with biases; head_dimension; a ValueError when the heads do not divide the width), heads by view +
transpose; the scoring INJECTED as a module, StandardAttentionMethod(dropout=0.0, is_causal_masking=False), whose
causal FLAG (off by default) masks with create_causal_mask (a (1, n, n) keep-mask made in forward from a uint8 triu)
filled with -inf, scores divided IN PLACE by torch.sqrt(torch.tensor(head_dimension, dtype=torch.float32)) - a
FLOAT32 square root whatever the scores' dtype - and a NumericEmbeddingManager passed to forward (positions: rotary,
ALiBi ... strategies; none here).  forward(input_query, input_key, input_value, numeric_embedding_manager, **kwargs)
returns (output, attention_probabilities).

Source: https://github.com/xomicsdatascience/AttentionSmithy (attention_smithy 1.3.0 on PyPI, the distribution's
Homepage), files attention_smithy/components/MultiheadAttention.py, attention_smithy/attention/
StandardAttentionMethod.py, attention_smithy/utils.py, attention_smithy/numeric_embeddings/NumericEmbeddingManager.py
and attention_smithy/numeric_embeddings/abstract_embedding_strategies.py as released in attention_smithy 1.3.0.
Licence: MIT (the wheel's METADATA classifier "License :: OSI Approved :: MIT License" and licenses/LICENSE in its
dist-info, "Copyright (c) 2024 Caleb Cranney").
Copied: verbatim from the PyPI wheel attention_smithy==1.3.0 (pip download --no-deps):
abstract_embedding_strategies.py lines 1-53 (whole), NumericEmbeddingManager.py lines 1-2 and 8-74,
utils.py lines 51-73 (create_causal_mask), StandardAttentionMethod.py lines 1-3 and 6-109 and MultiheadAttention.py
lines 1-3 and 6-115.  Left out: the package-internal imports (NumericEmbeddingManager.py lines 3-7,
StandardAttentionMethod.py lines 4-5, MultiheadAttention.py lines 4-5: the names are defined in this file), the
embedding strategies, the other attention methods, the layers and models.
ADDED: this docstring, the constants and the class AttentionSmithyCausalSelfAttention at the end, which builds the
layer as a causal self-attention (MultiheadAttention(embedding_dimension, number_of_heads,
StandardAttentionMethod(is_causal_masking=True)) with a NumericEmbeddingManager of no strategies) and calls it as the
package's DecoderLayer does its self-attention sublayer: query = key = value = x, padding_and_loss_attention_mask
None (the manager handed over with it), returning the output alone.
Truth: correct. Through the added class, out = mha_forward with query/key/value/out_weights and their biases, no
leak, to relative 1e-7 where sqrt(head_dimension) is not exact in float32 (head width 3: sqrt(3) rounded to float32),
exactly where it is (head width 4) (in _truth.py, with an independent per-head loop).
"""
from abc import ABC, abstractmethod
import torch
from torch import nn

class NumericEmbeddingStrategyBase(ABC, nn.Module):
    """
    Abstract base class for embedding strategies.
    Subclasses must implement the create_positional_or_custom_embedding method.
    Examples include sinusoidal and learned positional embeddings.
    """

    @abstractmethod
    def create_positional_or_custom_embedding(self, **kwargs) -> torch.Tensor:
        """
        Generate a positional or custom embedding based on the given input data.

        Returns:
            torch.Tensor: The output tensor represents positional or custom value encoding.
        """
        pass

class MatrixModificationStrategyBase(ABC, nn.Module):
    """
    Abstract base class for strategies that modify or transform matrices.
    Subclasses must implement the modify_matrices method.
    Examples include rotary positional embeddings.
    """

    @abstractmethod
    def modify_matrix(self, target_matrix, **kwargs) -> torch.Tensor:
        """
        Modify or transform the given matrices.

        Returns:
            Modified versions of the provided matrices.
        """
        pass

class AttentionBiasStrategyBase(ABC, nn.Module):
    """
    Abstract base class for strategies that generate bias tensors to be added to attention score matrices.
    Subclasses must implement the create_bias_tensor method.
    Examples include ALiBi positional embeddings.
    """

    @abstractmethod
    def create_bias_tensor(self, **kwargs) -> torch.Tensor:
        """
        Create a bias tensor that can be added to attention score matrices.

        Returns:
            A bias tensor of the same shape.
        """


import torch
from typing import Union
from torch import nn
from typing import Union, List

class NumericEmbeddingManager(nn.Module):
    """
    NumericEmbeddingManager keeps all numeric-based encoding in a single accessible location.

    Multiple positional embedding strategies have been proposed, and are often addressed
        interchangably. For example, you might use sinusoidal positional embeddings, or
        you might use rotary positional embeddings. It is easy to address this distinction
        in speech. However, in code, these positional embedding methods differ wildly in
        implementation. This is often the case with any numeric encoding, positional or
        otherwise.

    This class serves to promote a psuedo "interchangability" for experimentation
        with different numeric encoding types. The idea is to determine at the start of
        the program which numeric encodings the programmer wants to use, and they are
        implemented at their appropriate location. This is mostly used for position,
        but if the programmer wants to apply positional techniques to custom numeric
        values instead, that option is available as well.
    """
    def __init__(
        self,
        embedding_strategies: List[Union[NumericEmbeddingStrategyBase, MatrixModificationStrategyBase, AttentionBiasStrategyBase]]
    ) -> None:
        """
        Attributes:
            embedding_strategies:
                List[Union[NumericEmbeddingStrategyBase, MatrixModificationStrategyBase, AttentionBiasStrategyBase]]
                A list of numeric embedding strategies, primarily used for position encodings. This manager class
                will call the requisite strategies at the appropriate times.
        """
        super().__init__()
        for i, strategy in enumerate(embedding_strategies):
            setattr(self, f"embedding_strategy_{i}", strategy)

    def _get_strategies_by_type(self, strategy_type):
        """Helper function to find strategies of a specific type dynamically."""
        return [
            getattr(self, attr)
            for attr in dir(self)
            if attr.startswith("embedding_strategy_") and isinstance(getattr(self, attr), strategy_type)
        ]

    def create_positional_or_custom_embedding(self, **kwargs) -> torch.Tensor:
        output = torch.zeros_like(kwargs["token_embedding"])
        for embedding_strategy in self._get_strategies_by_type(NumericEmbeddingStrategyBase):
            output += embedding_strategy.create_positional_or_custom_embedding(**kwargs)
        return output

    def modify_matrix(self, target_matrix: torch.Tensor, **kwargs) -> torch.Tensor:
        for embedding_strategy in self._get_strategies_by_type(MatrixModificationStrategyBase):
            target_matrix = embedding_strategy.modify_matrix(target_matrix, **kwargs)
        return target_matrix

    def create_bias_tensor(self, **kwargs) -> torch.Tensor:
        output = torch.zeros_like(kwargs["attention_score_matrix"])
        for embedding_strategy in self._get_strategies_by_type(AttentionBiasStrategyBase):
            output += embedding_strategy.create_bias_tensor(**kwargs)
        return output









def create_causal_mask(
        sequence_length: int,
        device: torch.device = None
) -> torch.Tensor:
    """
    Creates a boolean tensor where values above the diagonal are False, all others
        are True. This creates a "causal" mask in attention that prevents tokens
        from receiving information from future tokens. This is used in things like
        GPT to optimize training. This is applied to attention_scores before softmax.
    NOTE: Causal masking only applies to self-attention, so sequence_length represents
        both query and key sequence lengths.

    Args:
        sequence_length (int): The dimensions of the square mask.
        device (torch.device, optional): Device on which to create the mask.

    Returns:
        subsequent_mask (torch.Tensor): A causal mask for attention scores, of shape
            (1, sequence_length, sequence_length).
    """
    attn_shape = (1, sequence_length, sequence_length)
    subsequent_mask = torch.triu(torch.ones(attn_shape, device=device), diagonal=1).type(torch.uint8)
    return subsequent_mask == 0


import torch
import torch.nn as nn
from torch.nn import functional as F

class StandardAttentionMethod(nn.Module):
    """
    A PyTorch module implementing the attention mechanism described in the "Attention Is All You Need" paper.
        The query, key and value matrices have already been multiplied by their respective weights before passing
        through this module.
    """

    def __init__(self,
                 dropout: float = 0.0,
                 is_causal_masking: bool = False):
        """
        Initializes the standard attention module.

        Args:
            dropout (float, optional): The dropout probability. Defaults to 0.0.
            is_causal_masking (bool, optional): When set to true, tokens can only be attended to by past tokens.
                This is most often seen decoder models like GPT. Defaults to false.
        """

        super().__init__()
        self.dropout_layer = nn.Dropout(dropout)
        self.is_causal_masking = is_causal_masking

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        numeric_embedding_manager: NumericEmbeddingManager,
        padding_and_loss_attention_mask: torch.Tensor,
        **kwargs,
    ):
        """
        Forward pass of the standard attention module.

        Args:
            q (torch.Tensor): The query tensor embedding, of shape (batch_size, num_heads, query_length, head_dim)
                Note that the embedding dimension can be calculated by multiplying (num_heads * head_dim)
            k (torch.Tensor): The key tensor embedding, of shape (batch_size, num_heads, kv_length, head_dim)
            v (torch.Tensor): The value tensor embedding, of shape (batch_size, num_heads, kv_length, head_dim)
            numeric_embedding_manager (NumericEmbeddingManager): Facade class that contains
                all numeric embedding methods (including position). Required to enable
                alibi embedding.
            padding_and_loss_attention_mask (torch.Tensor, optional): The padding attention mask, of shape
                (batch_size, kv_sequence_length).
                NOTE: tokens are often masked to pad samples to match the largest sample in a batch to keep
                them the same size. However, the loss function may also require masking tokens, as in BERT.
                That masking is included in this mask tensor.
        Returns:
            attention_outputs (torch.Tensor): The output tensor, of shape
                (batch_size, num_heads, query_length, head_dim).
            attention_probablities (torch.Tensor): The attention probablity matrix calculated during the
                attention method. Returned with the output for external analysis reasons. Of shape
                (batch_size, number_of_heads, query_length, kv_length).
        """
        attention_scores = self._calculate_query_by_key_attention_scores(q, k)
        attention_scores += numeric_embedding_manager.create_bias_tensor(attention_score_matrix=attention_scores, query=q, key=k, **kwargs)
        attention_scores = self._apply_masking_to_attention_scores(
            attention_scores, padding_and_loss_attention_mask
        )
        attention_probabilities = self._reduce_attention_scores_to_probabilities(attention_scores)
        attention_outputs = torch.matmul(attention_probabilities, v)
        return attention_outputs, attention_probabilities

    def _calculate_query_by_key_attention_scores(self, q, k):
        head_dimension = q.shape[-1]
        attention_scores = torch.matmul(q, k.transpose(-2, -1))
        attention_scores /= torch.sqrt(torch.tensor(head_dimension, dtype=torch.float32))
        return attention_scores

    def _apply_masking_to_attention_scores(
        self, attention_scores, padding_and_loss_attention_mask
    ):
        attention_scores = self._apply_diagonal_causal_masking_if_relevant(attention_scores)
        attention_scores = self._apply_padding_and_loss_attention_masking_if_relevant(
            attention_scores, padding_and_loss_attention_mask
        )
        return attention_scores

    def _apply_diagonal_causal_masking_if_relevant(self, attention_scores):
        if self.is_causal_masking:
            causal_mask = create_causal_mask(attention_scores.size(-1), device=attention_scores.device)
            attention_scores = attention_scores.masked_fill(causal_mask == 0, float("-inf"))
        return attention_scores

    def _apply_padding_and_loss_attention_masking_if_relevant(
        self, attention_scores, padding_and_loss_attention_mask
    ):

        if padding_and_loss_attention_mask is not None:
            batch_size_index = 0
            query_sequence_length_index = 2
            attention_scores = attention_scores.transpose(batch_size_index, query_sequence_length_index)
            attention_scores = attention_scores.masked_fill(
                padding_and_loss_attention_mask == 0, float("-inf")
            )
            attention_scores = attention_scores.transpose(batch_size_index, query_sequence_length_index)
        return attention_scores

    def _reduce_attention_scores_to_probabilities(self, attention_scores):
        attention_probabilities = F.softmax(attention_scores, dim=-1)
        attention_probabilities = self.dropout_layer(attention_probabilities)
        return attention_probabilities


import torch
import torch.nn as nn
from typing import Union

class MultiheadAttention(nn.Module):
    """
    A pytorch module that performs multihead attention as described in the "Attention
        Is All You Need" paper. Specifically, it multiplies the necessary tensors
        by their respective weights and reshapes them for the attention method. It
        also takes the outputs of the attention mechanism, reshapes them appropriately,
        and multiplies them by the output weight matrix before returning them.

    NOTE: The specific attention calculations of the original paper are found in the
        "StandardAttentionMethod" class. It is separated to allow for alternate attention
        mechanisms, such as Big Bird Attention, while keeping some of the foundational
        preprocessing steps (weight matrix multiplication, reshaping into heads etc.) to
        remain constant.
    """

    def __init__(self,
                 embedding_dimension: int,
                 number_of_heads: int,
                 attention_method: StandardAttentionMethod,
                 ) -> None:
        """
        Args:
            embedding_dimension (int): The token embedding dimension size.
                NOTE: embedding_dimension size MUST be divisible by number_of_heads.
            number_of_heads (int): The number of heads to split the embedding dimension
                into.
            attention_method: A class that performs attention scoring. Examples include
                the standard method as described in the original paper as well as big
                bird attention, which is a
        """

        super().__init__()
        self.embedding_dimension = embedding_dimension
        self.number_of_heads = number_of_heads
        self.attention_method = attention_method
        self.head_dimension = embedding_dimension // number_of_heads
        if self.head_dimension * number_of_heads != embedding_dimension:
            raise ValueError(f"embedding_dimension must be divisible by number_of_heads. embedding_dimension: {embedding_dimension}, number_of_heads: {number_of_heads}")

        self.query_weights = nn.Linear(embedding_dimension, embedding_dimension)
        self.key_weights = nn.Linear(embedding_dimension, embedding_dimension)
        self.value_weights = nn.Linear(embedding_dimension, embedding_dimension)
        self.out_weights = nn.Linear(embedding_dimension, embedding_dimension)

    def forward(self,
                input_query: torch.Tensor,
                input_key: torch.Tensor,
                input_value: torch.Tensor,
                numeric_embedding_manager: NumericEmbeddingManager,
                **kwargs
                ) -> torch.Tensor:
        """
        Args:
            input_query (torch.Tensor): The tokenized input meant to be analyzed as the
                "query" matrix described in the original paper, of shape
                (batch_size, query_sequence_length, embedding_dimension)
            input_key (torch.Tensor): The tokenized input meant to be analyzed as the
                "key" matrix described in the original paper, of shape
                (batch_size, kv_sequence_length, embedding_dimension)
            input_value (torch.Tensor): The tokenized input meant to be analyzed as the
                "value" matrix described in the original paper, of shape
                (batch_size, kv_sequence_length, embedding_dimension)
            numeric_embedding_manager (NumericEmbeddingManager): Manager class that contains
                all numeric embedding methods (including position). Required to enable
                rotary embedding.
        Returns:
            attention_outputs (torch.Tensor): The output tensor, of shape
                (batch_size, query_length, embedding_dimension).
            attention_probablities (torch.Tensor): The attention probablity matrix calculated during the
                attention method. Returned with the output for external analysis reasons. Of shape
                (batch_size, number_of_heads, query_length, kv_length).
        """

        query, key, value = self._prepare_matrices_for_attention(input_query, input_key, input_value)
        query = numeric_embedding_manager.modify_matrix(query, **kwargs)
        key = numeric_embedding_manager.modify_matrix(key, **kwargs)
        attention_output, attention_probabilities = self.attention_method(
            query, key, value, numeric_embedding_manager,
            input_query=input_query, input_key=input_key, input_value=input_value, **kwargs
        )
        attention_output = self._reshape_attention_output_to_match_query_shape(attention_output, input_query)
        output = self.out_weights(attention_output)
        return output, attention_probabilities

    def _prepare_matrices_for_attention(self, input_query, input_key, input_value):
        batch_size, query_sequence_length, embedding_dimension = input_query.shape
        if embedding_dimension != self.embedding_dimension:
            raise ValueError(f"Embedding dimension of input tensors does not match the embedding dimension established in the MultiheadAttention initialization. Tensor: {embedding_dimension}, attention: {self.embedding_dimension}")
        _, kv_sequence_length, _ = input_key.shape
        query = self.query_weights(input_query)
        key = self.key_weights(input_key)
        value = self.value_weights(input_value)
        query = query.view(batch_size, query_sequence_length, self.number_of_heads, self.head_dimension).transpose(
            1, 2
        )
        key = key.view(batch_size, kv_sequence_length, self.number_of_heads, self.head_dimension).transpose(1, 2)
        value = value.view(batch_size, kv_sequence_length, self.number_of_heads, self.head_dimension).transpose(1, 2)
        return query, key, value

    def _reshape_attention_output_to_match_query_shape(self, attention_output, input_query):
        attention_output = (
            attention_output.transpose(1, 2)
            .contiguous()
            .view(input_query.shape)
        )
        return attention_output





# --- added for the zoo: the constants and a causal self-attention as the package's DecoderLayer calls it ---
TARGET = "AttentionSmithyCausalSelfAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("spelled-out-names", "injected-attention-method", "causal-flag-on-method", "float32-sqrt-scale",
             "numeric-embedding-manager-argument", "tuple-output", "no-context-length")
FORWARD = ("x (via the added class; MultiheadAttention: input_query, input_key, input_value, "
           "numeric_embedding_manager, **kwargs)")
NOTES = ("AttentionSmithyCausalSelfAttention(embedding_dimension, number_of_heads, context_length=None) keeps "
         "MultiheadAttention(..., StandardAttentionMethod(is_causal_masking=True)) as self.attention")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("correct causal multi-head attention with biases, the causal flag on the injected scoring module, "
                    "a divisibility check (ValueError); the float32 square root of the head width is within the "
                    "float64 comparison's relative 1e-5")


class AttentionSmithyCausalSelfAttention(nn.Module):
    def __init__(self, embedding_dimension, number_of_heads, context_length=None):
        super().__init__()
        self.attention = MultiheadAttention(embedding_dimension, number_of_heads,
                                            StandardAttentionMethod(is_causal_masking=True))
        self.numeric_embedding_manager = NumericEmbeddingManager([])

    def forward(self, x):
        output, _ = self.attention(x, input_key=x, input_value=x,
                                   numeric_embedding_manager=self.numeric_embedding_manager,
                                   padding_and_loss_attention_mask=None)
        return output
# --- end of the added part ---
