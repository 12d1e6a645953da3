"""Chapter 11's classifier and training loop: shapes, padding, learning, determinism."""

import doctest

import numpy as np
import pytest
import torch

from selfattention.toys import models as models_module
from selfattention.toys import training as training_module
from selfattention.toys.data import SERIES, SERIES_VOCABULARY, make_batch, make_lines
from selfattention.toys.models import AttentionClassifier, masked_mean, pooled_attention
from selfattention.toys.training import EpochResult, evaluate, train_classifier

VOCAB = len(SERIES_VOCABULARY)
CLASSES = len(SERIES)


def small_model(seed=0, **kwargs):
    torch.manual_seed(seed)
    return AttentionClassifier(VOCAB, CLASSES, d_model=8, **kwargs).double()


def test_doctests_of_models_and_training():
    for module in (models_module, training_module):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


@pytest.mark.parametrize("num_heads", [1, 2])
def test_shapes_and_weights_rows(num_heads):
    batch = make_batch(make_lines(5, seed=1))
    model = small_model(num_heads=num_heads)
    logits, weights = model(batch.ids, batch.mask)
    length = batch.ids.shape[1]
    assert logits.shape == (5, CLASSES)
    assert weights.shape == (5, num_heads, length, length)
    torch.testing.assert_close(
        weights.sum(-1), torch.ones(5, num_heads, length, dtype=torch.float64)
    )
    # Padded keys get exactly zero weight.
    assert (weights.masked_select(~batch.mask[:, None, None, :]) == 0).all()


def test_padding_never_changes_a_prediction():
    lines = make_lines(6, seed=2)
    batch = make_batch(lines)
    padded = make_batch(lines, max_len=batch.ids.shape[1] + 5)
    model = small_model(num_heads=2).eval()
    logits, weights = model(batch.ids, batch.mask)
    logits_padded, weights_padded = model(padded.ids, padded.mask)
    torch.testing.assert_close(logits_padded, logits, rtol=0, atol=1e-12)
    length = batch.ids.shape[1]
    torch.testing.assert_close(weights_padded[..., :length, :length], weights, rtol=0, atol=1e-12)
    # One line alone gives the same logits as inside a padded batch.
    for row, line in enumerate(lines):
        alone = make_batch([line])
        torch.testing.assert_close(
            model(alone.ids, alone.mask)[0][0], logits[row], rtol=0, atol=1e-12
        )


def test_padding_ids_are_ignored_whatever_they_hold():
    batch = make_batch(make_lines(4, seed=3), max_len=12)
    model = small_model()
    scrambled = batch.ids.clone()
    scrambled[~batch.mask] = 7  # a real word id, but masked
    torch.testing.assert_close(
        model(scrambled, batch.mask)[0], model(batch.ids, batch.mask)[0], rtol=0, atol=1e-12
    )


def test_masked_mean_and_pooled_attention():
    values = torch.tensor([[[1.0], [3.0], [8.0]], [[2.0], [-5.0], [4.0]]])  # (2, 3, 1)
    mask = torch.tensor([[True, True, False], [True, False, True]])
    torch.testing.assert_close(masked_mean(values, mask), torch.tensor([[2.0], [3.0]]))
    batch = make_batch(make_lines(8, seed=4))
    _, weights = small_model(num_heads=2)(batch.ids, batch.mask)
    pooled = pooled_attention(weights, batch.mask)  # (B, T)
    torch.testing.assert_close(pooled.sum(-1), torch.ones(8, dtype=torch.float64))
    assert (pooled[~batch.mask] == 0).all()
    # It is the head-averaged weight matrix averaged over the real query rows.
    row = 0
    length = int(batch.lengths[row])
    expected = weights[row].mean(0)[:length, :length].mean(0)
    torch.testing.assert_close(pooled[row, :length], expected)


def test_the_pooled_vector_is_the_pooled_attention_times_the_values():
    # pooled output = sum_j a_j (v_j W_O) + b_O, the identity the chapter measures with
    batch = make_batch(make_lines(5, seed=6))
    model = small_model()
    x = model.embedding(batch.ids) + model.positions[: batch.ids.shape[1]]
    out, weights = model.attention(x, mask=batch.mask[:, None, None, :])
    pooled = masked_mean(out, batch.mask)
    a = pooled_attention(weights, batch.mask)  # (B, T)
    projected_values = model.attention.out_proj(model.attention.v_proj(x))  # (B, T, d)
    torch.testing.assert_close(pooled, (a[..., None] * projected_values).sum(1))


