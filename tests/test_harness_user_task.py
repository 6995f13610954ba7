"""A user's own small model through the harness's task protocol: define, register,
sweep over batch sizes and learning rates, load as a sweep, fit B_crit."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from empirical_batch import fit_tradeoff, load_sweep, steps_to_target  # noqa: E402
from empirical_batch.harness.config import SweepSpec  # noqa: E402
from empirical_batch.harness.sweep import run_sweep  # noqa: E402
from empirical_batch.harness.tasks import (  # noqa: E402
    TASKS,
    Task,
    TaskConfigError,
    make_task,
    register_task,
)
from empirical_batch.harness.trainer import StepBudget  # noqa: E402


class NoisyRegression(Task):
    """y = x·w* + noise, a linear model: the whole protocol in a few lines."""

    name = "user_regression"

    @dataclasses.dataclass(frozen=True)
    class Options:
        dim: int = 8
        noise: float = 0.5

    @classmethod
    def validate(cls, options) -> None:
        if options.dim < 1:
            raise TaskConfigError("dim must be >= 1")

    def _build(self) -> None:
        g = torch.Generator().manual_seed(0)
        self._w = torch.randn(self.options.dim, 1, generator=g).to(self.device, self.dtype)
        self._eval = self._draw(torch.Generator().manual_seed(1), 512)

    def _draw(self, gen, n):
        x = torch.randn(n, self.options.dim, generator=gen).to(self.device, self.dtype)
        return x, x @ self._w + self.options.noise * torch.randn(n, 1, generator=gen).to(
            self.device, self.dtype)

    def make_model(self):
        return torch.nn.Linear(self.options.dim, 1)

    def loss_fn(self, outputs, targets):
        return 0.5 * ((outputs - targets) ** 2).mean()

    def _sample(self, generator, batch_size):
        return self._draw(generator, batch_size)

    def _eval_data(self):
        return self._eval

    def _objective_data(self):
        return self._eval


@pytest.fixture()
def registered():
    register_task(NoisyRegression)  # also usable as a class decorator
    yield
    TASKS.pop("user_regression")  # leave the registry as the other tests expect it


def test_a_user_task_is_swept_and_fitted(registered):
    task = make_task("user_regression", dim=4).to("cpu")
    spec = SweepSpec(batch_sizes=(1, 2, 4, 8, 16, 32, 64),
                     learning_rates={"sgd": (0.05, 0.1, 0.2, 0.4)}, seeds=(0,),
                     budget=StepBudget(examples=2048, min_steps=40, max_steps=2000, n_log=12))
    frame = run_sweep(task, spec)
    sweep = load_sweep(frame)
    target = float(frame["metric"].quantile(0.3))
    fit = fit_tradeoff(steps_to_target(sweep, target), n_boot=0, interval="f")
    assert fit.b_crit > 0 and fit.n_batch_sizes >= 3


def test_register_task_refuses_what_is_not_a_task(registered):
    with pytest.raises(TypeError, match="Task subclass"):
        register_task(int)
    with pytest.raises(TaskConfigError, match="already registered"):
        register_task(type("Other", (NoisyRegression,), {"name": "teacher_student"}))
