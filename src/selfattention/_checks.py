"""The package's one input-checking layer, shared by the numpy functions and the torch modules.

Every public function and module of the package checks its arguments here,
so the same mistake gets the same message everywhere. Each message names the
argument and shows what it got (its type and value, or its shape and dtype).
The rules, written once (the API reference's introduction repeats them):

- **Types**: a wrong type raises ``TypeError``; a wrong shape, size, range,
  device or value raises ``ValueError``.
- **Flags** (``causal``, ``bias``) take ``True`` or ``False`` only (a Python
  or numpy bool): ``1``, ``"yes"`` and ``None`` are refused.
- **Numbers** are checked for type first (``dropout="0.1"`` is a
  ``TypeError`` naming ``dropout``), then for range; bools are not numbers.
- **Non-finite input**: arrays and tensors of numbers holding NaN or inf
  raise ``ValueError`` naming the argument. Two arguments are masks, not
  numbers, and take ``-inf`` by definition: the scores of ``softmax`` (where
  ``-inf`` means weight 0) and the additive mask of ``from_additive``.
- **Agreement**: tensors that are combined must share one dtype
  (``TypeError``) and one device (``ValueError``), with each other, with a
  module's parameters and with a key/value cache. Nothing is converted
  silently, because a conversion would change precision or copy data. The
  ``meta`` device is refused: it holds no values to compute with.
- **Masks** are boolean, True = may attend. Every consumer takes a mask as a
  numpy array, a list or a torch tensor, and converts it losslessly to what
  it computes with (a numpy mask becomes a tensor on the scores' device).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

Shape = tuple[int, ...]

#: The hint a boolean-mask error ends with: how to convert the other conventions.
MASK_HINT = (
    "convert a 0/1 mask with (mask != 0), an additive mask with from_additive, "
    "or nn.MultiheadAttention's True = blocked mask with ~mask"
)


def describe(value: Any) -> str:
    """A short description of ``value`` for an error message: its type, and its value or shape.

    Examples
    --------
    >>> describe("yes"), describe(1)
    ("str 'yes'", 'int 1')
    >>> describe(np.zeros((2, 3)))
    'ndarray of shape (2, 3) and dtype float64'
    >>> import torch
    >>> describe(torch.zeros(2, dtype=torch.int64))
    'Tensor of shape (2,) and dtype torch.int64 on cpu'
    """
    if isinstance(value, torch.Tensor):
        return (
            f"{type(value).__name__} of shape {tuple(value.shape)} and dtype {value.dtype} "
            f"on {value.device}"
        )
    if isinstance(value, np.ndarray):
        return f"ndarray of shape {value.shape} and dtype {value.dtype}"
    if value is None or isinstance(value, (bool, int, float, complex, str, np.generic)):
        text = repr(value)
        text = text if len(text) <= 40 else text[:37] + "..."
        return f"{type(value).__name__} {text}"
    return type(value).__name__


# ---------------------------------------------------------------------------
# Flags and numbers
# ---------------------------------------------------------------------------


def check_flag(value: Any, name: str) -> bool:
    """Return ``value`` as a Python bool, refusing anything that is not ``True`` or ``False``.

    ``numpy.bool_`` is accepted; ``1``, ``"yes"``, ``None`` and tensors are not,
    so a misplaced positional argument cannot switch a feature on silently.

    Parameters
    ----------
    value : bool
        The flag.
    name : str
        The argument's name, used in the error message.

    Returns
    -------
    bool

    Raises
    ------
    TypeError
        If ``value`` is not a bool.

    Examples
    --------
    >>> check_flag(True, "causal")
    True
    >>> check_flag(1, "causal")
    Traceback (most recent call last):
        ...
    TypeError: causal must be a bool, got int 1
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be a bool, got {describe(value)}")


def _is_real_number(value: Any) -> bool:
    return not isinstance(value, (bool, np.bool_)) and isinstance(
        value, (int, float, np.integer, np.floating)
    )