def test_positional_flag_and_frozen_embedding():
    batch = make_batch([["a", "jedi", "the"], ["the", "jedi", "a"]])
    without = small_model(positional=False)
    logits, _ = without(batch.ids, batch.mask)
    # Without positions the model sees a bag of words: a permutation changes nothing.
    torch.testing.assert_close(logits[0], logits[1])
    with_positions = small_model()
    logits, _ = with_positions(batch.ids, batch.mask)
    assert not torch.allclose(logits[0], logits[1])
    frozen = small_model(freeze_embedding=True)
    assert not frozen.embedding.weight.requires_grad
    assert frozen.attention.q_proj.weight.requires_grad


def test_a_few_steps_lower_the_loss_and_frozen_table_stays_put():
    train = make_batch(make_lines(120, seed=7))
    model = small_model(freeze_embedding=True)
    table = model.embedding.weight.detach().clone()
    before, _ = evaluate(model, train)
    history = train_classifier(model, train, epochs=4, batch_size=40, lr=0.03, log=None)
    after, _ = evaluate(model, train)
    assert after < 0.8 * before
    assert [result.epoch for result in history] == [1, 2, 3, 4]
    assert torch.equal(model.embedding.weight, table)


def test_training_is_deterministic_prints_one_line_per_epoch_and_restores_settings(capsys):
    train = make_batch(make_lines(90, seed=8))
    heldout = make_batch(make_lines(30, seed=9))
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    runs = []
    for _ in range(2):
        model = small_model(seed=1)
        history = train_classifier(model, train, heldout, epochs=2, batch_size=30, seed=4)
        runs.append((history, model.attention.q_proj.weight.detach().clone()))
    assert runs[0][0] == runs[1][0]
    assert torch.equal(runs[0][1], runs[1][1])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and lines[:2] == lines[2:]
    assert lines[0].startswith("epoch  1  loss ") and lines[0].endswith("%")
    assert torch.get_num_threads() == threads
    assert torch.are_deterministic_algorithms_enabled() == deterministic
    other = train_classifier(
        small_model(seed=1), train, heldout, epochs=2, batch_size=30, seed=5, log=None
    )
    assert other != runs[0][0]  # the seed decides the mini-batch order


def test_on_epoch_end_is_called_before_and_after_every_epoch():
    calls = []
    train_classifier(
        small_model(),
        make_batch(make_lines(30, seed=1)),
        epochs=2,
        log=None,
        on_epoch_end=lambda epoch, model: calls.append(epoch),
    )
    assert calls == [0, 1, 2]


