"""The sandbox's callbacks: answers pushed to the URL a submit named, as providers do.

in.php's ``pingback``: ``id`` and ``code`` (the answer, or the error code such as
ERROR_CAPTCHA_UNSOLVABLE), POSTed as a form in the 2captcha dialect, sent as a GET
query in the captchaai one (as CaptchaAI's blog shows). createTask's ``callbackUrl``:
the getTaskResult answer POSTed as JSON. Each is sent at the captcha's ready time,
with faults from the configuration (changeable at runtime through
``POST /admin/config``): ``callback_drop_rate`` (never sent), ``callback_late_rate``
(sent ``callback_late_seconds`` later), ``callback_duplicate_rate`` (sent twice).
Counted in ``GET /stats`` (``callbacks_*``).
"""

from __future__ import annotations

import heapq
import http.client
import itertools
import json
import logging
import random
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlencode, urlsplit

from .state import SandboxState

__all__ = ["COUNTERS", "CallbackSender"]

logger = logging.getLogger("captcha_tasks_sandbox")

COUNTERS = ("scheduled", "sent", "delivered", "failed", "dropped", "late", "duplicated")
#: Seconds a receiver has to answer (CapMonster documents 2).
SEND_TIMEOUT = 2.0

#: What to send: (method, url, body, content type), built at the ready time.
Request = tuple[str, str, bytes | None, str]


class CallbackSender:
    """Delivers callbacks from one thread (sends from a small pool)."""

    def __init__(self, state: SandboxState) -> None:
        self._state = state
        self._rng = random.Random(state.config.seed)
        self._heap: list[tuple[float, int, Callable[[], Request | None]]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._stopping = False
        self._counts = dict.fromkeys(COUNTERS, 0)
        self._pool = ThreadPoolExecutor(16, thread_name_prefix="sandbox-callback")
        self._local = threading.local()
        self._thread = threading.Thread(target=self._run, name="sandbox-callbacks", daemon=True)
        self._thread.start()

    def stats(self) -> dict[str, int]:
        with self._wake:
            return {f"callbacks_{name}": n for name, n in self._counts.items()}

    def reset(self) -> None:
        with self._wake:
            self._counts = dict.fromkeys(COUNTERS, 0)

    def stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify()
        self._thread.join(5)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def pingback(self, captcha_id: int, url: str) -> None:
        """An in.php submit's ``pingback``: ``id`` and ``code`` at its ready time."""
        if not _usable(url):
            return
        form = self._state.config.classic_dialect == "2captcha"

        def build() -> Request | None:
            code = self._code(captcha_id)
            if code is None:
                return None
            fields = urlencode({"id": str(captcha_id), "code": code})
            if form:
                return "POST", url, fields.encode(), "application/x-www-form-urlencoded"
            joiner = "&" if urlsplit(url).query else "?"
            return "GET", f"{url}{joiner}{fields}", None, ""

        self._schedule(captcha_id, build)

    def callback_url(
        self, captcha_id: int, url: str, body: Callable[[], dict[str, object]]
    ) -> None:
        """A createTask's ``callbackUrl``: ``body()`` (the getTaskResult answer) POSTed."""
        if not _usable(url):
            return

        def build() -> Request | None:
            return "POST", url, json.dumps(body()).encode(), "application/json"

        self._schedule(captcha_id, build)

    def _code(self, captcha_id: int) -> str | None:
        from .protocol import ApiError

        try:
            reply = self._state.get(str(captcha_id), poll=False)
        except ApiError as exc:
            return exc.code
        return reply.plain.removeprefix("OK|")

    def _schedule(self, captcha_id: int, build: Callable[[], Request | None]) -> None:
        timing = self._state.timing(captcha_id)
        if timing is None:
            return
        cfg = self._state.config
        with self._wake:
            self._counts["scheduled"] += 1
            rng = self._rng
            if rng.random() < cfg.callback_drop_rate:
                self._counts["dropped"] += 1
                return
            at = timing[1]
            if rng.random() < cfg.callback_late_rate:
                self._counts["late"] += 1
                at += cfg.callback_late_seconds
            times = [at]
            if rng.random() < cfg.callback_duplicate_rate:
                self._counts["duplicated"] += 1
                times.append(at + 0.01)
            for t in times:
                heapq.heappush(self._heap, (t, next(self._order), build))
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._stopping:
                    now = self._state.now()
                    if self._heap and self._heap[0][0] <= now:
                        break
                    wait = self._heap[0][0] - now if self._heap else None
                    self._wake.wait(wait)
                if self._stopping:
                    return
                _, _, build = heapq.heappop(self._heap)
            self._pool.submit(self._send, build)

    def _send(self, build: Callable[[], Request | None]) -> None:
        try:
            request = build()
        except Exception as exc:  # the task is gone (forgotten): nothing to say
            logger.debug("sandbox: callback not built: %s", exc)
            request = None
        if request is None:
            return
        with self._wake:
            self._counts["sent"] += 1
        delivered = self._deliver(*request)
        with self._wake:
            self._counts["delivered" if delivered else "failed"] += 1

    def _deliver(self, method: str, url: str, body: bytes | None, content_type: str) -> bool:
        """One request over this thread's kept-alive connection to the URL's host (a
        provider's callbacks come over few connections, not one per answer)."""
        parts = urlsplit(url)
        key = (parts.scheme, parts.netloc)
        connections = self._local.__dict__.setdefault("connections", {})
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        headers = {"Content-Type": content_type} if content_type else {}
        for attempt in (1, 2):  # a kept-alive connection the receiver closed: once more
            connection = connections.get(key)
            if connection is None:
                kind = (
                    http.client.HTTPSConnection
                    if parts.scheme == "https"
                    else (http.client.HTTPConnection)
                )
                connection = connections[key] = kind(parts.netloc, timeout=SEND_TIMEOUT)
            try:
                connection.request(method, target, body=body, headers=headers)
                answer = connection.getresponse()
                answer.read()
                return True
            except (http.client.HTTPException, OSError):
                connection.close()
                del connections[key]
                if attempt == 2:
                    return False  # a provider does not retry either
        return False


def _usable(url: str) -> bool:
    return urlsplit(url).scheme in ("http", "https")
