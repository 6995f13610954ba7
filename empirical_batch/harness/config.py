"""Presets of the harness: ``tiny`` (CI), ``cpu`` (committed CPU results), ``full`` (GPU).

A `HarnessConfig` holds one `TaskPlan` per task: the task's options,
its sweep (batch sizes, a learning-rate grid per optimizer, seeds and the step
budget), the noise measurement along reference runs and the one-step experiment.
Presets are plain data; `get_config` returns one, optionally restricted to
some tasks. Learning-rate grids are log grids (powers of two) chosen once from short
pilot runs so the best rate of every batch size lies inside the grid; the report
flags any batch size whose best rate sits at the edge of its grid.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

from ..errors import InputError, NotFoundError
from .tasks import check_task_name, make_task
from .trainer import OPTIMIZERS, Member, StepBudget


def pow2(lo: int, hi: int, step: int = 1) -> tuple[float, ...]:
    """Powers of two ``2**lo, 2**(lo+step), … 2**hi`` as floats."""
    return tuple(float(2.0**k) for k in range(lo, hi + 1, step))


@dataclass(frozen=True)
class SweepSpec:
    """The grid of one task: batch sizes × learning rates (per optimizer) × seeds."""

    batch_sizes: tuple[int, ...]
    learning_rates: dict[str, tuple[float, ...]]
    seeds: tuple[int, ...]
    budget: StepBudget

    def __post_init__(self) -> None:
        if not self.batch_sizes or any(
            not isinstance(b, int) or b <= 0 for b in self.batch_sizes
        ):
            raise InputError(f"batch_sizes must be positive integers, got {self.batch_sizes!r}")
        bad = sorted(set(self.learning_rates) - set(OPTIMIZERS))
        if bad or not self.learning_rates:
            raise InputError(
                f"learning_rates must map optimizers {OPTIMIZERS} to grids, got keys "
                f"{sorted(self.learning_rates)!r}"
            )
        if not self.seeds:
            raise InputError("seeds must not be empty")

    @property
    def optimizers(self) -> tuple[str, ...]:
        return tuple(o for o in OPTIMIZERS if o in self.learning_rates)

    def members(self) -> list[Member]:
        """Every run, in a fixed order (optimizer, batch size, learning rate, seed)."""
        return [
            Member(opt, b, lr, s)
            for opt in self.optimizers
            for b in self.batch_sizes
            for lr in self.learning_rates[opt]
            for s in self.seeds
        ]


@dataclass(frozen=True)
class NoiseSpec:
    """Noise scales along a reference run (one per optimizer) of the sweep.

    The reference run is the sweep member at ``batch_size`` and seed 0 whose learning
    rate reaches the lowest evaluation loss; it is retrained with the plain loop and
    at each of its logged steps B_simple and B_noise are measured on ``n_examples``
    examples of the task's objective data.
    """

    batch_size: int
    n_examples: int = 512
    n_checkpoints: int = 12
    #: Hessian-vector products for this many of the examples' deviations only
    #: (`empirical_batch.measure.hessian_noise_scale`'s ``n_probes``: unbiased, its
    #: standard error recorded); None: for all of them
    hvp_probes: int | None = None

    def __post_init__(self):
        _check_probes(self.hvp_probes)


@dataclass(frozen=True)
class OneStepSpec:
    """The one-step experiment at ``n_checkpoints`` checkpoints of the SGD reference run.

    At each checkpoint and batch size, ``n_batches`` batches, ``n_eps`` step sizes, the
    loss change measured on ``n_examples`` objective examples; ``n_boot`` bootstrap
    resamples of the batches give the intervals.
    """

    batch_sizes: tuple[int, ...]
    n_batches: int = 64
    n_eps: int = 24
    n_checkpoints: int = 3
    n_examples: int = 1024
    n_boot: int = 200
    #: probes of the Hessian measurement that places the ε grid and gives the
    #: ``_hvp`` predictions (as `NoiseSpec.hvp_probes`); None: all examples
    hvp_probes: int | None = None

    def __post_init__(self):
        _check_probes(self.hvp_probes)


def _check_probes(value) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or value < 2):
        raise InputError(f"hvp_probes must be None or an integer >= 2 (a standard error "
                         f"needs two probes), got {value!r}")


@dataclass(frozen=True)
class BranchSpec:
    """Branched training at ``n_checkpoints`` snapshots of each reference run (step 0
    excluded): factors ``k`` of the reference batch, ``steps_at_base`` steps of the
    ``k = 1`` branch (every branch trains on as many examples), ``seeds`` paired seeds,
    the mean of the last ``tail`` fraction of each branch's training losses compared."""

    factors: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    steps_at_base: int = 256
    n_checkpoints: int = 3
    seeds: tuple[int, ...] = (0, 1, 2, 3)
    tail: float = 0.25
    level: float = 0.95

    def __post_init__(self) -> None:
        if self.steps_at_base < self.factors[-1]:
            raise InputError(f"steps_at_base={self.steps_at_base} gives the largest branch "
                             f"(x{self.factors[-1]}) no step")
        if self.n_checkpoints < 1:
            raise InputError("n_checkpoints must be >= 1")


