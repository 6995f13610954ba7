"""A result's JSON reads back: ``read_result(r.to_json())`` equals ``r`` for every public
result class (fields compared NaN-aware), from values hypothesis generates through each
class's constructor; and ``interval(name, level)`` from the stored bootstrap draws."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, reject
from hypothesis import strategies as st
from test_result import _public_result_like_classes

from empirical_batch import read_result
from empirical_batch.errors import DataError, InputError, UsageError
from empirical_batch.result import RESULT_KEY, Interval, Result

#: classes whose dict cannot give them back, with the reason (from_dict says it): none
#: of the library's (a `Rule` holds functions, but reads back as the registered rule of
#: its name); `test_a_class_that_cannot_be_read_back_says_why` checks the mechanism
CANNOT_READ_BACK: dict[str, str] = {}

#: classes hypothesis does not build from field values: their fields must agree with
#: each other (a table and the counts of its rows, arrays of matching shapes); each is
#: checked with an object the library makes (`made`)
MADE_BY_THE_LIBRARY = {
    "empirical_batch.branched.BranchedCriticalBatch": "losses has one row per factor",
    "empirical_batch.budget.FixedBudgetFit": "optima, band and the two laws agree",
    "empirical_batch.fit.curve.CriticalBatchCurve": "its fits are fits of its steps tables",
    "empirical_batch.simulate.adaptive.AdaptiveResult": "schedule and fixed run agree",
    "empirical_batch.rules.Rule": "its lr_factor and move are functions (RULES)",
    "empirical_batch.planning.Plan": "its counts are read from its table's columns",
    "empirical_batch.simulate.sweep.SimulatedSweep": "its run count is read from its table",
    "empirical_batch.loaders.mlperf.RCPTable": "its benchmarks and counts are read from its "
                                               "table's columns",
}


def classes():
    return {name: cls for name, cls in _public_result_like_classes(own_to_dict=False).items()
            if issubclass(cls, Result) and name != "empirical_batch.result.TableResult"}


def extra(f) -> bool:
    """A field outside equality that has a default (a fit's bootstrap draws): not in
    the dict, not compared. (A table result's ``frame`` is outside ``==`` but compared.)"""
    return not f.compare and (f.default is not dataclasses.MISSING
                              or f.default_factory is not dataclasses.MISSING)


def same(a, b, where="") -> list[str]:
    """Where ``a`` and ``b`` differ (NaN equal to NaN; results, intervals, arrays,
    tables and containers compared element by element)."""
    if isinstance(a, Result) and type(a) is type(b):
        return [d for f in dataclasses.fields(a) if not extra(f)
                for d in same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")]
    if isinstance(a, Interval) and isinstance(b, Interval):
        return same((*a, a.level), (*b, b.level), where)
    if isinstance(a, pd.DataFrame) and isinstance(b, pd.DataFrame):
        if list(a.columns) != list(b.columns) or a.shape != b.shape:
            return [f"{where}: columns/shape {list(a.columns)} {a.shape} vs "
                    f"{list(b.columns)} {b.shape}"]
        return [d for c in a.columns for d in same(a[c].tolist(), b[c].tolist(),
                                                   f"{where}[{c}]")]
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return [f"{where}: shape {a.shape} vs {b.shape}"]
        return same(a.tolist(), b.tolist(), where)
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return [f"{where}: keys {sorted(a)} vs {sorted(b)}"]
        return [d for k in a for d in same(a[k], b[k], f"{where}[{k!r}]")]
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        if type(a) is not type(b) or len(a) != len(b):
            return [f"{where}: {a!r} vs {b!r}"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True))
                for d in same(x, y, f"{where}[{i}]")]
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return []
    if a is pd.NA or b is pd.NA:  # pandas' missing value of an extension column
        return [] if a is b else [f"{where}: {a!r} vs {b!r}"]
    if type(a) is not type(b) or a != b:
        return [f"{where}: {a!r} ({type(a).__name__}) vs {b!r} ({type(b).__name__})"]
    return []


def test_same_tells_values_apart():
    """The comparison the round trips rely on sees a changed value, a NaN against a
    number, a changed table cell and a list for a tuple."""
    assert same(Interval(1, math.nan, 0.9), Interval(1, math.nan, 0.9)) == []
    assert same(Interval(1, 2, 0.9), Interval(1, math.nan, 0.9)) != []
    assert same(pd.DataFrame({"a": [1.0, np.nan]}), pd.DataFrame({"a": [1.0, 2.0]})) != []
    assert same((1.0,), [1.0]) != [] and same(np.arange(3.0), np.arange(3.0)) == []
    assert same(1, 1.0) != []


# --- values generated from the field annotations --------------------------------------

FLOATS = st.one_of(st.floats(1e-6, 1e9), st.just(math.nan), st.just(math.inf),
                   st.floats(-1e3, 1e3))
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


def strategy(hint: str):
    """A hypothesis strategy for a field annotated ``hint`` (None: no generic one)."""
    from empirical_batch._revive import split_union

    alts = split_union(hint)
    if len(alts) > 1:  # JSON's null is None here: a NaN there would read back as None
        parts = [st.none() if a == "None" else
                 FLOATS.filter(lambda v: not math.isnan(v)) if a == "float" else strategy(a)
                 for a in alts]
        return None if any(p is None for p in parts) else st.one_of(*parts)
    head, _, rest = hint.partition("[")
    simple = {"float": FLOATS, "int": st.integers(0, 10**6), "str": TEXT,
              "bool": st.booleans(), "Any": st.none()}
    if hint in simple:
        return simple[hint]
    if hint == "Interval":
        return st.builds(Interval, FLOATS, FLOATS, st.floats(0.01, 0.99))
    if hint == "np.ndarray":
        return st.lists(FLOATS, max_size=5).map(lambda v: np.asarray(v, dtype=float))
    if hint == "pd.DataFrame":
        return st.lists(st.tuples(FLOATS, st.integers(-5, 5), TEXT), min_size=1, max_size=4).map(
            lambda rows: pd.DataFrame(rows, columns=["x", "n", "name"]))
    if head == "tuple" and rest.endswith(", ...]"):
        inner = strategy(rest[: -len(", ...]")])
        return None if inner is None else st.lists(inner, max_size=4).map(tuple)
    if head == "tuple" and rest:
        from empirical_batch._revive import _split_args

        parts = [strategy(a) for a in _split_args(rest[:-1])]
        return None if any(p is None for p in parts) else st.tuples(*parts)
    if head == "dict" and rest.startswith("str, float"):
        return st.dictionaries(TEXT, FLOATS, max_size=3)
    if head == "dict" and rest.startswith("str, Any"):  # (a NaN there reads back as None)
        return st.dictionaries(TEXT, st.one_of(st.floats(-1e9, 1e9), TEXT), max_size=3)
    if head == "Mapping" and rest.startswith("str, "):
        inner = strategy(rest[len("str, "):-1])
        return None if inner is None else st.dictionaries(TEXT, inner, max_size=2)
    if hint in SAMPLED:
        return st.deferred(SAMPLED[hint])
    from empirical_batch.result import _class_named

    nested = _class_named(hint)
    if nested is None or nested.cannot_read_back or field_strategies(nested) is None:
        return None
    return st.deferred(lambda: generated(nested))


def _published_laws():
    from empirical_batch.laws import PUBLISHED_LAWS

    return st.sampled_from(list(PUBLISHED_LAWS.values()))


#: classes drawn from objects the library holds (their fields must agree with each other)
SAMPLED = {"ScalingLaw": _published_laws}


#: classes whose constructor takes positive finite numbers only
POSITIVE = {"Hardware", "AdaptiveSchedule"}


def field_strategies(cls):
    out = {}
    for f in dataclasses.fields(cls):
        if not f.init or f.name.startswith("_") or extra(f):
            continue
        s = strategy(str(f.type))
        if cls.__qualname__ in POSITIVE and str(f.type) in ("float", "int"):
            s = st.floats(1e-3, 1e6) if str(f.type) == "float" else st.integers(1, 10**6)
        if s is None:
            return None
        out[f.name] = s
    return out


def generated(cls):
    """Objects of ``cls`` built by its constructor from generated field values (values
    it refuses are rejected)."""
    if cls.__qualname__ in SAMPLED:
        return SAMPLED[cls.__qualname__]()
    fields = field_strategies(cls)

    def build(kwargs):
        try:
            return cls(**kwargs)
        except (InputError, UsageError, ValueError, TypeError, ZeroDivisionError):
            reject()

    return st.fixed_dictionaries(fields).map(build)


def generic_classes():
    return sorted(name for name, cls in classes().items()
                  if name not in CANNOT_READ_BACK and name not in MADE_BY_THE_LIBRARY
                  and field_strategies(cls) is not None)


def test_every_class_is_read_back_or_says_why():
    """Each public result class is checked here: built by hypothesis, made by the
    library, or listed with the reason it cannot be read back."""
    left = sorted(set(classes()) - set(generic_classes()) - set(MADE_BY_THE_LIBRARY)
                  - set(CANNOT_READ_BACK))
    assert left == []
    assert len(generic_classes()) >= 25


@pytest.mark.parametrize("name", generic_classes())
def test_generated_results_read_back(name):
    cls = classes()[name]

    @given(generated(cls))
    def check(obj):
        text = obj.to_json()
        assert json.loads(text)[RESULT_KEY].endswith(f":{cls.__qualname__}")
        back = read_result(text)
        assert type(back) is cls
        assert same(obj, back) == []
        assert same(obj, cls.from_dict(json.loads(text))) == []

    check()


@pytest.fixture(scope="module")
def made():
    """Results made by the library for the classes hypothesis does not build."""
    from test_result import results

    from empirical_batch.fit import critical_batch_curve
    from empirical_batch.rules import RULES
    from empirical_batch.simulate import NoisyQuadratic, simulate_adaptive, simulate_sweep

    lib = results.__wrapped__()
    nq = NoisyQuadratic.zhang(200)
    sweep = simulate_sweep(nq, 2 ** np.arange(0, 9), np.geomspace(0.01, 1.9, 12),
                           max_steps=20_000, n_points=40)
    curve = critical_batch_curve(sweep, [0.2 * nq.initial_loss(), 0.1 * nq.initial_loss()],
                                 n_boot=20)
    small = NoisyQuadratic([1.0, 0.2, 0.05], [0.3, 1.0, 0.5], [1.0, 2.0, 4.0])
    from empirical_batch import Tradeoff, plan
    from empirical_batch.datasets import mlperf_rcp

    adaptive = simulate_adaptive(small, target=0.05, exchange_rate=100.0)
    return {"empirical_batch.branched.BranchedCriticalBatch": lib["BranchedCriticalBatch"],
            "empirical_batch.budget.FixedBudgetFit": lib["FixedBudgetFit"],
            "empirical_batch.fit.curve.CriticalBatchCurve": curve,
            "empirical_batch.simulate.adaptive.AdaptiveResult": adaptive,
            "empirical_batch.rules.Rule": next(iter(RULES.values())),
            "empirical_batch.planning.Plan": plan(Tradeoff(1000.0, 256_000.0)),
            "empirical_batch.simulate.sweep.SimulatedSweep": sweep,
            "empirical_batch.loaders.mlperf.RCPTable": mlperf_rcp(),
            "library": list(lib.values())}


def test_results_made_by_the_library_read_back(made):
    objs = [v for k, v in made.items() if k != "library"] + made["library"]
    assert {type(o).__module__ + "." + type(o).__qualname__ for o in objs} >= \
        set(MADE_BY_THE_LIBRARY)
    for obj in objs:
        back = read_result(obj.to_json())
        assert type(back) is type(obj) and same(obj, back) == [], type(obj).__name__


def test_a_class_that_cannot_be_read_back_says_why():
    for name in CANNOT_READ_BACK:
        with pytest.raises(UsageError, match=classes()[name].__name__):
            classes()[name].from_dict({})

    @dataclasses.dataclass(frozen=True, repr=False)
    class Held(Result):
        cannot_read_back = "it holds a callable"
        fn: object = print

        def to_dict(self):
            return {"fn": self.fn.__name__}

    text = Held().to_json()
    with pytest.raises(UsageError, match=r"Held cannot be read back.*holds a callable"):
        read_result(text)


def test_rules_read_back_as_the_registered_rule():
    from empirical_batch.rules import RULES, Rule

    for rule in RULES.values():
        assert read_result(rule.to_json()) is rule
    with pytest.raises(DataError, match="no registered rule"):
        Rule.from_dict({"name": "made-up"})
    changed = {**json.loads(next(iter(RULES.values())).to_json()), "formula": "x"}
    with pytest.raises(DataError, match="differs from the registered rule"):
        Rule.from_dict(changed)


def test_read_result_refuses_what_is_no_result(tmp_path):
    from empirical_batch import Tradeoff

    text = Tradeoff(s_min=100.0, e_min=6400.0).to_json()
    path = tmp_path / "t.json"
    path.write_text(text)
    assert read_result(path) == read_result(text) == read_result(json.loads(text))
    with pytest.raises(DataError, match="no 'result' key"):
        read_result('{"s_min": 1.0}')
    with pytest.raises(DataError, match="names no result class"):
        read_result('{"result": "os:system"}')
    with pytest.raises(DataError, match="not valid JSON"):
        read_result("{nope")
    with pytest.raises(InputError, match="no file"):
        read_result(str(tmp_path / "missing.json"))
    with pytest.raises(DataError, match="not a Tradeoff"):
        Tradeoff.from_dict({**json.loads(text), RESULT_KEY: "empirical_batch.x:Other"})
    with pytest.raises(DataError, match="'e_min'"):
        Tradeoff.from_dict({"s_min": 1.0})


# --- intervals at another level -------------------------------------------------------


@pytest.fixture(scope="module")
def fit():
    from empirical_batch import Tradeoff, fit_tradeoff

    rng = np.random.default_rng(1)
    b = 2.0 ** np.arange(0, 12)
    steps = Tradeoff(1000.0, 64_000.0).steps(b) * np.exp(0.05 * rng.standard_normal(b.size))
    return fit_tradeoff(pd.DataFrame({"batch_size": b, "steps": steps}), n_boot=400, seed=0)


@pytest.mark.parametrize("name", ["s_min", "e_min"])
@pytest.mark.parametrize("level", [0.5, 0.8, 0.99])
def test_interval_at_another_level_is_the_percentile_of_the_draws(fit, name, level):
    assert fit.status == "identified" and fit.draws[name].shape == (400,)
    got = fit.interval(name, level)
    tail = 100 * (1 - level) / 2
    want = np.percentile(fit.draws[name], [tail, 100 - tail])
    assert got.level == level and tuple(got) == pytest.approx(tuple(want), rel=1e-12)
    # the stored interval is the same percentiles at the fit's level
    stored = np.percentile(fit.draws[name], [2.5, 97.5])
    assert tuple(fit.interval(name)) == pytest.approx(tuple(stored), rel=1e-12)
    assert fit.interval(name, 0.95) is getattr(fit, f"{name}_interval")
    wider, narrower = fit.interval(name, 0.99), fit.interval(name, 0.5)
    assert wider.low <= narrower.low <= narrower.high <= wider.high


def test_interval_without_draws_names_what_it_lacks(fit):
    assert fit.interval("b_crit") is fit.b_crit_interval
    back = read_result(fit.to_json())
    assert back.draws == {} and same(back, fit) == []
    assert back.b_crit_profile == fit.b_crit_profile is not None
    with pytest.raises(UsageError, match=r"no bootstrap draws of b_crit.*level=0.95 only"):
        back.interval("b_crit", 0.9)  # the "profile" interval is calibrated on the draws
    with pytest.raises(UsageError, match="no bootstrap draws of s_min"):
        back.interval("s_min", 0.9)
    assert back.interval("s_min", 0.95) == fit.s_min_interval
    with pytest.raises(InputError, match="name must name an interval of TradeoffFit"):
        fit.interval("slope")
    with pytest.raises(InputError, match="level"):
        fit.interval("s_min", 1.5)


def test_interval_of_a_bound_keeps_its_open_end():
    """A lower bound on B_crit leaves S_min open: its interval at any level has low 0."""
    from empirical_batch import fit_tradeoff

    b = 2.0 ** np.arange(0, 8)
    rng = np.random.default_rng(0)
    steps = 1e6 / b * np.exp(0.02 * rng.standard_normal(b.size))  # still halving
    f = fit_tradeoff(pd.DataFrame({"batch_size": b, "steps": steps}), n_boot=200, seed=0)
    assert f.status == "lower_bound"
    got = f.interval("s_min", 0.8)
    assert got.low == 0.0 and got.high == pytest.approx(
        np.percentile(f.draws["s_min"], 90), rel=1e-12)


def test_the_fits_of_fit_json_read_back(tmp_path, capsys):
    """``empirical-batch fit --json`` writes each fit as a result: `read_result` gives the
    `TradeoffFit` back (its group, a key of the document, aside)."""
    from empirical_batch import Tradeoff, TradeoffFit
    from empirical_batch.cli import main

    t = Tradeoff.from_b_crit(100.0, s_min=2000)
    rows = [{"model": m, "batch_size": x, "steps_to_target": float(t.steps(x)) * k}
            for m, k in (("small", 1.0), ("big", 3.0)) for x in (16, 32, 64, 128, 256, 512)]
    path = tmp_path / "steps.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    assert main(["fit", str(path), "--group-by", "model", "--n-boot", "50", "--json",
                 "--fractional-steps"]) == 0
    fits = json.loads(capsys.readouterr().out)["fits"]
    back = [read_result(f) for f in fits]
    assert all(isinstance(f, TradeoffFit) for f in back) and len(back) == 2
    assert [f.b_crit for f in back] == pytest.approx([f["b_crit"] for f in fits])
    assert {f["group"]["model"] for f in fits} == {"small", "big"}


def test_a_tables_dtypes_are_restored_and_bad_ones_refused():
    from empirical_batch._revive import frame

    table = {"columns": ["seed", "x"], "rows": [[1, 0.5], [None, 1.5]], "dtypes": {"seed": "Int64"}}
    back = frame(table)
    assert str(back["seed"].dtype) == "Int64" and back["seed"].iloc[1] is pd.NA
    with pytest.raises(DataError, match="'dtypes' must map its columns"):
        frame({**table, "dtypes": {"no_such_column": "Int64"}})
    with pytest.raises(DataError, match="'dtypes' must map its columns"):
        frame({**table, "dtypes": ["Int64"]})
