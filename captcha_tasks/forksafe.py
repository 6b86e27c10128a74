"""Per-process values: a connection pool or an HTTP session built on first use in the
process that uses it, and forgotten in a child after ``fork()`` (prefork workers must
never share a socket their parent opened)."""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["PerProcess"]

T = TypeVar("T")

_instances: weakref.WeakSet[PerProcess[object]] = weakref.WeakSet()


class PerProcess(Generic[T]):
    """Values by key, each built once per process by the ``build`` given with the first
    ``get`` of its key, and shared by the process's threads; a forked child starts
    empty."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[Hashable, T] = {}
        _instances.add(self)  # type: ignore[arg-type]

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        with self._lock:
            if key not in self._values:
                self._values[key] = build()
            return self._values[key]

    def clear(self) -> list[T]:
        """Forget every value; the ones forgotten, for the caller to close."""
        with self._lock:
            values = list(self._values.values())
            self._values.clear()
            return values

    def _after_fork(self) -> None:
        # The parent's lock may have been held by another thread at fork time.
        self._lock = threading.Lock()
        self._values.clear()


def _forget_all_in_child() -> None:
    for cache in list(_instances):
        cache._after_fork()


os.register_at_fork(after_in_child=_forget_all_in_child)
