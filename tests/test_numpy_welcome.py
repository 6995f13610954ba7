"""numpy's numbers are welcome wherever a number is: every public numeric parameter
takes numpy scalars (and 0-d arrays) of its kind and gives what the Python number gives.

The shared checks (`empirical_batch._validate`: `as_scalar`, `as_float`,
`positive_float`, `check_count`; `empirical_batch.params.check`) unwrap them once; the
public parameters below go through them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from empirical_batch import params
from empirical_batch._validate import as_float, as_scalar, check_count, positive_float
from empirical_batch.result import Interval
from empirical_batch.schedule import (
    AdaptiveBatchRule,
    NoiseTrajectory,
    design_schedule,
    seesaw_schedule,
    to_megatron,
)
from empirical_batch.transfer import transfer

INTS = st.sampled_from([np.int64, np.int32, np.int16, np.uint32, np.uint64])
REALS = st.sampled_from([np.float64, np.float32])
WRAP = st.sampled_from(["scalar", "0-d array"])


def _np(kind, value, wrap):
    x = kind(value)
    return np.asarray(x) if wrap == "0-d array" else x


def _same(a, b):
    return a == b or (isinstance(a, float) and isinstance(b, float)
                      and math.isnan(a) and math.isnan(b))


@settings(max_examples=40, deadline=None)
@given(kind=INTS, n=st.integers(1, 2**15 - 1), wrap=WRAP)
def test_shared_integer_checks(kind, n, wrap):
    x = _np(kind, n, wrap)
    got = check_count(x, "n", 1)
    assert got == n and type(got) is int
    assert as_float(x, "x") == float(n) and positive_float(x, "x") == float(n)
    assert float(params.check("n_boot", x)) == n and float(params.check("devices", x)) == n
    assert as_scalar(x) == n
    assert (x in Interval(0, 2**15, 0.95)) is True


@settings(max_examples=40, deadline=None)
@given(kind=REALS, v=st.floats(1e-3, 1e3), wrap=WRAP)
def test_shared_real_checks(kind, v, wrap):
    x = _np(kind, v, wrap)
    want = float(kind(v))
    assert as_float(x, "x") == want and positive_float(x, "x") == want
    assert float(params.check("b_crit", x)) == want
    assert positive_float(_np(kind, np.inf, wrap), "x", allow_inf=True) == math.inf
    with pytest.raises(ValueError, match="x must be"):
        positive_float(_np(kind, np.inf, wrap), "x")


@pytest.mark.parametrize("bad", [np.bool_(True), np.asarray(True), np.complex128(1),
                                 np.float64(np.nan), np.int64(-1), np.float32(0.5)])
def test_numpy_values_of_another_kind_are_still_refused(bad):
    with pytest.raises(ValueError, match="n must be"):
        check_count(bad, "n", 0)


@settings(max_examples=25, deadline=None)
@given(ikind=INTS, rkind=REALS, steps=st.integers(100, 5000), tokens=st.integers(1, 8192),
       base=st.sampled_from([8, 16, 32]), wrap=WRAP)
def test_schedules(ikind, rkind, steps, tokens, base, wrap):
    ref = seesaw_schedule("cosine", total_steps=steps, base_batch=base)
    got = seesaw_schedule("cosine", total_steps=_np(ikind, steps, wrap),
                          base_batch=_np(ikind, base, wrap))
    assert got.stages.equals(ref.stages)
    assert to_megatron(ref, tokens_per_sample=_np(ikind, tokens, wrap)) == \
        to_megatron(ref, tokens_per_sample=tokens)
    traj = NoiseTrajectory(np.array([0.0, 100.0, 200.0]), np.array([50.0, 200.0, 800.0]))
    kw = dict(base_batch=base, granularity=8)
    a = design_schedule(traj, "app_d", exchange_rate=_np(rkind, 64.0, wrap),
                        max_batch=_np(ikind, 1024, wrap), **kw)
    b = design_schedule(traj, "app_d", exchange_rate=64.0, max_batch=1024, **kw)
    assert a.stages.equals(b.stages)


@settings(max_examples=40, deadline=None)
@given(ikind=INTS, rkind=REALS, batch=st.integers(1, 4096), min_steps=st.integers(1, 50),
       b_noise=st.floats(1.0, 1e5), wrap=WRAP)
def test_adaptive_rule(ikind, rkind, batch, min_steps, b_noise, wrap):
    for policy, rate in (("doubling", None), ("app_d", 100.0)):
        ref = AdaptiveBatchRule(policy, exchange_rate=rate, min_steps=min_steps)
        got = AdaptiveBatchRule(policy, min_steps=_np(ikind, min_steps, wrap),
                                exchange_rate=None if rate is None else _np(rkind, rate, wrap),
                                max_batch=_np(rkind, np.inf, wrap))
        assert got.min_steps == min_steps and type(got.min_steps) is int
        b = float(rkind(b_noise))
        want = ref.next_batch(batch, b, 0.9 * b)
        out = got.next_batch(_np(ikind, batch, wrap), _np(rkind, b_noise, wrap),
                             _np(rkind, 0.9 * b_noise, wrap))
        assert out == want and type(out) is int


@settings(max_examples=25, deadline=None)
@given(ikind=INTS, rkind=REALS, total=st.integers(1, 30000), lr=st.floats(1e-5, 1.0),
       wrap=WRAP)
def test_transfer(ikind, rkind, total, lr, wrap):
    ref = transfer({"lr": float(rkind(lr)), "total_steps": total}, 256, 1024,
                   optimizer="adamw", b_noise=40000.0)
    got = transfer({"lr": _np(rkind, lr, wrap), "total_steps": _np(ikind, total, wrap)},
                   _np(ikind, 256, wrap), _np(rkind, 1024, wrap), optimizer="adamw",
                   b_noise=_np(rkind, 40000.0, wrap))
    assert got.to_dict() == ref.to_dict()


torch = pytest.importorskip("torch")


@settings(max_examples=15, deadline=None)
@given(rkind=REALS, lr=st.floats(1e-5, 1.0), wrap=WRAP)
def test_batch_size_scheduler_base_lr(rkind, lr, wrap):
    from empirical_batch.schedule import BatchSizeScheduler

    sch = seesaw_schedule("cosine", total_steps=100, base_batch=8)
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1)
    got = BatchSizeScheduler(opt, sch, base_lr=_np(rkind, lr, wrap))
    assert got.base_lr == float(rkind(lr))
    for bad in (np.float64(np.inf), np.float32(0.0), np.bool_(True)):
        with pytest.raises(ValueError, match="base_lr"):
            BatchSizeScheduler(opt, sch, base_lr=bad)


@settings(max_examples=15, deadline=None)
@given(rkind=REALS, c=st.lists(st.floats(0.1, 10.0), min_size=2, max_size=2),
       as_array=st.booleans())
def test_weights(rkind, c, as_array):
    from empirical_batch.measure import GradientNoiseScale

    def run(weights):
        theta = torch.nn.Parameter(torch.ones(2, dtype=torch.float64))
        model = torch.nn.Module()
        model.theta = theta
        gns = GradientNoiseScale(model, micro_batch_size=4, accumulation_steps=2, beta=0.0)
        for n, cj in zip((4, 1), c, strict=True):
            (cj * (theta * n).sum()).backward()
        gns.step([4, 1], weights=weights)
        return gns.estimator.history()

    ref = run([float(rkind(v)) for v in c])
    w = np.array(c, dtype=rkind) if as_array else [rkind(v) for v in c]
    got = run(w)
    for key in ("b_small", "b_big", "g2", "trace_sigma"):
        np.testing.assert_array_equal(got[key], ref[key])


def test_messages_show_numbers_not_numpy_reprs():
    from empirical_batch._validate import as_array
    from empirical_batch.tradeoff import Tradeoff

    with pytest.raises(ValueError) as exc:
        as_array([1.0, np.nan], "loss")
    assert "got nan at index (1,)" in str(exc.value) and "np." not in str(exc.value)
    with pytest.raises(ValueError) as exc:
        Tradeoff(100, 6400).examples(np.float32(np.inf))
    assert str(exc.value) == "batch_size must be finite, got inf"
