"""The demo target site: pages behind a reCAPTCHA-style challenge, for fetcher tests.

Enabled by ``SandboxConfig(demo_port=...)`` (``--demo-port``), it runs in the sandbox
process on its own port and verifies tokens against the sandbox's own token store
(exactly like ``POST /siteverify``: once, unexpired, for this site's sitekey), so a
token solved through in.php/res.php with ``googlekey=demo_sitekey`` opens it once.

Routes:

``GET /page/<anything>``
    With a valid ``qa_validation_cookie``: the content page (``<h1>page ...</h1>``).
    Without: a 200 challenge page with ``<div class="g-recaptcha" data-sitekey=...>``
    and a form posting ``g-recaptcha-response``, ``next`` and ``csrf_token`` to
    ``/verify``. As on real sites, each load's form is good once: its ``csrf_token`` is
    bound to the visitor's ``demo_visitor`` cookie (set on the first load), spent by the
    first post, and stale ``demo_form_ttl`` (scaled) after the load; with
    ``demo_rotate_sitekey`` each load shows another sitekey and its form takes only
    tokens solved for that one.
    ``?widget=turnstile`` or ``?widget=hcaptcha`` shows that widget instead, and
    ``&callback=1`` names a page function in ``data-callback`` (``demo_widgets``).
    ``?widget=altcha``: ALTCHA's widget instead (``<altcha-widget challenge=...>``,
    its payload posted in ``altcha``): a v2 challenge (``PBKDF2/SHA-256``) made by the
    official ``altcha`` library from ``/altcha/challenge``; ``&altcha=v1``: a v1
    challenge from the earlier widget's ``challengeurl``; ``&altcha=inline``: the v2
    challenge in the page itself.
    ``?widget=cloudflare``: behind Cloudflare's challenge page instead. The page opens
    with a ``cf_clearance`` cookie the sandbox issued (CapSolver's AntiCloudflareTask,
    CapMonster's TurnstileTask in cf_clearance mode, CaptchaAI's cloudflare_challenge),
    sent from the user agent it was passed as and from the IP it is bound to (as
    DataDome's: the first it is presented from); without one it answers 403 as
    Cloudflare does: ``Server: cloudflare``, ``cf-mitigated: challenge``, a ``CF-RAY``
    and the "Just a moment..." page.
    ``?widget=datadome``: behind DataDome instead. The page opens with a ``datadome``
    cookie the sandbox solved (any dialect, in.php or JSON), sent from the user agent it
    was solved as and from the IP it was solved from (the IP it is first presented from
    stands for it: the sandbox does not solve through the proxy); without one (or from
    another user agent or IP) it answers 403 with
    DataDome's ``dd`` object and a fresh ``datadome`` cookie, ``t: 'fe'`` (``&dd=bv``:
    ``t: 'bv'``, a banned IP). The cookie stays good until it expires: it is a session,
    not a single-use token.
``POST /verify``
    A form this visitor loaded and has not posted yet (else 403 ``stale-form`` or
    ``expired-form``, before the token is looked at: it is not spent), then a good token
    (in any widget's field, for the sitekey that form showed) sets
    ``qa_validation_cookie`` (HttpOnly, ~1800 s x time_scale) and redirects (302) to
    ``next`` (a local path only); a bad one answers 403 and its reason.
``GET /altcha/challenge``
    A fresh ALTCHA challenge signed with the site's key (``?version=1``: a v1 one). The
    payload of its solution passes ``/verify`` once, before its ``expires``, as the
    library's own ``verify_solution`` judges it.
``GET|POST /login``, ``GET /account``
    Username, password and a token, posted with the form ``GET /login`` gave (the same
    one-time ``csrf_token``), sign in (``demo_session`` cookie, 302 to /account).
``GET /stats``, ``POST /reset``, ``GET /healthz``
    Counters (:data:`DEMO_COUNTERS`), zeroing them, liveness.
``GET /redirect?to=URL``
    Test aid only: a 302 to *any* URL (an open redirect), so fetchers can be tested
    against redirects to loopback or private addresses. Never expose this site.

Tokens, passwords and cookie values are never logged.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import hashlib
import html
import json
import random
import re
import secrets
import ssl
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import altcha
import altcha.v1

from .demo_widgets import (
    CLOUDFLARE_WIDGET,
    DATADOME_WIDGET,
    cloudflare_page,
    datadome_page,
    page_widget,
    posted_token,
    widget_markup,
)
from .handler import SandboxHandler, StatefulHTTPServer, _form, logger
from .state import SandboxState

__all__ = [
    "CSRF_FIELD",
    "DEMO_COUNTERS",
    "MAX_FORMS",
    "SESSION_COOKIE",
    "SESSION_TTL",
    "VALIDATION_COOKIE",
    "VALIDATION_TTL",
    "VISITOR_COOKIE",
    "DemoHTTPServer",
    "DemoHandler",
    "DemoSite",
]

#: The cookie a solved challenge earns; it opens ``/page/*``.
VALIDATION_COOKIE = "qa_validation_cookie"
#: The cookie a successful ``POST /login`` sets; it opens ``/account``.
SESSION_COOKIE = "demo_session"
#: Unscaled seconds the validation cookie stays valid.
VALIDATION_TTL = 1800.0
#: Unscaled seconds a login session stays valid.
SESSION_TTL = 1800.0
#: The session cookie naming a visitor; each challenge form is bound to it.
VISITOR_COOKIE = "demo_visitor"
#: The hidden field carrying a challenge form's one-time token.
CSRF_FIELD = "csrf_token"
#: Forms kept at most (the oldest forgotten first, as stale): a bound on the site's memory.
MAX_FORMS = 100_000
#: ``?widget=`` of a page behind ALTCHA, and the field its widget posts the payload in.
ALTCHA_WIDGET = "altcha"
ALTCHA_FIELD = "altcha"
#: The site's v2 challenges: this key derivation at this cost, the counter to find drawn
#: from 0 to ``ALTCHA_MAX_COUNTER`` (the library's deterministic mode: one answer).
ALTCHA_ALGORITHM = "PBKDF2/SHA-256"
ALTCHA_COST = 1_000
ALTCHA_MAX_COUNTER = 200
#: The site's v1 challenges' ``maxnumber`` (SHA-256).
ALTCHA_V1_MAX_NUMBER = 50_000
#: Unscaled seconds a challenge stays good (its signed ``expires``).
ALTCHA_TTL = 600.0

#: Counters in the demo site's ``/stats`` (zeroed by ``POST /reset``).
DEMO_COUNTERS = (
    "pages_served",  # content pages (/page/* with a valid validation cookie)
    "altcha_challenges",  # GET /altcha/challenge
    "challenges",  # challenge pages (/page/* without one)
    "tokens_accepted",  # tokens that passed (POST /verify, POST /login)
    "tokens_rejected",  # missing, unknown, reused, expired or wrong-sitekey tokens
    "cookies_rejected",  # unknown or expired validation cookies presented to /page/*
    "forms_issued",  # challenge and login forms served, each with its one-time csrf_token
    "stale_forms",  # posts whose csrf_token is missing, unknown, spent or another visitor's
    "expired_forms",  # posts of a form loaded more than demo_form_ttl (scaled) before
    "login_forms",  # GET /login
    "logins",  # successful POST /login
    "redirects",  # GET /redirect answered with a 302
)

_SECRETS_RE = re.compile(
    r"((?:key|secret|response|password|token|qa_validation_cookie|demo_session|demo_visitor"
    r"|cf_clearance|datadome)=)"
    r"[^&;\s\"']*",
    re.IGNORECASE,
)
_ROUTES = frozenset(
    {"/", "/verify", "/login", "/account", "/redirect", "/stats", "/reset", "/altcha/challenge"}
)
_PAGE = (
    '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
    "</head>\n<body>\n{body}\n</body></html>\n"
)


class DemoSite:
    """The demo site's memory: validation cookies, sessions, counters (thread-safe).

    ``clock`` is monotonic seconds; lifetimes are scaled by the sandbox's ``time_scale``.
    """

    def __init__(self, state: SandboxState, clock: Callable[[], float] = time.monotonic) -> None:
        self.state = state
        self._clock = clock
        self._lock = threading.Lock()
        self._validations: dict[str, float] = {}  # cookie value -> expires_at
        self._sessions: dict[str, tuple[str, float]] = {}  # value -> (username, expires_at)
        self._counts = dict.fromkeys(DEMO_COUNTERS, 0)
        self._bound_ips: dict[str, str] = {}  # solved cookie value -> the IP it is bound to
        # kind -> client IP -> the cookies (SHA-256 prefixes) that opened pages from it,
        # and how often
        self._bound_served: dict[str, dict[str, dict[str, int]]] = {}
        self._rng = random.Random(state.config.seed)  # reject_rates' draws
        self._peers: list[SandboxState] = []
        self._forms: dict[str, IssuedForm] = {}  # csrf_token -> the form it was issued with
        self._loads = 0  # challenge forms issued: the rotating sitekey's counter
        self._altcha_key = secrets.token_hex(32)  # signs the site's ALTCHA challenges
        self._altcha_spent: dict[str, float] = {}  # a solved challenge's signature -> expiry

    @property
    def sitekey(self) -> str:
        return self.state.config.demo_sitekey

    def lifetime(self, seconds: float) -> float:
        """Live-site ``seconds`` scaled by the sandbox's ``time_scale``."""
        return self.state.config.scaled(seconds)

    def count(self, counter: str) -> None:
        with self._lock:
            self._counts[counter] += 1

    def check_token(self, token: str, sitekey: str | None = None, *, host: str = "") -> str | None:
        """Spend ``token`` (for ``sitekey``, default the reCAPTCHA one) like /siteverify
        does: None if it passed, else the reason. A good token is still refused at the
        configured ``reject_rates`` for ``host`` (``site-rejected``), as a site refuses a
        solver whose tokens score low."""
        issuer = next((peer for peer in self._peers if peer.knows(token)), self.state)
        verdict = issuer.verify(token, sitekey or self.sitekey)
        passed = verdict.get("success") is True
        if passed:
            host = host.rsplit(":", 1)[0].lower()
            rate = self.state.config.reject_rate(host, issuer.config.dialect)
            with self._lock:
                refused = rate > 0 and self._rng.random() < rate
            if refused:
                verdict = {"success": False, "error-codes": ["site-rejected"]}
                passed = False
        self.count("tokens_accepted" if passed else "tokens_rejected")
        if passed:
            return None
        codes = verdict.get("error-codes")
        return ",".join(map(str, codes)) if isinstance(codes, list) and codes else "rejected"

    def trust(self, peer: SandboxState) -> None:
        """Also accept the tokens sandbox ``peer`` solves (another provider's, for a
        site judged by several): its dialect keys their ``reject_rates``."""
        with self._lock:
            self._peers.append(peer)

    def widget_sitekey(self, sitekey: str) -> str:
        """The sitekey this load shows for a widget whose own is ``sitekey``: itself, or
        with ``demo_rotate_sitekey`` its last four characters a hex counter (a key of the
        same format, another on every load)."""
        if not self.state.config.demo_rotate_sitekey:
            return sitekey
        with self._lock:
            self._loads += 1
            return f"{sitekey[:-4]}{self._loads % 0x10000:04x}"

    def issue_form(self, visitor: str, token_field: str, sitekey: str) -> str:
        """A one-time ``csrf_token`` for a form loaded by ``visitor`` that takes a token in
        ``token_field`` solved for ``sitekey``."""
        value = secrets.token_urlsafe(24)
        with self._lock:
            now = self._clock()
            _prune(self._forms, now, lambda form: form.expires_at)
            while len(self._forms) >= MAX_FORMS:
                del self._forms[next(iter(self._forms))]
            ttl = self.lifetime(self.state.config.demo_form_ttl)
            self._forms[value] = IssuedForm(visitor, token_field, sitekey, now + ttl)
            self._counts["forms_issued"] += 1
        return value

    def take_form(self, csrf_token: str, visitor: str | None) -> IssuedForm | str:
        """Spend the form of ``csrf_token`` as ``visitor`` posts it: the form, or why it is
        refused (``stale-form``: missing, unknown, spent or another visitor's;
        ``expired-form``). Another visitor's post does not spend it."""
        with self._lock:
            form = self._forms.get(csrf_token) if csrf_token else None
            if form is None or visitor is None or form.visitor != visitor:
                self._counts["stale_forms"] += 1
                return "stale-form"
            del self._forms[csrf_token]
            if self._clock() >= form.expires_at:
                self._counts["expired_forms"] += 1
                return "expired-form"
            return form

    def altcha_challenge(self, version: int = 2) -> dict[str, Any]:
        """A fresh ALTCHA challenge as the widget fetches it, made by the official
        library with the site's key: v2 (key derivation) or v1 (a hash)."""
        ttl = self.lifetime(ALTCHA_TTL)
        self.count("altcha_challenges")
        with self._lock:
            counter = self._rng.randint(0, ALTCHA_MAX_COUNTER)
            number = self._rng.randint(0, ALTCHA_V1_MAX_NUMBER)
        if version == 1:
            expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=ttl)
            options = altcha.v1.ChallengeOptions(
                algorithm="SHA-256",
                max_number=ALTCHA_V1_MAX_NUMBER,
                hmac_key=self._altcha_key,
                number=number,
                expires=expires,
            )
            v1 = altcha.v1.create_challenge(options)
            return dict(v1.to_dict())
        challenge = altcha.create_challenge(
            ALTCHA_ALGORITHM,
            ALTCHA_COST,
            counter=counter,
            expires_at=int(time.time() + max(1.0, ttl)),
            hmac_secret=self._altcha_key,
        )
        return dict(challenge.to_dict())

    def check_altcha(self, payload: str) -> str | None:
        """Judge an ALTCHA payload as the site's server does: the library's own
        ``verify_solution`` (v2) or ``verify_solution_v1`` (v1) with the site's key, and
        a challenge solved once. None if it passed, else the reason."""
        reason = self._altcha_reason(payload)
        self.count("tokens_accepted" if reason is None else "tokens_rejected")
        return reason

    def _altcha_reason(self, payload: str) -> str | None:
        if not payload:
            return "missing-input-response"
        try:
            decoded = json.loads(base64.b64decode(payload, validate=True))
        except ValueError:
            return "altcha-invalid"
        if not isinstance(decoded, dict):
            return "altcha-invalid"
        challenge = decoded.get("challenge")
        if isinstance(challenge, dict):  # v2: {"challenge": {parameters, signature}, ...}
            result = altcha.verify_solution(payload, self._altcha_key)
            if not result.verified:
                return "altcha-expired" if result.expired else "altcha-invalid"
            signature = str(challenge.get("signature"))
            expires_at = float(challenge.get("parameters", {}).get("expiresAt") or 0)
        else:
            verified, _ = altcha.v1.verify_solution(payload, self._altcha_key, True)
            if not verified:
                return "altcha-invalid"
            signature = str(decoded.get("signature"))
            expires_at = time.time() + self.lifetime(ALTCHA_TTL)
        with self._lock:
            now = time.time()
            _prune(self._altcha_spent, now, lambda expires: expires)
            if signature in self._altcha_spent:
                return "altcha-replayed"
            self._altcha_spent[signature] = max(expires_at, now + 1.0)
        return None

    def issue_validation(self) -> str:
        value = secrets.token_urlsafe(32)
        with self._lock:
            now = self._clock()
            _prune(self._validations, now, lambda expires: expires)
            self._validations[value] = now + self.lifetime(VALIDATION_TTL)
        return value

    def validation_ok(self, value: str | None) -> bool:
        if value is None:
            return False
        with self._lock:
            expires = self._validations.get(value)
            if expires is not None and self._clock() < expires:
                return True
            self._validations.pop(value, None)
            self._counts["cookies_rejected"] += 1
            return False

    def issue_session(self, username: str) -> str:
        value = secrets.token_urlsafe(32)
        with self._lock:
            now = self._clock()
            _prune(self._sessions, now, lambda entry: entry[1])
            self._sessions[value] = (username, now + self.lifetime(SESSION_TTL))
            self._counts["logins"] += 1
        return value

    def session_user(self, value: str | None) -> str | None:
        if value is None:
            return None
        with self._lock:
            entry = self._sessions.get(value)
            if entry is not None and self._clock() < entry[1]:
                return entry[0]
            self._sessions.pop(value, None)
            return None

    def datadome_ok(self, cookie: str, user_agent: str, client_ip: str) -> str | None:
        """Whether a ``datadome`` cookie opens a page for this request (:meth:`bound_ok`)."""
        return self.bound_ok("datadome", cookie, user_agent, client_ip)

    def bound_ok(self, kind: str, cookie: str, user_agent: str, client_ip: str) -> str | None:
        """Whether a cookie of a ``kind`` captcha (``datadome``, ``cloudflare_challenge``)
        opens a page for this request: solved by the sandbox, sent from the user agent it
        was solved as and from the IP it is bound to (the first it was presented from).
        ``None`` if it does, else why not."""
        reason = self.state.cookie_ok(kind, cookie, user_agent)
        if reason is not None:
            return reason
        with self._lock:
            if self._bound_ips.setdefault(cookie, client_ip) != client_ip:
                return "IP differs from the one the cookie was solved from"
            served = self._bound_served.setdefault(kind, {}).setdefault(client_ip, {})
            tag = hashlib.sha256(cookie.encode()).hexdigest()[:12]
            served[tag] = served.get(tag, 0) + 1
        return None

    def datadome_served(self) -> dict[str, dict[str, int]]:
        """Pages served behind DataDome (:meth:`served_behind`)."""
        return self.served_behind("datadome")

    def served_behind(self, kind: str) -> dict[str, dict[str, int]]:
        """Pages served behind a ``kind`` challenge, per client IP and per cookie that
        opened them (the first 12 hex digits of its SHA-256, never its value)."""
        with self._lock:
            return {ip: dict(tags) for ip, tags in self._bound_served.get(kind, {}).items()}

    def stats(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def reset(self) -> None:
        """Zero the counters (cookies and sessions stay valid)."""
        with self._lock:
            self._counts = dict.fromkeys(DEMO_COUNTERS, 0)
            self._bound_served = {}


@dataclasses.dataclass(frozen=True)
class IssuedForm:
    """A challenge or login form as the site served it: to whom, the field its token goes
    in and the sitekey it showed, and when it goes stale (the site's clock)."""

    visitor: str
    token_field: str
    sitekey: str
    expires_at: float


def _prune(entries: dict[str, Any], now: float, expiry: Callable[[Any], float]) -> None:
    """Drop expired entries from the front (insertion order is expiry order)."""
    for value in list(entries):
        if expiry(entries[value]) > now:
            return
        del entries[value]


class DemoHTTPServer(StatefulHTTPServer):
    """What :class:`DemoHandler` needs of its server, besides the sandbox's."""

    demo: DemoSite


class DemoHandler(SandboxHandler):
    """The demo site's requests (wire handling shared with the sandbox's handler)."""

    server: DemoHTTPServer

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        if self.server.state.config.verbose:
            status = code.value if isinstance(code, HTTPStatus) else code
            path = urlsplit(self.path).path
            logger.info("%s demo %s %s %s", self.address_string(), self.command, path, status)

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.state.config.verbose:
            message = _SECRETS_RE.sub(r"\1***", format % args)
            logger.info("%s demo %s", self.address_string(), message)

    def _route(self, path: str, query: str, body: bytes) -> None:
        demo = self.server.demo
        post = self.command == "POST"
        if path.startswith("/page/") and not post:
            self._page(path, query)
        elif path == "/altcha/challenge" and not post:
            version = dict(parse_qsl(query)).get("version") == "1"
            self._send_json(200, demo.altcha_challenge(1 if version else 2))
        elif path == "/verify" and post:
            self._verify(query, body)
        elif path == "/login" and post:
            self._login(query, body)
        elif path == "/login":
            demo.count("login_forms")
            self._form_page(200, "Sign in", self._login_form)
        elif path == "/account" and not post:
            self._account()
        elif path == "/redirect" and not post:
            self._redirect_to(query)
        elif path == "/stats" and not post:
            self._send_json(200, demo.stats())
        elif path == "/reset" and post:
            demo.reset()
            self._send_json(200, {"ok": True})
        elif path == "/healthz":
            self._send_json(200, {"ok": True})
        elif path == "/" and not post:
            links = '<a href="/page/1">page 1</a> <a href="/login">sign in</a>'
            self._html(200, "Demo site", f"<h1>Demo site</h1>\n<p>{links}</p>")
        elif path in _ROUTES or path.startswith("/page/"):
            self._send_json(405, {"error": "method not allowed"})
        else:
            self._send_json(404, {"error": "not found"})

    # -- pages ----------------------------------------------------------------------

    def _page(self, path: str, query: str) -> None:
        demo = self.server.demo
        target = path + ("?" + query if query else "")
        params = dict(parse_qsl(query, keep_blank_values=True))
        if params.get("widget") == DATADOME_WIDGET:
            self._datadome(path, target, banned=params.get("dd") == "bv")
            return
        if params.get("widget") == CLOUDFLARE_WIDGET:
            self._cloudflare(path, target)
            return
        if demo.validation_ok(self._cookie(VALIDATION_COOKIE)):
            demo.count("pages_served")
            name = html.escape(unquote(path.removeprefix("/page/")))
            body = f"<h1>page {name}</h1>\n<p>path: {html.escape(target)}</p>"
            self._html(200, f"page {name}", body)
            return
        demo.count("challenges")
        if params.get("widget") == ALTCHA_WIDGET:
            self._form_page(
                200, "Just a moment...", self._altcha_form, target, params.get("altcha", "")
            )
            return
        widget, callback = page_widget(query, demo.sitekey)

        def challenge_form(visitor: str) -> str:
            shown = dataclasses.replace(widget, sitekey=demo.widget_sitekey(widget.sitekey))
            csrf = demo.issue_form(visitor, shown.field, shown.sitekey)
            return _verify_form(target, csrf, widget_markup(shown, callback))

        self._form_page(200, "Just a moment...", challenge_form)

    def _datadome(self, path: str, target: str, *, banned: bool) -> None:
        demo = self.server.demo
        cookie = self._cookie("datadome") or ""
        agent = self.headers.get("User-Agent", "")
        reason = demo.datadome_ok(cookie, agent, self.client_address[0])
        if reason is None and not banned:
            demo.count("pages_served")
            name = html.escape(unquote(path.removeprefix("/page/")))
            body = f"<h1>page {name}</h1>\n<p>path: {html.escape(target)}</p>"
            self._html(200, f"page {name}", body)
            return
        if reason not in (None, "unknown cookie"):
            demo.count("cookies_rejected")  # a solved cookie from another user agent or IP
        demo.count("challenges")
        fresh = secrets.token_urlsafe(48)
        host = self.headers.get("Host", "")
        page = datadome_page(host, fresh, banned).encode()
        cookie_line = _cookie_header("datadome", fresh, 31_536_000, False).replace("; HttpOnly", "")
        headers = {"Cache-Control": "no-store", "Set-Cookie": cookie_line}
        self._send(403, page, "text/html; charset=utf-8", headers)

    def _cloudflare(self, path: str, target: str) -> None:
        demo = self.server.demo
        cookie = self._cookie("cf_clearance") or ""
        agent = self.headers.get("User-Agent", "")
        reason = demo.bound_ok("cloudflare_challenge", cookie, agent, self.client_address[0])
        if reason is None:
            demo.count("pages_served")
            name = html.escape(unquote(path.removeprefix("/page/")))
            body = f"<h1>page {name}</h1>\n<p>path: {html.escape(target)}</p>"
            self._html(200, f"page {name}", body, {"Server": "cloudflare"})
            return
        if reason != "unknown cookie":
            demo.count("cookies_rejected")  # a passed cookie from another user agent or IP
        demo.count("challenges")
        page, ray = cloudflare_page(self.headers.get("Host", ""), target)
        headers = {
            "Cache-Control": "private, max-age=0, no-store, no-cache, must-revalidate",
            "Server": "cloudflare",
            "cf-mitigated": "challenge",
            "CF-RAY": f"{ray}-SBX",
        }
        self._send(403, page.encode(), "text/html; charset=UTF-8", headers)

    def _verify(self, query: str, body: bytes) -> None:
        params = self._params(query, body)
        target = _local_path(params.get("next", ""))
        if target is None:
            self._html(400, "Bad request", "<h1>Bad request</h1>\n<p>next must be a local path</p>")
            return
        demo = self.server.demo
        reason = self._check_post(params)
        if reason is not None:
            self._failed(reason, target)
            return
        cookie = self._set_cookie(VALIDATION_COOKIE, demo.issue_validation(), VALIDATION_TTL)
        self._send(302, b"", "text/plain", {"Location": target, "Set-Cookie": cookie})

    def _login(self, query: str, body: bytes) -> None:
        params = self._params(query, body)
        username = params.get("username", "").strip()
        if not username or not params.get("password"):
            self._form_page(400, "Sign in", self._login_form, "username and password are required")
            return
        demo = self.server.demo
        reason = self._check_post(params, only_field="g-recaptcha-response")
        if reason is not None:
            self._failed(reason, "/login")
            return
        cookie = self._set_cookie(SESSION_COOKIE, demo.issue_session(username), SESSION_TTL)
        self._send(302, b"", "text/plain", {"Location": "/account", "Set-Cookie": cookie})

    def _account(self) -> None:
        username = self.server.demo.session_user(self._cookie(SESSION_COOKIE))
        if username is None:
            self._send(302, b"", "text/plain", {"Location": "/login"})
            return
        body = f"<h1>Account</h1>\n<p>Signed in as {html.escape(username)}</p>"
        self._html(200, "Account", body)

    def _redirect_to(self, query: str) -> None:
        target = dict(parse_qsl(query, keep_blank_values=True)).get("to", "")
        if not target or not target.isascii() or not target.isprintable() or " " in target:
            self._send_json(400, {"error": "to must be a URL (printable ASCII)"})
            return
        self.server.demo.count("redirects")
        self._send(302, b"", "text/plain", {"Location": target})

    # -- helpers --------------------------------------------------------------------

    def _failed(self, reason: str, back: str) -> None:
        body = (
            "<h1>Verification failed</h1>\n"
            f'<p class="error" id="reason">{html.escape(reason)}</p>\n'
            f'<p><a href="{html.escape(back)}">Try again</a></p>'
        )
        self._html(403, "Verification failed", body)

    def _altcha_form(self, visitor: str, target: str, variant: str) -> str:
        """The challenge form of a page behind ALTCHA: the widget where it looks for its
        challenge (``variant``: ``v1``, ``inline``, or the current widget's URL)."""
        demo = self.server.demo
        csrf = demo.issue_form(visitor, ALTCHA_FIELD, "")
        if variant == "v1":
            widget = '<altcha-widget challengeurl="/altcha/challenge?version=1"></altcha-widget>'
        elif variant == "inline":
            inline = html.escape(json.dumps(demo.altcha_challenge()), quote=True)
            widget = f'<altcha-widget challenge="{inline}"></altcha-widget>'
        else:
            widget = '<altcha-widget challenge="/altcha/challenge"></altcha-widget>'
        return _verify_form(target, csrf, f"{widget}\n")

    def _check_post(self, params: dict[str, str], *, only_field: str = "") -> str | None:
        """Why a posted form is refused (None: it passes): first the form itself (one
        this visitor loaded, not posted before, not expired), then its token, checked
        for the sitekey that form showed (a token in another widget's field: for that
        widget's own sitekey). ``only_field``: the one field a token is taken from."""
        demo = self.server.demo
        form = demo.take_form(params.get(CSRF_FIELD, ""), self._cookie(VISITOR_COOKIE))
        if isinstance(form, str):
            return form
        if form.token_field == ALTCHA_FIELD:
            return demo.check_altcha(params.get(ALTCHA_FIELD, ""))
        if only_field:
            token, sitekey = params.get(only_field, ""), form.sitekey
        else:
            token, sitekey = posted_token(params, demo.sitekey)
            if token and params.get(form.token_field) == token:
                sitekey = form.sitekey
        return demo.check_token(token, sitekey, host=self.headers.get("Host", ""))

    def _login_form(self, visitor: str, error: str = "") -> str:
        demo = self.server.demo
        message = f'<p class="error">{html.escape(error)}</p>\n' if error else ""
        widget = page_widget("", demo.sitekey)[0]
        widget = dataclasses.replace(widget, sitekey=demo.widget_sitekey(widget.sitekey))
        csrf = demo.issue_form(visitor, widget.field, widget.sitekey)
        return (
            f"<h1>Sign in</h1>\n{message}"
            '<form method="post" action="/login">\n'
            f'<input type="hidden" name="{CSRF_FIELD}" value="{csrf}">\n'
            '<input type="text" name="username" autocomplete="username">\n'
            '<input type="password" name="password" autocomplete="current-password">\n'
            f"{widget_markup(widget)}"
            '<button type="submit">Sign in</button>\n</form>'
        )

    def _form_page(self, status: int, title: str, form: Callable[..., str], *args: str) -> None:
        """A page whose form is bound to the visitor: ``form(visitor, *args)`` under the
        visitor's ``demo_visitor`` cookie, set here when the request carries none."""
        visitor = self._cookie(VISITOR_COOKIE)
        headers: dict[str, str] = {}
        if not visitor:
            visitor = secrets.token_urlsafe(16)
            secure = isinstance(self.request, ssl.SSLSocket)
            headers["Set-Cookie"] = _session_cookie_header(VISITOR_COOKIE, visitor, secure)
        self._html(status, title, form(visitor, *args), headers)

    def _params(self, query: str, body: bytes) -> dict[str, str]:
        try:
            params, _ = _form(query, self.headers.get("Content-Type", ""), body)
        except ValueError:
            return {}
        return params

    def _set_cookie(self, name: str, value: str, ttl: float) -> str:
        secure = isinstance(self.request, ssl.SSLSocket)
        return _cookie_header(name, value, self.server.demo.lifetime(ttl), secure)

    def _cookie(self, name: str) -> str | None:
        for header in self.headers.get_all("Cookie") or ():
            for pair in header.split(";"):
                key, sep, value = pair.strip().partition("=")
                if sep and key == name:
                    return value.strip().strip('"')
        return None

    def _html(
        self, status: int, title: str, body: str, headers: dict[str, str] | None = None
    ) -> None:
        page = _PAGE.format(title=html.escape(title), body=body).encode()
        headers = {"Cache-Control": "no-store", **(headers or {})}
        self._send(status, page, "text/html; charset=utf-8", headers)


def _verify_form(target: str, csrf: str, widget: str) -> str:
    """A challenge page's form: posted to ``/verify`` with ``next``, its one-time
    ``csrf_token`` and what ``widget`` renders."""
    return (
        "<h1>Checking that you are not a robot</h1>\n"
        '<form method="post" action="/verify">\n'
        f'<input type="hidden" name="next" value="{html.escape(target)}">\n'
        f'<input type="hidden" name="{CSRF_FIELD}" value="{csrf}">\n'
        f"{widget}"
        '<button type="submit">Continue</button>\n</form>'
    )


def _local_path(target: str) -> str | None:
    """``next`` if it is a path on this site (``/...``), ``/`` if empty, else None."""
    if not target:
        return "/"
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return None
    if not target.isascii() or not target.isprintable() or " " in target:
        return None
    parts = urlsplit(target)
    return None if parts.scheme or parts.netloc else target


def _session_cookie_header(name: str, value: str, secure: bool) -> str:
    """A session cookie (no Max-Age: it lasts as long as the visitor's browser)."""
    flags = "; Secure" if secure else ""
    return f"{name}={value}; Path=/; HttpOnly; SameSite=Lax{flags}"


def _cookie_header(name: str, value: str, lifetime: float, secure: bool) -> str:
    max_age = max(1, round(lifetime))
    flags = "; Secure" if secure else ""
    return f"{name}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Lax{flags}"