@dataclass(frozen=True)
class TaskPlan:
    task: str
    sweep: SweepSpec
    noise: NoiseSpec
    one_step: OneStepSpec
    options: dict = field(default_factory=dict)
    #: branched training at checkpoints of the reference runs (the validation study's
    #: `empirical_batch.validation.experiments.branched`)
    branched: BranchSpec | None = None

    def make_task(self):
        return make_task(self.task, **self.options)


@dataclass(frozen=True)
class HarnessConfig:
    name: str
    plans: tuple[TaskPlan, ...]
    #: target = L_hard + f (L_0 − L_hard) for each f (see empirical_batch.fit.choose_targets)
    target_fractions: tuple[float, ...] = (0.5, 0.25, 0.125, 0.0625, 0.0)

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(p.task for p in self.plans)

    def plan(self, task: str) -> TaskPlan:
        for p in self.plans:
            if p.task == task:
                return p
        raise NotFoundError(f"config {self.name!r} has no task {task!r}; it has {self.tasks}")

    def to_dict(self) -> dict:
        """The configuration as plain data (the manifests compare it). A plan without
        branched training, and a spec without probes, leave those keys out, so that
        results written before they existed still compare equal."""
        data = asdict(self)
        for plan in data["plans"]:
            if plan.get("branched") is None:
                plan.pop("branched", None)
            for name in ("noise", "one_step"):
                plan[name] = spec_key(plan[name])
        return data


def spec_key(spec) -> dict:
    """A spec (a dataclass or its dict) as plain data for cache keys and manifests, with
    ``hvp_probes`` left out while None: the keys of results measured before the field
    existed are unchanged."""
    data = dict(spec) if isinstance(spec, dict) else asdict(spec)
    if data.get("hvp_probes", 0) is None:
        del data["hvp_probes"]
    return data


