"""plan(), simulate_sweep and load_mlperf_rcp return result objects (TableResult):
frozen, short repr, to_dict/to_json/to_frame; the functions that read their tables
take them as they are; they are not DataFrames (their table is ``.frame``)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from empirical_batch.fit import critical_batch_curve, fit_tradeoff, steps_to_target
from empirical_batch.loaders import RCPTable, load_mlperf_rcp
from empirical_batch.planning import Hardware, Plan, frontier, frontier_bend, plan
from empirical_batch.result import REPR_LIMIT, Result, TableResult
from empirical_batch.simulate import NoisyQuadratic, SimulatedSweep, simulate_sweep
from empirical_batch.sweeps import Sweep, load_sweep
from empirical_batch.tradeoff import Tradeoff


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    t = Tradeoff.from_b_crit(256, s_min=1000)
    p = plan(t, Hardware(max_device_batch=64, max_devices=64))
    nq = NoisyQuadratic.zhang(100)
    sim = simulate_sweep(nq, 2 ** np.arange(0, 8), np.geomspace(0.01, 1.9, 10),
                         max_steps=5000, n_points=30)
    root = tmp_path_factory.mktemp("rcp")
    rng = np.random.default_rng(0)
    entries = {}
    for b in (64, 128, 256, 512, 1024, 2048):
        steps = 100 * (1 + 256 / b) * np.exp(0.05 * rng.standard_normal(5))
        entries[f"bert_ref_{b}"] = {"Benchmark": "bert", "BS": b, "Hyperparams": {},
                                    "Epochs to converge": (steps * b).round().tolist()}
    f = root / "training_5.0.0" / "rcps_bert.json"
    f.parent.mkdir(parents=True)
    f.write_text(json.dumps(entries))
    return {"plan": p, "sim": sim, "rcp": load_mlperf_rcp(root), "nq": nq}


@pytest.mark.parametrize("key, cls", [("plan", Plan), ("sim", SimulatedSweep),
                                      ("rcp", RCPTable)])
def test_result_protocol(results, key, cls):
    r = results[key]
    assert isinstance(r, cls) and isinstance(r, TableResult) and isinstance(r, Result)
    assert not isinstance(r, pd.DataFrame)
    assert len(repr(r)) <= REPR_LIMIT and repr(r).startswith(cls.__name__ + "(")
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.frame = None
    copy = r.to_frame()
    assert copy.equals(r.frame) and copy is not r.frame
    copy.iloc[0, 0] = copy.iloc[1, 0]  # the copy is the caller's: the result is unchanged
    assert r.to_frame().equals(r.frame)
    d = json.loads(r.to_json())
    assert d["columns"] == list(r.frame.columns)
    assert len(d["rows"]) == len(r.frame)
    assert "frame" not in d


def test_scalar_fields_describe_the_table(results):
    p, sim, rcp = results["plan"], results["sim"], results["rcp"]
    assert p.n_pairs == len(p.frame) and p.n_pareto == int(p.frame["pareto"].sum())
    assert p.b_crit == pytest.approx(256) and p.throughput_model is False
    assert sim.method == "exact" and sim.n_runs == sim.frame["run"].nunique() == 80
    assert sim.max_stable_lr == results["nq"].max_stable_lr
    assert rcp.benchmarks == ("bert",) and rcp.n_entries == 6 and rcp.n_rows == 30


def test_consumers_take_the_result_objects(results):
    p, sim, rcp = results["plan"], results["sim"], results["rcp"]
    assert frontier(p).equals(frontier(p.frame))
    assert frontier_bend(p).equals(frontier_bend(p.frame))
    assert p.frontier().equals(frontier(p.frame))
    target = 0.2 * results["nq"].initial_loss()
    a = steps_to_target(sim, target)
    b = steps_to_target(sim.frame, target)
    assert a.frame.equals(b.frame)
    assert isinstance(sim.to_sweep(), Sweep)
    assert load_sweep(sim).data.equals(load_sweep(sim.frame).data)
    c1 = critical_batch_curve(sim, [target], n_boot=0)
    c2 = critical_batch_curve(sim.frame, [target], n_boot=0)
    assert c1.fits[0].b_crit == c2.fits[0].b_crit
    f1 = fit_tradeoff(rcp, n_boot=50, seed=0)
    f2 = fit_tradeoff(rcp.frame, n_boot=50, seed=0)
    assert f1.b_crit == f2.b_crit and f1.b_crit_interval == f2.b_crit_interval


@pytest.mark.parametrize("key", ["plan", "sim", "rcp"])
def test_the_dataframe_hooks_are_removed(results, key):
    """Removed in 0.4: a table result is not a DataFrame; its table is ``.frame``."""
    r = results[key]
    col = r.frame.columns[0]
    with pytest.raises(TypeError, match="not subscriptable"):
        r[col]
    with pytest.raises(TypeError, match="has no len"):
        len(r)
    with pytest.raises(TypeError, match="not iterable"):
        list(r)
    for name in ("columns", "iloc", "loc", "groupby"):
        assert not hasattr(r, name)


def test_counts_are_read_from_the_table_never_stored_beside_it(results):
    import copy

    p, sim, rcp = (copy.deepcopy(results[k]) for k in ("plan", "sim", "rcp"))
    assert p.n_pareto > 0
    p.frame.drop(p.frame.index, inplace=True)  # the table edited in place
    assert (p.n_pairs, p.n_pareto) == (0, 0)
    sim.frame.drop(sim.frame.index[sim.frame["run"] != sim.frame["run"].iloc[0]],
                   inplace=True)
    assert sim.n_runs == 1
    rcp.frame.drop(rcp.frame.index[1:], inplace=True)
    assert (rcp.n_rows, rcp.n_entries) == (1, 1) and len(rcp.benchmarks) == 1
    d = json.loads(p.to_json())  # the counts are still written for readers of the JSON
    assert (d["n_pairs"], d["n_pareto"]) == (0, 0)
