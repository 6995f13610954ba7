"""The one interface every harness task implements.

A task owns its data (on a device, in a dtype), its model architecture and its loss.
Training code never looks inside: it asks for a model, for training batches drawn
from a ``torch.Generator``, for a fixed evaluation set, and for the data that define
the *objective* whose gradient SGD estimates (the one-step experiment and the noise
measurements use it: for a finite training set it is the training set itself; for a
generated task it is a large fixed sample of the training distribution).
"""

from __future__ import annotations

import dataclasses
import math
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import torch
from torch import nn

from ..._optional import check_installed
from ...errors import InputError
from ...params import INTEGER, REAL, Domain, check_fields

#: held while a model draws its initial weights from torch's global generator
_GLOBAL_RNG = threading.Lock()


class TaskConfigError(InputError):
    """A task was given an option it does not have or a value it cannot use."""


POSITIVE_INT = INTEGER.within(Domain(0.0, math.inf, integer=True), "a positive integer")
"""An option's constraint: an exact integer > 0 (not a bool, not a float)."""
FRACTION = REAL.within(Domain(0.0, 1.0), "a number strictly between 0 and 1")
"""An option's constraint: a real number in (0, 1)."""
NONNEGATIVE = REAL.within(Domain(0.0, math.inf, low_open=False), "a finite number >= 0")
"""An option's constraint: a finite real number >= 0."""


def check_options(task: str, options: Any, constraints: Mapping[str, Any]) -> None:
    """Check the fields of a task's ``options`` against the task's declared
    ``option_constraints`` (`empirical_batch.params.check_fields`): a `TaskConfigError`
    naming the task, the option, its constraint and the value received."""

    def error(field: str, message: str) -> TaskConfigError:
        return TaskConfigError(f"task {task!r}: option {field!r} "
                               f"{message.removeprefix(field + ' ')}")

    check_fields(options, constraints, error=error)


class MLP(nn.Module):
    """One hidden layer: ``fc2(activation(fc1(x)))``."""

    def __init__(self, inputs: int, hidden: int, outputs: int,
                 activation: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.fc1 = nn.Linear(inputs, hidden)
        self.fc2 = nn.Linear(hidden, outputs)
        self.activation = activation

    def forward(self, x):
        return self.fc2(self.activation(self.fc1(x)))


class Task(ABC):
    """A training problem for the harness.

    Subclasses define a frozen dataclass ``Options`` (their configuration, with
    defaults), ``option_constraints`` (each option's type and domain, declared once as
    `empirical_batch.params.validate_params` declares a function's: `POSITIVE_INT`,
    `FRACTION`, `NONNEGATIVE`, ``INTEGER``, ...), ``validate`` where options must agree
    with each other or with a file (raising `TaskConfigError`) and the abstract methods
    below. Construct with keyword overrides: ``Digits(hidden=32)``. Unknown option names
    and bad values raise `TaskConfigError` naming the task, the option and what is
    wrong.
    """

    name: ClassVar[str]
    Options: ClassVar[type]
    #: each option's constraint, checked at construction before `validate` (`check_options`)
    option_constraints: ClassVar[Mapping[str, Any]] = {}
    #: what one element of a batch is ("example", "sequence of 32 tokens", ...)
    unit: ClassVar[str] = "example"
    #: a language model (the report compares its B_crit(L) with Kaplan et al. 2020's α_B)
    language_model: ClassVar[bool] = False
    #: optional modules the task imports (e.g. ``("sklearn",)``), checked at construction
    requires: ClassVar[tuple[str, ...]] = ()

    def __init__(self, **options: Any) -> None:
        for module in self.requires:  # before any training: one line naming the extra
            check_installed(module, by=f"the {self.name} task")
        fields = {f.name for f in dataclasses.fields(self.Options)}
        unknown = sorted(set(options) - fields)
        if unknown:
            raise TaskConfigError(
                f"task {self.name!r} has no option {unknown[0]!r}; "
                f"its options are: {', '.join(sorted(fields))}"
            )
        self.options = self.Options(**options)
        check_options(self.name, self.options, self.option_constraints)
        self.validate(self.options)
        self.device = torch.device("cpu")
        self.dtype = torch.float32
        self._ready = False

    # -- configuration -------------------------------------------------------------
    @classmethod
    def validate(cls, options) -> None:
        """Raise `TaskConfigError` where options that each meet their constraint
        (``option_constraints``) cannot be used together, or name a file that cannot be
        used; none by default."""
        return None

    def to(self, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32) -> Task:
        """Build (or move) the task's tensors on ``device`` in ``dtype``; returns self."""
        self.device = torch.device(device)
        self.dtype = dtype
        self._build()
        self._ready = True
        return self

    def _require_ready(self) -> None:
        if not self._ready:
            self.to(self.device, self.dtype)

    # -- what subclasses provide ---------------------------------------------------
    @abstractmethod
    def _build(self) -> None:
        """Create data tensors on ``self.device`` / ``self.dtype``."""

    @abstractmethod
    def make_model(self) -> torch.nn.Module:
        """A freshly initialised model (uses torch's global RNG; see `init_model`)."""

    @abstractmethod
    def loss_fn(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Batch-mean loss, the one the training loop minimises."""

    @abstractmethod
    def _sample(self, generator: torch.Generator, batch_size: int):
        """A training batch ``(inputs, targets)`` drawn with ``generator``."""

    @abstractmethod
    def _eval_data(self):
        """The fixed evaluation set ``(inputs, targets)``."""

    @abstractmethod
    def _objective_data(self):
        """Data defining the training objective (see module docstring)."""

    # -- public, uniform API -------------------------------------------------------
    def init_model(self, seed: int) -> torch.nn.Module:
        """The model initialised from ``seed`` (CPU RNG, so identical on every device).

        The layers draw from torch's global generator, seeded here; the lock keeps runs
        initialised on other threads (a thread pool's shards) from drawing between the
        seeding and the last layer."""
        with _GLOBAL_RNG, torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            model = self.make_model()
        return model.to(device=self.device, dtype=self.dtype)

    def generator(self, seed: int, batch_size: int) -> torch.Generator:
        """The data stream of run seed ``seed`` at ``batch_size`` (shared across lrs)."""
        import numpy as np

        state = np.random.SeedSequence([int(seed), int(batch_size), 7919]).generate_state(1)
        gen = torch.Generator(device=self.device)
        gen.manual_seed(int(state[0]))
        return gen

    def sample(self, generator: torch.Generator, batch_size: int):
        self._require_ready()
        return self._sample(generator, int(batch_size))

    def eval_data(self):
        self._require_ready()
        return self._eval_data()

    def objective_data(self):
        self._require_ready()
        return self._objective_data()

    @property
    def population_size(self) -> float:
        """How many examples the batches are drawn from, when that set is finite and is the
        objective data itself (`objective_data`) and batches are drawn from it with
        replacement: the noise measurements then estimate that set's noise scales (the
        finite-population correction; `empirical_batch.validation.experiments.noise`). ``inf`` (the
        default) when the objective data are a sample of a larger or unbounded
        population (generated data, random windows of a long text)."""
        return float("inf")

    def describe(self) -> dict:
        return {"task": self.name, "unit": self.unit, **dataclasses.asdict(self.options)}
