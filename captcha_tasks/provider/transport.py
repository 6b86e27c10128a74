"""HTTP for providers: one session per process, a bounded POST, and whether a failed
request can have reached the provider.

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
"""

from __future__ import annotations

import http.client
import ssl
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any, NamedTuple

import requests
import urllib3
from requests.adapters import HTTPAdapter

from ..forksafe import PerProcess

__all__ = [
    "MAX_RESPONSE_BYTES",
    "POOL_MAXSIZE",
    "Reply",
    "RequestFailed",
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
_USER_AGENT = f"captcha-tasks/0.1 python-requests/{requests.__version__}"


class _Session(requests.Session):
    """requests reads the environment (proxies, ``NO_PROXY``, CA bundle) again for every
    request, walking all of ``os.environ`` several times: most of a provider call's
    CPU. Here it is read once per origin and kept, as settings are read once per
    process."""

    def __init__(self) -> None:
        super().__init__()
        self._environment: dict[tuple[Any, ...], Any] = {}

    def merge_environment_settings(
        self, url: Any, proxies: Any, stream: Any, verify: Any, cert: Any
    ) -> Any:
        if proxies or not self.trust_env:
            return super().merge_environment_settings(url, proxies, stream, verify, cert)
        parts = urllib.parse.urlsplit(str(url))
        key = (parts.scheme, parts.netloc, stream, verify, cert)
        found = self._environment.get(key)
        if found is None:
            found = super().merge_environment_settings(url, proxies, stream, verify, cert)
            self._environment[key] = found
        # A copy each time: requests may change what it is given.
        return {**found, "proxies": dict(found["proxies"])}


def make_session() -> requests.Session:
    """A session with a large connection pool and no automatic retries (the caller decides)."""
    session = _Session()
    adapter = HTTPAdapter(pool_connections=4, pool_maxsize=POOL_MAXSIZE, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.headers["User-Agent"] = _USER_AGENT
    return session


# The parent's sockets (and TLS state) must never be used or closed from a forked child.
_sessions: PerProcess[requests.Session] = PerProcess()


def shared_session() -> requests.Session:
    """The process's session, created on first use and again after a fork."""
    return _sessions.get("session", make_session)


def close_shared_session() -> None:
    """Close the process's session (tests, worker shutdown); the next call makes a new one."""
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
    session: requests.Session,
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
            body, cut = _read_body(response, deadline)
            return Reply(status, response.headers.get("Content-Type", ""), body, cut)
    except (
        requests.RequestException,
        urllib3.exceptions.HTTPError,
        http.client.HTTPException,
        OSError,
    ) as exc:
        maybe_sent = not (_never_sent(exc) or _refused(status))
        raise RequestFailed(f"{what} to {url}: {_describe(exc)}", maybe_sent=maybe_sent) from exc
    except _TooSlow:
        detail = f"{what} to {url}: no complete answer within {timeout:g} s"
        raise RequestFailed(detail, maybe_sent=not _refused(status)) from None


class _TooSlow(Exception):
    pass


def _read_body(response: requests.Response, deadline: float) -> tuple[bytes, bool]:
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
    body = b"".join(chunks)
    return body[:MAX_RESPONSE_BYTES], size > MAX_RESPONSE_BYTES


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
