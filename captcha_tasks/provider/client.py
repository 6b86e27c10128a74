"""The HTTP client for in.php / res.php: one call per method, no retries, no Celery.

Retry policy belongs to the caller, which reads ``transient`` and ``retry_after``
from the :mod:`captcha_tasks.errors` this raises. Every call has a timeout and an
overall deadline; the API key travels only in POST bodies, never in a URL (urllib3
logs URLs at debug level) nor in an error message.

res.php calls are idempotent: any failure to get their answer is transient. A submit
is not (each accepted in.php call is a captcha billed), so its failures are sorted by
whether the provider can have processed it:

- **not processed**, transient as before: no connection was made (refused, DNS,
  connect timeout, certificate refused); an answer, even an HTML 5xx page (502/503
  are taken to come from a gateway that did not pass the request on, 500 from a
  provider that failed before accepting); a provider error code (NO_SLOT, ...);
- **maybe processed**, :class:`~captcha_tasks.errors.SubmitUncertain` (permanent):
  the request may have been sent but no complete answer came (read timeout,
  connection reset or dropped, an answer cut off or past the overall deadline), or a
  504, a gateway that gave up waiting for a provider holding the request. When in
  doubt the submit counts as maybe processed: a wrong guess fails one task, the
  other way round pays a captcha twice.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import decimal
import http.client
import math
import os
import re
import ssl
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter

from ..errors import (
    ConfigurationError,
    InvalidTaskInput,
    ProviderUnavailable,
    SolverError,
    SolverNetworkError,
    SubmitUncertain,
)
from ..settings import PROVIDERS, Provider, Settings
from .captchas import DEFAULT_MAX_IMAGE_BYTES, Captcha, Proxy
from .protocol import NOT_READY, NotReady, parse_many, parse_response

__all__ = [
    "MAX_RESPONSE_BYTES",
    "Answer",
    "SolverClient",
    "close_shared_session",
    "make_session",
    "shared_session",
]

#: Bigger answers are cut off (tokens are a few kB; nothing legitimate comes near).
MAX_RESPONSE_BYTES = 1_048_576
#: Connections kept per host: enough for a worker process running many threads.
POOL_MAXSIZE = 64
_CONNECT_TIMEOUT_CAP = 5.0
_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_USER_AGENT = f"captcha-tasks/0.1 python-requests/{requests.__version__}"


@dataclasses.dataclass(frozen=True)
class Answer:
    """A solved captcha: a token or text, or a dict (GeeTest)."""

    captcha_id: str
    solution: str | dict[str, Any]

    def __repr__(self) -> str:
        shown = self.solution
        if isinstance(shown, str) and len(shown) > 40:
            shown = f"{shown[:20]}...{shown[-8:]} ({len(shown)} chars)"
        return f"Answer(captcha_id={self.captcha_id!r}, solution={shown!r})"


def make_session() -> requests.Session:
    """A session with a large connection pool and no automatic retries (the caller decides)."""
    session = requests.Session()
    adapter = HTTPAdapter(pool_connections=4, pool_maxsize=POOL_MAXSIZE, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.headers["User-Agent"] = _USER_AGENT
    return session


_session_lock = threading.Lock()
_session: requests.Session | None = None
_session_pid = 0


def _forget_session_after_fork() -> None:
    # The parent's sockets (and any TLS state) must never be used or closed from a
    # child: drop the reference, and replace a lock another thread may have held.
    global _session, _session_pid, _session_lock
    _session, _session_pid, _session_lock = None, 0, threading.Lock()


os.register_at_fork(after_in_child=_forget_session_after_fork)


def shared_session() -> requests.Session:
    """The process's session, created on first use and again after a fork."""
    global _session, _session_pid
    pid = os.getpid()
    with _session_lock:
        if _session is None or _session_pid != pid:
            _session, _session_pid = make_session(), pid
        return _session


def close_shared_session() -> None:
    """Close the process's session (tests, worker shutdown); the next call makes a new one."""
    global _session, _session_pid
    with _session_lock:
        if _session is not None and _session_pid == os.getpid():
            _session.close()
        _session, _session_pid = None, 0


