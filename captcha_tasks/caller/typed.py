"""Tasks as their callers' type checkers see them: ``.delay()`` and a direct call take the
task's own parameters, ``.get()`` gives its result type.

Celery's ``@app.task`` is untyped, and the ``celery-types`` stubs type a task built on a
custom base class (ours all are) as that class, without its parameters. The worker's
:func:`~captcha_tasks.worker.typed.task` registers each task as ``@app.task`` does and
types it as a :class:`TypedTask` with the function's parameters (less ``self``) and
return type. At run time nothing differs from a Celery task.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from typing_extensions import ParamSpec

__all__ = ["TaskResult", "TypedTask"]

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class TaskResult(Protocol[R_co]):
    """What ``.delay()`` / ``.apply_async()`` return (Celery's ``AsyncResult``), typed:
    ``.get()`` gives the task's result type."""

    @property
    def id(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def result(self) -> Any: ...

    def get(
        self,
        timeout: float | None = None,
        propagate: bool = True,
        interval: float = 0.5,
        **options: Any,
    ) -> R_co: ...
    def ready(self) -> bool: ...
    def successful(self) -> bool: ...
    def failed(self) -> bool: ...
    def forget(self) -> None: ...
    def revoke(self, **options: Any) -> None: ...
    def __getattr__(self, name: str) -> Any:
        """Every other attribute of Celery's ``AsyncResult`` (``wait``, ``then``...)."""


class TypedTask(Protocol[P, R]):
    """A Celery task (``type(task)`` is the task's Celery class) as the type checker sees
    it: called, ``.delay()``-ed or ``.si()``-ed with the function's parameters."""

    name: str
    run: Callable[P, R]

    def __getattr__(self, name: str) -> Any:
        """Every other attribute of a Celery task (``request``, ``app``, ``retry``...)."""

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R: ...
    def delay(self, *args: P.args, **kwargs: P.kwargs) -> TaskResult[R]: ...
    def apply_async(
        self,
        args: tuple[Any, ...] | list[Any] | None = None,
        kwargs: dict[str, Any] | None = None,
        **options: Any,
    ) -> TaskResult[R]: ...
    def si(self, *args: P.args, **kwargs: P.kwargs) -> Any: ...
    def s(self, *args: Any, **kwargs: Any) -> Any: ...
    def signature(self, *args: Any, **kwargs: Any) -> Any: ...
    def AsyncResult(self, task_id: str, **kwargs: Any) -> TaskResult[R]: ...