# --------------------------------------------------------------------------- presets
def _tiny() -> HarnessConfig:
    # the whole pipeline on a CPU in well under two minutes: 3 batch sizes, 3 rates,
    # one seed and a few dozen steps per run; numbers from it check plumbing, not theory
    budget = StepBudget(examples=192, min_steps=24, max_steps=64, n_log=8)
    bs = (4, 16, 64)
    one = OneStepSpec(batch_sizes=(1, 4, 16, 64), n_batches=8, n_eps=10, n_checkpoints=2,
                      n_examples=128, n_boot=50)
    noise = NoiseSpec(batch_size=16, n_examples=64, n_checkpoints=5)
    # the two character language models: the same small sweep, noise and one-step plans
    lm = (SweepSpec(bs, {"sgd": pow2(-2, 2, 2), "adam": pow2(-8, -4, 2)}, (0,),
                    StepBudget(examples=96, min_steps=12, max_steps=24, n_log=6)),
          NoiseSpec(batch_size=16, n_examples=16, n_checkpoints=4),
          OneStepSpec(batch_sizes=(1, 4, 16), n_batches=4, n_eps=8, n_checkpoints=2,
                      n_examples=32, n_boot=50))
    return HarnessConfig(
        "tiny",
        (
            TaskPlan("teacher_student",
                     SweepSpec(bs, {"sgd": pow2(-5, -1, 2), "adam": pow2(-9, -5, 2)}, (0,),
                               budget),
                     noise, one, {"hidden": 16, "eval_size": 512, "objective_size": 512},
                     BranchSpec(factors=(1, 2, 4), steps_at_base=8, n_checkpoints=1,
                                seeds=(0, 1))),
            TaskPlan("digits",
                     SweepSpec(bs, {"sgd": pow2(-4, 0, 2), "adam": pow2(-9, -5, 2)}, (0,),
                               budget),
                     noise, one, {"hidden": 16}),
            TaskPlan("sequence", *lm, {"context": 8, "d_model": 8, "corpus_chars": 8_000,
                                       "eval_windows": 16, "objective_windows": 32}),
            TaskPlan("text_lm", *lm, {"context": 8, "d_model": 8, "n_heads": 2, "n_layers": 1,
                                      "max_chars": 20_000, "eval_windows": 16,
                                      "objective_windows": 32}),
        ),
    )


def _cpu() -> HarnessConfig:
    bs = tuple(2**k for k in range(0, 8))  # 1 … 128: 8 powers of two
    budget = StepBudget(examples=4096, min_steps=192, max_steps=2048, n_log=24)
    one = OneStepSpec(batch_sizes=(1, 4, 16, 64, 256), n_batches=48, n_eps=16, n_examples=512)
    return HarnessConfig(
        "cpu",
        (
            TaskPlan("teacher_student",
                     SweepSpec(bs, {"sgd": pow2(-9, -1), "adam": pow2(-12, -4)}, (0, 1), budget),
                     NoiseSpec(batch_size=8, n_examples=512, n_checkpoints=10), one, {},
                     BranchSpec(steps_at_base=256, n_checkpoints=4, seeds=tuple(range(6)))),
            TaskPlan("digits",
                     SweepSpec(bs, {"sgd": pow2(-7, 1), "adam": pow2(-11, -5)}, (0, 1), budget),
                     NoiseSpec(batch_size=8, n_examples=512, n_checkpoints=10), one, {}),
            TaskPlan("sequence",
                     SweepSpec(bs, {"sgd": pow2(-4, 2), "adam": pow2(-10, -4)}, (0,),
                               StepBudget(examples=1024, min_steps=64, max_steps=512, n_log=16)),
                     NoiseSpec(batch_size=8, n_examples=128, n_checkpoints=8),
                     OneStepSpec(batch_sizes=(1, 4, 16, 64, 256), n_batches=32, n_eps=16,
                                 n_examples=128),
                     {"context": 16, "d_model": 16, "eval_windows": 128,
                      "objective_windows": 256}),
            # Tiny Shakespeare, 30,721 parameters; 170 s of sweep (two processes) and 414 s
            # of analysis on a 2-core CPU (data/harness/manifest*.json); rates chosen from
            # pilot runs at B = 32 (best Adam 2^-5, SGD 2^0)
            TaskPlan("text_lm",
                     SweepSpec(tuple(2**k for k in range(0, 9)),
                               {"sgd": pow2(-3, 2), "adam": pow2(-9, -4)}, (0,),
                               StepBudget(examples=8192, min_steps=128, max_steps=2048,
                                          n_log=24)),
                     NoiseSpec(batch_size=8, n_examples=128, n_checkpoints=8),
                     OneStepSpec(batch_sizes=(1, 4, 16, 64, 256), n_batches=32, n_eps=16,
                                 n_examples=128),
                     {"context": 32, "d_model": 32, "n_heads": 2, "n_layers": 2,
                      "eval_windows": 256, "objective_windows": 256},
                     BranchSpec(factors=(1, 2, 4, 8, 16, 32), steps_at_base=128,
                                n_checkpoints=3, seeds=(0, 1, 2, 3))),
        ),
    )


