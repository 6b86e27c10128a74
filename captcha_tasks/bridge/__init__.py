"""Bridges from message buses to the solve tasks: ``captcha-tasks bridge nats``.

:mod:`.jobs` maps a job message to its solve task and builds result messages (pure
functions), :mod:`.pending` keeps the jobs whose results are still to be published
in Redis, :mod:`.nats_bridge` runs the loops (over :mod:`.nats_io`'s connection), and
:mod:`.queue` is what they need of the task system, passed in by whoever starts a
bridge (no Celery here). The NATS client (``nats-py``, the ``nats`` extra) is
imported only when a bridge runs.
"""

from __future__ import annotations

from .jobs import Job, TaskCall, failed, parse_job, solved, task_call

__all__ = ["Job", "TaskCall", "failed", "parse_job", "solved", "task_call"]
