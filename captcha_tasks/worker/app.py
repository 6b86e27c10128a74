"""The Celery application: ``celery -A captcha_tasks worker`` finds ``captcha_tasks.app``.

Importing this module defines the app and nothing more: its configuration is read
the first time ``app.conf`` is (from ``captcha_tasks.worker.celeryconfig``, inside the
package), and what only a worker needs (its remote-control command, its quieter
success log) is set up when a worker of this app starts.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from celery import Celery, signals
from celery.utils.imports import import_from_cwd

from .celery_internals.amqp import AMQP

__all__ = ["CONFIG_MODULE", "app", "config_module"]

log = logging.getLogger(__name__)

#: The app's own configuration.
CONFIG_MODULE = "captcha_tasks.worker.celeryconfig"


app = Celery(
    "captcha_tasks",
    amqp=AMQP,
    include=[
        "captcha_tasks.worker.solve_tasks",
        "captcha_tasks.worker.kind_tasks",
        "captcha_tasks.worker.deprecated",
        "captcha_tasks.worker.page_tasks",
        "captcha_tasks.worker.altcha_tasks",
    ],
)


def config_module(environ: os._Environ[str] | dict[str, str] = os.environ) -> str:
    """The module the app reads its configuration from.

    ``celery --config NAME`` sets ``CELERY_CONFIG_MODULE``: that module is used when it
    builds on ours (``from captcha_tasks.celeryconfig import *`` gives it the
    ``CAPTCHA_TASKS_CONFIG`` marker). Any other module of that name belongs to another
    application sharing the process, and is ignored.
    """
    name = environ.get("CELERY_CONFIG_MODULE", "")
    if not name or name == CONFIG_MODULE:
        return CONFIG_MODULE
    try:
        module = import_from_cwd(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        log.warning(
            "CELERY_CONFIG_MODULE=%s: no such module; captcha_tasks uses %s", name, CONFIG_MODULE
        )
        return CONFIG_MODULE
    if getattr(module, "CAPTCHA_TASKS_CONFIG", False) is not True:
        log.warning(
            "CELERY_CONFIG_MODULE=%s is not a captcha_tasks configuration (it must "
            "start with `from captcha_tasks.celeryconfig import *`); captcha_tasks "
            "uses %s",
            name,
            CONFIG_MODULE,
        )
        return CONFIG_MODULE
    return name


@app.on_configure.connect  # type: ignore[untyped-decorator]
def _choose_config(sender: Celery, **_: Any) -> None:
    # Sent when the configuration is first read: the source is chosen then, not at import.
    sender.config_from_object(config_module())


def _install_steps() -> None:
    # By name, as Celery names its own: a worker's blueprint imports them when it starts,
    # and a process that only sends tasks never loads the engine or the HTTP servers.
    for step in (
        "startup_step:StartupCheckStep",
        "engine_step:SolveEngineStep",
        "callback_step:CallbackStep",
        "proxy_step:ProxyLeaseStep",
        "metrics_step:MetricsStep",
    ):
        app.steps["worker"].add(f"{__package__}.{step}")
    app.steps["consumer"].add(f"{__package__}.heartbeat_step:HeartbeatStep")


_install_steps()
# The inspect commands (fleet_version, solves): the `celery` command line sends only those
# registered in its own process, so they are registered wherever the app is imported; so
# are the trace hooks (a send's context in its message, the SDK in each worker process).
from . import inspect_commands, tracing_hooks  # noqa: E402, F401


@signals.worker_init.connect  # type: ignore[untyped-decorator]
def _on_worker_init(sender: Any = None, **_: Any) -> None:
    if getattr(sender, "app", None) is not app:
        return  # another application's worker in this process
    from .celery_internals.broker import scrub_broker_stats
    from .celery_internals.tracer import install_tracer_hooks
    from .celery_internals.versions import warn_if_untested

    warn_if_untested()
    # No return values in Celery's log (a solve's is a single-use token; a page's may
    # carry form data), a short record of a solve's Ignore, and the "ignored" line of
    # the tasks that log what their Ignore meant themselves at DEBUG.
    tasks = sender.app.tasks
    install_tracer_hooks(lambda name: bool(getattr(tasks.get(name), "logs_its_ignore", False)))
    scrub_broker_stats()

    # A caller gives up on an unreachable result backend after a few seconds; a worker,
    # which must store the results of solves already paid for, keeps trying longer.
    conf: Any = sender.app.conf
    options = dict(conf.result_backend_transport_options or {})
    if options.get("retry_policy") == conf.get("CLIENT_BACKEND_RETRY"):
        options["retry_policy"] = conf.get("WORKER_BACKEND_RETRY")
        conf.result_backend_transport_options = options
