"""The Celery application: ``celery -A captcha_tasks worker`` finds ``captcha_tasks.app``.

Importing this module defines the app and nothing more: its configuration is read
the first time ``app.conf`` is (from ``captcha_tasks.worker.celeryconfig``, inside the
package), and what only a worker needs (its remote-control command, its quieter
success log) is set up when a worker of this app starts.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import celery.app.amqp
from billiard.einfo import ExceptionInfo, ExceptionWithTraceback  # type: ignore[import-untyped]
from celery import Celery, signals
from celery.exceptions import Ignore
from celery.utils.imports import import_from_cwd

__all__ = ["CONFIG_MODULE", "IgnoreInfo", "app", "config_module"]

log = logging.getLogger(__name__)

#: The app's own configuration.
CONFIG_MODULE = "captcha_tasks.worker.celeryconfig"


class AMQP(celery.app.amqp.AMQP):  # type: ignore[misc]
    """Celery's message builder, with the ``task-sent`` event under the name the task
    is sent as (``shadow``: Celery's "name in logs and monitoring"), as its
    ``task-received`` is. Celery names it by the task's real name, and event consumers
    (Flower) keep the name of whichever event of a task they read last: a challenged
    ``fetch_page``'s last step, sent under the page's name, would show as
    ``submit_challenge`` whenever its ``task-sent`` arrived after its ``task-received``."""

    def as_task_v2(self, task_id: str, name: str, *args: Any, **kwargs: Any) -> Any:
        message = super().as_task_v2(task_id, name, *args, **kwargs)
        shadow = message.headers.get("shadow")
        if shadow and message.sent_event is not None:
            message.sent_event["name"] = shadow
        return message


app = Celery(
    "captcha_tasks",
    amqp=AMQP,
    include=[
        "captcha_tasks.worker.solve_tasks",
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


@signals.worker_init.connect  # type: ignore[untyped-decorator]
def _on_worker_init(sender: Any = None, **_: Any) -> None:
    if getattr(sender, "app", None) is not app:
        return  # another application's worker in this process
    from celery.app import trace

    # Registers the fleet_version inspect command (Celery's command registry is global
    # to the process: only a worker of this app adds it).
    from . import control  # noqa: F401

    # Celery logs every task's return value at INFO; a solve's is a single-use token
    # (and a page's may carry form data). Log that the task succeeded, not what it
    # returned: results are for the backend, not for log files.
    trace.LOG_SUCCESS = "Task %(name)s[%(id)s] succeeded in %(runtime)ss"
    # A solve's admitting execution ends with Ignore every time (see _ignore_info).
    trace.ExceptionInfo = IgnoreInfo
    # ... and logs what that meant itself, as a replaced or parked page does.
    from .trace_log import quiet_ignored_for

    tasks = sender.app.tasks
    quiet_ignored_for(lambda name: bool(getattr(tasks.get(name), "logs_its_ignore", False)))

    _scrub_broker_stats()

    # A caller gives up on an unreachable result backend after a few seconds; a worker,
    # which must store the results of solves already paid for, keeps trying longer.
    conf: Any = sender.app.conf
    options = dict(conf.result_backend_transport_options or {})
    if options.get("retry_policy") == conf.get("CLIENT_BACKEND_RETRY"):
        options["retry_policy"] = conf.get("WORKER_BACKEND_RETRY")
        conf.result_backend_transport_options = options


def _scrub_broker_stats() -> None:
    """``inspect stats`` (and Flower's worker pages) show the broker connection: Celery
    drops its password, but a sentinel:// list keeps the master's password in the URLs
    kombu lists as ``alternates``, and the sentinels' own in the transport options."""
    from celery.worker.consumer.connection import Connection

    from .broker import scrub_broker_info

    if getattr(Connection.info, "scrubbed", False):
        return
    celery_info = Connection.info

    def info(self: Any, c: Any) -> dict[str, Any]:
        found: dict[str, Any] = celery_info(self, c)
        if isinstance(found.get("broker"), dict):
            found["broker"] = scrub_broker_info(found["broker"])
        return found

    info.scrubbed = True  # type: ignore[attr-defined]
    Connection.info = info


class IgnoreInfo(ExceptionInfo):  # type: ignore[misc]
    """Celery's tracer records how every execution that raised ended, ``Ignore`` too,
    as billiard's ``ExceptionInfo``: the traceback formatted, each frame's code copied
    with all its positions (the tracer's own function is hundreds of lines), twice, then
    pickled (~40 kB) to the main process, which only acknowledges the message: for a
    solve's admitting execution, which ends in ``Ignore``, that would be most of its
    cost. ``Ignore`` is control flow, never logged with a traceback: its record here
    keeps the exception and drops the frames. Every other exception is recorded in
    full, as billiard's ``ExceptionInfo`` records it."""

    def __init__(self, exc_info: Any = None, internal: bool = False) -> None:
        kind, exception, tb = exc_info or sys.exc_info()
        if not isinstance(exception, Ignore):
            super().__init__((kind, exception, tb), internal)
            return
        self.type, self.tb, self.internal = kind, None, internal
        self.traceback = f"{type(exception).__name__}: {exception}\n"
        self.exception = ExceptionWithTraceback(exception, self.traceback)
