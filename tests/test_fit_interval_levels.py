"""``fit.interval("b_crit", level)`` at any level: recomputed from the fit's
`BCritProfile` and draws, it is exactly the interval `fit_tradeoff` gives at that level
(same seed, so the same draws), and it widens with the level."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from empirical_batch import Tradeoff, fit_tradeoff, read_result
from empirical_batch.errors import UsageError
from empirical_batch.fit.tradeoff_intervals import BCritProfile
from empirical_batch.result import Interval

METHODS = ("profile", "f", "percentile")


def _table(n=9, b_crit=64.0, noise=0.05, seed=1, first=0.0):
    rng = np.random.default_rng(seed)
    b = 2.0 ** (first + np.arange(n))
    steps = Tradeoff(1000.0, 1000.0 * b_crit).steps(b) * np.exp(
        noise * rng.standard_normal(n))
    return pd.DataFrame({"batch_size": b, "steps": steps})


def _fit(table, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_tradeoff(table, n_boot=kw.pop("n_boot", 300), seed=0, **kw)


@pytest.mark.parametrize("bounded", [False, True])
@pytest.mark.parametrize("method", METHODS)
def test_another_level_is_the_fit_at_that_level_exactly(method, bounded):
    table = _table()
    fit = _fit(table, interval=method, bounded=bounded)
    assert fit.status == "identified"
    assert fit.b_crit_profile == BCritProfile(
        method=method, log_batch_sizes=tuple(np.log(table["batch_size"]).tolist()),
        log_steps=fit.b_crit_profile.log_steps, log_b_crit=fit.b_crit_profile.log_b_crit,
        bounded=bounded)
    for level in (0.5, 0.8, 0.9, 0.99):
        at = _fit(table, interval=method, bounded=bounded, level=level)
        assert fit.interval("b_crit", level) == at.b_crit_interval  # exact, not approximate
        assert at.interval("b_crit", 0.95) == fit.b_crit_interval
    # its own level: the stored interval, and recomputing it gives the same values
    assert fit.interval("b_crit", 0.95) is fit.b_crit_interval
    from empirical_batch.fit.tradeoff_intervals import b_crit_interval_at

    again = b_crit_interval_at(fit.b_crit_profile, 0.95, fit.draws, fit.n_boot)
    assert Interval(*again, 0.95) == fit.b_crit_interval


def test_a_bound_at_another_level_is_the_fit_at_that_level():
    table = _table(n=7, b_crit=1e5, noise=0.02, seed=0)  # steps still halving: a bound
    assert _fit(table).status == "lower_bound"
    for method in METHODS:
        fit = _fit(table, interval=method)
        at = _fit(table, interval=method, level=0.7)
        assert fit.interval("b_crit", 0.7) == at.b_crit_interval
        assert fit.interval("b_crit", 0.99) == _fit(table, interval=method,
                                                     level=0.99).b_crit_interval


def test_the_f_interval_reads_back_at_any_level_and_the_bootstrap_ones_say_why():
    table = _table()
    f = _fit(table, interval="f")
    back = read_result(f.to_json())
    assert back.b_crit_profile == f.b_crit_profile and back.draws == {}
    assert back.interval("b_crit", 0.8) == f.interval("b_crit", 0.8)
    for method in ("profile", "percentile"):
        back = read_result(_fit(table, interval=method).to_json())
        with pytest.raises(UsageError, match=rf"no bootstrap draws of b_crit, which its "
                                             rf"'{method}' interval is formed from"):
            back.interval("b_crit", 0.8)
        assert back.interval("b_crit", 0.95) is back.b_crit_interval


def test_without_draws_a_bootstrap_interval_is_nan_at_every_level():
    fit = _fit(_table(), n_boot=0)
    assert fit.status == "unknown"
    got = fit.interval("b_crit", 0.8)
    assert math.isnan(got.low) and math.isnan(got.high) and got.level == 0.8
    assert _fit(_table(), n_boot=0, interval="f").interval("b_crit", 0.8).width > 0


def test_a_fit_without_a_profile_says_so():
    import dataclasses

    fit = dataclasses.replace(_fit(_table(), interval="f"), b_crit_profile=None)
    with pytest.raises(UsageError, match=r"no profile of b_crit.*level=0.95 only"):
        fit.interval("b_crit", 0.8)


def _one_sided(ci: Interval) -> tuple[bool, bool]:
    return ci.low <= 0, math.isinf(ci.high)


#: levels 0.005 apart: the ends are roots found to 1e-12 in log B_crit, so two levels
#: closer than that tolerance's effect on the critical value could order them either way
LEVELS = st.integers(2, 199).map(lambda k: k / 200)


@settings(max_examples=40, deadline=None)
@given(method=st.sampled_from(METHODS), n=st.integers(4, 9),
       log2_b_crit=st.floats(-2.0, 14.0), noise=st.sampled_from([0.01, 0.05, 0.2, 0.4]),
       seed=st.integers(0, 2**16), levels=st.lists(LEVELS, min_size=2, max_size=2,
                                                  unique=True).map(sorted))
def test_a_higher_level_gives_a_wider_or_equal_interval(method, n, log2_b_crit, noise,
                                                        seed, levels):
    """Nested in the level: the ``"f"`` set (its F quantile grows with the level), the
    ``"percentile"`` interval (its quantiles move apart), and the ``"profile"`` set while
    its ends stay as open or closed (its calibrated critical value grows with the level).
    A ``"profile"`` set that turns one-sided at the higher level takes its finite end
    from the ``"f"`` set, as the fit does (`b_crit_status`), so that end is not nested
    in the lower level's bootstrap-calibrated one."""
    fit = _fit(_table(n=n, b_crit=2.0**log2_b_crit, noise=noise, seed=seed), n_boot=200,
               interval=method)
    low, high = (fit.interval("b_crit", level) for level in levels)
    assert (low.level, high.level) == tuple(levels)
    if method == "profile" and _one_sided(low) != _one_sided(high):
        return
    assert high.low <= low.low <= low.high <= high.high, (low, high)
