"""HTTP for providers: one set of connections per process, a bounded POST, and whether
a failed request can have reached the provider.

No retries, no protocol: a provider client (:mod:`.classic`) decides what a failure
means for its call. A failure is sorted by whether the provider can have processed it:

- **never sent**: no connection was made (refused, DNS, connect timeout, certificate
  refused), or the answer's head refused the request (any status >= 400 but 504: 502
  and 503 are taken to come from a gateway that did not pass the request on, 500 from
  a provider that failed before accepting);
- **maybe sent**: the request may have gone out but no complete answer came (read
  timeout, connection reset or dropped, an answer cut off or past the overall
  deadline), or a 504, a gateway that gave up waiting for a provider holding the
  request. When in doubt a request counts as maybe sent.

Requests go out through :class:`Connections`: urllib3's pools (the library requests
itself runs on) driven directly. requests costs about twice the CPU per call (its
hooks, cookie jar, header merging and response model, paid on every submit and poll:
``docs/design/cost-per-solve.md``). What requests would read from the environment is
read here too, once per origin: the proxy (``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``,
SOCKS through PySocks) and the CA bundle (``REQUESTS_CA_BUNDLE``, ``CURL_CA_BUNDLE``,
else certifi's). :func:`post` takes anything with the one method it calls, so a
caller's own ``requests.Session`` still works in its place.
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any, NamedTuple, Protocol

import requests
import urllib3
from requests.utils import DEFAULT_CA_BUNDLE_PATH, get_auth_from_url, get_environ_proxies
from urllib3.util import make_headers

from .. import tracing
from ..forksafe import PerProcess
from ..version import __version__

__all__ = [
    "MAX_RESPONSE_BYTES",
    "POOL_MAXSIZE",
    "Connections",
    "DeadlinePassed",
    "HttpSession",
    "Reply",
    "RequestFailed",
    "arrived",
    "close_shared_session",
    "make_session",
    "post",
    "shared_session",
]

#: Answers are read up to this many bytes and no further (tokens are a few kB; nothing
#: legitimate comes near): a bigger one comes back ``cut``, and is no answer.
MAX_RESPONSE_BYTES = 1_048_576
#: Connections kept per host: enough for a worker process running many threads.
POOL_MAXSIZE = 64
#: A connect waits at most this long, whatever the read timeout.
CONNECT_TIMEOUT_CAP = 5.0
_USER_AGENT = f"captcha-tasks/{__version__}"
_HEADERS = {"User-Agent": _USER_AGENT, "Accept": "*/*", "Accept-Encoding": "gzip, deflate"}
_FORM = "application/x-www-form-urlencoded"


class StreamedResponse(Protocol):
    """What :func:`post` reads of an answer (requests' ``Response`` has it too)."""

    status_code: int
    headers: Mapping[str, str]
    raw: Any  # read1(size, decode_content=True) -> bytes


class HttpSession(Protocol):
    """The one call :func:`post` makes: :class:`Connections`, or a ``requests.Session``."""

    def post(
        self,
        url: str,
        data: Any = ...,
        json: Any = ...,
        *,
        files: Any = ...,
        timeout: tuple[float, float],
        allow_redirects: bool,
        stream: bool,
    ) -> AbstractContextManager[Any]: ...


class _Answer:
    """An answer whose body is read as it arrives (``raw`` is urllib3's response)."""

    __slots__ = ("headers", "raw", "status_code")

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self.raw = response
        self.status_code = response.status
        self.headers = response.headers


class Connections:
    """The connections of one process to its providers: a urllib3 pool per origin
    (:data:`POOL_MAXSIZE` connections each, no retries, no redirects), and the proxy and
    CA bundle the environment gives each origin, read once (``trust_env = False``: the
    environment is not read at all). Thread-safe; closed with :meth:`close`."""

    def __init__(self) -> None:
        self.trust_env = True
        self._lock = threading.Lock()
        self._managers: dict[tuple[str, str], urllib3.PoolManager] = {}
        self._routes: dict[tuple[str, str, bool], urllib3.PoolManager] = {}

    def post(
        self,
        url: str,
        data: Mapping[str, str] | None = None,
        json: Mapping[str, Any] | None = None,
        *,
        files: Mapping[str, tuple[str, bytes, str]] | None = None,
        timeout: tuple[float, float],
        allow_redirects: bool = False,
        stream: bool = True,
    ) -> AbstractContextManager[_Answer]:
        """POST ``data`` as a form (multipart with ``files``), or ``json`` as a JSON
        document; the answer's body is left to read (``stream`` must be true, and
        ``allow_redirects`` false: a redirect would resend a secret-bearing body)."""
        if allow_redirects or not stream:
            raise ValueError("Connections answers streamed, unredirected POSTs only")
        headers = dict(_HEADERS)
        if json is not None:
            body: bytes | str = _json_dumps(json)
            headers["Content-Type"] = "application/json"
        elif files:
            fields: dict[str, Any] = {**(data or {}), **files}
            body, headers["Content-Type"] = urllib3.encode_multipart_formdata(fields)
        else:
            body = urllib.parse.urlencode(data or {})
            headers["Content-Type"] = _FORM
        connect, read = timeout
        response = self._route(url).urlopen(
            "POST",
            url,
            body=body,
            headers=headers,
            retries=False,
            redirect=False,
            timeout=urllib3.Timeout(connect=connect, read=read),
            preload_content=False,
        )
        return _answered(response)

    def close(self) -> None:
        """Close every pooled connection; the next request opens new ones."""
        with self._lock:
            managers = list(self._managers.values())
            self._managers.clear()
            self._routes.clear()
        for manager in managers:
            manager.clear()

    def _route(self, url: str) -> urllib3.PoolManager:
        parts = urllib.parse.urlsplit(url)
        key = (parts.scheme, parts.netloc, self.trust_env)
        manager = self._routes.get(key)
        if manager is None:
            with self._lock:
                manager = self._routes.get(key)
                if manager is None:
                    manager = self._routes[key] = self._manager_for(url)
        return manager

    def _manager_for(self, url: str) -> urllib3.PoolManager:
        # Called with the lock held: what requests would pick for this URL.
        proxy, ca = "", DEFAULT_CA_BUNDLE_PATH
        if self.trust_env:
            proxy = requests.utils.select_proxy(url, get_environ_proxies(url)) or ""
            ca = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or ca
        key = (proxy, ca)
        found = self._managers.get(key)
        if found is not None:
            return found
        tls: dict[str, Any] = {"cert_reqs": ssl.CERT_REQUIRED}
        tls["ca_cert_dir" if os.path.isdir(ca) else "ca_certs"] = ca
        pools = {"num_pools": 8, "maxsize": POOL_MAXSIZE, "block": False, **tls}
        manager: urllib3.PoolManager
        if not proxy:
            manager = urllib3.PoolManager(**pools)
        elif proxy.lower().startswith("socks"):
            from urllib3.contrib.socks import SOCKSProxyManager  # needs PySocks, as requests

            user, password = get_auth_from_url(proxy)
            manager = SOCKSProxyManager(
                proxy, username=user or None, password=password or None, **pools
            )
        else:
            user, password = get_auth_from_url(proxy)
            auth = make_headers(proxy_basic_auth=f"{user}:{password}") if user else None
            manager = urllib3.ProxyManager(proxy, proxy_headers=auth, **pools)
        self._managers[key] = manager
        return manager


def _json_dumps(document: Mapping[str, Any]) -> bytes:
    return json.dumps(document, allow_nan=False, separators=(",", ":")).encode()


@contextmanager
def _answered(response: urllib3.BaseHTTPResponse) -> Iterator[_Answer]:
    """The answer; on leaving, its connection goes back to the pool if the body was
    read to its end, else it is closed (an answer cut short is never drained)."""
    try:
        yield _Answer(response)
    finally:
        if not response.closed:
            response.close()
        response.release_conn()


def make_session() -> Connections:
    """New connections for provider calls (no automatic retries: the caller decides)."""
    return Connections()


# The parent's sockets (and TLS state) must never be used or closed from a forked child.
_sessions: PerProcess[Connections] = PerProcess()


def shared_session() -> Connections:
    """The process's connections, created on first use and again after a fork."""
    return _sessions.get("session", make_session)


def close_shared_session() -> None:
    """Close the process's connections (tests, worker shutdown); the next call makes new
    ones."""
    for session in _sessions.clear():
        session.close()


class Reply(NamedTuple):
    """An answer read whole, or up to :data:`MAX_RESPONSE_BYTES` (``cut``: there was more,
    left unread; the connection is closed rather than drained)."""

    status: int
    content_type: str
    body: bytes
    cut: bool = False


class RequestFailed(Exception):
    """No whole answer came. ``maybe_sent``: the provider may have processed it."""

    def __init__(self, detail: str, *, maybe_sent: bool) -> None:
        super().__init__(detail)
        self.detail = detail
        self.maybe_sent = maybe_sent


def post(
    session: HttpSession,
    url: str,
    data: Mapping[str, str],
    files: Mapping[str, tuple[str, bytes, str]],
    *,
    timeout: float,
    what: str,
    json_body: Mapping[str, Any] | None = None,
) -> Reply:
    """POST and read the whole answer within a connect timeout plus ``timeout``; raises
    :class:`RequestFailed` (``what`` names the call in its message). ``json_body``, when
    given, is sent as a JSON document instead of the form ``data`` and ``files``."""
    connect_timeout = min(CONNECT_TIMEOUT_CAP, timeout)
    deadline = time.monotonic() + connect_timeout + timeout
    status = 0  # the answer's status, once its head has arrived
    try:
        # POST keeps secrets in the body; redirects would resend it as a GET.
        with session.post(
            url,
            data=dict(data) if json_body is None else None,
            files=(dict(files) or None) if json_body is None else None,
            json=dict(json_body) if json_body is not None else None,
            timeout=(connect_timeout, timeout),
            allow_redirects=False,
            stream=True,
        ) as response:
            status = response.status_code
            body, cut = _read_body(response, deadline, timeout)
            return Reply(status, response.headers.get("Content-Type", ""), body, cut)
    except (
        requests.RequestException,
        urllib3.exceptions.HTTPError,
        http.client.HTTPException,
        OSError,
    ) as exc:
        maybe_sent = not (_never_sent(exc) or _refused(status))
        raise RequestFailed(f"{what} to {url}: {_describe(exc)}", maybe_sent=maybe_sent) from exc
    except DeadlinePassed:
        detail = f"{what} to {url}: no complete answer within {timeout:g} s"
        raise RequestFailed(detail, maybe_sent=not _refused(status)) from None
    finally:
        # The request on its span, if it asked for it (the submit's: tracing.span).
        tracing.http_reply(url, status)


class DeadlinePassed(Exception):
    """An answer's deadline passed before the whole of it arrived (:func:`arrived`)."""


def arrived(
    raw: Any, deadline: float, *, read_timeout: float, read_size: int = 16_384
) -> Iterator[bytes]:
    """The body of ``raw`` (urllib3's response), decoded, chunk by chunk as it arrives,
    until its end or :class:`DeadlinePassed` at ``deadline`` (``time.monotonic()``).
    Each socket read waits at most ``read_timeout`` and what is left before the
    deadline: a server dripping bytes, each in time, is given up at the deadline, not a
    read timeout after it. ``read1`` returns whatever has arrived (``iter_content``
    would wait for a whole chunk)."""
    read1 = getattr(raw, "read1", None)  # urllib3 >= 2
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise DeadlinePassed
        _socket_timeout(raw, min(read_timeout, left))
        try:
            chunk = read1(read_size, decode_content=True) if read1 else raw.read(1024, True)
        except (urllib3.exceptions.ReadTimeoutError, TimeoutError):
            if left < read_timeout:  # this read waited for the deadline, not its timeout
                raise DeadlinePassed from None
            raise
        if not chunk:
            return
        yield chunk


def _socket_timeout(raw: Any, seconds: float) -> None:
    """Bound the next read of ``raw``'s socket by ``seconds``."""
    sock = getattr(getattr(raw, "connection", None), "sock", None)
    if sock is not None:
        sock.settimeout(max(seconds, 0.001))


def _read_body(
    response: StreamedResponse, deadline: float, read_timeout: float
) -> tuple[bytes, bool]:
    # Up to MAX_RESPONSE_BYTES and a little more, to know there was more: a bigger
    # answer is cut, and its connection closed rather than drained.
    chunks: list[bytes] = []
    size = 0
    for chunk in arrived(response.raw, deadline, read_timeout=read_timeout):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            break
    body = b"".join(chunks)
    return body[:MAX_RESPONSE_BYTES], size > MAX_RESPONSE_BYTES


def _never_sent(exc: BaseException) -> bool:
    """Whether a failed request certainly never reached the provider: no connection was
    made. urllib3 reports failures to connect (refused, unreachable, DNS, connect
    timeout) as a ConnectTimeoutError (NewConnectionError is one), itself when driven
    directly, wrapped in a MaxRetryError inside requests' error from a
    ``requests.Session``; whatever fails later is something else. A TLS handshake
    timeout is reported as a read timeout: it counts as maybe sent, the safe side."""
    if isinstance(exc, requests.ConnectTimeout):
        return True
    reason = _reason(exc)
    if isinstance(reason, urllib3.exceptions.ProxyError):
        # No connection to the proxy itself: the request never left this host.
        reason = reason.original_error
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


def _reason(exc: BaseException) -> object:
    """urllib3's error behind ``exc``: itself from :class:`Connections`; from a
    ``requests.Session``, the one requests wrapped (inside a MaxRetryError for a failed
    connection)."""
    reason: object = exc.args[0] if isinstance(exc, requests.RequestException) and exc.args else exc
    if isinstance(reason, urllib3.exceptions.MaxRetryError):
        reason = reason.reason
    return reason


def _describe(exc: BaseException) -> str:
    # A connection never made is named apart from a connect timeout.
    reason = _reason(exc)
    if isinstance(reason, urllib3.exceptions.ProxyError):
        kind = "proxy failed"
    elif isinstance(reason, urllib3.exceptions.NewConnectionError):
        kind = "connection failed"
    elif isinstance(exc, requests.ConnectTimeout) or isinstance(
        reason, urllib3.exceptions.ConnectTimeoutError
    ):
        kind = "connect timeout"
    elif isinstance(exc, requests.ReadTimeout | urllib3.exceptions.ReadTimeoutError):
        kind = "read timeout"
    elif isinstance(exc, requests.exceptions.SSLError | urllib3.exceptions.SSLError):
        kind = "TLS error"
    elif isinstance(
        exc, requests.ConnectionError | urllib3.exceptions.ProtocolError | ConnectionError
    ):
        kind = "connection failed"
    else:
        kind = type(exc).__name__
    return f"{kind} ({str(exc)[:200]})"
