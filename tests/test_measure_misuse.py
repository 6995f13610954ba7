"""Collectors cannot be misplaced (trust issue, "Collectors"): the estimate is the same
wherever step() is called between the last backward pass and optimizer.step(), a
single-backward step is skipped and counted, a wrong accumulation_steps is detected, one
overflowing step does not poison the estimator, and remove() releases the model.

v0.1 read .grad at step(): after clip_grad_norm_ or zero_grad(set_to_none=False) it
returned a wrong (often negative) B_simple, and a single-backward step raised."""

from __future__ import annotations

import math
import weakref

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from empirical_batch.measure import GradientNoiseScale  # noqa: E402
from tests import measure_oracle as orc  # noqa: E402

B, K, STEPS = 8, 4, 30


def _loop(before_step=None, k=K, scale=1.0, remainder=False):
    """K micro-batches per step with the same data every time; `before_step(model)` runs
    between the last backward pass and gns.step()."""
    x, y = orc.dataset()
    m = orc.model()
    gns = GradientNoiseScale(m, micro_batch_size=B, accumulation_steps=K, beta=0.9)
    rng = np.random.default_rng(3)
    for _ in range(STEPS):
        idx = rng.integers(0, orc.N, size=(k, B))
        for j in range(k):
            (orc.loss_fn(m(x[idx[j]]), y[idx[j]]) / K * scale).backward()
        if before_step is not None:
            before_step(m)
        gns.step(loss_scale=scale if scale != 1.0 else None)
        m.zero_grad()
    if remainder:  # an epoch-end step with one backward pass
        idx = rng.integers(0, orc.N, size=B)
        orc.loss_fn(m(x[idx]), y[idx]).backward()
        gns.step()
    return gns


@pytest.fixture(scope="module")
def reference():
    return _loop().estimator.history()


def _same(gns, reference):
    got = gns.estimator.history()
    np.testing.assert_allclose(got["sq_norm_small"], reference["sq_norm_small"], rtol=1e-10)
    np.testing.assert_allclose(got["sq_norm_big"], reference["sq_norm_big"], rtol=1e-10)


@pytest.mark.parametrize("misuse", [
    lambda m: torch.nn.utils.clip_grad_norm_(m.parameters(), 1e-3),
    lambda m: m.zero_grad(set_to_none=False),
    lambda m: m.zero_grad(set_to_none=True),
    lambda m: [p.grad.mul_(1 / 1024.0) for p in m.parameters()],  # like scaler.unscale_
], ids=["clip", "zero_grad_keep", "zero_grad_none", "unscale"])
def test_step_placement_does_not_change_the_estimate(reference, misuse):
    _same(_loop(before_step=misuse), reference)


def test_amp_scaled_loss_unscaled_before_step_gives_the_same_estimate(reference):
    def unscale(m):
        for p in m.parameters():
            p.grad.mul_(1 / 1024.0)

    _same(_loop(before_step=unscale, scale=1024.0), reference)


def test_single_backward_remainder_is_skipped_and_counted(reference):
    gns = _loop(remainder=True)
    assert gns.skipped["single_backward"] == 1
    _same(gns, reference)


def test_wrong_accumulation_steps_is_detected():
    with pytest.warns(UserWarning, match="accumulation_steps=4"):
        gns = _loop(k=3)
    assert gns.skipped["accumulation_mismatch"] == STEPS and gns.estimator.steps == 0


def test_one_overflowing_step_does_not_poison_the_estimator(reference):
    x, y = orc.dataset()
    m = orc.model()
    gns = GradientNoiseScale(m, micro_batch_size=B, accumulation_steps=K, beta=0.9)
    for t in range(3):
        for j in range(K):
            loss = orc.loss_fn(m(x[:B]), y[:B]) / K
            (loss * float("inf") if t == 1 and j == 0 else loss).backward()
        gns.step()
        m.zero_grad()
    assert gns.skipped["non_finite"] == 1 and gns.estimator.steps == 2
    assert math.isfinite(gns.b_simple)


def test_remove_releases_the_model():
    m = orc.model()
    gns = GradientNoiseScale(m, micro_batch_size=B, accumulation_steps=K)
    ref = weakref.ref(m)
    gns.remove()
    x, y = orc.dataset()
    orc.loss_fn(m(x[:B]), y[:B]).backward()  # no hook fires any more
    assert gns.params == [] and gns.optimizer is None
    with pytest.raises(RuntimeError, match="before any backward"):
        gns.step()
    del m
    assert ref() is None


def test_a_wrong_object_where_a_collector_or_logger_goes_is_named():
    from empirical_batch.errors import InputError
    from empirical_batch.estimators import GNSEstimator
    from empirical_batch.integrations.loggers import log_tensorboard, log_wandb
    from empirical_batch.measure import NoiseScaleLog

    model = torch.nn.Linear(2, 1)
    with pytest.raises(InputError, match=r"source must be a noise-scale collector .* got "
                                         r"Linear"):
        NoiseScaleLog().record(1, model)
    est = GNSEstimator(beta=0.0)
    est.update(2 + 40 / 4, 4, 2 + 40 / 16, 16)

    class Collector:
        estimator, skipped = est, {}

    class Writer:
        def add_scalar(self, *args, **kwargs):
            pass

    with pytest.raises(InputError, match="collector must be a noise-scale collector"):
        log_tensorboard(Writer(), model, 1)
    with pytest.raises(InputError, match="writer must be a TensorBoard SummaryWriter"):
        log_tensorboard(object(), Collector(), 1)
    with pytest.raises(InputError, match="run must be a Weights & Biases run"):
        log_wandb(model, Collector(), 1)
    assert NoiseScaleLog().record(1, Collector())["b_simple"] == pytest.approx(20.0)
