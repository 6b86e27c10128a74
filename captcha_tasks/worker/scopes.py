"""Per-execution scopes: what a task sets up before its body and tears down after it.

One task instance serves every execution of a process (concurrently under ``-P threads``
or ``gevent``), so what belongs to one execution cannot live on ``self``. A base class
of :class:`ScopedTask` names its scopes in ``scopes``: each is a method taking the
call's ``(args, kwargs)`` and returning a context manager. :meth:`ScopedTask.__call__`
enters the scopes of every base (in method resolution order: the first base listed is
the outermost) around the body, and :meth:`ScopedTask.scoped` finds what a scope
yielded for the execution running here::

    class BrowserTask(ScopedTask):
        abstract = True
        scopes = ("browser_scope",)

        @contextlib.contextmanager
        def browser_scope(self, args, kwargs):
            with launch_browser() as browser:
                yield browser

    class SiteTask(SharedCookiesTask, BrowserTask):  # cookies, then the browser
        abstract = True

Teardown runs whatever the body's outcome (success, failure, ``self.retry``).
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any, ClassVar

from celery import Task

__all__ = ["ScopedTask"]


class _Execution:
    """One running execution of a scoped task: what each of its scopes yielded."""

    __slots__ = ("entered", "outer", "task")

    def __init__(self, task: ScopedTask, outer: _Execution | None) -> None:
        self.task = task
        self.outer = outer  # the execution this one runs inside (a task called directly)
        self.entered: dict[str, Any] = {}


# The innermost running execution. A context variable is per thread and per greenlet,
# which is what one execution is under every pool.
_current: contextvars.ContextVar[_Execution | None] = contextvars.ContextVar(
    "captcha_tasks_execution", default=None
)


class ScopedTask(Task):  # type: ignore[misc]  # celery ships no type hints
    """A task whose body runs inside the scopes its base classes name (module docstring)."""

    abstract = True
    #: This class's own scope methods (the bases' are gathered, not overridden).
    scopes: ClassVar[tuple[str, ...]] = ()
    #: Every scope of the class, outermost first.
    all_scopes: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names: list[str] = []
        for klass in cls.__mro__:
            names.extend(n for n in vars(klass).get("scopes", ()) if n not in names)
        cls.all_scopes = tuple(names)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        execution = _Execution(self, _current.get())
        token = _current.set(execution)
        try:
            with contextlib.ExitStack() as stack:
                for name in self.all_scopes:
                    scope = getattr(self, name)(args, kwargs)
                    execution.entered[name] = stack.enter_context(scope)
                return super().__call__(*args, **kwargs)
        finally:
            _current.reset(token)

    def scoped(self, name: str) -> Any:
        """What scope ``name`` yielded for this task's execution running here; ``None``
        outside one (or before that scope was entered)."""
        execution = _current.get()
        while execution is not None and execution.task is not self:
            execution = execution.outer
        return None if execution is None else execution.entered.get(name)
