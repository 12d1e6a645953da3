"""Training and evaluation for chapter 11, deterministic on any CPU.

``train_classifier`` runs Adam on shuffled mini-batches with a fixed seed,
one thread and PyTorch's deterministic algorithms, prints one rounded line
per epoch and returns the history. ``evaluate`` gives the loss and accuracy
of a model on a batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from .._checks import check_callable, check_positive_int, check_real, describe
from .data import Batch
from .models import AttentionClassifier


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


@contextmanager
def _one_deterministic_thread() -> Iterator[None]:
    """Run the body on one thread with deterministic algorithms; put both settings back.

    The training loops run this way so that a run gives the same numbers
    whatever the machine's core count. The caller's settings are restored
    however the body ends.

    Examples
    --------
    >>> threads = torch.get_num_threads()
    >>> with _one_deterministic_thread():
    ...     torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    (1, True)
    >>> torch.get_num_threads() == threads
    True
    """
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)


@contextmanager
def _unchanged_on_error(model: nn.Module) -> Iterator[None]:
    """Run the body; if it raises, put ``model`` and torch's random state back as they were.

    The package's rule "a call that raises changes nothing" for the training
    loops: the parameters and buffers (copied back in place, so an optimizer
    that holds them still does), each parameter's ``.grad``, every
    submodule's train/eval mode and torch's CPU random state are saved
    before the body runs and restored if it raises an ``Exception`` (a
    failing forward pass, a ``log`` or callback that raises). An interrupt
    (``KeyboardInterrupt``) keeps the partly trained model. On success
    nothing is restored.

    Examples
    --------
    >>> layer = torch.nn.Linear(2, 1)
    >>> before = layer.weight.detach().clone()
    >>> try:
    ...     with _unchanged_on_error(layer):
    ...         with torch.no_grad():
    ...             _ = layer.weight.add_(1.0)
    ...         raise ValueError("something failed")
    ... except ValueError:
    ...     pass
    >>> torch.equal(layer.weight, before)
    True
    """
    state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    grads = [
        (parameter, None if parameter.grad is None else parameter.grad.detach().clone())
        for parameter in model.parameters()
    ]
    modes = [(module, module.training) for module in model.modules()]
    rng = torch.get_rng_state()
    try:
        yield
    except Exception:
        current = model.state_dict()
        with torch.no_grad():
            for name, saved in state.items():
                current[name].copy_(saved)
        for parameter, grad in grads:
            parameter.grad = grad
        for module, training in modes:
            module.training = training
        torch.set_rng_state(rng)
        raise


def _check_model_and_batch(model: nn.Module, batch: Batch, name: str) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {describe(model)}")
    if not isinstance(batch, Batch):
        raise TypeError(f"{name} must be a Batch (see make_batch), got {describe(batch)}")
    if (batch.labels < 0).any():
        raise ValueError(f"{name} has lines without a label (-1); build it from labelled Lines")
    if isinstance(model, AttentionClassifier):  # the package's model: check that it fits
        width, top = batch.ids.shape[1], int(batch.ids.max()) if batch.ids.numel() else 0
        if top >= model.vocab_size or width > model.max_len:
            raise ValueError(
                f"{name} does not fit the model: its ids reach {top} and its lines "
                f"{width} tokens, but model has vocab_size={model.vocab_size} and "
                f"max_len={model.max_len}"
            )
        if int(batch.labels.max()) >= model.num_classes:
            raise ValueError(
                f"{name} has labels up to {int(batch.labels.max())}, but model has "
                f"num_classes={model.num_classes}"
            )


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
    try:
        with torch.no_grad():
            logits, _ = model(batch.ids, batch.mask)  # (B, C)
            loss = nn.functional.cross_entropy(logits, batch.labels).item()
            accuracy = (logits.argmax(dim=-1) == batch.labels).double().mean().item()
    finally:
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

    Each epoch trains in ``model.train()`` mode and scores in ``eval()``
    mode (``evaluate``). On success the model is left in ``eval()`` mode,
    ready to be measured; call ``model.train()`` before training it further
    by hand. A call that raises leaves the mode as it was.

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

    Raises
    ------
    TypeError, ValueError
        For an argument of the wrong type or value, naming it; for an
        ``AttentionClassifier``, also when ``train`` or ``heldout`` has ids,
        lines or labels the model does not take. A call that raises (here or
        later, in a forward pass, ``log`` or ``on_epoch_end``) leaves the
        model's parameters, gradients and mode and torch's random state as
        they were.

    Examples
    --------
    >>> from selfattention.toys.data import SERIES, SERIES_VOCABULARY, make_batch, make_lines
    >>> from selfattention.toys.models import AttentionClassifier
    >>> _ = torch.manual_seed(0)
    >>> model = AttentionClassifier(len(SERIES_VOCABULARY), len(SERIES))
    >>> history = train_classifier(model, make_batch(make_lines(60)), epochs=2, log=None)
    >>> [result.epoch for result in history]
    [1, 2]
    >>> model.training  # left in eval() mode
    False
    """
    _check_model_and_batch(model, train, "train")
    if heldout is not None:
        _check_model_and_batch(model, heldout, "heldout")
    epochs = check_positive_int(epochs, "epochs")
    batch_size = check_positive_int(batch_size, "batch_size")
    seed = check_positive_int(seed, "seed", allow_zero=True)
    lr = check_real(lr, "lr", low=0.0, low_open=True)
    check_callable(log, "log", optional=True)
    check_callable(on_epoch_end, "on_epoch_end", optional=True)
    parameters = [parameter for parameter in model.parameters() if parameter.requires_grad]
    if not parameters:
        raise ValueError("model has no trainable parameters")

    # A call that raises leaves the model as it was.
    with _one_deterministic_thread(), _unchanged_on_error(model):
        generator = torch.Generator().manual_seed(seed)
        optimizer = torch.optim.Adam(parameters, lr=lr)
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
