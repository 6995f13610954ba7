"""Warnings name the user's line: `empirical_batch.errors.warn` attributes each warning to
the first caller outside the library, however many library frames (and decorators) the
call passed through."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pandas as pd
import pytest

from empirical_batch.errors import EmpiricalBatchWarning, warn
from empirical_batch.fit import FitWarning, fit_tradeoff
from empirical_batch.noise_log import BSimpleForBNoise
from empirical_batch.schedule import NoiseTrajectory
from empirical_batch.tradeoff import Tradeoff
from empirical_batch.transfer import RegimeWarning, transfer


def _only(record, category):
    hits = [w for w in record if issubclass(w.category, category)]
    assert len(hits) == 1, [str(w.message) for w in record]
    return hits[0]


def test_warn_called_here_names_this_line():
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        warn("plain", EmpiricalBatchWarning)
    w = _only(record, EmpiricalBatchWarning)
    assert (w.filename, w.lineno) == (__file__, line)


def test_a_warning_two_library_calls_deep_names_the_callers_line():
    log = pd.DataFrame({"step": [1, 2], "b_simple": [10.0, 20.0]})
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        NoiseTrajectory.from_log(log, 8)  # from_log -> the log's quantity -> warn
    assert _only(record, BSimpleForBNoise).filename == __file__


def test_a_warning_through_a_decorated_function_names_the_callers_line():
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        transfer({"lr": 0.1}, 10, 3000, optimizer="sgd", rule="linear", b_noise=1000)
    assert _only(record, RegimeWarning).filename == __file__


def test_a_fit_warning_names_the_callers_line_not_the_keyword_wrapper():
    b = 2.0 ** np.arange(10)
    frame = pd.DataFrame({"batch_size": b, "steps": Tradeoff.from_b_crit(30, s_min=100).steps(b)})
    frame.loc[7, "steps"] *= 3  # steps rise from 64 to 128
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        fit_tradeoff(frame, n_boot=0, interval="f")  # through @removed_keywords
    assert _only(record, FitWarning).filename == __file__


def test_the_library_warns_only_through_warn():
    """Every warning goes through `warn` (no hand-counted ``stacklevel``)."""
    import ast
    from pathlib import Path

    import empirical_batch

    root = Path(empirical_batch.__file__).parent
    calls = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "warn" and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "warnings"):
                calls.append(f"{path.relative_to(root)}:{node.lineno}")
    assert [c for c in calls if not c.startswith("errors.py:")] == []
    assert len(calls) == 1  # the one call, inside `warn`


@pytest.mark.parametrize("category", [UserWarning, DeprecationWarning])
def test_warn_keeps_the_category(category):
    with pytest.warns(category, match="text"):
        warn("text", category)
