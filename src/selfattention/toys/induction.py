"""Chapter 15's task, metrics and training: repeated random tokens and induction heads.

A sequence is a beginning-of-sequence token (BOS) followed by random tokens,
in which one random segment occurs twice, at a random place and with a
random length. Every token is unpredictable except those of the second
occurrence after its first token: once the segment has started again, each
next token can be *copied* from what followed the earlier occurrence. A
model that learns to do so has an induction head.

- ``RepeatTask`` describes the task and draws seeded batches
  (``RepeatBatch``: token ids, and a mask of the tokens predictable by
  copying).
- ``previous_token_score``, ``prefix_matching_score`` and ``copy_losses``
  measure what a model does on a batch.
- ``train_induction`` trains a model on fresh batches, deterministically on
  one thread as chapter 11 does, and logs one rounded line per checkpoint.

Positions count from 0, and position 0 always holds BOS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .._checks import (
    check_bool_tensor,
    check_callable,
    check_finite,
    check_float_tensor,
    check_int64_tensor,
    check_positive_int,
    check_real,
    check_same_device,
    describe,
)
from .training import _one_deterministic_thread, _unchanged_on_error


def _as_generator(seed: int | np.random.Generator, name: str = "seed") -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(check_positive_int(seed, name, allow_zero=True))


@dataclass(frozen=True)
class RepeatBatch:
    """A batch of sequences with one repeated segment each.

    Attributes
    ----------
    ids : torch.Tensor
        ``(B, T)`` int64 token ids; ``ids[:, 0]`` is BOS.
    copyable : torch.Tensor
        ``(B, T)`` bool, True on the tokens predictable by copying: the
        second occurrence of the segment without its first token.
    first, second : torch.Tensor
        ``(B,)`` int64 start positions of the segment's two occurrences.
    repeat : torch.Tensor
        ``(B,)`` int64 length of the segment.

    Examples
    --------
    >>> batch = RepeatTask(vocab_size=8, length=9, min_repeat=3, max_repeat=3).sample(1, 0)
    >>> tuple(batch.ids.shape), int(batch.repeat[0]), int(batch.copyable.sum())
    ((1, 10), 3, 2)
    """

    ids: torch.Tensor
    copyable: torch.Tensor
    first: torch.Tensor
    second: torch.Tensor
    repeat: torch.Tensor

    def __len__(self) -> int:
        """The number of sequences, ``B``."""
        return self.ids.shape[0]

    @property
    def queries(self) -> torch.Tensor:
        """``(B, T)`` bool, True on the positions whose *next* token is copyable.

        These are the positions at which an induction head has something to
        do: positions ``second .. second + repeat - 2`` of each sequence.

        Examples
        --------
        >>> batch = RepeatTask(vocab_size=8, length=9, min_repeat=3, max_repeat=3).sample(1, 0)
        >>> torch.equal(batch.queries[:, :-1], batch.copyable[:, 1:])
        True
        """
        shifted = torch.zeros_like(self.copyable)  # (B, T)
        shifted[:, :-1] = self.copyable[:, 1:]
        return shifted


@dataclass(frozen=True)
class RepeatTask:
    """Sequences of random tokens in which a random segment occurs twice.

    Each sequence is BOS followed by ``length`` tokens drawn uniformly from
    ``0 .. vocab_size - 1``. A segment of ``min_repeat`` to ``max_repeat``
    tokens (uniform) starts at a random position ``first >= 1`` and is
    copied to start at ``second >= first + repeat``, so the two occurrences
    do not overlap. With ``offset=None`` both places are random; with an
    integer ``offset``, the copy always starts exactly ``offset`` tokens
    after the original (``second = first + offset``), a task that a model
    can solve from positions alone.

    Parameters
    ----------
    vocab_size : int
        Number of random token ids; BOS gets the id ``vocab_size``.
    length : int
        Tokens after BOS; a sequence has ``T = length + 1`` positions.
    min_repeat, max_repeat : int
        Shortest and longest segment, at least 2, with
        ``2 * max_repeat <= length``.
    offset : int or None
        Fixed distance from the first occurrence to the second, at least
        ``max_repeat`` and less than ``length``; None draws it.

    Raises
    ------
    TypeError
        If a size is not an int.
    ValueError
        If the sizes do not fit together as stated above.

    Examples
    --------
    >>> task = RepeatTask(vocab_size=10, length=12, min_repeat=4, max_repeat=4)
    >>> batch = task.sample(batch_size=2, seed=0)
    >>> task.bos, task.num_ids, tuple(batch.ids.shape)
    (10, 11, (2, 13))
    >>> b, n = 0, int(batch.repeat[0])
    >>> s, s2 = int(batch.first[b]), int(batch.second[b])
    >>> torch.equal(batch.ids[b, s:s + n], batch.ids[b, s2:s2 + n])
    True
    >>> batch.copyable[b].nonzero().flatten().tolist() == list(range(s2 + 1, s2 + n))
    True
    """

    vocab_size: int = 32
    length: int = 25
    min_repeat: int = 4
    max_repeat: int = 12
    offset: int | None = None

    def __post_init__(self) -> None:
        for name in ("vocab_size", "length", "min_repeat", "max_repeat"):
            check_positive_int(getattr(self, name), name)
        if self.min_repeat < 2 or self.min_repeat > self.max_repeat:
            raise ValueError(
                f"need 2 <= min_repeat <= max_repeat, got min_repeat={self.min_repeat}, "
                f"max_repeat={self.max_repeat}"
            )
        if 2 * self.max_repeat > self.length:
            raise ValueError(
                f"two copies of max_repeat={self.max_repeat} tokens do not fit in "
                f"length={self.length}"
            )
        if self.offset is not None:
            check_positive_int(self.offset, "offset")
            if not self.max_repeat <= self.offset < self.length:
                raise ValueError(
                    f"offset must satisfy max_repeat={self.max_repeat} <= offset < "
                    f"length={self.length}, got {self.offset}"
                )
            if self.offset + self.max_repeat > self.length:
                raise ValueError(
                    f"offset={self.offset} + max_repeat={self.max_repeat} exceeds "
                    f"length={self.length}"
                )

    @property
    def bos(self) -> int:
        """The id of the beginning-of-sequence token, ``vocab_size``."""
        return self.vocab_size

    @property
    def num_ids(self) -> int:
        """How many ids a model must embed, the random tokens and BOS (``vocab_size + 1``)."""
        return self.vocab_size + 1

    def sample(self, batch_size: int, seed: int | np.random.Generator = 0) -> RepeatBatch:
        """Draw ``batch_size`` sequences; the same ``seed`` always gives the same batch.

        ``seed`` is an int or a ``numpy.random.Generator``; a generator is
        advanced, so a training loop can draw a fresh batch from one
        generator at every step.

        Examples
        --------
        >>> task = RepeatTask()
        >>> torch.equal(task.sample(4, 7).ids, task.sample(4, 7).ids)
        True
        """
        batch_size = check_positive_int(batch_size, "batch_size")
        rng = _as_generator(seed)
        width = self.length + 1  # T, BOS included
        ids = rng.integers(0, self.vocab_size, size=(batch_size, width))  # (B, T)
        ids[:, 0] = self.bos
        copyable = np.zeros((batch_size, width), dtype=bool)  # (B, T)
        firsts, seconds, repeats = [], [], []
        for b in range(batch_size):
            n = int(rng.integers(self.min_repeat, self.max_repeat + 1))
            if self.offset is None:
                # first in 1 .. T - 2n, then second in first + n .. T - n.
                s = int(rng.integers(1, width - 2 * n + 1))
                s2 = int(rng.integers(s + n, width - n + 1))
            else:
                s = int(rng.integers(1, width - self.offset - n + 1))
                s2 = s + self.offset
            ids[b, s2 : s2 + n] = ids[b, s : s + n]
            copyable[b, s2 + 1 : s2 + n] = True
            firsts.append(s)
            seconds.append(s2)
            repeats.append(n)
        return RepeatBatch(
            ids=torch.from_numpy(ids).to(torch.int64),
            copyable=torch.from_numpy(copyable),
            first=torch.tensor(firsts, dtype=torch.int64),
            second=torch.tensor(seconds, dtype=torch.int64),
            repeat=torch.tensor(repeats, dtype=torch.int64),
        )


def _check_weights(weights: object) -> torch.Tensor:
    check_float_tensor(weights, "weights")
    if weights.dim() != 4 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(
            f"weights must have shape (B, h, T, T) (self-attention, no cache), "
            f"got {tuple(weights.shape)}"
        )
    check_finite(weights, "weights")
    return weights


def _check_ids(
    ids: object, shape: tuple[int, ...], device: torch.device, owner: str, name: str = "ids"
) -> torch.Tensor:
    check_int64_tensor(ids, name)
    if tuple(ids.shape) != shape:
        raise ValueError(f"{name} must have shape {shape}, got {tuple(ids.shape)}")
    check_same_device(ids, name, device, owner)
    return ids


def _check_bool(
    mask: object, shape: tuple[int, ...], device: torch.device, name: str, meaning: str
) -> torch.Tensor:
    check_bool_tensor(mask, name, meaning)
    if tuple(mask.shape) != shape:
        raise ValueError(f"{name} must have shape {shape}, got {tuple(mask.shape)}")
    check_same_device(mask, name, device, "ids")
    return mask


def previous_token_score(weights: torch.Tensor) -> torch.Tensor:
    """Each head's mean weight from query ``i`` on key ``i - 1``, the previous token.

    The mean runs over the batch and over the queries ``i = 1 .. T - 1``
    (query 0 has no previous token). A head that always looks one token back
    scores 1; uniform causal attention scores the mean of ``1 / (i + 1)``.

    Parameters
    ----------
    weights : torch.Tensor
        ``(B, h, T, T)`` attention weights of one layer.

    Returns
    -------
    torch.Tensor
        ``(h,)``, one score in [0, 1] per head.

    Raises
    ------
    TypeError
        If ``weights`` is not a floating-point tensor.
    ValueError
        If ``weights`` is not ``(B, h, T, T)`` with ``T >= 2``, or holds NaN
        or inf.

    Examples
    --------
    Head 0 looks one token back, head 1 looks at itself:

    >>> T = 4
    >>> back = torch.eye(T).roll(-1, dims=1).tril()  # (T, T): key i - 1
    >>> back[0, 0] = 1.0                             # query 0 keeps itself
    >>> weights = torch.stack([back, torch.eye(T)])[None]  # (1, 2, T, T)
    >>> previous_token_score(weights)
    tensor([1., 0.])
    """
    weights = _check_weights(weights)
    if weights.shape[-1] < 2:
        raise ValueError(f"weights needs T >= 2 positions, got {tuple(weights.shape)}")
    one_back = weights.diagonal(offset=-1, dim1=-2, dim2=-1)  # (B, h, T - 1): A[i, i - 1]
    return one_back.mean(dim=(0, 2))  # (h,)


def prefix_matching_keys(ids: torch.Tensor) -> torch.Tensor:
    """``(B, T, T)`` bool: is key ``j`` the token after an earlier occurrence of query ``i``?

    Entry ``[b, i, j]`` is True when ``1 <= j <= i`` and ``ids[b, j - 1] ==
    ids[b, i]``: position ``j - 1`` holds the same token as the query and
    comes before it, and ``j``, one step later, is where an induction head
    looks. The key is the one *after* the match, not the match itself.

    Examples
    --------
    In ``BOS a b c a``, the last ``a`` (query 4) matches position 1, so key 2
    (``b``, the token that followed) is marked:

    >>> ids = torch.tensor([[9, 0, 1, 2, 0]])  # (1, 5)
    >>> prefix_matching_keys(ids)[0, 4].nonzero().flatten().tolist()
    [2]
    """
    check_int64_tensor(ids, "ids")
    if ids.dim() != 2:
        raise ValueError(f"ids must have shape (B, T), got {tuple(ids.shape)}")
    before = torch.full_like(ids, -1)  # (B, T): the token before key j
    before[:, 1:] = ids[:, :-1]
    length = ids.shape[1]
    causal = torch.ones(length, length, dtype=torch.bool, device=ids.device).tril()  # j <= i
    return (before[:, None, :] == ids[:, :, None]) & causal  # (B, T_q, T_k)


def prefix_matching_score(
    weights: torch.Tensor, ids: torch.Tensor, queries: torch.Tensor | None = None
) -> torch.Tensor:
    """Each head's weight on the token after an earlier occurrence of the query's token.

    For query ``i`` whose token occurred before, at some ``j - 1 < i``, an
    induction head attends to key ``j``: the token that came *next* last
    time, which is the best guess for what comes next now. The score of
    query ``i`` is the total weight on all such keys (see
    ``prefix_matching_keys``); the result is its mean over the chosen
    queries. A query whose token did not occur before has no such key and is
    skipped.

    Parameters
    ----------
    weights : torch.Tensor
        ``(B, h, T, T)`` attention weights of one layer.
    ids : torch.Tensor
        ``(B, T)`` int64 token ids the weights were computed on.
    queries : torch.Tensor, optional
        ``(B, T)`` bool, the queries to average over (e.g.
        ``RepeatBatch.queries``); default: every query with a match.

    Returns
    -------
    torch.Tensor
        ``(h,)``, one score in [0, 1] per head.

    Raises
    ------
    TypeError
        If an argument has the wrong type or dtype.
    ValueError
        If the shapes or devices disagree, ``weights`` holds NaN or inf, or
        no chosen query has an earlier occurrence.

    Examples
    --------
    A hand-built pattern: ``BOS a b c a b c`` (``a, b, c = 0, 1, 2``). Head 0
    sends query ``i`` of the second half to key ``i - 2``, the token after
    the earlier occurrence; head 1 sends it to key ``i - 3``, the earlier
    occurrence itself, one step too early:

    >>> ids = torch.tensor([[9, 0, 1, 2, 0, 1, 2]])  # (B, T) = (1, 7)
    >>> weights = torch.zeros(1, 2, 7, 7)            # (B, h, T, T)
    >>> for i in range(7):
    ...     weights[0, 0, i, i - 2 if i >= 4 else i] = 1.0
    ...     weights[0, 1, i, i - 3 if i >= 4 else i] = 1.0
    >>> prefix_matching_score(weights, ids)
    tensor([1., 0.])
    """
    weights = _check_weights(weights)
    batch, _, length, _ = weights.shape
    ids = _check_ids(ids, (batch, length), weights.device, "weights")
    if queries is not None:
        queries = _check_bool(
            queries, (batch, length), ids.device, "queries", "True = a query to average over"
        )
    keys = prefix_matching_keys(ids)  # (B, T_q, T_k)
    chosen = keys.any(dim=-1)  # (B, T_q): queries with an earlier occurrence
    if queries is not None:
        chosen = chosen & queries
    if not chosen.any():
        among = "no query of ids" if queries is None else "no query chosen by queries"
        raise ValueError(f"{among} has an earlier occurrence of its token in ids")
    on_keys = (weights * keys[:, None].to(weights.dtype)).sum(dim=-1)  # (B, h, T_q)
    return on_keys.transpose(0, 1)[:, chosen].mean(dim=-1)  # (h,)


def copy_losses(
    logits: torch.Tensor, ids: torch.Tensor, copyable: torch.Tensor
) -> tuple[float, float]:
    """Mean next-token cross-entropy on the copyable tokens, and on all the others.

    ``logits[:, i]`` predicts ``ids[:, i + 1]``, so the targets are the
    tokens at positions ``1 .. T - 1`` (BOS at position 0 is never a
    target). A target counts as copyable where ``copyable`` is True. For
    random tokens drawn from ``V`` ids, a model that cannot copy does no
    better than ``ln V`` on either group.

    Parameters
    ----------
    logits : torch.Tensor
        ``(B, T, num_ids)`` next-token scores.
    ids : torch.Tensor
        ``(B, T)`` int64 token ids.
    copyable : torch.Tensor
        ``(B, T)`` bool, True on the tokens predictable by copying.

    Returns
    -------
    tuple of float
        ``(loss on copyable tokens, loss on the other tokens)``, in nats.

    Raises
    ------
    TypeError
        If an argument has the wrong type or dtype.
    ValueError
        If the shapes or devices disagree, an id lies outside ``[0,
        num_ids)``, ``logits`` holds NaN or inf, or a group of targets is
        empty.

    Examples
    --------
    Uniform logits over 4 ids give ``ln 4`` on every token:

    >>> ids = torch.tensor([[3, 0, 1, 0, 1]])  # (B, T) = (1, 5)
    >>> copyable = torch.tensor([[False, False, False, False, True]])
    >>> losses = copy_losses(torch.zeros(1, 5, 4), ids, copyable)
    >>> import math
    >>> [round(loss, 4) for loss in losses], round(math.log(4), 4)
    ([1.3863, 1.3863], 1.3863)
    """
    check_float_tensor(logits, "logits")
    if logits.dim() != 3 or logits.shape[1] < 2:
        raise ValueError(
            f"logits must have shape (B, T, num_ids), T >= 2, got {tuple(logits.shape)}"
        )
    batch, length, num_ids = logits.shape
    ids = _check_ids(ids, (batch, length), logits.device, "logits")
    copyable = _check_bool(
        copyable, (batch, length), ids.device, "copyable", "True = predictable by copying"
    )
    if int(ids.min()) < 0 or int(ids.max()) >= num_ids:
        raise ValueError(
            f"ids must lie in [0, {num_ids}) for logits of shape {tuple(logits.shape)}, "
            f"got values from {int(ids.min())} to {int(ids.max())}"
        )
    check_finite(logits, "logits")
    per_token = nn.functional.cross_entropy(
        logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none"
    )  # (B, T - 1): the loss on ids[:, 1:]
    target_copyable = copyable[:, 1:]  # (B, T - 1)
    if not target_copyable.any() or target_copyable.all():
        raise ValueError("copyable must mark some targets (positions 1 .. T - 1), not all")
    return (
        float(per_token[target_copyable].mean()),
        float(per_token[~target_copyable].mean()),
    )


@dataclass(frozen=True)
class Checkpoint:
    """What ``train_induction`` measured on its evaluation batch at one step.

    Attributes
    ----------
    step : int
        Optimizer steps taken so far (0 = before training).
    copyable_loss, other_loss : float
        ``copy_losses`` of the model on the evaluation batch.
    previous_token : tuple of float
        ``previous_token_score`` of each head of the first layer.
    prefix_matching : tuple of float
        ``prefix_matching_score`` of each head of the last layer, over the
        evaluation batch's ``queries``.

    Examples
    --------
    >>> Checkpoint(500, 0.91234, 3.6, (0.07, 0.62), (0.81, 0.805)).line()
    'step  500  loss: copyable 0.912  other 3.600  prev 0.07 0.62  prefix 0.81 0.81'
    """

    step: int
    copyable_loss: float
    other_loss: float
    previous_token: tuple[float, ...]
    prefix_matching: tuple[float, ...]

    def line(self) -> str:
        """One compact line, rounded so that another CPU prints the same."""
        previous = " ".join(f"{score:.2f}" for score in self.previous_token)
        prefix = " ".join(f"{score:.2f}" for score in self.prefix_matching)
        return (
            f"step {self.step:4d}  loss: copyable {self.copyable_loss:.3f}  "
            f"other {self.other_loss:.3f}  prev {previous}  prefix {prefix}"
        )


def _extent(ids: object) -> tuple[int, int]:
    """The largest id of a batch's ``ids (B, T)`` and its length ``T``; -1 and 0 if unreadable.

    Whatever cannot be read here is refused, with its name, by the model.
    """
    if not isinstance(ids, torch.Tensor) or ids.dim() == 0 or ids.device.type == "meta":
        return -1, 0
    return (int(ids.max()) if ids.numel() else -1), ids.shape[-1]


def _check_fits(model: nn.Module, top: int, length: int, name: str) -> None:
    """Raise ``ValueError`` naming ``name`` unless ids up to ``top`` in sequences of
    ``length`` positions fit the package's decoder.

    Only a ``TinyDecoder`` is checked (its ids and positions); any other
    model is the caller's.
    """
    from .decoder import TinyDecoder  # the decoder imports nothing from here: no cycle

    if isinstance(model, TinyDecoder) and (top >= model.num_ids or length > model.max_len):
        raise ValueError(
            f"{name} does not fit the model: its ids reach {top} and its sequences "
            f"{length} positions, but model has num_ids={model.num_ids} and "
            f"max_len={model.max_len}"
        )


def measure(model: nn.Module, batch: RepeatBatch, step: int = 0) -> Checkpoint:
    """Run ``model`` on ``batch`` without gradients and return its ``Checkpoint``.

    ``model(ids)`` must return ``(logits, weights)`` with ``weights`` one
    ``(B, h, T, T)`` tensor per layer, as ``selfattention.toys.decoder.TinyDecoder``
    does. The model's mode is restored afterwards, also when the call
    raises.

    Raises
    ------
    TypeError
        If ``model`` is not a module, ``batch`` not a ``RepeatBatch`` or
        ``step`` not an int.
    ValueError
        If ``step`` is negative, ``batch`` has ids or positions that a
        ``TinyDecoder`` does not embed, or the model's outputs fail the
        metrics' checks (e.g. NaN logits).

    Examples
    --------
    >>> from selfattention.toys.decoder import TinyDecoder
    >>> task = RepeatTask()
    >>> _ = torch.manual_seed(0)
    >>> model = TinyDecoder(task.num_ids, num_layers=2)
    >>> checkpoint = measure(model, task.sample(16, seed=1))
    >>> len(checkpoint.previous_token), len(checkpoint.prefix_matching)
    (2, 2)
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {describe(model)}")
    if not isinstance(batch, RepeatBatch):
        raise TypeError(f"batch must be a RepeatBatch, got {describe(batch)}")
    step = check_positive_int(step, "step", allow_zero=True)
    _check_fits(model, *_extent(batch.ids), "batch")
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            logits, weights = model(batch.ids)  # (B, T, num_ids), [(B, h, T, T)] per layer
    finally:
        model.train(was_training)
    copyable, other = copy_losses(logits, batch.ids, batch.copyable)
    previous = previous_token_score(weights[0])
    prefix = prefix_matching_score(weights[-1], batch.ids, batch.queries)
    return Checkpoint(
        step=step,
        copyable_loss=copyable,
        other_loss=other,
        previous_token=tuple(float(score) for score in previous),
        prefix_matching=tuple(float(score) for score in prefix),
    )


