"""The sandbox's memory: captchas, threads in use, balance, tokens and counters.

Every method takes one lock for its whole step, so checks and updates are atomic
(a submit cannot slip past the thread limit between "count" and "take").
A captcha holds a thread from its submit until its ready time, whether or not
anyone collects the answer; a heap of ready times keeps ``in_flight`` exact.
"""

from __future__ import annotations

import collections
import heapq
import random
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone

from .answers import altcha_answer
from .config import DEV_API_KEY, KINDS, TOKEN_TTL, SandboxConfig
from .garbage import GARBAGE_KINDS, Garbage
from .protocol import ApiError, Reply, Submission
from .records import CaptchaRecord, TokenRecord, challenge_user_agent, make_answer

__all__ = ["COUNTERS", "SandboxState"]

#: Counters in ``/stats`` (all zeroed by ``POST /admin/reset``).
COUNTERS = (
    "requests",  # in.php and res.php requests, faults included
    "submitted",  # accepted submits
    "polls",  # res.php action=get calls (id= or ids=)
    "solved",  # captchas that reached their ready time with an answer
    "unsolvable",  # captchas that reached their ready time as ERROR_CAPTCHA_UNSOLVABLE
    "no_slot",  # submits refused over the thread limit
    "zero_balance",  # submits refused for lack of funds (2captcha dialect)
    "param_errors",  # submits refused for their parameters
    "errors_injected",  # HTML 502 pages served (fail_rate)
    "slow_injected",  # responses held back (slow_rate)
    "garbage_injected",  # answers replaced by garbage (garbage_rate), and per kind:
    *(f"garbage_{kind}" for kind in GARBAGE_KINDS),
    "bad_key",  # requests with a malformed or unknown key
    "reports_bad",
    "reports_good",
    "reports_refused",  # duplicate, late or premature reports
    "balance_calls",
    "tokens_verified",  # /siteverify successes
    "tokens_rejected",  # /siteverify failures (unknown, reused, expired)
    "duplicates",  # accepted submits with the same parameters as an earlier one
)

#: Real seconds a captcha is remembered at least after its ready time, whatever the scale.
_MIN_RETENTION = 300.0
_ID_LOW, _ID_HIGH = 1_000_000_000, 10_000_000_000
_MAX_IDS = 100


