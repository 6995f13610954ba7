"""Models cannot go stale: inputs are fixed once built, the caller's arrays are untouched."""

from __future__ import annotations

import numpy as np
import pytest

from empirical_batch import NoisyQuadratic, QuadraticModel


def test_noisy_quadratic_refuses_edits_and_keeps_caller_arrays_writable():
    h = np.array([1.0, 0.1])
    nq = NoisyQuadratic(h, noise=[1.0, 0.1], init=1.0, precondition=0.5)
    before = nq.expected_loss(0.5, 4, 10)
    with pytest.raises(AttributeError, match="immutable"):
        nq.curvature = np.array([2.0, 0.2])
    with pytest.raises(ValueError, match="read-only"):
        nq.curvature[0] = 5.0
    with pytest.raises(ValueError, match="read-only"):
        nq.update_curvature[0] = 5.0
    h[0] = 7.0  # the caller's array stays theirs
    assert nq.curvature[0] == 1.0 and nq.expected_loss(0.5, 4, 10) == before
    np.testing.assert_allclose(nq.update_curvature, np.array([1.0, 0.1]) ** 0.5)


def test_quadratic_model_refuses_edits():
    g = np.array([1.0, 1.0])
    m = QuadraticModel(gradient=g, hessian=[1.0, 3.0], noise_cov=[4.0, 4.0])
    with pytest.raises(AttributeError, match="immutable"):
        m.gradient = np.array([2.0, 2.0])
    with pytest.raises(AttributeError, match="immutable"):
        m.g2 = 3.0
    with pytest.raises(ValueError, match="read-only"):
        m.gradient[0] = 3.0
    g[0] = 9.0
    assert m.b_noise == 4.0
    s = QuadraticModel.from_scalars(g2=2.0, ghg=4.0, trace_sigma=8.0, trace_h_sigma=16.0)
    with pytest.raises(AttributeError, match="immutable"):
        s.trace_sigma = 1.0
