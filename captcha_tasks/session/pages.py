"""Fetching target pages safely, and finding the captcha challenge in them.

Plain code, no Celery. Page tasks only touch hosts in ``CAPTCHA_TASKS_ALLOWED_DOMAINS``:

- ``example.com`` allows ``example.com`` and its subdomains, on any port;
  ``example.com:8443`` only that port; an IP literal (``127.0.0.1:8766``) only as
  written. Schemes other than http and https are refused.
- A host name must resolve to public addresses only: a name that resolves to a
  loopback, private, link-local or otherwise reserved address is refused (DNS
  pointing inside the network). Reaching an internal address is possible only by
  listing that address itself.
- Redirects are followed by hand, each hop checked the same way.
- A direct connection is checked again once made: the address the socket actually
  reached must be public too (unless the URL is an address listed as written), so a
  DNS answer that changes between the check and the connect (rebinding) is caught.
  Through a pool proxy, the proxy resolves and connects.

Every refusal raises :class:`~captcha_tasks.errors.TargetNotAllowed`.

Proxies (``session.proxies``, set from the worker's pinned proxy): ``http://`` and
``https://`` ones, and SOCKS through PySocks (``requests[socks]``): ``socks5h://`` and
``socks4a://``, host names resolved by the proxy (what
:func:`~captcha_tasks.session.proxies.proxy_url` builds), as well as ``socks5://`` and
``socks4://``. A proxy that cannot be reached, refuses its credentials or the
connection raises :class:`~captcha_tasks.errors.ProxyRejected` (codes ``PROXY_*``),
the proxy shown with its password masked, never requests' own exception.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import re
import socket
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import quote, urljoin, urlsplit, urlunsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from ..errors import (
    ConfigurationError,
    PageFetchFailed,
    PageTooLarge,
    PageTooSlow,
    ProxyRejected,
    TargetNotAllowed,
)
from ..provider.kinds.cloudflare_challenge import MAX_HTML
from ..provider.transport import DeadlinePassed, arrived
from ..redaction import mask_url, mask_urls_in
from ..settings import Settings

__all__ = [
    "ALTCHA_FIELD",
    "SITEKEY_RE",
    "WIDGETS",
    "Challenge",
    "Page",
    "Widget",
    "check_url",
    "cloudflare_markers",
    "detect_challenge",
    "fetch",
    "find_altcha",
    "find_challenge",
    "find_cloudflare",
    "find_datadome",
    "find_widgets",
    "submit",
]

MAX_REDIRECTS = 5
MAX_URL_LENGTH = 2048
#: Never in a URL as written (urlsplit would drop some and keep others).
_UNSAFE = re.compile(r"[\x00-\x20\x7f-\x9f]|\s")
#: (connect, read) seconds for a target page: the wait for a connection, and for each
#: read; the whole fetch is bounded by ``CAPTCHA_TASKS_PAGE_DEADLINE``.
PAGE_TIMEOUT = (5.0, 30.0)
#: Bytes asked of the socket per read of a page's body.
READ_SIZE = 65_536


def _split_host(entry: str) -> tuple[str, int | None]:
    if entry.startswith("["):  # [::1]:8080
        host, _, rest = entry[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else None
    if entry.count(":") == 1:
        host, port = entry.split(":")
        return host, int(port)
    return entry, None


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _allowed_entry(settings: Settings, host: str, port: int) -> str | None:
    for entry in settings.allowed_domains:
        name, entry_port = _split_host(entry)
        if entry_port is not None and entry_port != port:
            continue
        if host == name or (not _is_ip(name) and host.endswith("." + name)):
            return name
    return None


def _shown(url: str) -> str:
    """``url`` for a message: its password masked *before* it is cut to 80 characters
    (a cut could otherwise leave a password without the ``@`` that marks it)."""
    return f"{mask_urls_in(url)!r:.80}"


def check_url(url: str, settings: Settings, *, resolve: bool = True, allowlist: bool = True) -> str:
    """``url`` if a page task may fetch it, else :class:`TargetNotAllowed`.

    ``resolve=False`` trusts the host's name without looking it up; ``allowlist=False``
    checks only the URL's form (scheme, host, port, no credentials), not
    ``CAPTCHA_TASKS_ALLOWED_DOMAINS``."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_LENGTH:
        shown = _shown(url) if isinstance(url, str) else f"{url!r:.80}"
        raise TargetNotAllowed(f"not a page URL (1-{MAX_URL_LENGTH} characters): {shown}")
    if _UNSAFE.search(url):
        raise TargetNotAllowed(f"whitespace or control characters in the URL {_shown(url)}")
    try:
        parts = urlsplit(url)
    except ValueError:  # an unclosed [IPv6 bracket, a host that NFKC-normalises oddly
        raise TargetNotAllowed(f"not a valid URL: {_shown(url)}") from None
    if parts.scheme not in ("http", "https"):
        raise TargetNotAllowed(f"only http and https pages are fetched, not {parts.scheme!r}")
    host = (parts.hostname or "").lower().rstrip(".")
    if not host or parts.username or parts.password:
        raise TargetNotAllowed(f"no host, or credentials in the URL: {_shown(url)}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise TargetNotAllowed(f"bad port in {_shown(url)}") from None
    if not allowlist:
        return url
    entry = _allowed_entry(settings, host, port)
    if entry is None:
        # The refused value and the setting, never the list: a caller need not learn
        # which other hosts this deployment reaches.
        empty = "" if settings.allowed_domains else " (it is empty: no host is)"
        raise TargetNotAllowed(
            f"{_where(url)} is not allowed by CAPTCHA_TASKS_ALLOWED_DOMAINS{empty}"
        )
    if _is_ip(host) or not resolve:
        return url  # an address the operator listed as written
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:  # UnicodeError: not IDNA-encodable
        raise TargetNotAllowed(f"{host} does not resolve: {exc}") from None
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if not address.is_global:
            raise TargetNotAllowed(
                f"{host} resolves to {address}, a non-public address: list the address "
                "itself in CAPTCHA_TASKS_ALLOWED_DOMAINS to allow it"
            )
    return url


def _checked_socket(host: str, sock: socket.socket) -> socket.socket:
    """``sock`` if the address it reached may be fetched (see the module docstring)."""
    host = host.strip("[]")
    if _is_ip(host):
        return sock  # an address the operator listed as written (check_url saw it)
    peer = ipaddress.ip_address(sock.getpeername()[0])
    if peer.is_global:
        return sock
    sock.close()
    raise TargetNotAllowed(
        f"{host} connected to {peer}, a non-public address (its DNS answer changed after "
        "the allowlist check?)"
    )


class _CheckedHTTPConnection(HTTPConnection):
    def _new_conn(self) -> socket.socket:
        return _checked_socket(self.host, super()._new_conn())


class _CheckedHTTPSConnection(HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        return _checked_socket(self.host, super()._new_conn())


class _CheckedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _CheckedHTTPConnection


class _CheckedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _CheckedHTTPSConnection


class CheckedAdapter(HTTPAdapter):
    """Direct connections whose peer address is checked once connected."""

    def init_poolmanager(self, *args: object, **kwargs: object) -> None:
        super().init_poolmanager(*args, **kwargs)  # type: ignore[arg-type]
        self.poolmanager.pool_classes_by_scheme = {
            "http": _CheckedHTTPPool,
            "https": _CheckedHTTPSPool,
        }


def _guard(session: requests.Session) -> None:
    """Mount :class:`CheckedAdapter` on ``session`` (once)."""
    if not isinstance(session.get_adapter("https://example.com/"), CheckedAdapter):
        session.mount("http://", CheckedAdapter())
        session.mount("https://", CheckedAdapter())


@dataclass
class Page:
    """A loaded page: its status, final URL, text, the redirects it took, and its
    response headers (names lowercased; a repeated header's values joined by ``, ``)."""

    status: int
    url: str
    text: str
    redirects: int = 0
    headers: dict[str, str] = field(default_factory=dict)


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it wraps (causes, contexts, urllib3's ``reason``, PySocks'
    ``socket_err``), each once."""
    todo: list[BaseException] = [exc]
    seen: set[int] = set()
    while todo and len(seen) < 32:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        inner = [
            current.__cause__,
            current.__context__,
            getattr(current, "reason", None),
            getattr(current, "socket_err", None),
            *current.args,
        ]
        todo += [e for e in inner if isinstance(e, BaseException)]


def _os_error(causes: list[BaseException]) -> OSError | None:
    """The innermost of the standard library's own ``OSError``s among ``causes`` (what the
    socket said: refused, unreachable, reset), or ``None``."""
    found = [e for e in causes if isinstance(e, OSError) and type(e).__module__ == "builtins"]
    return found[-1] if found else None


def _proxy_failure(
    session: requests.Session, url: str, exc: requests.exceptions.RequestException
) -> ProxyRejected | None:
    """The typed error for a request that failed at its proxy, or ``None`` (not one)."""
    proxy = requests.utils.select_proxy(url, session.proxies)
    shown = f"the proxy {mask_url(proxy)}" if proxy else "the proxy"
    target = urlsplit(url).netloc.rpartition("@")[2]
    causes = list(_causes(exc))
    timed_out = any(isinstance(e, TimeoutError | requests.exceptions.Timeout) for e in causes)
    # PySocks' errors (imported by urllib3 when a SOCKS proxy is used).
    socks: Any = sys.modules.get("socks")
    failed = [e for e in causes if socks is not None and isinstance(e, socks.ProxyError)]
    if failed:
        innermost = failed[-1]
        reason = str(getattr(innermost, "msg", "") or type(innermost).__name__)
        socket_error = getattr(innermost, "socket_err", None)
        if socket_error is not None and str(socket_error) not in reason:
            reason = f"{reason}: {socket_error}"

        def seen(*kinds: type[BaseException]) -> bool:
            return any(isinstance(e, kinds) for e in failed)

        if seen(socks.SOCKS5AuthError):
            message, code = f"{shown} refused its username or password ({reason})", "AUTH_FAILED"
        elif timed_out:
            message, code = f"{shown} did not answer in time: {reason}", "TIMEOUT"
        elif seen(socks.ProxyConnectionError):
            message, code = f"cannot connect to {shown}: {reason}", "CONNECTION_FAILED"
        elif seen(socks.SOCKS5Error, socks.SOCKS4Error):
            # The proxy answered: it could not (or would not) connect to the target.
            message, code = f"{shown} could not connect to {target}: {reason}", "CONNECT_REFUSED"
        else:
            message, code = f"{shown} failed: {reason}", "ERROR"
    elif isinstance(exc, requests.exceptions.ProxyError):  # an HTTP(S) proxy
        text = " ".join(str(e) for e in causes)
        tunnel = re.search(r"Tunnel connection failed: (\d{3}[^'\")]*)", text)
        if tunnel and tunnel.group(1).startswith("407"):
            message, code = f"{shown} refused its credentials (HTTP 407)", "AUTH_FAILED"
        elif tunnel:
            detail = tunnel.group(1).strip()
            message, code = f"{shown} refused to connect to {target}: {detail}", "CONNECT_REFUSED"
        elif timed_out:
            message, code = f"{shown} did not answer in time", "TIMEOUT"
        else:
            os_error = _os_error(causes)
            why = f": {os_error.strerror or os_error}" if os_error else ""
            message, code = f"cannot connect to {shown}{why}", "CONNECTION_FAILED"
    else:
        return None
    return ProxyRejected(message, code=f"PROXY_{code}")


def _request(
    session: requests.Session,
    method: str,
    url: str,
    data: Mapping[str, str] | None,
    deadline: float,
    settings: Settings,
) -> requests.Response:
    """The answer's head (its body is read by :func:`_read_body`), within the fetch's
    deadline."""
    left = _left(url, deadline, settings)
    timeout = (min(PAGE_TIMEOUT[0], left), min(PAGE_TIMEOUT[1], left))
    try:
        return session.request(
            method, url, data=data, allow_redirects=False, timeout=timeout, stream=True
        )
    except requests.exceptions.InvalidSchema as exc:
        if "SOCKS" in str(exc):  # requests without PySocks
            raise ConfigurationError(
                "a SOCKS proxy needs PySocks: pip install 'requests[socks]'"
            ) from None
        raise
    except requests.exceptions.RequestException as exc:
        failure = None
        if isinstance(exc, requests.exceptions.ConnectionError | requests.exceptions.Timeout):
            failure = _proxy_failure(session, url, exc)
        # Not chained: requests' messages quote the page's path and query.
        raise failure or _unreadable(url, exc, deadline, settings) from None


def _left(url: str, deadline: float, settings: Settings) -> float:
    """Seconds left before ``deadline``, or :class:`PageTooSlow` when none are."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise _too_slow(url, settings)
    return left


def _too_slow(url: str, settings: Settings) -> PageTooSlow:
    return PageTooSlow(
        f"{_where(url)} took over CAPTCHA_TASKS_PAGE_DEADLINE ({settings.page_deadline:g} s)"
    )


def _where(url: str) -> str:
    """``url``'s host and port for a message: its path and query can hold what the
    caller would not want in a result or a log."""
    parts = urlsplit(url)
    host = (parts.hostname or "?").lower()
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = 0
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _unreadable(
    url: str, exc: BaseException, deadline: float, settings: Settings
) -> PageFetchFailed:
    """The typed error for a fetch the HTTP stack failed: its reason in a few words,
    never the stack's own message."""
    _left(url, deadline, settings)  # past the deadline, that is the reason
    causes = list(_causes(exc))
    if any(isinstance(e, TimeoutError | requests.exceptions.Timeout) for e in causes):
        return PageFetchFailed(
            f"{_where(url)} sent nothing for {PAGE_TIMEOUT[1]:g} s", "PAGE_TIMEOUT"
        )
    if isinstance(exc, requests.exceptions.ConnectionError):
        os_error = _os_error(causes)
        why = f": {os_error.strerror or type(os_error).__name__}" if os_error else ""
        return PageFetchFailed(f"cannot connect to {_where(url)}{why}", "PAGE_UNREACHABLE")
    return PageFetchFailed(
        f"{_where(url)} sent an answer that could not be read ({type(exc).__name__})",
        "PAGE_UNREADABLE",
    )


def _read_body(response: requests.Response, url: str, deadline: float, settings: Settings) -> bytes:
    """The answer's body, decoded (gzip, deflate), read as it arrives: refused past
    ``CAPTCHA_TASKS_MAX_PAGE_BYTES`` (at once when its ``Content-Length`` says so) and
    past the fetch's deadline, however steadily the site sends."""
    limit = settings.max_page_bytes
    length = response.headers.get("Content-Length", "")
    encoded = response.headers.get("Content-Encoding", "identity").lower() != "identity"
    if length.isdigit() and int(length) > limit and not encoded:
        raise _too_large(url, settings, f"its Content-Length is {int(length):,} bytes")
    chunks: list[bytes] = []
    size = 0
    try:
        for chunk in arrived(
            response.raw, deadline, read_timeout=PAGE_TIMEOUT[1], read_size=READ_SIZE
        ):
            size += len(chunk)
            if size > limit:
                raise _too_large(url, settings, "more than that was sent")
            chunks.append(chunk)
    except DeadlinePassed:
        raise _too_slow(url, settings) from None
    except (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError) as exc:
        raise _unreadable(url, exc, deadline, settings) from None
    return b"".join(chunks)


def _too_large(url: str, settings: Settings, detail: str) -> PageTooLarge:
    return PageTooLarge(
        f"{_where(url)}: an answer over CAPTCHA_TASKS_MAX_PAGE_BYTES "
        f"({settings.max_page_bytes:,} bytes): {detail}"
    )


def _text(response: requests.Response, body: bytes) -> str:
    """``body`` as text, decoded as requests' ``Response.text`` decodes."""
    if not body:
        return ""
    encoding = response.encoding
    if encoding is None:
        detector = getattr(requests.compat, "chardet", None)  # what requests guesses with
        detected = detector.detect(body) if detector is not None else None
        encoding = (detected or {}).get("encoding") or "utf-8"
    try:
        return str(body, encoding, errors="replace")
    except (LookupError, TypeError):
        return str(body, "utf-8", errors="replace")


def _follow(
    session: requests.Session,
    method: str,
    url: str,
    settings: Settings,
    data: Mapping[str, str] | None = None,
) -> Page:
    _guard(session)
    deadline = time.monotonic() + settings.page_deadline
    hops = 0
    while True:
        check_url(url, settings)
        response = _request(session, method, url, data, deadline, settings)
        with response:
            if response.is_redirect and hops < MAX_REDIRECTS:
                location = response.headers.get("Location", "")
                url = urljoin(url, location)
                hops += 1
                # 303, and 301/302 after a POST, turn into a GET (as browsers do).
                if response.status_code in (301, 302, 303) and method != "GET":
                    method, data = "GET", None
                continue
            if response.is_redirect:
                raise TargetNotAllowed(f"more than {MAX_REDIRECTS} redirects from {_shown(url)}")
            body = _read_body(response, url, deadline, settings)
            headers = {name.lower(): value for name, value in response.headers.items()}
            return Page(response.status_code, url, _text(response, body), hops, headers)


def fetch(session: requests.Session, url: str, settings: Settings) -> Page:
    """GET ``url`` (allowlist-checked, redirects checked hop by hop)."""
    return _follow(session, "GET", url, settings)


def submit(
    session: requests.Session, url: str, settings: Settings, data: Mapping[str, str]
) -> Page:
    """POST a form to ``url`` the same way."""
    return _follow(session, "POST", url, settings, data)


#: Widget class -> (captcha type, the form field its token goes in).
WIDGETS = {
    "g-recaptcha": ("recaptcha_v2", "g-recaptcha-response"),
    "cf-turnstile": ("turnstile", "cf-turnstile-response"),
    "h-captcha": ("hcaptcha", "h-captcha-response"),
}


#: What a widget's ``data-sitekey`` must look like to be taken for one.
SITEKEY_RE = re.compile(r"[A-Za-z0-9_.-]{10,100}")


#: The form field ALTCHA's widget posts its payload in when its ``name`` names none.
ALTCHA_FIELD = "altcha"
#: The longest ``name`` taken from an ALTCHA widget for the field its payload goes in.
MAX_FIELD_NAME = 100


@dataclass
class Challenge:
    """A captcha widget found in a page, and the form that carries its token; or a
    DataDome challenge (``type`` ``datadome``, ``captcha_url`` its captcha's address,
    ``action`` the page to load again once its cookie is set); or Cloudflare's challenge
    page (``type`` ``cloudflare_challenge``, ``action`` the page to load again once its
    ``cf_clearance`` is set); or an ALTCHA widget
    (``type`` ``altcha``, no sitekey: ``captcha_url`` the address of its challenge, or
    ``challenge_json`` the challenge itself where the widget carries it inline)."""

    type: str
    sitekey: str
    token_field: str
    action: str
    fields: dict[str, str] = field(default_factory=dict)
    captcha_url: str = ""
    challenge_json: str = ""
    #: Cloudflare's challenge page as loaded ("": over the most a solve takes, not sent).
    page_html: str = field(default="", repr=False)


@dataclass
class Widget:
    """A captcha widget of :data:`WIDGETS` in a page: its kind, site key and token field,
    its attributes, and the form it sits in (``action`` as written, hidden fields), if any."""

    type: str
    sitekey: str
    token_field: str
    attributes: dict[str, str]
    form: tuple[str, dict[str, str]] | None


class _WidgetParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.widgets: list[Widget] = []
        self.altcha: list[Widget] = []
        self._form: tuple[str, dict[str, str]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        if tag == "altcha-widget":
            field_name = attributes.get("name") or ALTCHA_FIELD
            self.altcha.append(Widget("altcha", "", field_name, attributes, self._form))
            return
        if tag == "form":
            self._form = (attributes.get("action", ""), {})
        elif tag == "input" and self._form is not None:
            name = attributes.get("name")
            if name and attributes.get("type", "text").lower() == "hidden":
                self._form[1][name] = attributes.get("value", "")
        sitekey = attributes.get("data-sitekey", "")
        if not sitekey:
            return
        classes = attributes.get("class", "").split()
        for widget, (kind, token_field) in WIDGETS.items():
            if widget in classes:
                self.widgets.append(Widget(kind, sitekey, token_field, attributes, self._form))
                return

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._form = None


def _parsed(html: str) -> _WidgetParser:
    parser = _WidgetParser()
    parser.feed(html)
    parser.close()
    return parser


def find_widgets(html: str) -> list[Widget]:
    """Every reCAPTCHA, Turnstile or hCaptcha widget in ``html``, in document order, its
    site key as written (check it against :data:`SITEKEY_RE` before use)."""
    if "data-sitekey" not in html:
        return []
    return _parsed(html).widgets


def find_altcha(html: str, page_url: str) -> Challenge | None:
    """The first ALTCHA widget (``<altcha-widget>``) in ``html`` that says where its
    challenge is, with the form its payload is posted with. The widget's ``challenge``
    (a URL, or the challenge's JSON), else ``challengejson``, else ``challengeurl``
    (the attributes of earlier widget versions); a URL is resolved against the page, as
    the widget resolves it. The payload goes in the field its ``name`` names
    (:data:`ALTCHA_FIELD` by default)."""
    if "altcha-widget" not in html:
        return None
    for widget in _parsed(html).altcha:
        attributes = widget.attributes
        source = (
            attributes.get("challenge")
            or attributes.get("challengejson")
            or attributes.get("challengeurl")
            or ""
        ).strip()
        name = widget.token_field
        if not source or len(name) > MAX_FIELD_NAME or not name.isprintable():
            continue
        action, fields = widget.form or ("", {})
        inline = source.startswith("{")
        return Challenge(
            "altcha",
            "",
            name,
            urljoin(page_url, action),
            dict(fields),
            captcha_url="" if inline else urljoin(page_url, source),
            challenge_json=source if inline else "",
        )
    return None


#: DataDome's challenge object in its 403 page: ``var dd={'rt':'c','cid':...}``.
_DATADOME_OBJECT = re.compile(r"var\s+dd\s*=\s*(\{[^{}<>]{1,4096}\})")
_DATADOME_HOST = re.compile(r"^(?:[a-z0-9-]+\.)*captcha-delivery\.com$")


def find_datadome(page: Page) -> Challenge | None:
    """DataDome's captcha challenge (an HTTP 403 whose page carries DataDome's ``dd``
    object, ``rt: 'c'``), with the captcha's URL built from it as DataDome's script
    builds its iframe; ``None`` for any other page (an interstitial device check,
    ``rt: 'i'``, has no captcha to solve)."""
    if page.status != 403 or "captcha-delivery.com" not in page.text:
        return None
    found = _DATADOME_OBJECT.search(page.text)
    if found is None:
        return None
    try:
        dd = json.loads(found.group(1).replace("'", '"'))
    except ValueError:
        return None
    if not isinstance(dd, dict) or dd.get("rt") != "c":
        return None
    host = str(dd.get("host", ""))
    if not _DATADOME_HOST.match(host):
        return None
    query = "&".join(
        f"{name}={quote(str(value), safe='')}"
        for name, value in (
            ("initialCid", dd.get("cid", "")),
            ("hash", dd.get("hsh", "")),
            ("cid", dd.get("cookie", "")),
            ("t", dd.get("t", "")),
            ("referer", page.url),
            ("s", dd.get("s", "")),
            ("e", dd.get("e", "")),
        )
    )
    url = urlunsplit(("https", host, "/captcha/", query, ""))
    return Challenge("datadome", "", "datadome", page.url, captcha_url=url)


#: What only Cloudflare's challenge page carries: its options object and its platform's
#: script path (a block page, "Attention Required!", carries neither).
_CLOUDFLARE_MARKERS = ("window._cf_chl_opt", "/cdn-cgi/challenge-platform/")


def cloudflare_markers(status: int, html: str) -> bool:
    """Whether a page's status and body are those of Cloudflare's challenge page: 403 or
    503, with the challenge platform's script (what a page whose headers are not known
    is judged by)."""
    return status in (403, 503) and any(marker in html for marker in _CLOUDFLARE_MARKERS)


def find_cloudflare(page: Page) -> Challenge | None:
    """Cloudflare's challenge page ("Just a moment..."): HTTP 403 or 503 from Cloudflare
    (``Server: cloudflare``) marked ``cf-mitigated: challenge`` or carrying the challenge
    platform's script; ``None`` for any other page (a firewall block, error 1020, is no
    challenge a solve passes)."""
    if page.status not in (403, 503):
        return None
    if "cloudflare" not in page.headers.get("server", "").lower():
        return None
    marked = page.headers.get("cf-mitigated", "").lower() == "challenge"
    if not marked and not cloudflare_markers(page.status, page.text):
        return None
    html = page.text if len(page.text) <= MAX_HTML else ""
    return Challenge("cloudflare_challenge", "", "cf_clearance", page.url, page_html=html)


def detect_challenge(page: Page) -> Challenge | None:
    """What challenges ``page``: DataDome (:func:`find_datadome`), Cloudflare's challenge
    page (:func:`find_cloudflare`) or a captcha widget (:func:`find_challenge`); ``None``:
    nothing."""
    return find_datadome(page) or find_cloudflare(page) or find_challenge(page.text, page.url)


def find_challenge(html: str, page_url: str) -> Challenge | None:
    """The first reCAPTCHA, Turnstile or hCaptcha widget in ``html``, with the form
    (absolute action URL and hidden fields) its token is submitted with; else the first
    ALTCHA widget (:func:`find_altcha`)."""
    widgets = find_widgets(html)
    if not widgets:
        return find_altcha(html, page_url)
    if not SITEKEY_RE.fullmatch(widgets[0].sitekey):
        return None
    first = widgets[0]
    action, fields = first.form or ("", {})
    return Challenge(
        first.type, first.sitekey, first.token_field, urljoin(page_url, action), dict(fields)
    )
