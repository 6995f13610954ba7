"""Parameters declared once: each `validate_params` constraint is enforced at the call,
names the parameter, and a categorical one is the same ``Literal`` as the parameter's
annotation (one declaration read by the type checker and by the runtime check); the
type constraints refuse the wrong types naming the parameter and accept the right ones."""

from __future__ import annotations

import importlib
import inspect
import math
import pkgutil
import re
import typing
from typing import Literal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import empirical_batch
from empirical_batch.errors import InputError
from empirical_batch.params import (
    BOOLEAN,
    CALLABLE,
    INTEGER,
    PATH_LIKE,
    REAL,
    AnyOf,
    Domain,
    Kind,
    Options,
    Within,
    check_fields,
    instance_of,
    validate_params,
)

_OPTIONAL = ("empirical_batch.integrations", "empirical_batch.measure", "empirical_batch.harness",
             "empirical_batch.plot")


def _constrained():
    """Every public function of the package that declares constraints."""
    found = {}
    for info in pkgutil.walk_packages(empirical_batch.__path__, "empirical_batch."):
        if info.name.startswith(_OPTIONAL) or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name, None)
            if callable(obj) and hasattr(obj, "parameter_constraints"):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


FUNCTIONS = _constrained()
CASES = [(name, param) for name, f in sorted(FUNCTIONS.items())
         for param in f.parameter_constraints]


def test_the_declared_functions_are_found():
    expected = {"empirical_batch.fit.tradeoff_fit.fit_tradeoff",
                "empirical_batch.fit.steps.steps_to_target",
                "empirical_batch.fit.lr_scaling.fit_lr_scaling",
                "empirical_batch.simulate.sweep.simulate_sweep",
                "empirical_batch.laws.optima.cell_optima",
                "empirical_batch.laws.grid.load_grid",
                "empirical_batch.laws.predict.predict_batch",
                "empirical_batch.transfer.transfer",
                "empirical_batch.noise_log.final_noise_scale",
                "empirical_batch.schedule.policies.design_schedule",
                "empirical_batch.schedule.policies.seesaw_schedule",
                "empirical_batch.definitions.convert_cbs",
                "empirical_batch.definitions.zhang_cbs_from_b_crit",
                "empirical_batch.definitions.b_crit_from_zhang_cbs",
                "empirical_batch.definitions.zhang_cbs_from_sweep",
                "empirical_batch.definitions.merrill_cbs_from_b_crit",
                "empirical_batch.branched.branched_critical_batch",
                "empirical_batch.quadratic_model.anisotropic_quadratic",
                "empirical_batch.quadratic_model.power_law_spectrum",
                "empirical_batch.budget.fit_fixed_budget",
                "empirical_batch.tradeoff.adaptive_schedule",
                "empirical_batch.planning.plan",
                "empirical_batch.one_step.surge_eps_opt"}
    assert expected <= set(FUNCTIONS), sorted(expected - set(FUNCTIONS))


def _literal_args(annotation):
    if typing.get_origin(annotation) is Literal:
        return typing.get_args(annotation)
    inner = [a for a in typing.get_args(annotation) if a is not type(None)]
    return _literal_args(inner[0]) if len(inner) == 1 else None


@pytest.mark.parametrize("name,param", CASES)
def test_a_categorical_constraint_is_the_parameters_literal(name, param):
    f = FUNCTIONS[name]
    constraint = f.parameter_constraints[param]
    if not isinstance(constraint, Options):
        return
    raw = inspect.unwrap(f)
    annotation = eval(raw.__annotations__[param], raw.__globals__)
    assert _literal_args(annotation) == constraint.choices, (name, param)


def _valid(c):
    """A value that meets constraint ``c`` (``object()`` for no constraint)."""
    if c is None:
        return object()
    if isinstance(c, Options):
        return c.choices[0]
    if isinstance(c, AnyOf):
        return _valid(c.constraints[0])
    if isinstance(c, Kind) and c.classes:
        for v in ({}, "x", *(cls.__new__(cls) for cls in c.classes
                            if not getattr(cls, "__abstractmethods__", None))):
            if c.accepts(v):
                return v
    candidates = {INTEGER: [1, 2, 10], BOOLEAN: [True], CALLABLE: [print], PATH_LIKE: ["x"]}
    kind = c.kind if isinstance(c, Within) else c
    for v in candidates.get(kind, [1.0, 2.0, 0.5, 0.0, 10.0]):
        try:
            c.check(v, "value")
        except InputError:
            continue
        return v
    raise AssertionError(f"no placeholder for {c}")