class SolverClient:
    """A client for one provider account.

    ``session``: a :class:`requests.Session` to use instead of the process-wide one
    (the client never closes a session it did not create; it creates none).
    ``stats`` counts requests per action (``submit``, ``get``, ``get_many``,
    ``getbalance``, ``reportgood``, ``reportbad``) and failures (``errors:<code>``).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        provider: Provider = "captchaai",
        timeout: float = 30.0,
        json_mode: bool = True,
        session: requests.Session | None = None,
        max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES,
    ) -> None:
        parts = urlsplit(base_url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigurationError(f"solver base URL must be http(s)://host, got {base_url!r}")
        if parts.query or parts.fragment or parts.username or parts.password:
            raise ConfigurationError("solver base URL must not carry a query or credentials")
        # split() == [key]: non-empty and no whitespace anywhere.
        if (
            not isinstance(api_key, str)
            or api_key.split() != [api_key]
            or not api_key.isprintable()
        ):
            raise ConfigurationError("the API key must be a non-empty string without whitespace")
        if provider not in PROVIDERS:
            raise ConfigurationError(f"provider must be one of {', '.join(PROVIDERS)}")
        if isinstance(timeout, bool) or not (math.isfinite(timeout) and timeout > 0):
            raise ConfigurationError(f"timeout must be a positive number, got {timeout!r}")
        self.base_url = base_url.strip().rstrip("/")
        self.provider: Provider = provider
        self.timeout = float(timeout)
        self.json_mode = json_mode
        self.max_image_bytes = max_image_bytes
        self._api_key = api_key
        self._secrets = (api_key,)
        self._session = session
        self._stats: collections.Counter[str] = collections.Counter()
        self._stats_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> SolverClient:
        """A client configured from :class:`~captcha_tasks.settings.Settings`."""
        options: dict[str, Any] = {
            "provider": settings.provider,
            "timeout": settings.http_timeout,
            "max_image_bytes": settings.max_image_bytes,
            **overrides,
        }
        return cls(settings.solver_url, settings.require_api_key(), **options)

    def __repr__(self) -> str:
        return f"SolverClient({self.base_url!r}, key='***', provider={self.provider!r})"

    @property
    def stats(self) -> dict[str, int]:
        """A snapshot of the request counters."""
        with self._stats_lock:
            return dict(self._stats)

    # -- the API ---------------------------------------------------------------------

    def submit(self, captcha: Captcha, *, proxy: Proxy | None = None) -> str:
        """Send a captcha to in.php; returns its id. Validates first: nothing invalid is sent."""
        if not isinstance(captcha, Captcha):
            raise InvalidTaskInput(f"not a captcha: {type(captcha).__name__}")
        if proxy is not None and not isinstance(proxy, Proxy):
            raise InvalidTaskInput(f"proxy must be a Proxy, got {type(proxy).__name__}")
        captcha.validate(max_image_bytes=self.max_image_bytes)
        params = captcha.to_params()
        if proxy is not None:
            params.update(proxy.to_params())
        value = self._call("in.php", "submit", params, files=captcha.to_files(), idempotent=False)
        if isinstance(value, str) and _ID_RE.match(value):
            return value
        raise self._unexpected("submit", value)

    def get(self, captcha_id: str) -> Answer | None:
        """The answer, or ``None`` while the captcha is being solved."""
        captcha_id = _check_id(captcha_id)
        value = self._call("res.php", "get", {"action": "get", "id": captcha_id})
        if value is NOT_READY:
            return None
        if isinstance(value, str | dict):
            return Answer(captcha_id, value)
        raise self._unexpected("get", value)  # pragma: no cover - parse_response returns no other

    def get_many(self, captcha_ids: Iterable[str]) -> dict[str, Answer | SolverError | None]:
        """Several answers in one request (``action=get&ids=a,b,c``).

        Each value is the :class:`Answer`, ``None`` while not ready, or the error for
        that captcha alone (returned, not raised: one unsolvable captcha must not hide
        the others). Errors for the whole request are raised.
        """
        ids = list(dict.fromkeys(_check_id(i) for i in captcha_ids))
        if len(ids) <= 1:
            return {i: self.get(i) for i in ids}
        data = {"action": "get", "ids": ",".join(ids)}
        status, content_type, body = self._post("res.php", "get_many", data, {})
        with self._errors_counted():
            slots = parse_many(
                status, content_type, body, len(ids), provider=self.provider, redact=self._secrets
            )
        out: dict[str, Answer | SolverError | None] = {}
        for captcha_id, slot in zip(ids, slots, strict=True):
            if isinstance(slot, SolverError):
                self._count(f"errors:{slot.code}")
                out[captcha_id] = slot
            else:
                out[captcha_id] = None if slot is NOT_READY else Answer(captcha_id, str(slot))
        return out

    def balance(self) -> decimal.Decimal:
        """The account balance (USD for 2Captcha; CaptchaAI plans bill threads instead)."""
        value = self._call("res.php", "getbalance", {"action": "getbalance"})
        if isinstance(value, str):
            try:
                balance = decimal.Decimal(value)
            except decimal.InvalidOperation:
                pass
            else:
                if balance.is_finite():
                    return balance
        raise self._unexpected("getbalance", value)

    def report(self, captcha_id: str, *, correct: bool) -> None:
        """Tell the provider whether an answer worked (``reportgood`` / ``reportbad``)."""
        action = "reportgood" if correct else "reportbad"
        value = self._call("res.php", action, {"action": action, "id": _check_id(captcha_id)})
        if value != "OK_REPORT_RECORDED":
            raise self._unexpected(action, value)

    # -- plumbing --------------------------------------------------------------------

    def _call(
        self,
        endpoint: str,
        action: str,
        params: Mapping[str, str],
        *,
        files: Mapping[str, tuple[str, bytes, str]] | None = None,
        idempotent: bool = True,
    ) -> str | dict[str, Any] | NotReady:
        status, content_type, body = self._post(
            endpoint, action, params, files or {}, idempotent=idempotent
        )
        with self._errors_counted():
            try:
                return parse_response(
                    status, content_type, body, provider=self.provider, redact=self._secrets
                )
            except ProviderUnavailable as exc:
                if idempotent or exc.code != "HTTP_504":
                    raise
                # A gateway timeout, not the provider's answer: it may hold the request.
                raise self._uncertain(f"{action} to {self.base_url}/{endpoint}: {exc}") from exc

    def _post(
        self,
        endpoint: str,
        action: str,
        params: Mapping[str, str],
        files: Mapping[str, tuple[str, bytes, str]],
        *,
        idempotent: bool = True,
    ) -> tuple[int, str, bytes]:
        """POST and read the whole answer. A failure raises :class:`SolverNetworkError`,
        unless the call is not ``idempotent`` and may have been processed: then
        :class:`SubmitUncertain`."""
        data = {**params, "key": self._api_key}
        if self.json_mode:
            data["json"] = "1"
        url = f"{self.base_url}/{endpoint}"
        session = self._session or shared_session()
        connect_timeout = min(_CONNECT_TIMEOUT_CAP, self.timeout)
        deadline = time.monotonic() + connect_timeout + self.timeout
        self._count(action)
        status = 0  # the answer's status, once its head has arrived
        try:
            # POST, so the key is in the body; redirects would resend it as a GET.
            with session.post(
                url,
                data=data,
                files=dict(files) or None,
                timeout=(connect_timeout, self.timeout),
                allow_redirects=False,
                stream=True,
            ) as response:
                status = response.status_code
                body = _read_body(response, deadline)
                return status, response.headers.get("Content-Type", ""), body
        except (
            requests.RequestException,
            urllib3.exceptions.HTTPError,
            http.client.HTTPException,
            OSError,
        ) as exc:
            detail = self._redact(f"{action} to {url}: {_describe(exc)}")
            if not (idempotent or _never_sent(exc) or _refused(status)):
                self._count("errors:SUBMIT_OUTCOME_UNKNOWN")
                raise self._uncertain(detail) from exc
            self._count("errors:NETWORK")
            raise SolverNetworkError(detail) from exc
        except _TooSlow:
            detail = f"{action} to {url}: no complete answer within {self.timeout:g} s"
            if not (idempotent or _refused(status)):
                self._count("errors:SUBMIT_OUTCOME_UNKNOWN")
                raise self._uncertain(detail) from None
            self._count("errors:NETWORK")
            raise SolverNetworkError(detail) from None

    @staticmethod
    def _uncertain(detail: str) -> SubmitUncertain:
        return SubmitUncertain(f"{detail}: {SubmitUncertain.consequence}")

    @contextlib.contextmanager
    def _errors_counted(self) -> Iterator[None]:
        try:
            yield
        except SolverError as exc:
            self._count(f"errors:{exc.code}")
            raise

    def _unexpected(self, action: str, value: object) -> SolverError:
        self._count("errors:UNRECOGNISED_ANSWER")
        shown = self._redact(repr(value)[:120])
        return ProviderUnavailable(
            f"{action}: unexpected answer {shown}", "UNRECOGNISED_ANSWER", 5.0
        )

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "***")

    def _count(self, name: str) -> None:
        with self._stats_lock:
            self._stats[name] += 1


class _TooSlow(Exception):
    pass


def _read_body(response: requests.Response, deadline: float) -> bytes:
    # The read timeout bounds each socket read; this bounds the whole answer, so a
    # server dripping bytes cannot hold a worker forever. read1 returns whatever has
    # arrived (iter_content would block until a whole chunk is there).
    raw = response.raw
    read1 = getattr(raw, "read1", None)  # urllib3 >= 2
    chunks: list[bytes] = []
    size = 0
    while size <= MAX_RESPONSE_BYTES:
        if time.monotonic() > deadline:
            raise _TooSlow
        chunk = read1(16_384, decode_content=True) if read1 else raw.read(1024, decode_content=True)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)[:MAX_RESPONSE_BYTES]


def _check_id(captcha_id: object) -> str:
    if isinstance(captcha_id, int) and not isinstance(captcha_id, bool):
        captcha_id = str(captcha_id)
    if not isinstance(captcha_id, str) or not _ID_RE.match(captcha_id):
        shown = repr(captcha_id)[:40]
        raise InvalidTaskInput(f"captcha_id: {shown} is not a captcha id (1-64 letters/digits)")
    return captcha_id


def _never_sent(exc: BaseException) -> bool:
    """Whether a failed request certainly never reached the provider: no connection was
    made. urllib3 reports failures to connect (refused, unreachable, DNS, connect
    timeout) wrapped in a MaxRetryError; whatever fails later comes unwrapped, or as
    something else. A TLS handshake timeout is reported as a read timeout: it counts as
    maybe sent, the safe side."""
    if isinstance(exc, requests.ConnectTimeout):
        return True
    reason: object = exc
    if isinstance(exc, requests.RequestException) and exc.args:
        reason = exc.args[0]
    if isinstance(reason, urllib3.exceptions.MaxRetryError):
        reason = reason.reason
    if isinstance(reason, urllib3.exceptions.ConnectTimeoutError):  # NewConnectionError too
        return True
    # A refused certificate: the handshake never completed, so nothing was sent.
    return isinstance(reason, urllib3.exceptions.SSLError) and any(
        isinstance(arg, ssl.SSLCertVerificationError) for arg in reason.args
    )


def _refused(status: int) -> bool:
    """Whether an answer whose head said ``status`` refused the request (it failed to
    arrive whole, but the provider or its gateway had answered). 504 does not: the
    gateway stopped waiting for a provider that has the request."""
    return status >= 400 and status != 504


def _describe(exc: BaseException) -> str:
    if isinstance(exc, requests.ConnectTimeout):
        kind = "connect timeout"
    elif isinstance(exc, requests.ReadTimeout | urllib3.exceptions.ReadTimeoutError):
        kind = "read timeout"
    elif isinstance(exc, requests.exceptions.SSLError):
        kind = "TLS error"
    elif isinstance(exc, requests.ConnectionError):
        kind = "connection failed"
    else:
        kind = type(exc).__name__
    return f"{kind} ({str(exc)[:200]})"
