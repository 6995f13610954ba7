"""Task plugins: each a `Task` registered by name.

>>> from empirical_batch.harness.tasks import make_task
>>> make_task("digits", hidden=16).options.hidden
16

Your own model: subclass `Task` (a frozen dataclass ``Options``, ``validate``,
``_build``, ``make_model``, ``loss_fn``, ``_sample``, ``_eval_data``,
``_objective_data``; see `Task`), `register_task` it, and sweep it with
`empirical_batch.harness.sweep.run_sweep` (``tests/test_harness_user_task.py`` is a
complete example in 40 lines).
"""

from __future__ import annotations

from ...errors import InputError
from .base import Task, TaskConfigError
from .digits import Digits
from .sequence import Sequence
from .teacher_student import TeacherStudent
from .text_lm import TextLM

TASKS: dict[str, type[Task]] = {
    t.name: t for t in (TeacherStudent, Digits, Sequence, TextLM)
}

__all__ = ["TASKS", "Digits", "Sequence", "Task", "TaskConfigError", "TeacherStudent", "TextLM",
           "check_task_name", "make_task", "register_task"]


def register_task(cls: type[Task]) -> type[Task]:
    """Register a `Task` subclass under its ``name`` (usable as a class decorator), so
    that configurations and `make_task` find it."""
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise InputError(f"register_task needs a Task subclass, got {cls!r}")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise TaskConfigError(f"{cls.__name__} needs a class attribute name (a string)")
    if name in TASKS and TASKS[name] is not cls:
        raise TaskConfigError(f"a task named {name!r} is already registered")
    TASKS[name] = cls
    return cls


def check_task_name(name: str) -> None:
    """Raise `TaskConfigError` listing the tasks when ``name`` is not one of them."""
    if not isinstance(name, str) or name not in TASKS:
        raise TaskConfigError(f"unknown task {name!r}; available tasks: {', '.join(TASKS)}")


def make_task(name: str, **options) -> Task:
    """The task registered as ``name`` with ``options``; a clear error for a bad name/option."""
    check_task_name(name)
    return TASKS[name](**options)
