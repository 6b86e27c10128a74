"""One worker re-authenticates a host at a time: a session lock per host, in Redis.

:class:`SessionLock` is redis-py's :class:`~redis.lock.Lock` (an owner token set with
``SET NX PX``; release and extend are Lua scripts that check the token) with the TTL
``CAPTCHA_TASKS_LOCK_TTL``: a holder that crashes frees the lock when it expires, and
a holder whose lock expired can neither release nor extend the new holder's lock.

In tasks, ``SessionLockTask`` (``from captcha_tasks import SessionLockTask``) waits
without holding a worker slot: when another worker holds the lock, the task is retried
a moment later (same task id, :func:`lock_wait_policy`) instead of blocking, or, with
``lock_wait = "park"`` (``fetch_page``'s), parked and re-sent once the lock is released
or expires (:mod:`.parking`), so a wait costs one more execution, not one per retry. The
intended pattern is double-checked: look for fresh shared cookies, take the lock only
when they are missing, look again under the lock (the previous holder
may have just saved them), and re-authenticate only if they are still missing::

    from celery import shared_task
    from captcha_tasks import SessionLockTask

    @shared_task(base=SessionLockTask, bind=True, name="myapp.fetch_orders")
    def fetch_orders(self, url):
        host = urlsplit(url).hostname
        if not shared_cookies_fresh(host):            # e.g. CookieStore(...).load(host)
            with self.session_lock(host):             # held elsewhere -> retry or park
                if not shared_cookies_fresh(host):    # the last holder may have saved them
                    log_in_and_save_cookies(host)     # solves the login captcha once
        session = requests.Session()
        load_shared_cookies(session, host)
        return session.get(url, timeout=30).status_code

A waiter gives up with :class:`SessionLockTimeout` after roughly twice the lock TTL,
long enough for a crashed holder's lock to expire and a new holder to finish.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import uuid

import redis
from redis.exceptions import LockError
from redis.lock import Lock

from ..errors import SessionLockBusy, SessionLockTimeout
from ..settings import Settings
from ..state import Keys
from .cookie_model import normalize_host  # one host name for its lock and its cookies
from .parking import Released, release_collect

__all__ = [
    "SessionLock",
    "SessionLockBusy",
    "SessionLockTimeout",
    "lock_wait_policy",
]

log = logging.getLogger(__name__)

#: Seconds between two attempts of a waiting task (before ``CAPTCHA_TASKS_TIME_SCALE``).
RETRY_SECONDS = 2.0
#: A waiter gives up after this many lock TTLs.
WAIT_TTLS = 2.0
#: Separates the owner's name from the random part of a lock token.
_OWNER_SEP = "#"


def _default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class SessionLock:
    """The session lock of ``host``: non-blocking, owner-checked, expiring.

    ``owner`` names the holder in :meth:`holder` (default ``hostname:pid``); each
    instance has its own random token, so only the instance that acquired the lock
    can release or extend it. One instance is meant for one holder (not shared
    between threads that each want the lock).
    """

    def __init__(
        self,
        client: redis.Redis,
        settings: Settings,
        host: str,
        *,
        owner: str | None = None,
    ) -> None:
        self.host = normalize_host(host)
        self.ttl = settings.lock_ttl
        self.owner = (owner or _default_owner()).replace(_OWNER_SEP, "_")
        self.key = Keys(settings.key_prefix).session_lock(self.host)
        self._client = client
        self._settings = settings
        self._lock = Lock(client, self.key, timeout=self.ttl, blocking=False, thread_local=False)

    def acquire(self, blocking: bool = False, timeout: float | None = None) -> bool:
        """Take the lock; ``False`` if another owner holds it (after ``timeout`` seconds
        of trying when ``blocking``)."""
        token = f"{self.owner}{_OWNER_SEP}{uuid.uuid4().hex}"
        return bool(self._lock.acquire(blocking=blocking, blocking_timeout=timeout, token=token))

    def release(self) -> bool:
        """Release the lock if this instance still owns it. ``False`` (nothing deleted)
        if it was never acquired here, or expired and perhaps went to another owner.
        Tasks parked on the lock stay parked (the sweeper wakes them): task code
        releases with :meth:`release_collect` and re-sends them."""
        return self.release_collect().released

    def release_collect(self) -> Released:
        """Release as :meth:`release`, and hand back the tasks parked on the lock in the
        same atomic step (see :mod:`.parking`): re-send each, then ``forget`` it."""
        token = self.token
        if token is None:
            return Released(False, [])
        done = release_collect(self._client, self._settings, self.host, token)
        self._lock.local.token = None
        if not done.released:
            log.warning("session lock of %s had expired before its release", self.host)
        return done

    def extend(self, ttl: float | None = None) -> bool:
        """Reset the lock's TTL to ``ttl`` (default: the lock TTL) if this instance still
        owns it; ``False`` if it does not (the lock expired: stop relying on it)."""
        try:
            self._lock.extend(self.ttl if ttl is None else ttl, replace_ttl=True)
        except LockError:  # LockNotOwnedError included
            return False
        return True

    @property
    def token(self) -> str | None:
        """This instance's owner token while it holds the lock: hand it to the task
        that will release the lock (:meth:`adopt`), e.g. the last task of a chain."""
        token = self._lock.local.token
        return token.decode() if isinstance(token, bytes) else token

    @classmethod
    def adopt(cls, client: redis.Redis, settings: Settings, host: str, token: str) -> SessionLock:
        """A handle on a lock acquired elsewhere with ``token``, to release or extend it
        (still owner-checked: if the lock expired and moved on, both are refused)."""
        lock = cls(client, settings, host)
        lock._lock.local.token = token.encode()
        return lock

    def owned(self) -> bool:
        """Whether this instance holds the lock now (one Redis read)."""
        return bool(self._lock.owned())

    def holder(self) -> str | None:
        """The owner name of whoever holds the lock now, or ``None`` if it is free."""
        token = self._client.get(self.key)
        if token is None:
            return None
        text = token.decode() if isinstance(token, bytes) else str(token)
        owner, sep, _ = text.rpartition(_OWNER_SEP)
        return owner if sep else text

    def remaining(self) -> float | None:
        """Seconds until the lock expires, or ``None`` if it is free."""
        ms = self._client.pttl(self.key)
        return None if ms is None or int(ms) < 0 else int(ms) / 1000

    def __enter__(self) -> SessionLock:
        if not self.acquire():
            raise SessionLockBusy(f"session lock of {self.host} is held by {self.holder()}")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"SessionLock(host={self.host!r}, owner={self.owner!r}, ttl={self.ttl!r})"


def lock_wait_policy(settings: Settings) -> tuple[float, int]:
    """``(countdown, max_retries)`` of a task waiting for a session lock.

    The countdown is short (``RETRY_SECONDS`` scaled, at most a quarter of the lock
    TTL); the retries cover ``WAIT_TTLS`` lock TTLs, so a waiter outlives a crashed
    holder's lock and the next holder's re-authentication, and then gives up.
    """
    countdown = max(0.05, min(settings.scaled(RETRY_SECONDS), settings.lock_ttl / 4))
    return countdown, max(1, math.ceil(WAIT_TTLS * settings.lock_ttl / countdown))