def train_induction(
    model: nn.Module,
    task: RepeatTask,
    eval_batch: RepeatBatch,
    steps: int = 1000,
    batch_size: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
    log_every: int = 100,
    log: Callable[[str], None] | None = print,
) -> list[Checkpoint]:
    """Train ``model`` to predict the next token of ``task``'s sequences; return its checkpoints.

    Every step draws a fresh batch from ``task`` with a generator seeded by
    ``seed``, and takes one AdamW step (PyTorch's default weight decay, 0.01)
    on the mean next-token cross-entropy over positions ``1 .. T - 1``.
    Before training and every ``log_every`` steps the model is measured on
    ``eval_batch`` (see ``measure``), and the ``Checkpoint`` is logged as one
    rounded line.

    Deterministic, as chapter 11's ``train_classifier``: one thread and
    ``torch.use_deterministic_algorithms(True)``, both restored afterwards.
    Build the model in float64 (``torch.set_default_dtype``) so that two CPUs
    print the same digits; its initial weights are the caller's business.

    Parameters
    ----------
    model : nn.Module
        Called as ``model(ids) -> (logits, weights)``.
    task : RepeatTask
        Where the training batches come from.
    eval_batch : RepeatBatch
        A fixed batch for the checkpoints.
    steps, batch_size : int
        Optimizer steps, and sequences per step.
    lr : float
        AdamW's learning rate.
    seed : int
        Seed of the training batches.
    log_every : int
        Steps between checkpoints.
    log : callable or None
        Receives ``Checkpoint.line()``; None is silent.

    Raises
    ------
    TypeError, ValueError
        For an argument of the wrong type or value, naming it; for a
        ``TinyDecoder``, also when ``task`` or ``eval_batch`` has ids or
        positions the model does not embed. A call that raises (here or
        later, in a forward pass or in ``log``) leaves the model's
        parameters, gradients and mode and torch's random state as they
        were.

    Examples
    --------
    >>> from selfattention.toys.decoder import TinyDecoder
    >>> task = RepeatTask()
    >>> _ = torch.manual_seed(0)
    >>> model = TinyDecoder(task.num_ids, num_layers=1)
    >>> history = train_induction(model, task, task.sample(8, seed=1), steps=4,
    ...                           log_every=2, log=None)
    >>> [checkpoint.step for checkpoint in history]
    [0, 2, 4]
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {describe(model)}")
    if not isinstance(task, RepeatTask):
        raise TypeError(f"task must be a RepeatTask, got {describe(task)}")
    if not isinstance(eval_batch, RepeatBatch):
        raise TypeError(f"eval_batch must be a RepeatBatch, got {describe(eval_batch)}")
    steps = check_positive_int(steps, "steps")
    batch_size = check_positive_int(batch_size, "batch_size")
    seed = check_positive_int(seed, "seed", allow_zero=True)
    log_every = check_positive_int(log_every, "log_every")
    lr = check_real(lr, "lr", low=0.0, low_open=True)
    check_callable(log, "log", optional=True)
    _check_fits(model, task.bos, task.length + 1, "task")  # BOS is the task's largest id
    _check_fits(model, *_extent(eval_batch.ids), "eval_batch")

    # A call that raises leaves the model as it was.
    with _one_deterministic_thread(), _unchanged_on_error(model):
        rng = np.random.default_rng(seed)
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
        history: list[Checkpoint] = []

        def checkpoint(step: int) -> None:
            history.append(measure(model, eval_batch, step))
            if log is not None:
                log(history[-1].line())

        for step in range(steps):
            if step % log_every == 0:
                checkpoint(step)
            model.train()
            ids = task.sample(batch_size, rng).ids  # (B, T), fresh every step
            logits, _ = model(ids)  # (B, T, num_ids)
            loss = nn.functional.cross_entropy(  # logits[:, i] predict ids[:, i + 1]
                logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1)
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        checkpoint(steps)
        model.eval()
        return history