def _full() -> HarnessConfig:
    # GPU preset. The sweeps take 76,928 vmapped steps in all (`python -m
    # empirical_batch.harness.config full`); a step of these models is bound by
    # per-operation overhead, so the preset is priced from operation counts at about
    # 6-7 minutes on one H100 with CUDA graphs and 14 minutes without
    # (`benchmarks/estimate_harness.py`; docs/benchmarks.md, "The full preset on one
    # H100"). --time-budget runs it in pieces where a command's time is shorter.
    bs = tuple(2**k for k in range(0, 11))  # 1 … 1024: 11 powers of two
    budget = StepBudget(examples=2**14, min_steps=256, max_steps=2**13, n_log=32)
    one = OneStepSpec(batch_sizes=tuple(2**k for k in range(0, 12)), n_batches=256, n_eps=32,
                      n_checkpoints=4, n_examples=2048)
    return HarnessConfig(
        "full",
        (
            TaskPlan("teacher_student",
                     SweepSpec(bs, {"sgd": pow2(-10, 0), "adam": pow2(-13, -3)}, (0, 1, 2),
                               budget),
                     NoiseSpec(batch_size=16, n_examples=4096, n_checkpoints=16), one, {},
                     BranchSpec(steps_at_base=512, n_checkpoints=6, seeds=tuple(range(8)))),
            TaskPlan("digits",
                     SweepSpec(bs, {"sgd": pow2(-8, 2), "adam": pow2(-12, -4)}, (0, 1, 2),
                               budget),
                     NoiseSpec(batch_size=16, n_examples=1437, n_checkpoints=16),
                     replace(one, n_examples=1437), {}),
            TaskPlan("sequence",
                     SweepSpec(bs, {"sgd": pow2(-5, 3), "adam": pow2(-11, -3)}, (0, 1),
                               StepBudget(examples=2**13, min_steps=128, max_steps=2**12,
                                          n_log=28)),
                     NoiseSpec(batch_size=16, n_examples=1024, n_checkpoints=16,
                               hvp_probes=256),
                     OneStepSpec(batch_sizes=tuple(2**k for k in range(0, 11)), n_batches=128,
                                 n_eps=28, n_checkpoints=4, n_examples=1024, hvp_probes=256),
                     {"context": 32, "n_layers": 2, "eval_windows": 512,
                      "objective_windows": 1024}),
            # Tiny Shakespeare, 31,745 parameters, B = 2 … 4096 windows of 64 characters.
            # Not yet run on a GPU; priced at about 241 s on one H100, its fits included
            # (149 s of sweep, bound by memory traffic; 34 s of measurements with 256
            # Hessian probes, about 2 % relative error on B_noise; docs/benchmarks.md).
            # Rates from CPU pilots of this model: best Adam 2^-8 at B = 2 (2048 steps) and
            # 2^-6 at B = 64 (512 steps); best SGD 2^-1 and 2^0, with 2^1 diverging at both
            TaskPlan("text_lm",
                     SweepSpec(tuple(2**k for k in range(1, 13)),
                               {"sgd": pow2(-4, 1), "adam": pow2(-9, -3)}, (0, 1),
                               StepBudget(examples=2**15, min_steps=512, max_steps=2**11,
                                          n_log=32)),
                     NoiseSpec(batch_size=32, n_examples=512, n_checkpoints=12,
                               hvp_probes=256),
                     OneStepSpec(batch_sizes=tuple(2**k for k in range(0, 11)), n_batches=64,
                                 n_eps=16, n_checkpoints=3, n_examples=512, hvp_probes=256),
                     {"context": 64, "d_model": 32, "n_heads": 2, "n_layers": 2,
                      "eval_windows": 512, "objective_windows": 512},
                     BranchSpec(steps_at_base=256, n_checkpoints=4, seeds=tuple(range(6)))),
        ),
    )


PRESETS = {"tiny": _tiny, "cpu": _cpu, "full": _full}


