"""The decorator every task of the package is registered with: Celery's ``@app.task``,
typed for callers (:mod:`captcha_tasks.caller.typed`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, TypeVar, cast

from typing_extensions import ParamSpec

from ..caller.typed import TypedTask
from .app import app

__all__ = ["task"]

P = ParamSpec("P")
R = TypeVar("R")


def task(
    name: str, *, base: type, **options: Any
) -> Callable[[Callable[Concatenate[Any, P], R]], TypedTask[P, R]]:
    """``@app.task(name=name, base=base, bind=True, **options)``, typed for callers: a
    :class:`~captcha_tasks.caller.typed.TypedTask` with the function's parameters (less
    ``self``) and return type."""

    def register(fun: Callable[Concatenate[Any, P], R]) -> TypedTask[P, R]:
        return cast("TypedTask[P, R]", app.task(name=name, base=base, bind=True, **options)(fun))

    return register
