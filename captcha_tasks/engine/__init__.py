"""Solving as plain code, no Celery inside: admission, the engine (its loop, the queue
of Lua calls, the key-refusal pause, the observers), timings, job records."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports
from .admission import admit
from .jobs import Job

if TYPE_CHECKING:
    from .finish import Completer
    from .loop import Engine

#: The engine itself, imported on first use: a caller that admits nothing and a task
#: module that only names a job load no loop, poller or HTTP server.
_LAZY = {"Completer": "finish", "Engine": "loop"}

__getattr__ = lazy_exports(__name__, _LAZY, globals())


__all__ = ["Completer", "Engine", "Job", "admit"]
