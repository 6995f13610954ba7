"""Parameters declared once: each `validate_params` constraint is enforced at the call,
names the parameter, and a categorical one is the same ``Literal`` as the parameter's
annotation (one declaration read by the type checker and by the runtime check)."""

from __future__ import annotations

import importlib
import inspect
import math
import pkgutil
import typing
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import empirical_batch
from empirical_batch.errors import InputError
from empirical_batch.params import Domain, Options, validate_params

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
            c = f.parameter_constraints.get(p.name)
            v = (c.choices[0] if isinstance(c, Options)
                 else 1.0 if isinstance(c, Domain) else object())
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
    bad = "no such option" if isinstance(c, Options) else math.nan
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
