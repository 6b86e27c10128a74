"""Solving as plain code, no Celery inside: admission, the engine, timings, job records."""

from .admission import admit
from .engine import Completer, Engine
from .jobs import Job

__all__ = ["Completer", "Engine", "Job", "admit"]
