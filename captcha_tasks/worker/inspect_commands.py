"""The inspect commands every captcha_tasks worker answers, registered wherever the app is
imported: the ``celery`` command line lists and sends only the commands its own process
knows (Celery's registry is global to the process, so ``celery -A captcha_tasks inspect
solves`` needs them registered there too, not only in the workers).

``fleet_version``: what a worker runs, for ``captcha-tasks rollout`` (and anyone)::

    celery -A captcha_tasks inspect fleet_version
    -> {"celery@w1": {"version": "0.2.0", "pid": 4242, "hostname": "celery@w1"}}

It answers from the worker's main process, so it reports the version the process
was started with (``CAPTCHA_TASKS_VERSION``, else the package's).

``solves``: the solves the engines hold, which Celery's ``inspect active`` and
``reserved`` never list (a solve is admitted, its message acknowledged, as soon as a
worker receives it; the engines end it later)::

    celery -A captcha_tasks inspect solves
    -> {"celery@w1": {"waiting": 28, "in_flight": 5, "calls": 2, "revoking": 0,
                      "engines": [{"name": "engine@w1", "provider": "default",
                                   "calls": 2}]}}

``waiting`` (for a provider's thread) and ``in_flight`` (at a provider) are the
cluster's, as ``captcha-tasks status`` counts them: any worker's engine takes any of
them. ``calls``: the provider calls this worker's engines are making now, which a
rolling update waits for before it restarts the worker; ``revoking``: revocations it
has not settled yet.
"""

from __future__ import annotations

import os
from typing import Any

from celery.worker.control import inspect_command

from ..version import worker_version

__all__ = ["FLEET_VERSION_COMMAND", "SOLVES_COMMAND", "fleet_version", "solves"]

#: The inspect command's name (``app.control.broadcast(FLEET_VERSION_COMMAND, reply=True)``).
FLEET_VERSION_COMMAND = "fleet_version"
#: The inspect command that shows the solves the engines hold.
SOLVES_COMMAND = "solves"


@inspect_command()  # type: ignore[untyped-decorator]
def fleet_version(state: Any, **kwargs: Any) -> dict[str, Any]:
    """The version this worker reports, its pid and node name."""
    return {
        "version": worker_version(),
        "pid": os.getpid(),
        "hostname": state.consumer.hostname,
    }


@inspect_command()  # type: ignore[untyped-decorator]
def solves(state: Any, **kwargs: Any) -> dict[str, Any]:
    """The cluster's waiting and in-flight solves, and this worker's provider calls."""
    from ..monitor.status import thread_budget
    from ..settings import get_settings
    from ..state import Keys, state_redis
    from ..state.clock import clock_of
    from .engine_step import running_engines

    settings = get_settings()
    client = state_redis(settings)
    budget = thread_budget(client, Keys(settings.key_prefix), settings, clock_of(client)())
    engines = running_engines()
    shown = [
        {"name": engine.name, "provider": engine.provider_name, "calls": engine.calls_in_progress}
        for engine in engines
    ]
    return {
        "waiting": budget["waiting"],
        "in_flight": budget["in_flight"],
        "calls": sum(engine["calls"] for engine in shown),
        "revoking": sum(engine.revoking() for engine in engines),
        "engines": shown,
    }
