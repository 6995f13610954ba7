"""Task plugins: each a `Task` registered by name.

>>> from empirical_batch.harness.tasks import make_task
>>> make_task("digits", hidden=16).options.hidden
16
"""

from __future__ import annotations

from .base import Task, TaskConfigError
from .digits import Digits
from .sequence import Sequence
from .teacher_student import TeacherStudent

TASKS: dict[str, type[Task]] = {t.name: t for t in (TeacherStudent, Digits, Sequence)}

__all__ = ["TASKS", "Digits", "Sequence", "Task", "TaskConfigError", "TeacherStudent",
           "check_task_name", "make_task"]


def check_task_name(name: str) -> None:
    """Raise `TaskConfigError` listing the tasks when ``name`` is not one of them."""
    if not isinstance(name, str) or name not in TASKS:
        raise TaskConfigError(f"unknown task {name!r}; available tasks: {', '.join(TASKS)}")


def make_task(name: str, **options) -> Task:
    """The task registered as ``name`` with ``options``; a clear error for a bad name/option."""
    check_task_name(name)
    return TASKS[name](**options)