def get_config(name: str = "tiny", tasks: tuple[str, ...] | list[str] | None = None
               ) -> HarnessConfig:
    """The preset ``name``, restricted to ``tasks`` (all of its tasks when None).

    Task options are validated here (by constructing each task), so a bad preset or
    an unknown task name fails before any training.
    """
    if name not in PRESETS:
        raise InputError(f"unknown config {name!r}; choose one of {', '.join(PRESETS)}")
    cfg = PRESETS[name]()
    if tasks:
        for t in tasks:
            check_task_name(t)
        cfg = replace(cfg, plans=tuple(cfg.plan(t) for t in tasks))
    for p in cfg.plans:
        p.make_task()
    return cfg


def scale_budget(budget: StepBudget, scale: float) -> StepBudget:
    """``budget`` with its example and step counts × ``scale`` (at least 1; <= 8 logs).

    What ``benchmarks/bench_harness.py --scale`` trains (the batched/plain ratio is
    per step, so a fraction of the budget measures it).
    """
    if not (isinstance(scale, int | float) and math.isfinite(scale) and scale > 0):
        raise InputError(f"scale must be a finite number > 0, got {scale!r}")
    return StepBudget(
        examples=max(1, math.ceil(budget.examples * scale)),
        min_steps=max(1, math.ceil(budget.min_steps * scale)),
        max_steps=max(1, math.ceil(budget.max_steps * scale)),
        n_log=min(budget.n_log, 8),
    )


def plan_summary(config: HarnessConfig, scale: float | None = None):
    """What ``config`` trains, per task: runs, steps, vmapped steps, model size.

    ``run_steps`` counts every run's updates; ``vmapped_steps`` the steps of the
    batched program (runs sharing a batch size step together, `group_members`);
    ``steps_per_batch_size`` the step budget of each batch size. Noise and one-step
    columns restate the analysis specs. One row per task (a pandas DataFrame).
    With ``scale``, the step budgets are those of ``bench_harness.py --scale``.
    """
    import pandas as pd

    from .trainer import group_members

    rows = []
    for p in config.plans:
        task = p.make_task()
        members = p.sweep.members()
        budget = p.sweep.budget if scale is None else scale_budget(p.sweep.budget, scale)
        rows.append({
            "task": p.task,
            "parameters": sum(t.numel() for t in task.init_model(0).parameters()),
            "batch_sizes": f"{min(p.sweep.batch_sizes)}…{max(p.sweep.batch_sizes)} "
                           f"({len(p.sweep.batch_sizes)})",
            "learning_rates": ", ".join(f"{o} {len(g)}" for o, g in
                                        p.sweep.learning_rates.items()),
            "seeds": len(p.sweep.seeds),
            "runs": len(members),
            "steps_per_batch_size": f"{budget.steps(max(p.sweep.batch_sizes))}…"
                                    f"{budget.steps(min(p.sweep.batch_sizes))}",
            "run_steps": sum(budget.steps(m.batch_size) for m in members),
            "vmapped_steps": sum(budget.steps(g[0].batch_size) for g in group_members(members)),
            "noise_checkpoints": p.noise.n_checkpoints,
            "noise_examples": p.noise.n_examples,
            "one_step_batch_sizes": f"{min(p.one_step.batch_sizes)}…"
                                    f"{max(p.one_step.batch_sizes)}",
            "one_step_batches": p.one_step.n_batches,
            "one_step_eps": p.one_step.n_eps,
            "one_step_checkpoints": p.one_step.n_checkpoints,
            "one_step_examples": p.one_step.n_examples,
        })
    return pd.DataFrame(rows)


if __name__ == "__main__":  # pragma: no cover
    import sys

    # python -m empirical_batch.harness.config [NAME [SCALE]]
    summary = plan_summary(get_config(sys.argv[1] if len(sys.argv) > 1 else "full"),
                           float(sys.argv[2]) if len(sys.argv) > 2 else None)
    print(summary.T.to_string(header=False))
    print(f"total: {summary['runs'].sum()} runs, {summary['run_steps'].sum()} run-steps, "
          f"{summary['vmapped_steps'].sum()} vmapped steps")
