"""Solving as plain code, no Celery inside: admission, the engine (its loop, the queue
of Lua calls, the key-refusal pause, the observers), timings, job records."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .admission import admit
from .jobs import Job

if TYPE_CHECKING:
    from .finish import Completer
    from .loop import Engine

#: The engine itself, imported on first use: a caller that admits nothing and a task
#: module that only names a job load no loop, poller or HTTP server.
_LAZY = {"Completer": "finish", "Engine": "loop"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = ["Completer", "Engine", "Job", "admit"]