class SandboxState:
    """Thread-safe state of one sandbox. ``clock`` is monotonic seconds (injectable for tests)."""

    def __init__(self, config: SandboxConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._config = config
        self._clock = clock
        self._started = clock()
        self._rng = random.Random(config.seed)
        self._keys = frozenset({DEV_API_KEY, *config.api_keys})
        self._balance = round(config.balance, 6)
        self._captchas: dict[int, CaptchaRecord] = {}
        self._tokens: dict[str, TokenRecord] = {}
        self._pending: list[tuple[float, int]] = []  # (ready_at, id): the threads in use
        self._forget: list[tuple[float, int]] = []  # (forget_at, id)
        self._fingerprints: set[bytes] = set()
        self._counts = dict.fromkeys(COUNTERS, 0)
        self._by_type: collections.Counter[str] = collections.Counter()
        self._max_in_flight = 0

    @property
    def config(self) -> SandboxConfig:
        return self._config

    def now(self) -> float:
        """This state's clock (what ``timing`` is measured with)."""
        return self._clock()

    def timing(self, captcha_id: int) -> tuple[float, float] | None:
        """A remembered captcha's submit and ready times (``now()``'s clock)."""
        with self._lock:
            captcha = self._captchas.get(captcha_id)
            return None if captcha is None else (captcha.submitted_at, captcha.ready_at)

    # -- requests -------------------------------------------------------------------

    def begin_request(self, endpoint: str = "") -> str | Garbage | None:
        """Count an in.php/res.php request and roll its fault: ``"fail"``, ``"slow"``, the
        :class:`~.garbage.Garbage` its answer is replaced with, or None.

        ``endpoint`` (``in.php``, ``res.php``): only those in ``fault_paths`` get faults
        (when not given, any may)."""
        with self._lock:
            self._counts["requests"] += 1
            cfg = self._config
            if endpoint and endpoint not in cfg.fault_paths:
                return None
            if cfg.fail_rate and self._rng.random() < cfg.fail_rate:
                self._counts["errors_injected"] += 1
                return "fail"
            if cfg.slow_rate and self._rng.random() < cfg.slow_rate:
                self._counts["slow_injected"] += 1
                return "slow"
            if cfg.garbage_rate and self._rng.random() < cfg.garbage_rate:
                # In turn, so that every kind is served however few garbage answers go out.
                kind = cfg.garbage_kinds[self._counts["garbage_injected"] % len(cfg.garbage_kinds)]
                self._counts["garbage_injected"] += 1
                self._counts[f"garbage_{kind}"] += 1
                return Garbage(kind, self._rng.getrandbits(32))
            return None

    def check_key(self, key: str) -> None:
        """in.php/res.php's key check (the JSON API checks its own: ``json_api``)."""
        if key in self._keys and not self._config.refuse_keys:
            return
        with self._lock:
            self._counts["bad_key"] += 1
        if len(key) != 32 or not key.isascii() or not key.isalnum():
            raise ApiError("ERROR_WRONG_USER_KEY")
        raise ApiError("ERROR_KEY_DOES_NOT_EXIST")

    def count(self, counter: str) -> None:
        with self._lock:
            self._counts[counter] += 1

    # -- in.php ---------------------------------------------------------------------

    def submit(self, sub: Submission, immediate: bool = False) -> int:
        """Accept a captcha and return its id, or raise ERROR_ZERO_BALANCE / the over-limit code.

        ``immediate``: solved at once (CapSolver's synchronous image tasks)."""
        with self._lock:
            now = self._clock()
            self._advance(now)
            self._prune(now)
            cfg = self._config
            cost = cfg.price if cfg.classic_dialect == "2captcha" else 0.0
            if cost and self._balance + 1e-9 < cost:
                self._counts["zero_balance"] += 1
                raise ApiError("ERROR_ZERO_BALANCE")
            if len(self._pending) >= cfg.threads:
                self._counts["no_slot"] += 1
                raise ApiError(cfg.over_limit_code)
            rng = self._rng
            captcha_id = rng.randrange(_ID_LOW, _ID_HIGH)
            while captcha_id in self._captchas:
                captcha_id = rng.randrange(_ID_LOW, _ID_HIGH)
            jitter = rng.uniform(1 - cfg.jitter, 1 + cfg.jitter)
            ready_at = now if immediate else now + cfg.scaled(cfg.latency[sub.kind]) * jitter
            unsolvable = bool(cfg.unsolvable_rate) and rng.random() < cfg.unsolvable_rate
            # An Altcha challenge no number solves: unsolvable, as at a provider.
            unsolvable |= sub.kind == "altcha" and altcha_answer(sub.challenge) is None
            answer, issued = make_answer(sub, ready_at, cfg, rng, unsolvable)
            captcha_token = None
            if issued is not None:
                captcha_token, record = issued
                self._tokens[captcha_token] = record
            self._captchas[captcha_id] = CaptchaRecord(
                id=captcha_id,
                kind=sub.kind,
                ready_at=ready_at,
                report_until=now + cfg.scaled(cfg.report_window),
                unsolvable=unsolvable,
                answer=answer,
                cost=cost,
                token=captcha_token,
                submitted_at=now,
                fingerprint=sub.fingerprint.hex(),
                useragent=challenge_user_agent(sub),
                hostname=sub.hostname,
            )
            self._balance = round(self._balance - cost, 6)
            heapq.heappush(self._pending, (ready_at, captcha_id))
            retention = max(cfg.scaled(cfg.report_window + max(TOKEN_TTL.values())), _MIN_RETENTION)
            heapq.heappush(self._forget, (ready_at + retention, captcha_id))
            self._max_in_flight = max(self._max_in_flight, len(self._pending))
            self._counts["submitted"] += 1
            self._by_type[sub.kind] += 1
            if sub.fingerprint in self._fingerprints:
                self._counts["duplicates"] += 1
            else:
                self._fingerprints.add(sub.fingerprint)
            return captcha_id

    # -- res.php --------------------------------------------------------------------

    def get(self, raw_id: str, poll: bool = True) -> Reply:
        """``action=get&id=``: the answer, or CAPCHA_NOT_READY / an error (raised).
        ``poll=False``: not a client's poll (an answer sent with the submit)."""
        captcha_id = _parse_id(raw_id)
        with self._lock:
            self._counts["polls"] += poll
            now = self._clock()
            self._advance(now)
            result = self._result(captcha_id, now)
        if isinstance(result, ApiError):
            raise result
        extra = {"useragent": result.useragent} if result.useragent else None
        return Reply.answer(result.answer, extra)

    def get_many(self, raw_ids: str) -> Reply:
        """``action=get&ids=1,2``: each answer (or its code) joined by ``|``; each answer in
        its plain form without ``OK|`` (GeeTest and AWS WAF fields as compact JSON,
        coordinates as ``coordinates:x=..,y=..;...``)."""
        ids = [_parse_id(raw) for raw in raw_ids.split(",")]
        if len(ids) > _MAX_IDS:
            raise ApiError("ERROR_BAD_PARAMETERS")
        parts: list[str] = []
        with self._lock:
            self._counts["polls"] += 1
            now = self._clock()
            self._advance(now)
            for captcha_id in ids:
                result = self._result(captcha_id, now)
                if isinstance(result, ApiError):
                    parts.append(result.code)
                else:
                    parts.append(Reply.answer(result.answer).plain.removeprefix("OK|"))
        joined = "|".join(parts)
        return Reply.ok(joined, plain=joined)

    def report(self, raw_id: str, good: bool) -> Reply:
        """``reportgood`` / ``reportbad``: once per captcha, within the report window."""
        captcha_id = _parse_id(raw_id)
        with self._lock:
            now = self._clock()
            self._advance(now)
            captcha = self._captchas.get(captcha_id)
            if captcha is None:
                raise ApiError("ERROR_WRONG_CAPTCHA_ID")
            if captcha.reported:
                self._counts["reports_refused"] += 1
                raise ApiError("ERROR_DUPLICATE_REPORT")
            if now < captcha.ready_at or captcha.unsolvable or now > captcha.report_until:
                self._counts["reports_refused"] += 1
                raise ApiError("ERROR_REPORT_NOT_RECORDED")
            captcha.reported = True
            self._counts["reports_good" if good else "reports_bad"] += 1
        return Reply.ok("OK_REPORT_RECORDED", plain="OK_REPORT_RECORDED")

    def get_balance(self) -> Reply:
        with self._lock:
            self._counts["balance_calls"] += 1
            self._advance(self._clock())
            text = f"{self._balance:.4f}"
        return Reply.ok(text, plain=text)

    # -- /siteverify ----------------------------------------------------------------

    def knows(self, response: str) -> bool:
        """Whether this sandbox issued the token ``response`` (spent or not)."""
        with self._lock:
            return bool(response) and response in self._tokens

    def verify(self, response: str, sitekey: str = "") -> dict[str, object]:
        """Check a token like a site-verify API: valid once, until it expires."""
        with self._lock:
            now = self._clock()
            record = self._tokens.get(response) if response else None
            if not response:
                codes = ["missing-input-response"]
            elif record is None or now < record.ready_at:
                codes = ["invalid-input-response"]
            elif record.used or now > record.expires_at:
                codes = ["timeout-or-duplicate"]
            elif sitekey and sitekey != record.sitekey:
                codes = ["sitekey-secret-mismatch"]
            else:
                codes = []
            if codes or record is None:
                self._counts["tokens_rejected"] += 1
                return {"success": False, "error-codes": codes}
            record.used = True
            self._counts["tokens_verified"] += 1
            solved_wall = time.time() - (now - record.ready_at)
        out: dict[str, object] = {
            "success": True,
            "challenge_ts": datetime.fromtimestamp(solved_wall, tz=timezone.utc)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "hostname": record.hostname,
        }
        if record.kind == "recaptcha_v3":
            out["score"] = record.score
            out["action"] = record.action
        elif record.kind == "turnstile":
            out["action"] = record.action
            out["cdata"] = record.cdata
        elif record.kind == "mtcaptcha":
            out["action"] = record.action  # what reached the provider: tests read it
        return out

    def datadome_cookie_ok(self, value: str, user_agent: str) -> str | None:
        """Whether a ``datadome`` cookie this sandbox issued opens a page for a request
        from ``user_agent`` (:meth:`cookie_ok`)."""
        return self.cookie_ok("datadome", value, user_agent)

    def cookie_ok(self, kind: str, value: str, user_agent: str) -> str | None:
        """Whether a cookie this sandbox issued for a ``kind`` captcha (``datadome``,
        ``cloudflare_challenge``'s ``cf_clearance``) opens a page for a request from
        ``user_agent``: ``None`` if it does (it stays good: a session cookie, not a
        single-use token), else why not."""
        with self._lock:
            now = self._clock()
            record = self._tokens.get(value) if value else None
            if record is None or record.kind != kind or now < record.ready_at:
                return "unknown cookie"
            if record.used or now > record.expires_at:
                return "expired cookie"
            if user_agent != record.user_agent:
                return "user agent differs from the one the cookie was solved as"
            return None

    # -- admin and stats ------------------------------------------------------------

    def configure(self, changes: Mapping[str, object]) -> SandboxConfig:
        """Apply ``POST /admin/config`` changes (raises ConfigurationError, changing nothing)."""
        with self._lock:
            config = self._config.updated(changes)
            if "balance" in changes:
                self._balance = round(config.balance, 6)
            self._config = config
            return config

    def reset(self) -> None:
        """Zero the counters and forget submit fingerprints; captchas in flight stay."""
        with self._lock:
            self._advance(self._clock())
            self._counts = dict.fromkeys(COUNTERS, 0)
            self._by_type.clear()
            self._fingerprints.clear()
            self._max_in_flight = len(self._pending)

    def captchas(self) -> list[dict[str, object]]:
        """``GET /admin/captchas``: every captcha still remembered, with its submit, ready
        and first-answered times as epoch seconds (benchmarks compare them with their own
        clocks), its real latency, how many res.php gets asked for it and the fingerprint
        of its parameters (the fault suite finds duplicate submits of one job with it) and
        its page's host name (the same over both wire formats)."""
        with self._lock:
            now = self._clock()
            self._advance(now)
            offset = time.time() - now  # this clock -> epoch seconds

            def epoch(t: float | None) -> float | None:
                return None if t is None else round(t + offset, 6)

            return [
                {
                    "id": str(c.id),
                    "kind": c.kind,
                    "submitted_at": epoch(c.submitted_at),
                    "ready_at": epoch(c.ready_at),
                    "answered_at": epoch(c.answered_at),
                    "latency": round(c.ready_at - c.submitted_at, 6),
                    "polls": c.polls,
                    "unsolvable": c.unsolvable,
                    "fingerprint": c.fingerprint,
                    "hostname": c.hostname,
                }
                for c in sorted(self._captchas.values(), key=lambda c: c.submitted_at)
            ]

    def stats(self) -> dict[str, object]:
        with self._lock:
            now = self._clock()
            self._advance(now)
            out: dict[str, object] = dict(self._counts)
            out.update(
                in_flight=len(self._pending),
                max_in_flight=self._max_in_flight,
                threads=self._config.threads,
                balance=round(self._balance, 4),
                dialect=self._config.dialect,
                time_scale=self._config.time_scale,
                by_type={kind: self._by_type[kind] for kind in KINDS},
                captchas_stored=len(self._captchas),
                uptime=round(now - self._started, 3),
            )
            return out

    # -- internals (lock held) ------------------------------------------------------

    def _advance(self, now: float) -> None:
        """Free the threads of captchas whose ready time has passed."""
        pending = self._pending
        while pending and pending[0][0] <= now:
            _, captcha_id = heapq.heappop(pending)
            captcha = self._captchas.get(captcha_id)
            if captcha is None:
                continue
            if captcha.unsolvable:
                self._counts["unsolvable"] += 1
                self._balance = round(self._balance + captcha.cost, 6)  # not billed
            else:
                self._counts["solved"] += 1

    def _prune(self, now: float) -> None:
        forget = self._forget
        while forget and forget[0][0] <= now:
            _, captcha_id = heapq.heappop(forget)
            captcha = self._captchas.pop(captcha_id, None)
            if captcha is not None and captcha.token is not None:
                self._tokens.pop(captcha.token, None)

    def _result(self, captcha_id: int, now: float) -> CaptchaRecord | ApiError:
        captcha = self._captchas.get(captcha_id)
        if captcha is None:
            return ApiError("ERROR_WRONG_CAPTCHA_ID")
        captcha.polls += 1
        if now < captcha.ready_at:
            return ApiError("CAPCHA_NOT_READY")
        if captcha.answered_at is None:
            captcha.answered_at = now
        if captcha.unsolvable:
            return ApiError("ERROR_CAPTCHA_UNSOLVABLE")
        return captcha


def _parse_id(raw: str) -> int:
    raw = raw.strip()
    if not raw or len(raw) > 20 or not raw.isascii() or not raw.isdigit():
        raise ApiError("ERROR_WRONG_ID_FORMAT")
    return int(raw)
