"""Solving as plain code, no Celery inside: admission, the engine, timings, job records."""

from .admission import admit
from .jobs import Job
from .loop import Completer, Engine

__all__ = ["Completer", "Engine", "Job", "admit"]
