"""Single-head self-attention as a torch module (chapter 8 builds it)."""

from __future__ import annotations

import torch
from torch import nn

from .._checks import check_finite, check_flag, check_positive_int
from .attention_torch import _check_output_finite, attend, check_model_input, combine_masks


class SelfAttention(nn.Module):
    """One attention head: project to Q, K, V, attend, project back.

    ``q_proj`` and ``k_proj`` map ``d_model -> d_k``, ``v_proj`` maps
    ``d_model -> d_v`` and ``out_proj`` maps ``d_v -> d_model`` (all
    ``torch.nn.Linear``). The attention itself is
    ``softmax(Q K^T / sqrt(d_k)) V``, written out by hand.

    Parameters
    ----------
    d_model : int
        Width of the input and output tokens; positive.
    d_k : int, optional
        Size of each query and key; defaults to ``d_model``.
    d_v : int, optional
        Size of each value; defaults to ``d_k``.
    bias : bool, default True
        Whether the four linear layers have biases.

    Raises
    ------
    TypeError
        If ``d_model``, ``d_k`` or ``d_v`` is not an int, or ``bias`` is not
        a bool.
    ValueError
        If one of them is not positive.

    Examples
    --------
    >>> import torch
    >>> from selfattention import SelfAttention
    >>> _ = torch.manual_seed(0)
    >>> attention = SelfAttention(d_model=4, d_k=2)
    >>> attention.d_v  # defaults to d_k
    2
    >>> x = torch.randn(2, 3, 4)  # (B, T, d_model)
    >>> output, weights = attention(x, causal=True)
    >>> tuple(output.shape), tuple(weights.shape)
    ((2, 3, 4), (2, 3, 3))
    >>> bool((weights.triu(diagonal=1) == 0).all())  # no query sees a later key
    True
    """

    def __init__(
        self, d_model: int, d_k: int | None = None, d_v: int | None = None, bias: bool = True
    ) -> None:
        super().__init__()
        self.d_model = check_positive_int(d_model, "d_model")
        self.d_k = check_positive_int(d_model if d_k is None else d_k, "d_k")
        self.d_v = check_positive_int(self.d_k if d_v is None else d_v, "d_v")
        bias = check_flag(bias, "bias")
        self.q_proj = nn.Linear(self.d_model, self.d_k, bias=bias)
        self.k_proj = nn.Linear(self.d_model, self.d_k, bias=bias)
        self.v_proj = nn.Linear(self.d_model, self.d_v, bias=bias)
        self.out_proj = nn.Linear(self.d_v, self.d_model, bias=bias)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, causal: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend over ``x``: every token is a query, a key and a value.

        Parameters
        ----------
        x : torch.Tensor, shape ``(B, T, d_model)`` or ``(T, d_model)``
            Floating-point tokens.
        mask : torch.Tensor or numpy.ndarray of bool, optional
            Broadcastable to the scores ``(B, T, T)`` (or ``(T, T)``);
            True = may attend. A numpy mask is converted with
            ``torch.from_numpy``.
        causal : bool, default False
            If True, token ``i`` sees only tokens ``j <= i``; combined with
            ``mask``.

        Returns
        -------
        output : torch.Tensor
            Shaped like ``x``.
        weights : torch.Tensor, shape ``(B, T, T)`` or ``(T, T)``
            The attention weights; a row with nothing to attend to is all 0.

        Raises
        ------
        TypeError
            If ``x`` is not a floating-point tensor of the module's dtype,
            ``mask`` is not boolean, or ``causal`` is not a bool.
        ValueError
            If ``x`` is not 2-D or 3-D, its last size is not ``d_model``, it
            holds NaN or inf or is on another device than the module,
            ``mask`` does not broadcast to the scores, or the output would
            not be finite (a parameter holds NaN or inf, or the scores
            overflow the dtype).

        Examples
        --------
        >>> import torch
        >>> from selfattention import SelfAttention
        >>> attention = SelfAttention(d_model=4)
        >>> output, weights = attention(torch.randn(3, 4))  # (T, d_model)
        >>> tuple(output.shape), tuple(weights.shape)
        ((3, 4), (3, 3))
        """
        check_model_input(x, "x", self.d_model, ranks=(3, 2), like=self.q_proj.weight)
        check_finite(x, "x")
        t = x.shape[-2]
        keep = combine_masks(mask, causal, tuple(x.shape[:-2]) + (t, t), x.device)
        query = self.q_proj(x)  # (..., T, d_k)
        key = self.k_proj(x)  # (..., T, d_k)
        value = self.v_proj(x)  # (..., T, d_v)
        context, weights = attend(query, key, value, keep)  # (..., T, d_v), (..., T, T)
        output = self.out_proj(context)  # (..., T, d_model)
        _check_output_finite(output, self, "x", "output")
        return output, weights
