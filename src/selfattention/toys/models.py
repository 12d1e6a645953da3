"""A tiny attention classifier for chapter 11: which series is this line from?

Token ids go through an embedding table, the fixed sinusoidal positional
encoding is added, the package's ``MultiHeadAttention`` mixes the tokens
(padding hidden from it by a key mask), the outputs of the real tokens are
averaged (masked mean pooling), and one linear layer gives a score (logit)
per class. The model returns the logits and the attention weights.
"""

from __future__ import annotations

import torch
from torch import nn

from .._checks import (
    check_bool_tensor,
    check_finite,
    check_flag,
    check_float_tensor,
    check_int64_tensor,
    check_positive_int,
    check_same_device,
)
from ..handmath.positional import sinusoidal_positional_encoding
from ..layers.multi_head import MultiHeadAttention

# What True means in the classifier's mask.
_REAL_TOKEN = "True = real token"


def _check_ids_and_mask(ids: torch.Tensor, mask: torch.Tensor) -> None:
    check_int64_tensor(ids, "ids")
    if ids.dim() != 2:
        raise ValueError(f"ids must have shape (B, T), got {tuple(ids.shape)}")
    check_bool_tensor(mask, "mask", _REAL_TOKEN)
    if mask.shape != ids.shape:
        raise ValueError(
            f"mask must have the shape of ids {tuple(ids.shape)}, got {tuple(mask.shape)}"
        )
    check_same_device(mask, "mask", ids.device, "ids")
    if not mask.any(dim=1).all():
        raise ValueError("every line needs at least one real token (a row of mask is all False)")


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Average ``values (B, T, d)`` over the real positions of ``mask (B, T)``.

    Padding positions (False) get no weight, so appending padding never
    changes the result. ``values`` must be a floating-point tensor without
    NaN or inf and ``mask`` a boolean one on the same device (else
    ``TypeError``/``ValueError`` naming the argument).

    Examples
    --------
    >>> values = torch.tensor([[[1.0], [3.0], [100.0]]])  # (1, 3, 1)
    >>> masked_mean(values, torch.tensor([[True, True, False]]))
    tensor([[2.]])
    """
    check_float_tensor(values, "values")
    check_bool_tensor(mask, "mask", _REAL_TOKEN)
    if values.dim() != 3 or mask.shape != values.shape[:2]:
        raise ValueError(
            f"values must be (B, T, d) and mask (B, T); got values {tuple(values.shape)}, "
            f"mask {tuple(mask.shape)}"
        )
    check_same_device(mask, "mask", values.device, "values")
    check_finite(values, "values")
    keep = mask.to(values.dtype).unsqueeze(-1)  # (B, T, 1)
    counts = keep.sum(dim=1).clamp(min=1.0)  # (B, 1)
    return (values * keep).sum(dim=1) / counts  # (B, d)


def pooled_attention(weights: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The weight each key gets in the pooled vector: the mean of ``weights`` over real queries.

    With mean pooling, the pooled output is ``sum_j a_j (v_j W_O) + b_O`` with
    ``a_j`` the average over the real queries ``i`` of ``A_ij`` (and over
    heads), so ``a (B, T_k)`` says exactly how much each token contributes.
    Each row of ``a`` sums to 1 and is zero on padding.

    Parameters
    ----------
    weights : torch.Tensor
        ``(B, h, T, T)`` attention weights, as returned by the model.
    mask : torch.Tensor
        ``(B, T)`` bool, True = real token.

    Raises
    ------
    TypeError
        If ``weights`` is not a floating-point tensor or ``mask`` not a
        boolean one.
    ValueError
        If the shapes do not fit, the two are on different devices, or
        ``weights`` holds NaN or inf.

    Examples
    --------
    >>> weights = torch.tensor([[[[0.5, 0.5], [1.0, 0.0]]]])  # (1, 1, 2, 2)
    >>> pooled_attention(weights, torch.tensor([[True, False]]))
    tensor([[0.5000, 0.5000]])
    """
    check_float_tensor(weights, "weights")
    if weights.dim() != 4 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(f"weights must have shape (B, h, T, T), got {tuple(weights.shape)}")
    check_bool_tensor(mask, "mask", _REAL_TOKEN)
    if mask.shape != (weights.shape[0], weights.shape[-1]):
        raise ValueError(
            f"mask must be a bool (B, T) = {(weights.shape[0], weights.shape[-1])} tensor, "
            f"got {tuple(mask.shape)} {mask.dtype}"
        )
    check_same_device(mask, "mask", weights.device, "weights")
    check_finite(weights, "weights")
    per_query = weights.mean(dim=1)  # (B, T_q, T_k), averaged over heads
    return masked_mean(per_query, mask)  # (B, T_k): averaged over real queries


