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

__all__ = ["CONFIG_MODULE", "app", "config_module"]

log = logging.getLogger(__name__)

#: The app's own configuration.
CONFIG_MODULE = "captcha_tasks.worker.celeryconfig"

app = Celery(
    "captcha_tasks",
    include=[
        "captcha_tasks.worker.solve_tasks",
        "captcha_tasks.worker.solve_more",
        "captcha_tasks.worker.page_tasks",
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
        log.warning("CELERY_CONFIG_MODULE=%s: no such module; captcha_tasks uses %s",
                    name, CONFIG_MODULE)  # fmt: skip
        return CONFIG_MODULE
    if getattr(module, "CAPTCHA_TASKS_CONFIG", False) is not True:
        log.warning("CELERY_CONFIG_MODULE=%s is not a captcha_tasks configuration (it must "
                    "start with `from captcha_tasks.celeryconfig import *`); captcha_tasks "
                    "uses %s", name, CONFIG_MODULE)  # fmt: skip
        return CONFIG_MODULE
    return name


@app.on_configure.connect  # type: ignore[untyped-decorator]
def _choose_config(sender: Celery, **_: Any) -> None:
    # Sent when the configuration is first read: the source is chosen then, not at import.
    sender.config_from_object(config_module())


def _install_steps() -> None:
    from .engine_step import SolveEngineStep
    from .heartbeat_step import HeartbeatStep
    from .metrics_step import MetricsStep
    from .proxy_step import ProxyLeaseStep

    app.steps["worker"].add(SolveEngineStep)
    app.steps["worker"].add(ProxyLeaseStep)
    app.steps["worker"].add(MetricsStep)
    app.steps["consumer"].add(HeartbeatStep)


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

    # A caller gives up on an unreachable result backend after a few seconds; a worker,
    # which must store the results of solves already paid for, keeps trying longer.
    conf: Any = sender.app.conf
    options = dict(conf.result_backend_transport_options or {})
    if options.get("retry_policy") == conf.get("CLIENT_BACKEND_RETRY"):
        options["retry_policy"] = conf.get("WORKER_BACKEND_RETRY")
        conf.result_backend_transport_options = options


@signals.worker_process_init.connect  # type: ignore[untyped-decorator]
def _on_pool_process_init(**_: Any) -> None:
    # A prefork child has just built each task's tracer: wrap ours (see _light_ignored).
    for name, task in list(app.tasks.items()):
        if name.startswith("captcha_tasks.") and getattr(task, "__trace__", None) is not None:
            task.__trace__ = _light_ignored(task.__trace__)


def _light_ignored(trace: Any) -> Any:
    """A tracer whose ignored executions report a bare ``Ignore`` to the worker's main
    process. Celery sends it the whole ``ExceptionInfo`` (tracebacks with every code
    position of its tracer's frames: ~40 kB pickled, then unpickled) only for it to
    acknowledge the message, which is all it does with an ignored one. A solve's
    admitting execution ends that way every time."""
    from billiard.einfo import ExceptionInfo  # type: ignore[import-untyped]
    from celery.app.trace import IGNORED, trace_ok_t
    from celery.exceptions import Ignore

    try:
        raise Ignore()
    except Ignore:
        bare = ExceptionInfo(internal=True)
    bare.tb = None  # keep the exception and its type; drop the frames

    def traced(*args: Any, **kwargs: Any) -> Any:
        out = trace(*args, **kwargs)
        info = out[1]
        if info is not None and info.state == IGNORED:
            return trace_ok_t(bare, info, out[2], out[3])
        return out

    return traced