def _call_with(f, param, value):
    """Call ``f`` with ``param=value`` and placeholders for its other required
    parameters (a constrained one gets a valid value): the check runs before the body."""
    sig = inspect.signature(inspect.unwrap(f))
    args, kwargs = [], {}
    for p in sig.parameters.values():
        if p.name == param:
            v = value
        elif p.default is not inspect.Parameter.empty:
            continue
        else:
            v = _valid(f.parameter_constraints.get(p.name))
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != param \
                and not kwargs:
            args.append(v)
        else:
            kwargs[p.name] = v
    return f(*args, **kwargs)


@pytest.mark.parametrize("name,param", CASES)
def test_a_value_outside_the_constraint_is_refused_naming_the_parameter(name, param):
    f = FUNCTIONS[name]
    c = f.parameter_constraints[param]
    bad = ("no such option" if isinstance(c, Options)
           else math.nan if isinstance(c, Domain | Within) else object())
    with pytest.raises(InputError, match=rf"^{param} must be"):
        _call_with(f, param, bad)


CATEGORICAL = [(n, p) for n, p in CASES
               if isinstance(FUNCTIONS[n].parameter_constraints[p], Options)]


@settings(max_examples=25, deadline=None)
@given(case=st.sampled_from(CATEGORICAL), text=st.text(max_size=12))
def test_any_other_text_is_refused_with_the_options(case, text):
    name, param = case
    options = FUNCTIONS[name].parameter_constraints[param]
    if text in options.choices:
        return
    with pytest.raises(InputError, match=rf"^{param} must be one of '") as err:
        _call_with(FUNCTIONS[name], param, text)
    assert all(repr(c) in str(err.value) for c in options.choices)


def test_none_passes_only_where_it_is_the_default():
    @validate_params(a=Literal["x", "y"], b=Literal["x", "y"], level="level")
    def f(a="x", b=None, level=None):
        return a, b, level

    assert f(b=None, level=None) == ("x", None, None)
    with pytest.raises(InputError, match=r"^a must be one of 'x', 'y', got None"):
        f(a=None)
    with pytest.raises(InputError, match=r"^level must be in \(0, 1\), got 2"):
        f(level=2)


def test_declaring_a_missing_parameter_or_a_plain_type_is_refused():
    with pytest.raises(InputError, match=r"has no parameter\(s\) \['c'\]"):
        validate_params(c="level")(lambda a: a)
    with pytest.raises(InputError, match="takes a Literal type"):
        validate_params(a=str)
    with pytest.raises(Exception, match="no declared domain"):
        validate_params(a="no_such_domain")


def test_a_positional_argument_is_checked_too():
    @validate_params(how=Literal["mean", "min"])
    def f(x, how="mean"):
        return how

    assert f(1, "min") == "min"
    with pytest.raises(InputError, match=r"^how must be one of"):
        f(1, "max")


# --- type constraints -----------------------------------------------------------------

NOT_BOOL_INTEGERS = st.one_of(st.integers(-10**6, 10**6),
                              st.integers(-10**6, 10**6).map(np.int64))
REALS = st.one_of(st.floats(allow_nan=False, allow_infinity=False), NOT_BOOL_INTEGERS,
                  st.floats(-1e6, 1e6).map(np.float64))
NOT_NUMBERS = st.one_of(st.text(max_size=5), st.none(), st.lists(st.integers(), max_size=2),
                        st.just(object()), st.just(1j))


@validate_params(n=INTEGER, x=REAL, flag=BOOLEAN, fn=CALLABLE, path=PATH_LIKE,
                 n_boot=INTEGER.within("n_boot"), level=REAL.within("level"),
                 seed=[INTEGER, instance_of(np.random.Generator), None])
def typed(n=1, x=1.0, flag=False, fn=print, path="x", n_boot=0, level=0.5, seed=0):
    return n, x, flag, fn, path, n_boot, level, seed


@settings(max_examples=60, deadline=None)
@given(value=st.one_of(st.booleans(), st.floats(allow_nan=True), NOT_NUMBERS,
                       st.floats(-1e6, 1e6).filter(lambda v: v != int(v)).map(np.float64),
                       st.integers(0, 3).map(float)))
def test_an_integer_refuses_bools_floats_and_other_types_naming_the_parameter(value):
    """A bool is no integer (though Python's bool is an int), and neither is 3.0."""
    for param, text in (("n", "an integer"), ("n_boot", "an integer >= 0")):
        with pytest.raises(InputError, match=rf"^{param} must be {text}, got ") as err:
            typed(**{param: value})
        assert type(value).__name__ in str(err.value)


@settings(max_examples=60, deadline=None)
@given(value=st.one_of(st.booleans(), st.text(max_size=5), st.none(), st.just(1j),
                       st.just(object()), st.lists(st.floats(), max_size=2)))