class AttentionClassifier(nn.Module):
    """Embedding + sinusoidal positions + attention + masked mean pooling + linear.

    Parameters
    ----------
    vocab_size : int
        Number of token ids; id 0 is padding.
    num_classes : int
        Number of labels.
    d_model : int
        Width of every token vector.
    num_heads : int
        Attention heads; must divide ``d_model``.
    max_len : int
        Longest line the positional table covers.
    positional : bool
        Add the sinusoidal positional encoding (turn off to see what it does).
    freeze_embedding : bool
        Keep the embedding table at its random initial values (no gradient).
        Every word then stays a fixed random vector, so the model cannot
        learn to shrink the filler words to zero and must use attention.

    Raises
    ------
    TypeError
        If a size is not an int or a flag not a bool.
    ValueError
        If a size is not positive or ``num_heads`` does not divide
        ``d_model``; nothing is built (torch's random state is untouched).

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> model = AttentionClassifier(vocab_size=10, num_classes=3, d_model=8)
    >>> ids = torch.tensor([[4, 2, 7], [5, 1, 0]])  # (B, T) = (2, 3)
    >>> mask = ids != 0                             # (B, T) True = real token
    >>> logits, weights = model(ids, mask)
    >>> tuple(logits.shape), tuple(weights.shape)
    ((2, 3), (2, 1, 3, 3))
    """

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        d_model: int = 16,
        num_heads: int = 1,
        max_len: int = 32,
        positional: bool = True,
        freeze_embedding: bool = False,
    ) -> None:
        super().__init__()
        # Every argument is checked before any layer is built (and draws from torch's RNG).
        vocab_size = check_positive_int(vocab_size, "vocab_size")
        num_classes = check_positive_int(num_classes, "num_classes")
        d_model = check_positive_int(d_model, "d_model")
        num_heads = check_positive_int(num_heads, "num_heads")
        max_len = check_positive_int(max_len, "max_len")
        positional = check_flag(positional, "positional")
        freeze_embedding = check_flag(freeze_embedding, "freeze_embedding")
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.vocab_size, self.num_classes, self.max_len = vocab_size, num_classes, max_len
        self.positional = positional
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=0)
        self.embedding.weight.requires_grad_(not freeze_embedding)
        table = sinusoidal_positional_encoding(self.max_len, d_model)  # (max_len, d_model)
        self.register_buffer("positions", torch.from_numpy(table).to(torch.get_default_dtype()))
        self.attention = MultiHeadAttention(d_model, num_heads)
        self.classifier = nn.Linear(d_model, num_classes)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Classify a padded batch.

        Parameters
        ----------
        ids : torch.Tensor
            ``(B, T)`` int64 token ids.
        mask : torch.Tensor
            ``(B, T)`` bool, True = real token, False = padding.

        Returns
        -------
        logits : torch.Tensor
            ``(B, num_classes)``, one score per class.
        weights : torch.Tensor
            ``(B, num_heads, T, T)`` attention weights (zero on padded keys).

        Raises
        ------
        TypeError
            If ``ids`` is not an int64 tensor or ``mask`` not a bool tensor.
        ValueError
            If the shapes differ or are not ``(B, T)``, ``T > max_len``, an id
            lies outside ``[0, vocab_size)``, a line has no real token, or a
            tensor is on another device than the model (or on ``meta``).
        """
        _check_ids_and_mask(ids, mask)
        check_same_device(ids, "ids", self.embedding.weight.device, "the model's parameters")
        length = ids.shape[1]
        if length > self.max_len:
            raise ValueError(f"ids has length {length}, longer than max_len={self.max_len}")
        if int(ids.min()) < 0 or int(ids.max()) >= self.vocab_size:
            raise ValueError(
                f"ids must lie in [0, {self.vocab_size}), got values from "
                f"{int(ids.min())} to {int(ids.max())}"
            )
        x = self.embedding(ids)  # (B, T, d_model)
        if self.positional:
            x = x + self.positions[:length].to(x.dtype)  # (T, d_model) broadcast
        # Padded keys are hidden from every query: mask (B, T) -> (B, 1, 1, T).
        out, weights = self.attention(x, mask=mask[:, None, None, :])  # (B, T, d), (B, h, T, T)
        pooled = masked_mean(out, mask)  # (B, d_model): real queries only
        return self.classifier(pooled), weights
