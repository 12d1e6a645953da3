"""Training and evaluation for chapter 11, deterministic on any CPU.

``train_classifier`` runs Adam on shuffled mini-batches with a fixed seed,
one thread and PyTorch's deterministic algorithms, prints one rounded line
per epoch and returns the history. ``evaluate`` gives the loss and accuracy
of a model on a batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from .._checks import check_positive_int
from .data import Batch


@dataclass(frozen=True)
class EpochResult:
    """Loss and accuracies after one epoch (accuracies are fractions in [0, 1]).

    Examples
    --------
    >>> EpochResult(epoch=2, loss=0.41234, train_accuracy=0.9, heldout_accuracy=0.875).line()
    'epoch  2  loss 0.412  train  90.0%  held-out  87.5%'
    """

    epoch: int
    loss: float
    train_accuracy: float
    heldout_accuracy: float | None

    def line(self) -> str:
        """One compact line, rounded so that another CPU prints the same."""
        text = (
            f"epoch {self.epoch:2d}  loss {self.loss:.3f}  train {100 * self.train_accuracy:5.1f}%"
        )
        if self.heldout_accuracy is not None:
            text += f"  held-out {100 * self.heldout_accuracy:5.1f}%"
        return text


def _check_model_and_batch(model: nn.Module, batch: Batch, name: str) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(batch, Batch):
        raise TypeError(f"{name} must be a Batch (see make_batch), got {type(batch).__name__}")
    if (batch.labels < 0).any():
        raise ValueError(f"{name} has lines without a label (-1); build it from labelled Lines")


def evaluate(model: nn.Module, batch: Batch) -> tuple[float, float]:
    """Mean cross-entropy loss and accuracy of ``model`` on ``batch``, without gradients.

    Examples
    --------
    >>> from selfattention.toys.data import SERIES, SERIES_VOCABULARY, make_batch, make_lines
    >>> from selfattention.toys.models import AttentionClassifier
    >>> _ = torch.manual_seed(0)
    >>> model = AttentionClassifier(len(SERIES_VOCABULARY), len(SERIES))
    >>> loss, accuracy = evaluate(model, make_batch(make_lines(30)))
    >>> 0.0 <= accuracy <= 1.0
    True
    """
    _check_model_and_batch(model, batch, "batch")
    was_training = model.training
    model.eval()
    with torch.no_grad():
        logits, _ = model(batch.ids, batch.mask)  # (B, C)
        loss = nn.functional.cross_entropy(logits, batch.labels).item()
        accuracy = (logits.argmax(dim=-1) == batch.labels).double().mean().item()
    model.train(was_training)
    return loss, accuracy


def train_classifier(
    model: nn.Module,
    train: Batch,
    heldout: Batch | None = None,
    epochs: int = 10,
    batch_size: int = 32,
    lr: float = 0.01,
    seed: int = 0,
    log: Callable[[str], None] | None = print,
    on_epoch_end: Callable[[int, nn.Module], None] | None = None,
) -> list[EpochResult]:
    """Train ``model`` with Adam and cross-entropy; return one ``EpochResult`` per epoch.

    Deterministic: the mini-batch order comes from a generator seeded with
    ``seed``, and the loop runs on one thread with
    ``torch.use_deterministic_algorithms(True)``; both settings are restored
    afterwards. The model's initial weights are the caller's business (seed
    torch before building it). Only parameters with ``requires_grad`` train.

    Parameters
    ----------
    model : nn.Module
        Called as ``model(ids, mask) -> (logits, weights)``.
    train, heldout : Batch
        Training lines, and optional held-out lines scored after each epoch.
    epochs, batch_size : int
        Passes over ``train``, and lines per optimizer step.
    lr : float
        Adam's learning rate.
    seed : int
        Seed of the shuffling.
    log : callable or None
        Receives one line per epoch (``EpochResult.line``); None is silent.
    on_epoch_end : callable or None
        Called as ``on_epoch_end(epoch, model)`` after each epoch, and once
        with epoch 0 before training (e.g. to take snapshots).

    Examples
    --------
    >>> from selfattention.toys.data import SERIES, SERIES_VOCABULARY, make_batch, make_lines
    >>> from selfattention.toys.models import AttentionClassifier
    >>> _ = torch.manual_seed(0)
    >>> model = AttentionClassifier(len(SERIES_VOCABULARY), len(SERIES))
    >>> history = train_classifier(model, make_batch(make_lines(60)), epochs=2, log=None)
    >>> [result.epoch for result in history]
    [1, 2]
    """
    _check_model_and_batch(model, train, "train")
    if heldout is not None:
        _check_model_and_batch(model, heldout, "heldout")
    epochs = check_positive_int(epochs, "epochs")
    batch_size = check_positive_int(batch_size, "batch_size")
    seed = check_positive_int(seed, "seed", allow_zero=True)
    if (
        isinstance(lr, bool)
        or not isinstance(lr, (int, float))
        or not math.isfinite(lr)
        or lr <= 0
    ):
        raise ValueError(f"lr must be a positive finite number, got {lr!r}")
    if log is not None and not callable(log):
        raise TypeError(f"log must be callable or None, got {type(log).__name__}")
    if on_epoch_end is not None and not callable(on_epoch_end):
        raise TypeError(
            f"on_epoch_end must be callable or None, got {type(on_epoch_end).__name__}"
        )
    parameters = [parameter for parameter in model.parameters() if parameter.requires_grad]
    if not parameters:
        raise ValueError("model has no trainable parameters")

    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        generator = torch.Generator().manual_seed(seed)
        optimizer = torch.optim.Adam(parameters, lr=float(lr))
        history = []
        if on_epoch_end is not None:
            on_epoch_end(0, model)
        for epoch in range(1, epochs + 1):
            model.train()
            order = torch.randperm(len(train), generator=generator)  # (N,)
            total = 0.0
            for start in range(0, len(train), batch_size):
                part = train.subset(order[start : start + batch_size])
                logits, _ = model(part.ids, part.mask)  # (b, C)
                loss = nn.functional.cross_entropy(logits, part.labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss.item() * len(part)
            _, train_accuracy = evaluate(model, train)
            heldout_accuracy = evaluate(model, heldout)[1] if heldout is not None else None
            result = EpochResult(epoch, total / len(train), train_accuracy, heldout_accuracy)
            history.append(result)
            if log is not None:
                log(result.line())
            if on_epoch_end is not None:
                on_epoch_end(epoch, model)
        model.eval()
        return history
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)