def test_training_runs_on_one_deterministic_thread_and_leaves_eval_mode():
    # Chapter 11 says train_classifier sets both settings itself: a caller on
    # two threads without deterministic algorithms gets them during training
    # (seen from on_epoch_end), and its own settings back afterwards.
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    seen = []
    model = small_model()
    try:
        torch.set_num_threads(2)
        torch.use_deterministic_algorithms(False)
        train_classifier(
            model,
            make_batch(make_lines(30, seed=1)),
            epochs=2,
            log=None,
            on_epoch_end=lambda epoch, model: seen.append(
                (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
            ),
        )
        after = (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)
    assert seen == [(1, True)] * 3
    assert after == (2, False)
    # Documented: on success the model is left in eval() mode, every submodule.
    assert not any(module.training for module in model.modules())


def test_epoch_result_line_is_rounded():
    line = EpochResult(3, 0.123456, 0.98765, 0.5).line()
    assert line == "epoch  3  loss 0.123  train  98.8%  held-out  50.0%"
    assert EpochResult(12, 1.0, 1.0, None).line() == "epoch 12  loss 1.000  train 100.0%"


def test_model_bad_inputs():
    model = small_model()
    batch = make_batch(make_lines(3, seed=1))
    with pytest.raises(TypeError, match=r"ids must be an int64 torch.Tensor, got .*torch.float64"):
        model(batch.ids.double(), batch.mask)
    with pytest.raises(ValueError, match=r"ids must have shape \(B, T\), got \(4,\)"):
        model(torch.zeros(4, dtype=torch.int64), torch.ones(4, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"mask must be a bool torch.Tensor .* got .*torch.int64"):
        model(batch.ids, batch.mask.long())
    with pytest.raises(ValueError, match=r"mask must have the shape of ids"):
        model(batch.ids, batch.mask[:, :2])
    with pytest.raises(ValueError, match=r"at least one real token"):
        model(batch.ids, torch.zeros_like(batch.mask))
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 67\)"):
        model(batch.ids + 100, batch.mask)
    with pytest.raises(ValueError, match=r"longer than max_len=32"):
        model(torch.ones(1, 40, dtype=torch.int64), torch.ones(1, 40, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"d_model=6 is not divisible by num_heads=4"):
        AttentionClassifier(VOCAB, CLASSES, d_model=6, num_heads=4)
    with pytest.raises(TypeError, match=r"num_classes must be an int"):
        AttentionClassifier(VOCAB, 3.0)
    with pytest.raises(TypeError, match=r"positional must be a bool"):
        AttentionClassifier(VOCAB, CLASSES, positional=1)
    with pytest.raises(TypeError, match=r"freeze_embedding must be a bool"):
        AttentionClassifier(VOCAB, CLASSES, freeze_embedding="yes")
    with pytest.raises(ValueError, match=r"values must be \(B, T, d\) and mask \(B, T\)"):
        masked_mean(torch.zeros(2, 3), torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"mask must be a bool torch.Tensor \(True = real token\)"):
        masked_mean(torch.zeros(2, 3, 1), torch.ones(2, 3))
    with pytest.raises(ValueError, match=r"weights must have shape \(B, h, T, T\)"):
        pooled_attention(torch.zeros(2, 3, 3), torch.ones(2, 3, dtype=torch.bool))


def test_training_bad_arguments():
    model = small_model()
    train = make_batch(make_lines(10, seed=1))
    with pytest.raises(TypeError, match=r"model must be a torch.nn.Module, got str"):
        train_classifier("model", train)
    with pytest.raises(TypeError, match=r"train must be a Batch"):
        train_classifier(model, train.ids)
    with pytest.raises(ValueError, match=r"train has lines without a label"):
        train_classifier(model, make_batch([["a", "jedi"]]))
    with pytest.raises(TypeError, match=r"heldout must be a Batch"):
        train_classifier(model, train, heldout=[1])
    with pytest.raises(ValueError, match=r"epochs must be positive, got 0"):
        train_classifier(model, train, epochs=0)
    with pytest.raises(TypeError, match=r"batch_size must be an int"):
        train_classifier(model, train, batch_size=2.5)
    with pytest.raises(ValueError, match=r"lr must be positive and finite, got -0.1"):
        train_classifier(model, train, lr=-0.1)
    with pytest.raises(ValueError, match=r"lr must be positive and finite, got nan"):
        train_classifier(model, train, lr=float("nan"))
    with pytest.raises(TypeError, match=r"lr must be a real number, got str '0.01'"):
        train_classifier(model, train, lr="0.01")
    with pytest.raises(TypeError, match=r"on_epoch_end must be callable or None, got int 1"):
        train_classifier(model, train, on_epoch_end=1)
    with pytest.raises(ValueError, match=r"train does not fit the model: its ids reach \d+"):
        train_classifier(AttentionClassifier(5, CLASSES, d_model=8).double(), train)
    with pytest.raises(ValueError, match=r"train does not fit the model: .* max_len=4"):
        train_classifier(AttentionClassifier(VOCAB, CLASSES, d_model=8, max_len=4), train)
    with pytest.raises(ValueError, match=r"train has labels up to 2, but model has num_classes=2"):
        train_classifier(AttentionClassifier(VOCAB, 2, d_model=8), train)
    with pytest.raises(TypeError, match=r"log must be callable or None"):
        train_classifier(model, train, log="print")
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    with pytest.raises(ValueError, match=r"no trainable parameters"):
        train_classifier(model, train)
    with pytest.raises(TypeError, match=r"batch must be a Batch"):
        evaluate(small_model(), train.ids)


def test_bad_pooling_inputs_are_named():
    mask = torch.ones(2, 3, dtype=torch.bool)  # (B, T)
    values = torch.zeros(2, 3, 4)  # (B, T, d)
    values[1, 2, 0] = float("nan")
    with pytest.raises(ValueError, match=r"values contains NaN \(shape \(2, 3, 4\)\)"):
        masked_mean(values, mask)
    with pytest.raises(TypeError, match=r"values must be a torch.Tensor, got list"):
        masked_mean([[[1.0]]], mask[:1, :1])
    with pytest.raises(TypeError, match=r"values must be a floating-point tensor"):
        masked_mean(torch.zeros(2, 3, 4, dtype=torch.complex64), mask)
    with pytest.raises(ValueError, match=r"mask is on the meta device"):
        masked_mean(torch.zeros(2, 3, 4), mask.to("meta"))
    weights = torch.full((2, 1, 3, 3), 1 / 3)  # (B, h, T, T)
    weights[0, 0, 0, 0] = float("inf")
    with pytest.raises(ValueError, match=r"weights contains inf"):
        pooled_attention(weights, mask)
    with pytest.raises(TypeError, match=r"weights must be a floating-point tensor"):
        pooled_attention(torch.ones(2, 1, 3, 3, dtype=torch.bool), mask)
    with pytest.raises(TypeError, match=r"mask must be a bool torch.Tensor"):
        pooled_attention(torch.full((2, 1, 3, 3), 1 / 3), [[1, 1, 1], [1, 1, 1]])


def test_a_bad_constructor_call_builds_nothing():
    torch.manual_seed(0)
    state = torch.get_rng_state()
    with pytest.raises(ValueError, match=r"d_model=6 is not divisible by num_heads=4"):
        AttentionClassifier(VOCAB, CLASSES, d_model=6, num_heads=4)
    with pytest.raises(TypeError, match=r"positional must be a bool, got int 1"):
        AttentionClassifier(VOCAB, CLASSES, positional=1)
    assert torch.equal(torch.get_rng_state(), state), "no layer was initialised"
    model = AttentionClassifier(VOCAB, CLASSES, positional=np.bool_(False))
    assert model.positional is False


def snapshot(model):
    return (
        {name: tensor.clone() for name, tensor in model.state_dict().items()},
        [None if p.grad is None else p.grad.clone() for p in model.parameters()],
        [module.training for module in model.modules()],
    )


def assert_same(model, saved):
    params, grads, modes = saved
    now = model.state_dict()
    assert all(torch.equal(now[name], tensor) for name, tensor in params.items())
    for parameter, grad in zip(model.parameters(), grads, strict=True):
        assert (parameter.grad is None and grad is None) or torch.equal(parameter.grad, grad)
    assert [module.training for module in model.modules()] == modes


def test_training_that_raises_midway_leaves_the_model_as_it_was():
    # A log that fails after the first epoch: by then Adam has changed every weight.
    model = small_model().train()
    model.attention.eval()  # a mixed mode, restored module by module
    train = make_batch(make_lines(40, seed=1))
    saved, rng = snapshot(model), torch.get_rng_state()
    threads = torch.get_num_threads()
    seen = []

    def failing_log(line):
        seen.append(line)
        raise RuntimeError("the log failed")

    def draws(epoch, model):  # moves torch's random state, which must be put back
        torch.rand(1)

    with pytest.raises(RuntimeError, match="the log failed"):
        train_classifier(model, train, epochs=3, log=failing_log, on_epoch_end=draws)
    assert len(seen) == 1, "it failed after a whole epoch of training"
    assert_same(model, saved)
    assert torch.equal(torch.get_rng_state(), rng)
    assert torch.get_num_threads() == threads
    assert not torch.are_deterministic_algorithms_enabled()
    # and the same call without the failure trains as before
    history = train_classifier(model, train, epochs=1, log=None)
    assert len(history) == 1 and not torch.equal(
        model.classifier.weight, saved[0]["classifier.weight"]
    )


def test_evaluate_restores_the_mode_when_the_model_raises():
    class Broken(torch.nn.Module):
        def forward(self, ids, mask):
            raise ValueError("broken model")

    model = Broken().train()
    with pytest.raises(ValueError, match="broken model"):
        evaluate(model, make_batch(make_lines(3, seed=1)))
    assert model.training