def check_real(
    value: Any,
    name: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    kind: str = "a real number",
) -> float:
    """Return ``value`` as a finite float after checking its type and range.

    Parameters
    ----------
    value : int or float
        A Python or numpy real number; bools, strings and tensors are refused.
    name : str
        The argument's name, used in error messages.
    low, high : float, optional
        The bounds; ``low_open``/``high_open`` exclude them.
    kind : str, default "a real number"
        What the type error says ``value`` must be.

    Returns
    -------
    float

    Raises
    ------
    TypeError
        If ``value`` is not a real number.
    ValueError
        If ``value`` is NaN, infinite or out of range.

    Examples
    --------
    >>> check_real(0.1, "dropout", low=0, high=1, high_open=True)
    0.1
    >>> check_real("0.1", "dropout", low=0, high=1, high_open=True)
    Traceback (most recent call last):
        ...
    TypeError: dropout must be a real number, got str '0.1'
    >>> check_real(1.0, "dropout", low=0, high=1, high_open=True)
    Traceback (most recent call last):
        ...
    ValueError: dropout must be in [0, 1), got 1.0
    """
    if not _is_real_number(value):
        raise TypeError(f"{name} must be {kind}, got {describe(value)}")
    number = float(value)

    words = {(0.0, ">"): "positive", (0.0, ">="): "non-negative", (0.0, "<"): "negative"}
    if low is not None and high is not None:
        opening, closing = "(" if low_open else "[", ")" if high_open else "]"
        bound = f"in {opening}{low:g}, {high:g}{closing}"  # NaN and inf are outside
    elif low is not None:
        sign = ">" if low_open else ">="
        bound = f"{words.get((low, sign), f'{sign} {low:g}')} and finite"
    elif high is not None:
        sign = "<" if high_open else "<="
        bound = f"{words.get((high, sign), f'{sign} {high:g}')} and finite"
    else:
        bound = "finite"
    ok = bool(np.isfinite(number))
    if ok and low is not None:
        ok = number > low if low_open else number >= low
    if ok and high is not None:
        ok = number < high if high_open else number <= high
    if not ok:
        raise ValueError(f"{name} must be {bound}, got {value!r}")
    return number


