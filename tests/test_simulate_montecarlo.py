"""Monte Carlo SGD (torch) against the exact expected dynamics."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from empirical_batch.simulate import NoisyQuadratic, monte_carlo_sgd

torch = pytest.importorskip("torch")


pytestmark = pytest.mark.usefixtures("one_torch_thread")

# |z| bound for the mean of many seeds against the exact value. Each check compares
# 2 B × 2 lr × 3 steps = 12 correlated z-scores; P(max |z| > 4) < 12 · 6.3e-5 ≈ 1e-3
# for Gaussian z, and the seed is fixed, so the test is deterministic.
Z_MAX = 4.0


def check_against_exact(nq, result):
    a = result.learning_rates[None, :, None]
    b = result.batch_sizes[:, None, None]
    exact = nq.expected_loss(a, b, result.steps[None, None, :])
    se = result.stderr()
    z = (result.mean() - exact) / np.where(se > 0, se, 1.0)
    assert np.all(np.abs(z) < Z_MAX), np.abs(z).max()
    # the test can fail: a 5% wrong noise level would be seen
    assert np.max(se / exact) < 0.05


@pytest.mark.parametrize(
    "options",
    [{}, {"momentum": 0.6}, {"ema": 0.8}, {"precondition": 0.5, "momentum": 0.3, "ema": 0.5}],
)
def test_monte_carlo_mean_matches_exact(options):
    nq = NoisyQuadratic([1.0, 0.3, 0.05], [0.5, 1.0, 0.2], [1.0, 2.0, 0.5], **options)
    res = monte_carlo_sgd(nq, [1, 4], [0.1, 0.5], 40, n_seeds=3000, record_steps=[0, 5, 40],
                          dtype="float64", seed=1)
    check_against_exact(nq, res)


def test_finite_dataset_matches_exact_second_moments():
    nq = NoisyQuadratic([1.0, 0.3, 0.05], [0.5, 1.0, 0.2], [1.0, 2.0, 0.5])
    res = monte_carlo_sgd(nq, [1, 4], [0.1, 0.5], 40, n_seeds=3000, record_steps=[0, 5, 40],
                          dtype="float64", dataset_size=16, seed=2)
    check_against_exact(nq, res)


def test_wrong_noise_is_detected():
    """Guard: the comparison rejects a problem with 20% more noise than simulated."""
    nq = NoisyQuadratic([1.0, 0.3], [1.0, 1.0], 0.0)
    res = monte_carlo_sgd(nq, [1], [0.5], 30, n_seeds=3000, record_steps=[30], dtype="float64")
    louder = NoisyQuadratic([1.0, 0.3], [1.2, 1.2], 0.0)
    with pytest.raises(AssertionError):
        check_against_exact(louder, res)


def test_result_views_and_progress():
    nq = NoisyQuadratic.zhang(8)
    res = monte_carlo_sgd(nq, [1, 2], [0.1], 10, n_seeds=2, n_points=3, progress=True)
    assert res.loss.shape == (2, 1, 2, res.steps.size)
    assert res.steps[0] == 0 and res.steps[-1] == 10
    frame = res.to_frame()
    assert len(frame) == res.loss.size
    assert set(res.to_dict()) >= {"loss", "steps", "device"}


def test_chunked_lr_axis_is_consistent():
    nq = NoisyQuadratic.zhang(8)
    kw = dict(batch_sizes=[1, 2], learning_rates=[0.1, 0.2, 0.3], steps=5, n_seeds=2)
    res = monte_carlo_sgd(nq, **kw, max_elements=1)
    assert res.loss.shape[:2] == (2, 3) and np.all(np.isfinite(res.loss))


@pytest.mark.parametrize(
    ("kwargs", "err"),
    [
        ({"batch_sizes": [0]}, ValueError),
        ({"learning_rates": [-1.0]}, ValueError),
        ({"steps": -1}, ValueError),
        ({"n_seeds": 0}, ValueError),
        ({"dtype": "float16"}, ValueError),
        ({"dataset_size": 1}, ValueError),
        ({"record_steps": [50]}, ValueError),
    ],
)
def test_bad_arguments(kwargs, err):
    nq = NoisyQuadratic.zhang(4)
    base = dict(batch_sizes=[1], learning_rates=[0.1], steps=10)
    with pytest.raises(err):
        monte_carlo_sgd(nq, **{**base, **kwargs})


def test_import_without_torch():
    code = (
        "import sys\n"
        "sys.modules['torch'] = None  # any 'import torch' now fails\n"
        "import empirical_batch.simulate as s\n"
        "nq = s.NoisyQuadratic.zhang(10)\n"
        "s.simulate_sweep(nq, [1, 2], [0.1], 10)\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "ok" in out.stdout


@pytest.mark.gpu
def test_cuda_matches_exact():
    nq = NoisyQuadratic([1.0, 0.3, 0.05], [0.5, 1.0, 0.2], [1.0, 2.0, 0.5], momentum=0.5)
    res = monte_carlo_sgd(nq, [1, 4], [0.1, 0.5], 40, n_seeds=3000, record_steps=[0, 5, 40],
                          dtype="float64", device="cuda", seed=3)
    check_against_exact(nq, res)


@pytest.mark.parametrize("device, word", [("cuda", "no CUDA device is available"),
                                          ("cuda:0", "no CUDA device is available"),
                                          ("tpu9", "must be a torch device")])
def test_a_device_this_machine_lacks_is_refused_in_words(monkeypatch, device, word):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=word):
        monte_carlo_sgd(NoisyQuadratic([1.0, 0.5], 1.0, 1.0), [4], [0.1], steps=3,
                        device=device)
