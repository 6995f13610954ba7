"""The harness's subsampled Hessian probes: declared on the specs, left out of the
manifests and cache keys while unused, and measured with their stated error."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning"  # raised inside torch.func
)

from empirical_batch.errors import InputError  # noqa: E402
from empirical_batch.harness.config import (  # noqa: E402
    NoiseSpec,
    OneStepSpec,
    get_config,
    spec_key,
)
from empirical_batch.harness.tasks import make_task  # noqa: E402
from empirical_batch.validation.experiments.noise import measure_scales  # noqa: E402


def _keys(obj):
    if isinstance(obj, dict):
        return set(obj) | {k for v in obj.values() for k in _keys(v)}
    if isinstance(obj, list | tuple):
        return {k for v in obj for k in _keys(v)}
    return set()


@pytest.mark.parametrize("name", ["tiny", "cpu"])
def test_unused_probes_leave_manifests_and_keys_unchanged(name):
    cfg = get_config(name, ["teacher_student"])
    assert "hvp_probes" not in _keys(cfg.to_dict())
    plan = cfg.plans[0]
    assert spec_key(plan.noise) == {"batch_size": plan.noise.batch_size,
                                    "n_examples": plan.noise.n_examples,
                                    "n_checkpoints": plan.noise.n_checkpoints}
    assert spec_key(NoiseSpec(batch_size=4, hvp_probes=8))["hvp_probes"] == 8


@pytest.mark.parametrize("bad", [0, 1, 2.0, True, "8"])
def test_bad_probe_counts_are_refused_when_declared(bad):
    with pytest.raises(InputError, match="hvp_probes"):
        NoiseSpec(batch_size=4, hvp_probes=bad)
    with pytest.raises(InputError, match="hvp_probes"):
        OneStepSpec(batch_sizes=(1, 2), hvp_probes=bad)


def test_probed_measurement_states_its_error():
    task = make_task("teacher_student").to("cpu", torch.float64)
    model = task.init_model(0)
    exact = measure_scales(task, model, 96)
    assert exact["n_probes"] == 96 and exact["b_noise_se"] == 0.0
    draws = [measure_scales(task, model, 96, hvp_probes=24, seed=s) for s in range(8)]
    for d in draws:
        assert d["n_probes"] == 24 and d["b_noise_se"] > 0 and d["b_noise_pop_se"] > 0
        # the Hessian-free quantities do not depend on the probes
        for key in ("g2", "ghg", "trace_sigma", "b_simple", "b_simple_collector"):
            assert d[key] == pytest.approx(exact[key], rel=1e-12)
        assert abs(d["b_noise"] - exact["b_noise"]) < 5 * d["b_noise_se"]
    assert len({d["b_noise"] for d in draws}) > 1  # the seed draws other probes
