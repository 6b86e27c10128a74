"""A worker's pinned proxy: leased at start, kept by a heartbeat, given back at the end.

:class:`ProxyKeeper` (plain code, run by the worker bootstep
:class:`captcha_tasks.worker.proxy_step.ProxyLeaseStep` in the main process) leases a
proxy of the pool (:mod:`captcha_tasks.session.proxies`) for the worker's hostname; a
heartbeat thread renews the lease every ``CAPTCHA_TASKS_PROXY_LEASE_TTL / 3`` seconds, leases
another when the lease was lost (expired, quarantined, removed), and keeps trying
when the pool had nothing free. If the worker dies, the heartbeat stops and the
proxy returns to the pool within the lease TTL. On a warm shutdown the lease is kept
while running tasks finish and released once the pool has drained
(``worker_shutdown``); a cold shutdown releases it at once.

Code in the worker, prefork children included, finds the proxy with
:func:`current_proxy` (``task.request.hostname`` names the worker), or through the
``PinnedProxyTask`` base (``from captcha_tasks import PinnedProxyTask``)::

    @app.task(base=PinnedProxyTask, bind=True, name="myapp.fetch")
    def fetch(self, url):
        session = requests.Session()
        self.use_proxy(session, required=True)   # session.proxies <- the worker's proxy
        response = session.get(url, timeout=30)
        if response.status_code == 407:          # the proxy refuses us: move on
            self.report_bad_proxy("HTTP 407")    # quarantined; the worker leases another
            raise self.retry(countdown=1)
        ...

Proxies are logged masked (``user:***@host:port``) and by id; the password stays in
the pool hash and in memory.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time

import redis
import requests

from ..provider.proxy import Proxy
from ..settings import Settings, get_settings
from ..state import state_redis
from ..state.outage import REDIS_OUTAGE
from .proxies import ProxyPool, UnknownProxy, masked, proxy_url

__all__ = [
    "ProxyKeeper",
    "current_proxy",
    "current_proxy_id",
    "forget_current_proxy",
    "replace_bad_proxy",
    "use_proxy",
]

log = logging.getLogger(__name__)

#: Longest time :func:`current_proxy` trusts what it read (also at most a sixth of
#: the lease TTL), so a proxy that moved is seen moving within a couple of seconds.
CACHE_SECONDS = 2.0


class ProxyKeeper:
    """Keeps ``worker``'s proxy lease alive from a daemon thread (plain code, no Celery)."""

    def __init__(self, pool: ProxyPool, worker: str, interval: float) -> None:
        self.pool = pool
        self.worker = worker
        self.interval = interval
        self.proxy_id: str | None = None
        self.proxy: Proxy | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._mutex = threading.Lock()
        self._said_none = False

    @classmethod
    def from_settings(
        cls, settings: Settings, worker: str, client: redis.Redis | None = None
    ) -> ProxyKeeper:
        pool = ProxyPool(client if client is not None else state_redis(settings), settings)
        return cls(pool, worker, settings.proxy_lease_ttl / 3)

    def start(self) -> ProxyKeeper:
        """Lease now (so the first task already has its proxy), then heartbeat."""
        self.tick()
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, name=f"proxy-lease@{self.worker}", daemon=True
        )
        self._thread.start()
        return self

    def tick(self) -> str | None:
        """One heartbeat: renew the lease, or lease one if it was lost or missing."""
        with self._mutex:
            try:
                held = self.proxy_id
                if held is not None and self.pool.renew(self.worker, held):
                    REDIS_OUTAGE.ok()
                    return held
                if held is not None:
                    log.warning("proxy %s (%s) lease lost: leasing another", held, self._shown())
                self._take(self.pool.lease(self.worker))
                REDIS_OUTAGE.ok()
            except redis.RedisError as exc:
                # Said once per outage for the whole worker (the other parts meet it too).
                REDIS_OUTAGE.failed(f"proxy lease heartbeat of {self.worker}", exc)
            return self.proxy_id

    def _take(self, ident: str | None) -> None:
        proxy: Proxy | None = None
        if ident is not None:
            try:
                proxy = self.pool.get(ident)
            except UnknownProxy:  # removed between the lease and this read
                self.pool.release(self.worker, ident)
                ident = None
        changed = ident != self.proxy_id
        self.proxy_id, self.proxy = ident, proxy
        forget_current_proxy(self.worker)
        if proxy is not None:
            self._said_none = False
            if changed:
                log.info("worker %s leased proxy %s (%s)", self.worker, ident, masked(proxy))
        elif not self._said_none:
            self._said_none = True
            if self.pool.ids():
                log.warning(
                    "no free proxy in the pool for %s: running without one, retrying every %.1f s",
                    self.worker,
                    self.interval,
                )
            else:
                log.info("the proxy pool is empty: %s runs without a proxy", self.worker)

    def _shown(self) -> str:
        return masked(self.proxy) if self.proxy is not None else "?"

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.tick()
            except Exception:  # the heartbeat must outlive any one bad beat
                log.exception("proxy lease heartbeat of %s failed", self.worker)

    def stop(self, release: bool = True) -> None:
        """Stop the heartbeat and (by default) give the proxy back."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=max(5.0, self.interval))
        with self._mutex:
            ident, self.proxy_id, self.proxy = self.proxy_id, None, None
            if release and ident is not None:
                try:
                    self.pool.release(self.worker, ident)
                    log.info("worker %s released proxy %s", self.worker, ident)
                except redis.RedisError as exc:  # it expires on its own
                    log.warning("could not release proxy %s: %s", ident, exc)
            forget_current_proxy(self.worker)


# -- the proxy of the worker running this code ------------------------------------------

_cache_mutex = threading.Lock()
_cache: dict[tuple[str, str, str], tuple[float, tuple[str, Proxy] | None]] = {}


def _held(hostname: str, settings: Settings | None = None) -> tuple[str, Proxy] | None:
    settings = settings or get_settings()
    key = (settings.state_url, settings.key_prefix, hostname)
    now = time.monotonic()
    with _cache_mutex:
        cached = _cache.get(key)
    if cached is not None and cached[0] > now:
        return cached[1]
    held = ProxyPool(state_redis(settings), settings).held(hostname)
    ttl = min(CACHE_SECONDS, settings.proxy_lease_ttl / 6)
    with _cache_mutex:
        _cache[key] = (now + ttl, held)
    return held


def current_proxy(hostname: str, settings: Settings | None = None) -> Proxy | None:
    """The proxy worker ``hostname`` holds (with credentials, for use), or ``None``.

    Reads Redis at most every couple of seconds per process (a short cache), so it
    is cheap to call from every task; in a task, pass ``self.request.hostname``.
    """
    held = _held(hostname, settings)
    return held[1] if held else None


def current_proxy_id(hostname: str, settings: Settings | None = None) -> str | None:
    held = _held(hostname, settings)
    return held[0] if held else None


def forget_current_proxy(hostname: str | None = None) -> None:
    """Drop this process's cached answer (for ``hostname``, or all)."""
    with _cache_mutex:
        for key in [k for k in _cache if hostname is None or k[2] == hostname]:
            del _cache[key]


def use_proxy(session: requests.Session, proxy: Proxy | None) -> Proxy | None:
    """Point ``session`` (http and https) at ``proxy``; ``None`` clears the session's
    http/https proxies (it goes direct, or through the environment's proxy)."""
    if proxy is None:
        session.proxies.pop("http", None)
        session.proxies.pop("https", None)
        return None
    url = proxy_url(proxy)
    session.proxies.update({"http": url, "https": url})
    return proxy


def replace_bad_proxy(
    hostname: str, reason: str = "", settings: Settings | None = None
) -> str | None:
    """Quarantine the proxy worker ``hostname`` holds and lease it another at once.

    Returns the new proxy id (``None`` if none is free; the worker's heartbeat keeps trying).
    """
    settings = settings or get_settings()
    pool = ProxyPool(state_redis(settings), settings)
    ident = current_proxy_id(hostname, settings)
    if ident is not None:
        with contextlib.suppress(UnknownProxy):  # removed meanwhile: nothing to report
            pool.report_bad(ident, reason)
    forget_current_proxy(hostname)
    return pool.lease(hostname)
