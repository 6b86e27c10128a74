"""Solving as plain code, no Celery inside: admission, the engine (its loop, the queue
of Lua calls, the key-refusal pause, the observers), timings, job records."""

from .admission import admit
from .finish import Completer
from .jobs import Job
from .loop import Engine

__all__ = ["Completer", "Engine", "Job", "admit"]