def check_int(value: Any, name: str) -> int:
    """Return ``value`` as an int (any sign), refusing bools, floats and strings.

    Examples
    --------
    >>> check_int(-1, "axis")
    -1
    >>> check_int(1.0, "axis")
    Traceback (most recent call last):
        ...
    TypeError: axis must be an int, got float 1.0
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {describe(value)}")
    return int(value)


def check_positive_int(value: Any, name: str, allow_zero: bool = False) -> int:
    """Return ``value`` as an int after checking its type and sign.

    Parameters
    ----------
    value : int
        The number to check (a Python or numpy integer, not a bool).
    name : str
        The argument's name, used in error messages.
    allow_zero : bool, default False
        Whether 0 is allowed.

    Returns
    -------
    int
        ``value`` as a Python int.

    Raises
    ------
    TypeError
        If ``value`` is not an integer, or is a bool.
    ValueError
        If ``value`` is negative, or 0 when ``allow_zero`` is False.

    Examples
    --------
    >>> check_positive_int(3, "d_model")
    3
    >>> check_positive_int(0, "d_model")
    Traceback (most recent call last):
        ...
    ValueError: d_model must be positive, got 0
    """
    number = check_int(value, name)
    if number < 0 or (number == 0 and not allow_zero):
        bound = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{name} must be {bound}, got {number}")
    return number


def check_callable(value: Any, name: str, *, optional: bool = False) -> Any:
    """Return ``value`` unchanged if it is callable (or None, with ``optional``).

    Examples
    --------
    >>> check_callable(print, "log") is print
    True
    >>> check_callable("print", "log", optional=True)
    Traceback (most recent call last):
        ...
    TypeError: log must be callable or None, got str 'print'
    """
    if (optional and value is None) or callable(value):
        return value
    what = "callable or None" if optional else "callable"
    raise TypeError(f"{name} must be {what}, got {describe(value)}")


# ---------------------------------------------------------------------------
# Non-finite values
# ---------------------------------------------------------------------------


def all_finite(values: Any) -> bool:
    """Whether every number in ``values`` (numpy array or torch tensor) is finite.

    The fast path is one sum: a NaN or inf anywhere makes the sum NaN or inf,
    so a finite sum proves every entry finite, without allocating a mask the
    size of the input (about 15 times faster than ``isfinite(x).all()`` on a
    CPU). Only a sum that is not finite (bad input, or a sum that overflows)
    pays for the entry-by-entry check.

    Examples
    --------
    >>> all_finite(np.array([1.0, 2.0])), all_finite(np.array([1.0, np.inf]))
    (True, False)
    """
    if isinstance(values, torch.Tensor):
        if not (values.is_floating_point() or values.is_complex()):
            return True
        values = values.detach()  # the check is not part of the autograd graph
        low_precision = values.dtype in (torch.float16, torch.bfloat16)
        total = values.sum(dtype=torch.float32) if low_precision else values.sum()
        return bool(torch.isfinite(total)) or bool(torch.isfinite(values).all())
    array = np.asarray(values)
    if not np.issubdtype(array.dtype, np.inexact):
        return True
    with np.errstate(all="ignore"):  # inf - inf in the sum is expected, not a warning
        total = array.sum()
    return bool(np.isfinite(total)) or bool(np.isfinite(array).all())


def check_finite(values: Any, name: str, allow_neg_inf: bool = False) -> None:
    """Raise ``ValueError`` naming ``name`` if ``values`` holds NaN or inf.

    The package's one non-finite policy: an input of numbers (numpy array or
    torch tensor) with NaN or inf is refused, so no output holds a NaN that
    the inputs did not. ``allow_neg_inf`` lets ``-inf`` through, for the two
    arguments where it means "blocked".

    Examples
    --------
    >>> check_finite(np.array([1.0, np.nan]), "query")
    Traceback (most recent call last):
        ...
    ValueError: query contains NaN (shape (2,)); query must be finite, without NaN or inf
    >>> check_finite(np.array([0.0, -np.inf]), "x", allow_neg_inf=True)
    """
    if isinstance(values, torch.Tensor):
        if not (values.is_floating_point() or values.is_complex()):
            return
        if values.device.type == "meta":
            raise ValueError(
                f"{name} is on the meta device, which holds no values ({describe(values)})"
            )
        if all_finite(values):
            return
        finite = torch.isfinite(values)
        bad = values[~finite].detach().cpu().numpy()  # (n_bad,) the entries that are not finite
    else:
        array = np.asarray(values)
        if not np.issubdtype(array.dtype, np.inexact) or all_finite(array):
            return
        finite = np.isfinite(array)
        bad = array[~finite]  # (n_bad,) the entries that are not finite
    has_nan = bool(np.isnan(bad).any())
    has_pos_inf = bool((bad == np.inf).any())
    has_neg_inf = bool((bad == -np.inf).any())
    if allow_neg_inf and not (has_nan or has_pos_inf):
        return
    if allow_neg_inf:
        found = [word for word, here in (("NaN", has_nan), ("+inf", has_pos_inf)) if here]
        rule = "without NaN or +inf (-inf means blocked)"
    else:
        found = [
            word
            for word, here in (
                ("NaN", has_nan),
                ("inf", not has_nan or has_pos_inf or has_neg_inf),
            )
            if here
        ]
        rule = "without NaN or inf"
    raise ValueError(
        f"{name} contains {' and '.join(found)} (shape {tuple(values.shape)}); "
        f"{name} must be finite, {rule}"
    )


# ---------------------------------------------------------------------------
# numpy arrays
# ---------------------------------------------------------------------------


def _tensor_to_numpy(tensor: torch.Tensor, name: str) -> np.ndarray:
    """A CPU numpy copy (or view) of ``tensor``; the meta device holds no values."""
    if tensor.device.type == "meta":
        raise ValueError(
            f"{name} is on the meta device, which holds no values ({describe(tensor)})"
        )
    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:  # numpy has no bfloat16; float32 holds it exactly
        tensor = tensor.float()
    return tensor.numpy()


def as_float_array(
    value: Any, name: str, *, finite: bool = False, allow_neg_inf: bool = False
) -> np.ndarray:
    """Return ``value`` as a floating numpy array.

    Integer inputs are promoted to float64; float16, float32 and float64 are
    kept as they are. Booleans are refused: a mask passed as data is a bug.
    A CPU torch tensor is read as an array (the result has no autograd).

    Parameters
    ----------
    value : array_like
        Real numbers of any shape.
    name : str
        The argument's name, used in error messages.
    finite : bool, default False
        Refuse inf as well as NaN (NaN is always refused).
    allow_neg_inf : bool, default False
        With ``finite``, let ``-inf`` through (softmax's scores, where it
        means weight 0).

    Returns
    -------
    numpy.ndarray
        A floating-point array (a view of ``value`` when no conversion is needed).

    Raises
    ------
    TypeError
        If ``value`` is not array-like or does not hold real, non-boolean numbers.
    ValueError
        If ``value`` contains NaN (or inf, with ``finite=True``), or is a
        tensor on the meta device.

    Examples
    --------
    >>> as_float_array([1, 2], "x").dtype
    dtype('float64')
    >>> as_float_array([True], "x")
    Traceback (most recent call last):
        ...
    TypeError: x must hold real numbers, got dtype bool
    """
    if isinstance(value, torch.Tensor):
        array = _tensor_to_numpy(value, name)
    else:
        try:
            array = np.asarray(value)
        except Exception as exc:  # ragged lists and the like: numpy raises many kinds
            raise TypeError(
                f"{name} must be an array of real numbers, got {describe(value)} "
                f"that numpy cannot read as one ({exc})"
            ) from None
    if array.dtype == np.bool_ or not (
        np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)
    ):
        raise TypeError(f"{name} must hold real numbers, got dtype {array.dtype}")
    if np.issubdtype(array.dtype, np.integer):
        array = array.astype(np.float64)
    if finite:
        check_finite(array, name, allow_neg_inf=allow_neg_inf)
    elif np.isnan(array).any():
        check_finite(array, name)  # the same message for NaN everywhere
    return array


# ---------------------------------------------------------------------------
# Masks: the package's one boolean-mask validator
# ---------------------------------------------------------------------------


def as_bool_mask(
    mask: Any,
    name: str = "mask",
    *,
    to: str = "numpy",
    device: torch.device | str | None = None,
    hint: str = MASK_HINT,
) -> Any:
    """Check that ``mask`` is boolean (True = may attend) and return it as ``to`` asks.

    Every mask of the package goes through this one function: the numpy
    functions, the torch modules and the mask converters.

    Parameters
    ----------
    mask : numpy array, list or torch tensor of bool
        The mask. 0/1, float and additive masks are refused, with ``hint``
        saying how to convert them.
    name : str, default "mask"
        The argument's name, used in error messages.
    to : {"numpy", "torch", "same"}, default "numpy"
        Return a numpy array; a torch tensor on ``device`` (a numpy mask is
        converted with ``torch.from_numpy``, a tensor is moved); or the same
        library as ``mask`` (for the converters, which return what they get).
    device : torch.device or str, optional
        Where ``to="torch"`` puts the mask; defaults to where it is.
    hint : str
        The end of the type error's message.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        Boolean, the same shape as ``mask``.

    Raises
    ------
    TypeError
        If ``mask`` is not boolean (its message names ``name``, the dtype and
        shape it got, and how to convert).
    ValueError
        If ``mask`` is a tensor on the meta device.

    Examples
    --------
    >>> as_bool_mask([True, False]).tolist()
    [True, False]
    >>> as_bool_mask(np.array([True]), to="torch")
    tensor([True])
    >>> as_bool_mask([1, 0])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    TypeError: mask must be boolean (True = may attend), got dtype int64 with shape (2,); ...
    """
    if to not in ("numpy", "torch", "same"):
        raise ValueError(f"to must be 'numpy', 'torch' or 'same', got {to!r}")
    if isinstance(mask, torch.Tensor):
        if mask.device.type == "meta":
            raise ValueError(
                f"{name} is on the meta device, which holds no values ({describe(mask)})"
            )
        if mask.dtype != torch.bool:
            raise TypeError(
                f"{name} must be boolean (True = may attend), got dtype {mask.dtype} "
                f"with shape {tuple(mask.shape)}; {hint}"
            )
        if to == "numpy":
            return mask.detach().cpu().numpy()
        if to == "torch" and device is not None:
            return mask.to(device)
        return mask
    try:
        array = np.asarray(mask)
    except Exception as exc:  # ragged lists: numpy raises many kinds
        raise TypeError(
            f"{name} must be a boolean array or tensor, got {describe(mask)} "
            f"that numpy cannot read as one ({exc})"
        ) from None
    if array.dtype != np.bool_:
        raise TypeError(
            f"{name} must be boolean (True = may attend), got dtype {array.dtype} "
            f"with shape {array.shape}; {hint}"
        )
    if to == "torch":
        return torch.from_numpy(np.ascontiguousarray(array)).to(device or "cpu")
    return array


# ---------------------------------------------------------------------------
# torch tensors
# ---------------------------------------------------------------------------


def check_float_tensor(tensor: Any, name: str) -> torch.Tensor:
    """Raise unless ``tensor`` is a floating-point torch tensor with values (not ``meta``).

    Returns ``tensor`` unchanged. A numpy array gets a ``TypeError`` that says
    how to convert it.

    Examples
    --------
    >>> import torch
    >>> check_float_tensor(torch.tensor([1, 2]), "x")
    Traceback (most recent call last):
        ...
    TypeError: x must be a floating-point tensor, got dtype torch.int64 (shape (2,))
    """
    if not isinstance(tensor, torch.Tensor):
        how = (
            f"; convert it with torch.from_numpy({name})" if isinstance(tensor, np.ndarray) else ""
        )
        raise TypeError(f"{name} must be a torch.Tensor, got {describe(tensor)}{how}")
    if not tensor.is_floating_point():
        raise TypeError(
            f"{name} must be a floating-point tensor, got dtype {tensor.dtype} "
            f"(shape {tuple(tensor.shape)})"
        )
    if tensor.device.type == "meta":
        raise ValueError(
            f"{name} is on the meta device, which holds no values ({describe(tensor)})"
        )
    return tensor


def check_int64_tensor(tensor: Any, name: str) -> torch.Tensor:
    """Raise unless ``tensor`` is an int64 torch tensor with values (not ``meta``).

    For token ids and other indices. Returns ``tensor`` unchanged; a numpy
    array gets a ``TypeError`` that says how to convert it.

    Examples
    --------
    >>> import torch
    >>> check_int64_tensor(torch.tensor([1.0]), "ids")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    TypeError: ids must be an int64 torch.Tensor, got Tensor of shape (1,) and dtype ...
    """
    if not isinstance(tensor, torch.Tensor) or tensor.dtype != torch.int64:
        how = ""
        if isinstance(tensor, np.ndarray):
            how = f"; convert it with torch.from_numpy({name}).long()"
        raise TypeError(f"{name} must be an int64 torch.Tensor, got {describe(tensor)}{how}")
    if tensor.device.type == "meta":
        raise ValueError(
            f"{name} is on the meta device, which holds no values ({describe(tensor)})"
        )
    return tensor


def check_bool_tensor(tensor: Any, name: str, meaning: str) -> torch.Tensor:
    """Raise unless ``tensor`` is a boolean torch tensor with values (not ``meta``).

    For boolean arguments that are not attention masks (``meaning`` says what
    True means, e.g. "True = real token"); attention masks go through
    :func:`as_bool_mask`. Returns ``tensor`` unchanged.

    Examples
    --------
    >>> import torch
    >>> check_bool_tensor(torch.ones(2), "copyable", "True = copyable")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    TypeError: copyable must be a bool torch.Tensor (True = copyable), got Tensor of shape (2,) ...
    """
    if not isinstance(tensor, torch.Tensor) or tensor.dtype != torch.bool:
        raise TypeError(f"{name} must be a bool torch.Tensor ({meaning}), got {describe(tensor)}")
    if tensor.device.type == "meta":
        raise ValueError(
            f"{name} is on the meta device, which holds no values ({describe(tensor)})"
        )
    return tensor


def check_float_dtype(dtype: Any, name: str = "dtype") -> torch.dtype:
    """Return ``dtype`` if it is a floating-point ``torch.dtype``.

    Examples
    --------
    >>> import torch
    >>> check_float_dtype(torch.float32)
    torch.float32
    >>> check_float_dtype("float32")
    Traceback (most recent call last):
        ...
    TypeError: dtype must be a floating-point torch.dtype such as torch.float64, got str 'float32'
    """
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        shown = f"torch.dtype {dtype}" if isinstance(dtype, torch.dtype) else describe(dtype)
        raise TypeError(
            f"{name} must be a floating-point torch.dtype such as torch.float64, got {shown}"
        )
    return dtype


def check_same_device(
    tensor: torch.Tensor, name: str, device: torch.device | str, owner: str
) -> None:
    """Raise ``ValueError`` unless ``tensor`` is on ``device`` (``owner``'s device).

    Examples
    --------
    >>> import torch
    >>> check_same_device(torch.zeros(2), "ids", "cpu", "the model's parameters")
    """
    device = torch.device(device)
    if tensor.device != device:
        raise ValueError(
            f"{name} is on device {tensor.device}, {owner} on {device}; move one of them, "
            f"e.g. {name}.to('{device}')"
        )


def check_same_dtype_device(
    tensor: torch.Tensor, name: str, dtype: torch.dtype, device: torch.device, owner: str
) -> None:
    """Raise unless ``tensor`` has ``dtype`` (``TypeError``) and is on ``device`` (``ValueError``).

    ``owner`` names whose dtype and device they are ("the module's
    parameters", "key", "the cache"); the message names both and the fix.

    Examples
    --------
    >>> import torch
    >>> check_same_dtype_device(torch.zeros(2, dtype=torch.float64), "x",
    ...                         torch.float32, torch.device("cpu"), "the module's parameters")
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    TypeError: x has dtype torch.float64, the module's parameters torch.float32; ...
    """
    if tensor.dtype != dtype:
        raise TypeError(
            f"{name} has dtype {tensor.dtype}, {owner} {dtype}; convert one of them, "
            f"e.g. {name}.to({dtype})"
        )
    check_same_device(tensor, name, device, owner)


def check_query_key_value_agree(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor
) -> None:
    """Raise unless query, key and value share one dtype (TypeError) and device (ValueError).

    Examples
    --------
    >>> import torch
    >>> check_query_key_value_agree(torch.zeros(2), torch.zeros(2), torch.zeros(2))
    >>> check_query_key_value_agree(torch.zeros(2), torch.zeros(2), torch.zeros(2).double())
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    TypeError: query, key and value must share one dtype, got torch.float32, ...
    """
    if not (query.dtype == key.dtype == value.dtype):
        raise TypeError(
            f"query, key and value must share one dtype, got {query.dtype}, "
            f"{key.dtype} and {value.dtype}"
        )
    if not (query.device == key.device == value.device):
        raise ValueError(
            f"query, key and value must be on one device, got {query.device}, "
            f"{key.device} and {value.device}"
        )


# ---------------------------------------------------------------------------
# Shapes
# ---------------------------------------------------------------------------


def check_rank(shape: Sequence[int], name: str, minimum: int = 2) -> None:
    """Raise ``ValueError`` unless ``shape`` has at least ``minimum`` dimensions.

    Parameters
    ----------
    shape : sequence of int
        The shape to check.
    name : str
        The argument's name, used in the error message.
    minimum : int, default 2
        The smallest allowed number of dimensions.

    Raises
    ------
    ValueError
        If ``len(shape) < minimum``.

    Examples
    --------
    >>> check_rank((3, 4), "query")
    >>> check_rank((4,), "query")
    Traceback (most recent call last):
        ...
    ValueError: query must have at least 2 dimensions, got shape (4,)
    """
    if len(shape) < minimum:
        raise ValueError(
            f"{name} must have at least {minimum} dimensions, got shape {tuple(shape)}"
        )


def broadcast_shapes(*named: tuple[str, Sequence[int]]) -> Shape:
    """Broadcast several ``(name, shape)`` pairs, naming them all on failure.

    Parameters
    ----------
    *named : tuple of (str, sequence of int)
        The shapes to broadcast, each with the name of its argument.

    Returns
    -------
    tuple of int
        The broadcast shape.

    Raises
    ------
    ValueError
        If the shapes do not broadcast; the message lists every pair.

    Examples
    --------
    >>> broadcast_shapes(("a", (2, 1)), ("b", (3,)))
    (2, 3)
    """
    try:
        return tuple(np.broadcast_shapes(*(tuple(shape) for _, shape in named)))
    except ValueError:
        listing = ", ".join(f"{name} {tuple(shape)}" for name, shape in named)
        raise ValueError(f"shapes do not broadcast: {listing}") from None


def check_mask_shape(mask_shape: Sequence[int], target: Sequence[int], name: str = "mask") -> None:
    """Raise ``ValueError`` unless ``mask_shape`` broadcasts to exactly ``target``.

    A mask may have fewer or size-1 dimensions, but it may not enlarge the
    scores it masks.

    Parameters
    ----------
    mask_shape : sequence of int
        The shape of the mask.
    target : sequence of int
        The shape of the scores, ``(..., T_q, T_k)``.
    name : str, default "mask"
        The argument's name, used in the error message.

    Raises
    ------
    ValueError
        If ``mask_shape`` does not broadcast to ``target``.

    Examples
    --------
    >>> check_mask_shape((1, 3), (2, 3))
    >>> check_mask_shape((2, 2, 3), (2, 3))
    Traceback (most recent call last):
        ...
    ValueError: mask of shape (2, 2, 3) does not broadcast to the score shape (2, 3)
    """
    target = tuple(target)
    try:
        result = tuple(np.broadcast_shapes(tuple(mask_shape), target))
    except ValueError:
        result = None
    if result != target:
        raise ValueError(
            f"{name} of shape {tuple(mask_shape)} does not broadcast to the score shape {target}"
        )


def check_attention_shapes(
    query: Sequence[int], key: Sequence[int], value: Sequence[int]
) -> Shape:
    """Validate query/key/value shapes; return the broadcast leading shape.

    Parameters
    ----------
    query : sequence of int
        Shape ``(..., T_q, d_k)``.
    key : sequence of int
        Shape ``(..., T_k, d_k)``.
    value : sequence of int
        Shape ``(..., T_k, d_v)``.

    Returns
    -------
    tuple of int
        The broadcast batch dimensions ``...``.

    Raises
    ------
    ValueError
        If a shape has fewer than 2 dimensions, ``d_k`` or ``T_k`` differ, or
        the batch dimensions do not broadcast.

    Examples
    --------
    >>> check_attention_shapes((5, 2, 4), (1, 3, 4), (3, 6))
    (5,)
    """
    for name, shape in (("query", query), ("key", key), ("value", value)):
        check_rank(shape, name)
    if query[-1] != key[-1]:
        raise ValueError(
            f"query and key must share the feature size d_k: query has shape "
            f"{tuple(query)}, key has shape {tuple(key)}"
        )
    if key[-2] != value[-2]:
        raise ValueError(
            f"key and value must have the same length Tk: key has shape "
            f"{tuple(key)}, value has shape {tuple(value)}"
        )
    return broadcast_shapes(
        ("query batch dims of", query[:-2]),
        ("key batch dims of", key[:-2]),
        ("value batch dims of", value[:-2]),
    )
