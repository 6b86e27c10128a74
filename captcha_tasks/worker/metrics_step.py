"""Serves Prometheus metrics from every ``celery worker`` (a worker bootstep).

Off unless ``CAPTCHA_TASKS_METRICS_PORT`` is set. Then, before the pool forks its
children, the step puts prometheus_client in multiprocess mode (a private directory
per worker unless ``PROMETHEUS_MULTIPROC_DIR`` names one) and installs the
:class:`~captcha_tasks.monitor.metrics.PrometheusObserver`, so the engine (main
process) and the solve tasks (children) count into files that ``/metrics`` merges.
The endpoint is served from the main process on ``CAPTCHA_TASKS_METRICS_ADDRESS``
(default ``127.0.0.1``); the Redis gauges are read at each scrape.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from celery import bootsteps, signals

from ..engine.spend import set_spend_observer
from ..monitor.metrics import PrometheusObserver, StateCollector, set_solve_observer
from ..settings import Settings, get_settings

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

__all__ = [
    "MULTIPROC_DIR_ENV",
    "MetricsStep",
    "enable_multiprocess",
    "mark_process_dead",
    "metrics_endpoint",
]

log = logging.getLogger(__name__)

#: prometheus_client's directory of per-process value files.
MULTIPROC_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"

#: Files prometheus_client writes in the multiprocess directory (only these are
#: ever deleted from a directory the operator named).
_VALUE_FILE = re.compile(r"^(counter|histogram|summary|gauge_[a-z]+)_\d+\.db$")


def metrics_endpoint(environ: Mapping[str, str] | None = None) -> tuple[str, int] | None:
    """``(address, port)`` of the worker's ``/metrics`` endpoint, or ``None`` (off)."""
    settings = Settings.from_env(environ)
    if settings.metrics_port is None:
        return None
    return settings.metrics_address, settings.metrics_port


def enable_multiprocess(
    name: str, environ: MutableMapping[str, str] | None = None
) -> tuple[Path, bool]:
    """Point prometheus_client at a directory of per-process value files, for this
    process and the children it forks from now on. Call it before any metric exists.

    Uses ``PROMETHEUS_MULTIPROC_DIR`` when set (created if missing; value files left
    by an earlier run are deleted, nothing else), else a new private directory named
    after ``name``. Returns ``(directory, created)``: a created one is the caller's
    to remove.
    """
    env = os.environ if environ is None else environ
    configured = env.get(MULTIPROC_DIR_ENV, "").strip()
    if configured:
        directory = Path(configured)
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        for entry in directory.iterdir():
            if _VALUE_FILE.match(entry.name):
                entry.unlink(missing_ok=True)
        created = False
    else:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:64]
        directory = Path(tempfile.mkdtemp(prefix=f"captcha-tasks-metrics-{safe}-"))
        created = True
    env[MULTIPROC_DIR_ENV] = str(directory)

    from prometheus_client import values

    if not getattr(values.ValueClass, "_multiprocess", False):
        # prometheus_client was imported before the variable was set, and chose
        # in-memory values then: switch to file-backed ones (as its own tests do).
        values.ValueClass = values.MultiProcessValue()  # type: ignore[no-untyped-call]
    return directory, created


def mark_process_dead(pid: int, directory: Path | str) -> None:
    """Forget a dead process's live gauges (its counters and histograms still count)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid, str(directory))  # type: ignore[no-untyped-call]


class MetricsStep(bootsteps.StartStopStep):  # type: ignore[misc]
    """``/metrics`` of this worker (see the module docstring)."""

    requires: ClassVar[set[str]] = {
        "celery.worker.components:Pool",
        "captcha_tasks.worker.startup_step:StartupCheckStep",
    }

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        # Read here so a malformed value stops the worker before anything starts.
        self.endpoint = metrics_endpoint()
        self.directory: Path | None = None
        self._created = False
        self._server: WSGIServer | None = None
        self._worker: Any = None

    def create(self, worker: Any) -> None:
        # Runs when the blueprint is applied: before the Pool step forks the children,
        # which inherit the environment and the observer set up here.
        if self.endpoint is None:
            return
        self._worker = worker
        self.directory, self._created = enable_multiprocess(worker.hostname)
        observer = PrometheusObserver()
        set_solve_observer(observer)
        set_spend_observer(observer)
        signals.worker_process_shutdown.connect(self._child_exited, weak=False)
        signals.worker_shutdown.connect(self._worker_shut_down, weak=False)

    def start(self, worker: Any) -> None:
        if self.endpoint is None or self.directory is None:
            return
        from prometheus_client import CollectorRegistry, start_http_server
        from prometheus_client.multiprocess import MultiProcessCollector

        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=str(self.directory))  # type: ignore[no-untyped-call]
        registry.register(StateCollector.from_settings(get_settings()))
        address, port = self.endpoint
        try:
            self._server, _ = start_http_server(port, address, registry)
        except OSError as exc:
            # Solving matters more than its metrics: run on, but say it loudly.
            log.error(
                "metrics: cannot serve on %s:%d (%s); this worker exports none", address, port, exc
            )
            return
        host = f"[{address}]" if ":" in address else address
        log.info(
            "metrics: serving http://%s:%d/metrics (values in %s)",
            host,
            self._server.server_port,
            self.directory,
        )

    def stop(self, worker: Any) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def terminate(self, worker: Any) -> None:
        self.stop(worker)

    def _child_exited(self, sender: Any = None, pid: int | None = None, **kwargs: Any) -> None:
        # Sent in the exiting child itself (prefork pool).
        if pid is not None and self.directory is not None:
            try:
                mark_process_dead(pid, self.directory)
            except OSError as exc:
                log.warning("metrics: could not mark process %s dead: %s", pid, exc)

    def _worker_shut_down(self, sender: Any = None, **kwargs: Any) -> None:
        # After the pool has drained: no process writes value files any more.
        if sender is not None and sender is not self._worker:
            return
        signals.worker_process_shutdown.disconnect(self._child_exited)
        signals.worker_shutdown.disconnect(self._worker_shut_down)
        set_solve_observer(None)
        set_spend_observer(None)
        if self._created and self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None
