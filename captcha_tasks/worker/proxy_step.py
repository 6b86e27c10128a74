"""The worker bootstep that pins one proxy of the pool to the worker.

The lease and its heartbeat are :class:`~captcha_tasks.session.pinned_proxy.ProxyKeeper`
(plain code); this step runs it in the worker's main process: it leases when the
worker starts, keeps the lease through a warm shutdown while running tasks finish,
and releases it once the pool has drained (``worker_shutdown``); a cold shutdown
releases it at once.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from celery import bootsteps, signals

from ..session.pinned_proxy import ProxyKeeper
from ..settings import get_settings

__all__ = ["ProxyLeaseStep"]

log = logging.getLogger(__name__)


class ProxyLeaseStep(bootsteps.StartStopStep):  # type: ignore[misc]
    """Pins one proxy of the pool to this worker (see :mod:`captcha_tasks.session.pinned_proxy`)."""

    requires: ClassVar[set[str]] = {
        "celery.worker.components:Pool",
        "captcha_tasks.worker.startup_step:StartupCheckStep",
    }

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        self.keeper: ProxyKeeper | None = None
        self._worker: Any = None

    def start(self, worker: Any) -> None:
        settings = get_settings()
        self._worker = worker
        self.keeper = ProxyKeeper.from_settings(settings, worker.hostname).start()
        signals.worker_shutdown.connect(self._on_worker_shutdown, weak=False)

    def stop(self, worker: Any) -> None:
        # Warm shutdown: tasks still running use the proxy until the pool has drained,
        # so the lease is kept (heartbeat included) until worker_shutdown.
        log.debug("proxy lease of %s kept until the pool has drained", worker.hostname)

    def terminate(self, worker: Any) -> None:
        self.finish(worker)

    def finish(self, worker: Any) -> None:
        """Stop the heartbeat and release the proxy (idempotent)."""
        signals.worker_shutdown.disconnect(self._on_worker_shutdown)
        keeper, self.keeper = self.keeper, None
        if keeper is not None:
            keeper.stop(release=True)

    def _on_worker_shutdown(self, sender: Any = None, **kwargs: Any) -> None:
        if sender is None or sender is self._worker:
            self.finish(sender)