def test_a_real_refuses_bools_strings_and_other_types_naming_the_parameter(value):
    with pytest.raises(InputError, match=r"^x must be a real number, got ") as err:
        typed(x=value)
    assert repr(value) in str(err.value) and type(value).__name__ in str(err.value)
    with pytest.raises(InputError, match=r"^level must be a real number in \(0, 1\), got "):
        typed(level=value)


@settings(max_examples=60, deadline=None)
@given(n=NOT_BOOL_INTEGERS, x=REALS, flag=st.booleans(), n_boot=st.integers(0, 10**9),
       level=st.floats(1e-9, 1 - 1e-9), seed=st.one_of(st.integers(), st.none()))
def test_the_type_constraints_accept_valid_values(n, x, flag, n_boot, level, seed):
    got = typed(n=n, x=x, flag=flag, fn=len, path="a/b", n_boot=np.int64(n_boot),
                level=level, seed=seed)
    assert got[:3] == (n, x, flag) and got[-1] is seed
    assert typed(flag=np.bool_(True), path=__import__("pathlib").Path("p"),
                 seed=np.random.default_rng(0))[2]


@settings(max_examples=40, deadline=None)
@given(value=st.one_of(st.integers(-10**6, -1), st.floats(-1e6, 0.0), st.floats(1.0, 1e6),
                       st.just(math.inf), st.just(math.nan)))
def test_a_typed_domain_refuses_a_value_outside_it_with_the_value(value):
    with pytest.raises(InputError, match=r"^level must be a real number in \(0, 1\), got "
                                         + re.escape(repr(value))):
        typed(level=value)
    if isinstance(value, int):
        with pytest.raises(InputError, match=rf"^n_boot must be an integer >= 0, got {value}$"):
            typed(n_boot=value)


def test_the_other_types_and_any_of_name_what_they_allow():
    with pytest.raises(InputError, match=r"^flag must be a bool, got int 1$"):
        typed(flag=1)
    with pytest.raises(InputError, match=r"^fn must be callable, got str 'f'$"):
        typed(fn="f")
    with pytest.raises(InputError, match=r"^path must be a path \(str or os.PathLike\), got "
                                         r"int 3$"):
        typed(path=3)
    with pytest.raises(InputError, match=r"^seed must be an integer, a Generator or None, "
                                         r"got float 1.5$"):
        typed(seed=1.5)
    with pytest.raises(InputError, match="only INTEGER and REAL take a domain"):
        BOOLEAN.within("level")
    with pytest.raises(InputError, match="takes classes"):
        instance_of("Sweep")
    with pytest.raises(InputError, match="needs one that is not None"):
        validate_params(a=[None])


def test_an_options_dataclass_declares_its_fields_once():
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Opts:
        hidden: int = 64
        rate: float = 0.1
        name: str | None = None

    constraints = {"hidden": INTEGER.within(Domain(0, integer=True)),
                   "rate": REAL.within("level"), "name": [instance_of(str)]}
    check_fields(Opts(), constraints)
    with pytest.raises(InputError, match=r"^hidden must be an integer > 0, got float 2.0"):
        check_fields(Opts(hidden=2.0), constraints)

    class Refused(InputError):
        pass

    with pytest.raises(Refused, match=r"option 'rate': rate must be a real number in"):
        check_fields(Opts(rate=True), constraints,
                     error=lambda field, msg: Refused(f"option {field!r}: {msg}"))
    with pytest.raises(InputError, match="has no field 'width'"):
        check_fields(Opts(), {"width": INTEGER})


def _numeric_kind(c):
    kind = c.kind if isinstance(c, Within) else c
    return kind if kind in (INTEGER, REAL) else None


TYPED = [(n, p) for n, p in CASES if _numeric_kind(FUNCTIONS[n].parameter_constraints[p])]


def test_the_library_declares_typed_numbers():
    assert {("empirical_batch.fit.tradeoff_fit.fit_tradeoff", "n_boot"),
            ("empirical_batch.laws.optima.cell_optima", "band"),
            ("empirical_batch.simulate.sign.sign_step_monte_carlo", "n_samples")} <= set(TYPED)


@pytest.mark.parametrize("name,param", TYPED)
def test_a_declared_number_refuses_a_bool_and_a_string_naming_the_parameter(name, param):
    f = FUNCTIONS[name]
    kind = _numeric_kind(f.parameter_constraints[param])
    default = inspect.signature(inspect.unwrap(f)).parameters[param].default
    bad = [True, "1"] + ([2.5] if kind is INTEGER else []) + ([] if default is None else [None])
    for value in bad:
        with pytest.raises(InputError, match=rf"^{param} must be .*, got {type(value).__name__}"):
            _call_with(f, param, value)
