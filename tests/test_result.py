"""The result protocol: one Interval type on every result object, the v0.2 interval
names still working with a DeprecationWarning, short reprs, dict/JSON/frame forms, and
tables that are views of the fits."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest

from empirical_batch.result import REPR_LIMIT, Interval, Result, dumps, json_safe


def test_interval_is_a_pair_with_a_level():
    ci = Interval(1, 3, 0.9)
    assert (ci.low, ci.high, ci.level) == (1.0, 3.0, 0.9)
    lo, hi = ci
    assert (lo, hi) == (1.0, 3.0) and ci[0] == 1.0 and ci[1] == 3.0 and len(ci) == 2
    assert 2.0 in ci and 4.0 not in ci and ci.width == 2.0
    assert ci.to_dict() == {"low": 1.0, "high": 3.0, "level": 0.9}
    with pytest.raises(AttributeError):
        ci.low = 0.0  # type: ignore[misc]
    assert len(repr(Interval(-math.inf, math.inf, 0.95))) < 80


def test_json_is_strict():
    text = dumps({"a": math.inf, "b": math.nan, "c": np.float64(2.5), "d": (1, 2),
                  "e": Interval(0.0, math.inf, 0.95)})
    assert json.loads(text) == {"a": "inf", "b": None, "c": 2.5, "d": [1, 2],
                                "e": {"low": 0.0, "high": "inf", "level": 0.95}}
    assert json_safe(np.arange(2)) == [0, 1]


@pytest.fixture(scope="module")
def results():
    """One object of every result class with intervals, made by the library."""
    from empirical_batch.branched import branched_critical_batch
    from empirical_batch.budget import fit_fixed_budget
    from empirical_batch.estimators import GNSEstimator
    from empirical_batch.fit import fit_b_crit_law, fit_lr_scaling, fit_power_law
    from empirical_batch.fit.tradeoff_fit import fit_tradeoff
    from empirical_batch.tradeoff import Tradeoff

    rng = np.random.default_rng(0)
    t = Tradeoff(s_min=1000.0, e_min=64_000.0)
    b = 2.0 ** np.arange(0, 12)
    steps = t.steps(b) * np.exp(0.03 * rng.standard_normal(b.size))
    table = pd.DataFrame({"batch_size": b, "steps": steps, "examples": steps * b})
    fit = fit_tradeoff(table, n_boot=200, seed=0)
    law = fit_power_law([1, 2, 4, 8], [3.0, 6.1, 11.8, 24.2])
    b_law = fit_b_crit_law([3.0, 2.5, 2.0, 1.8], [10.0, 20.0, 45.0, 70.0])
    lrs = 0.5 / (1 + 64.0 / b) * np.exp(0.02 * rng.standard_normal(b.size))
    lr = fit_lr_scaling(pd.DataFrame({"batch_size": b, "learning_rate": lrs}), n_boot=50,
                        seed=0)
    rec = lr.recommend(128.0)
    est = GNSEstimator(0.9)
    for _ in range(20):
        est.update(1.5 + 0.1 * rng.standard_normal(), 8, 1.05 + 0.01 * rng.standard_normal(),
                   64)
    gns = est.estimate(0.9)
    budget = pd.DataFrame([{"compute": c, "batch_size": bb, "learning_rate": lrr,
                            "loss": 2.0 + (np.log(bb) - 0.5 * np.log(c)) ** 2 * 0.01
                            + (np.log(lrr) + 3) ** 2 * 0.01}
                           for c in (1e3, 1e4, 1e5, 1e6) for bb in (8, 16, 32, 64, 128)
                           for lrr in (0.01, 0.03, 0.1)])
    fixed = fit_fixed_budget(budget, budget="compute", n_boot=50, seed=0)

    def train_steps(state, batch_size, lr, n_steps, seed):
        noise = 0.001 * np.random.default_rng([seed, batch_size]).standard_normal()
        final = 1.0 + 0.1 * max(0.0, batch_size / 32 - 4) + noise
        return state, [final] * n_steps

    branched = branched_critical_batch(train_steps, None, 32, examples=32 * 64, lr=1e-3)
    return {"TradeoffFit": fit, "PowerLaw": law, "BCritLaw": b_law, "LRScalingFit": lr,
            "LRRecommendation": rec, "GNSEstimate": gns, "FixedBudgetFit": fixed,
            "BranchedCriticalBatch": branched}


# the v0.2 names of their intervals, removed in 0.4
OLD_NAMES = {
    "TradeoffFit": ["b_crit_ci", "b_crit_lo", "b_crit_hi", "ci_level", "s_min_ci", "e_min_ci"],
    "PowerLaw": ["exponent_ci", "ci_level", "coefficient_ci"],
    "BCritLaw": ["alpha_b_ci", "ci_level", "b_star_ci", "exponent_ci"],
    "LRScalingFit": ["eps_star_ci", "ci_level", "b_star_ci", "alpha_ci"],
    "LRRecommendation": ["learning_rate_ci"],
    "GNSEstimate": ["b_simple_low", "b_simple_high"],
    "FixedBudgetFit": ["b_opt_exponent_ci", "ci_level", "lr_opt_exponent_ci"],
    "BranchedCriticalBatch": ["b_crit_low", "b_crit_high"],
}


@pytest.mark.parametrize("name", sorted(OLD_NAMES))
def test_intervals_are_interval_objects_and_old_names_are_gone(results, name):
    obj = results[name]
    assert type(obj).__name__ == name and isinstance(obj, Result)
    intervals = [f.name for f in dataclasses.fields(obj) if f.name.endswith("_interval")]
    assert intervals
    for field in intervals:
        ci = getattr(obj, field)
        assert isinstance(ci, Interval)
        if hasattr(obj, "level"):
            assert ci.level == obj.level
    for old in OLD_NAMES[name]:
        assert not hasattr(obj, old), old
        with pytest.raises(AttributeError):
            getattr(obj, old)
    assert _old_interval_keys(obj.to_dict()) == []


@pytest.mark.parametrize("name", sorted(OLD_NAMES))
def test_result_forms(results, name):
    obj = results[name]
    assert len(repr(obj)) <= REPR_LIMIT, repr(obj)
    d = obj.to_dict()
    assert isinstance(d, dict)
    json.loads(obj.to_json())  # strict JSON
    assert isinstance(obj.to_frame(), pd.DataFrame)
    field = next(f.name for f in dataclasses.fields(obj) if f.name.endswith("_interval"))
    with pytest.raises(AttributeError):
        setattr(obj, field, Interval(0, 1, 0.5))


def test_curve_table_is_a_view_of_the_fits():
    from empirical_batch.fit import critical_batch_curve
    from empirical_batch.simulate import NoisyQuadratic, simulate_sweep

    nq = NoisyQuadratic.zhang(200)
    sweep = simulate_sweep(nq, 2 ** np.arange(0, 9), np.geomspace(0.01, 1.9, 12),
                           max_steps=20_000, n_points=40)
    curve = critical_batch_curve(sweep, [0.2 * nq.initial_loss()], n_boot=0)
    b = curve.fits[0].b_crit
    edited = curve.frame
    edited.loc[0, "b_crit"] = -1.0
    assert curve.b_crit[0] == b == curve.frame.loc[0, "b_crit"]
    assert curve.status == (curve.fits[0].status,)


def test_interval_holds_numpy_scalars_of_every_real_kind():
    from hypothesis import given
    from hypothesis import strategies as st

    from empirical_batch.result import Interval

    kinds = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.float16,
             np.float32, np.float64, int, float)

    @given(st.integers(-20, 20), st.sampled_from(kinds))
    def check(v, kind):
        if kind in (np.uint8, np.uint32) and v < 0:
            return
        x = kind(v)
        assert (x in Interval(2, 8, 0.95)) is (2 <= v <= 8)

    check()
    assert True not in Interval(0, 2, 0.95) and np.True_ not in Interval(0, 2, 0.95)
    assert "5" not in Interval(2, 8, 0.95) and np.nan not in Interval(2, 8, 0.95)


def _public_result_like_classes(own_to_dict=True):
    """Every public dataclass of the library that writes itself out (``to_dict`` of its
    own; any public dataclass with ``own_to_dict=False``)."""
    import dataclasses
    import importlib
    import pkgutil

    import empirical_batch

    found = {}
    for info in pkgutil.walk_packages(empirical_batch.__path__, "empirical_batch."):
        if any(part.startswith("_") for part in info.name.split(".")) or \
                info.name.startswith(("empirical_batch.validation", "empirical_batch.cli")):
            continue
        try:
            module = importlib.import_module(info.name)
        except Exception:  # an optional package that is not installed
            continue
        for name in getattr(module, "__all__", ()):
            cls = getattr(module, name, None)
            if isinstance(cls, type) and dataclasses.is_dataclass(cls) and \
                    ("to_dict" in vars(cls) or not own_to_dict) and cls.__module__ == info.name:
                found[f"{info.name}.{name}"] = cls
    return found


OLD_SUFFIXES = ("_ci", "_lo", "_hi")


def _old_interval_keys(d, where=""):
    """The keys of a result's ``to_dict()`` (nested dicts and lists of dicts included)
    spelled as the v0.2 intervals were: ``x_ci``, ``x_lo``, ``x_hi``, ``ci_level``."""
    found = []
    if isinstance(d, dict):
        for k, v in d.items():
            if str(k).endswith(OLD_SUFFIXES) or k == "ci_level":
                found.append(f"{where}{k}")
            found += _old_interval_keys(v, f"{where}{k}.")
    elif isinstance(d, list | tuple):
        for v in d:
            found += _old_interval_keys(v, where)
    return found


def test_no_public_result_has_an_old_interval_name():
    """No ``_lo``/``_hi``/``_ci`` interval names (nor ``ci_level``) on any public result
    class: its fields, properties and methods (0.4 removed the v0.2 spellings)."""
    classes = {name: cls for name, cls in _public_result_like_classes(own_to_dict=False).items()
               if issubclass(cls, Result)}
    assert len(classes) >= 30, sorted(classes)
    bad = sorted(f"{name}.{attr}" for name, cls in classes.items()
                 for attr in {*dir(cls), *(f.name for f in dataclasses.fields(cls))}
                 if attr.endswith(OLD_SUFFIXES) or attr == "ci_level")
    assert bad == []


def test_no_result_writes_an_old_interval_key(results, tmp_path):
    from empirical_batch.noise_log import final_noise_scale
    from empirical_batch.transfer import transfer

    objs = [*results.values(), transfer({"lr": 3e-4}, 256, 1024, optimizer="adamw",
                                        b_noise=4000.0),
            final_noise_scale(pd.DataFrame({"step": [1, 2], "b_simple": [10.0, 12.0]}),
                              "b_simple")]
    for obj in objs:
        assert _old_interval_keys(obj.to_dict()) == [], type(obj).__name__
        assert _old_interval_keys(json.loads(obj.to_json())) == [], type(obj).__name__


def test_every_result_like_class_follows_the_protocol():
    """A public dataclass that writes itself out is a `Result`: to_dict, to_json and
    to_frame, as the result protocol documents (docs/design.md)."""
    classes = _public_result_like_classes()
    assert {"empirical_batch.transfer.TransferResult",
            "empirical_batch.throughput.ThroughputModel"} <= set(classes)
    # an Interval is a field of results (its to_dict is the protocol's); a Member is one
    # run of a harness sweep's plan, an input
    exempt = {"empirical_batch.result.Interval", "empirical_batch.harness.trainer.Member"}
    missing = sorted(name for name, cls in classes.items()
                     if not issubclass(cls, Result) and name not in exempt)
    assert missing == []


def test_the_former_outliers_write_json_and_frames(tmp_path):
    from empirical_batch.noise_log import final_noise_scale
    from empirical_batch.throughput import fit_throughput
    from empirical_batch.transfer import transfer

    objs = [transfer({"lr": 3e-4}, 256, 1024, optimizer="adamw", b_noise=4000.0)]
    log = pd.DataFrame({"step": [1, 2], "b_simple": [10.0, 12.0]})
    objs.append(final_noise_scale(log, "b_simple"))
    timings = pd.DataFrame([{"micro_batch": m, "devices": d, "accumulation": 1,
                             "step_seconds": 0.01 + 0.001 * m + 0.02 * np.log2(d)}
                            for m in (8, 16, 32, 64) for d in (1, 2, 4)])
    objs.append(fit_throughput(timings))
    from empirical_batch.measure.hessian import HessianNoiseScale
    from empirical_batch.tradeoff import Tradeoff

    objs.append(HessianNoiseScale(b_noise=3.0, b_simple=4.0, g2=1.0, ghg=2.0,
                                  trace_sigma=4.0, trace_h_sigma=6.0, n_examples=16))
    objs.append(Tradeoff(s_min=100.0, e_min=6400.0))
    for obj in objs:
        json.loads(obj.to_json())
        assert isinstance(obj.to_frame(), pd.DataFrame) and len(obj.to_frame()) >= 1
