"""The classic in.php / res.php provider: one call per method, no retries, no Celery.

:class:`SolverClient` is a :class:`~captcha_tasks.provider.base.Provider`.
Retry policy belongs to the caller, which reads the class (transient or permanent)
and ``retry_after`` of the :mod:`captcha_tasks.errors` this raises. Every call has a timeout and an
overall deadline; the API key travels only in POST bodies, never in a URL (urllib3
logs URLs at debug level) nor in an error message.

res.php calls are idempotent: any failure to get their answer is transient. A submit
is not (each accepted in.php call is a captcha billed): one that may have been
processed (:mod:`.transport` says when) fails with
:class:`~captcha_tasks.errors.SubmitUncertain` (permanent), one that surely was not
(no connection, a refusing answer, a provider error code such as NO_SLOT) is
transient. When in doubt the submit counts as maybe processed: a wrong
guess fails one task, the other way round pays a captcha twice. So does a submit
answered under HTTP 2xx by something that is not the protocol (:mod:`.unreadable`: an
HTML page, cut or wrong-shaped JSON, binary noise, no body, a body past the cap), or
by a value that is no captcha id: whoever wrote it, the provider may have the captcha.
"""

from __future__ import annotations

import collections
import contextlib
import decimal
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..errors import (
    ConfigurationError,
    ProviderUnavailable,
    SolverError,
    SolverNetworkError,
    SubmitUncertain,
)
from ..redaction import mask_secrets
from ..settings import PROTOCOLS, PROVIDERS, Settings
from ..settings import Provider as Dialect
from ..settings.providers import ProviderConfig
from .answers import classic_solution, slot_answer
from .base import ID_RE, Answer, Polled, check_account, check_id, check_submit, check_timeout
from .captchas import DEFAULT_MAX_IMAGE_BYTES, Captcha, CaptchaType, Proxy
from .classic_params import proxy_params, submit_files, submit_params
from .offers import check_offered
from .poll_rules import CLASSIC_RULES
from .protocol import NOT_READY, NotReady, WithUserAgent, parse_many, parse_response
from .transport import HttpSession, Reply, RequestFailed, post, shared_session
from .unreadable import is_unreadable, uncertain_submit

__all__ = ["SolverClient"]


class SolverClient:
    """A client for one provider account.

    ``session``: connections (:class:`~.transport.Connections`, or a ``requests.Session``)
    to use instead of the process's own
    (the client never closes a session it did not create; it creates none).
    ``stats`` counts requests per action (``submit``, ``get``, ``get_many``,
    ``getbalance``, ``reportgood``, ``reportbad``) and failures (``errors:<code>``).
    """

    #: res.php answers many ids in one ``action=get&ids=a,b,c`` request.
    batch_reads = True
    poll_rules = CLASSIC_RULES

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        provider: Dialect = "captchaai",
        timeout: float = 30.0,
        json_mode: bool = True,
        session: HttpSession | None = None,
        max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES,
    ) -> None:
        check_account(base_url, api_key)
        if PROTOCOLS.get(provider) != "classic":  # a JSON provider needs JsonTaskClient
            classic = ", ".join(name for name in PROVIDERS if PROTOCOLS[name] == "classic")
            raise ConfigurationError(
                f"SolverClient speaks in.php/res.php: provider must be one of {classic}, "
                f"got {provider!r} (make_provider picks the client for a provider)"
            )
        check_timeout(timeout)
        self.base_url = base_url.strip().rstrip("/")
        self.provider: Dialect = provider
        self.timeout = float(timeout)
        self.json_mode = json_mode
        self.max_image_bytes = max_image_bytes
        self._api_key = api_key
        self._secrets = (api_key,)
        self._session = session
        self._stats: collections.Counter[str] = collections.Counter()
        self._stats_lock = threading.Lock()

    @classmethod
    def from_settings(
        cls, settings: Settings, config: ProviderConfig | None = None, **overrides: Any
    ) -> SolverClient:
        """A client of configured provider ``config`` (default: the preferred one),
        with the HTTP timeout and image limit of ``settings``."""
        config = config or settings.provider_config()
        options: dict[str, Any] = {
            "provider": config.protocol,
            "timeout": settings.http_timeout,
            "max_image_bytes": settings.max_image_bytes,
            **overrides,
        }
        return cls(config.url, config.require_api_key(), **options)

    def __repr__(self) -> str:
        return f"SolverClient({self.base_url!r}, key='***', provider={self.provider!r})"

    @property
    def stats(self) -> dict[str, int]:
        """A snapshot of the request counters."""
        with self._stats_lock:
            return dict(self._stats)

    # -- the API ---------------------------------------------------------------------

    def submit(
        self, captcha: Captcha, *, proxy: Proxy | None = None, callback_url: str | None = None
    ) -> str:
        """Send a captcha to in.php; returns its id. Validates first: nothing invalid is sent.
        ``callback_url``: the ``pingback`` the provider sends the answer to."""
        check_submit(captcha, proxy)
        captcha.validate(max_image_bytes=self.max_image_bytes)
        check_offered(self.provider, captcha, proxied=proxy is not None)
        params = submit_params(captcha)
        if proxy is not None:
            params.update(proxy_params(proxy))
        if callback_url:
            params["pingback"] = callback_url
        files = submit_files(captcha)
        # A portal may echo the request: its proxy password is masked like the key.
        secrets = self._secrets + ((proxy.password,) if proxy and proxy.password else ())
        value = self._call(
            "in.php", "submit", params, files=files, idempotent=False, secrets=secrets
        )
        if isinstance(value, str) and ID_RE.match(value):
            return value
        # Answered, but with no captcha id: the provider may hold (and bill) one.
        self._count("errors:SUBMIT_OUTCOME_UNKNOWN")
        shown = mask_secrets(repr(value), secrets)[:120]
        raise uncertain_submit(f"submit to {self.base_url}/in.php", f"no captcha id in {shown}")

    def get(self, captcha_id: str) -> Answer | None:
        """The answer, or ``None`` while the captcha is being solved."""
        captcha_id = _check_id(captcha_id)
        value = self._call("res.php", "get", {"action": "get", "id": captcha_id})
        if value is NOT_READY:
            return None
        agent = value.user_agent if isinstance(value, WithUserAgent) else None
        if isinstance(value, WithUserAgent):
            value = value.value
        if isinstance(value, str | dict | list):
            with self._errors_counted():
                return Answer(captcha_id, classic_solution(value), user_agent=agent)
        raise self._unexpected("get", value)  # pragma: no cover - parse_response returns no other

    def get_many(self, captcha_ids: Iterable[str]) -> dict[str, Polled]:
        """Several answers in one request (``action=get&ids=a,b,c``).

        Each value is the :class:`Answer`, ``None`` while not ready, or the error for
        that captcha alone (returned, not raised: one unsolvable captcha must not hide
        the others). Errors for the whole request are raised.
        """
        ids = list(dict.fromkeys(_check_id(i) for i in captcha_ids))
        if len(ids) <= 1:
            return {i: self.get(i) for i in ids}
        data = {"action": "get", "ids": ",".join(ids)}
        reply = self._post("res.php", "get_many", data, {})
        with self._errors_counted():
            slots = parse_many(
                *reply[:3], len(ids), provider=self.provider, redact=self._secrets, cut=reply.cut
            )
        out: dict[str, Polled] = {}
        for captcha_id, slot in zip(ids, slots, strict=True):
            if isinstance(slot, SolverError):
                self._count(f"errors:{slot.code}")
                out[captcha_id] = slot
            else:
                out[captcha_id] = None if slot is NOT_READY else self._slot(captcha_id, str(slot))
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

    def report(
        self, captcha_id: str, *, correct: bool, captcha_type: CaptchaType | None = None
    ) -> None:
        """Tell the provider whether an answer worked (``reportgood`` / ``reportbad``,
        whatever ``captcha_type``)."""
        action = "reportgood" if correct else "reportbad"
        value = self._call("res.php", action, {"action": action, "id": _check_id(captcha_id)})
        if value != "OK_REPORT_RECORDED":
            raise self._unexpected(action, value)

    # -- plumbing --------------------------------------------------------------------

    def _slot(self, captcha_id: str, slot: str) -> Answer | SolverError:
        """One answer of a batch read (:func:`.answers.slot_answer`), its errors counted."""
        found = slot_answer(captcha_id, slot)
        if isinstance(found, SolverError):
            self._count(f"errors:{found.code}")
        return found

    def _call(
        self,
        endpoint: str,
        action: str,
        params: Mapping[str, str],
        *,
        files: Mapping[str, tuple[str, bytes, str]] | None = None,
        idempotent: bool = True,
        secrets: tuple[str, ...] = (),
    ) -> str | dict[str, Any] | list[Any] | WithUserAgent | NotReady:
        reply = self._post(endpoint, action, params, files or {}, idempotent=idempotent)
        try:
            return parse_response(
                *reply[:3], provider=self.provider, redact=secrets or self._secrets, cut=reply.cut
            )
        except SolverError as exc:
            error: SolverError = exc
            call = f"{action} to {self.base_url}/{endpoint}"
            if not idempotent and exc.code == "HTTP_504":
                # A gateway timeout, not the provider's answer: it may hold the request.
                error = self._uncertain(f"{call}: {exc}")
            elif not idempotent and 200 <= reply.status < 300 and is_unreadable(exc):
                error = uncertain_submit(call, exc)
            self._count(f"errors:{error.code}")
            if error is exc:
                raise
            raise error from None

    def _post(
        self,
        endpoint: str,
        action: str,
        params: Mapping[str, str],
        files: Mapping[str, tuple[str, bytes, str]],
        *,
        idempotent: bool = True,
    ) -> Reply:
        """POST and read the whole answer. A failure raises :class:`SolverNetworkError`,
        unless the call is not ``idempotent`` and may have been processed: then
        :class:`SubmitUncertain`."""
        data = {**params, "key": self._api_key}
        if self.json_mode:
            data["json"] = "1"
        url = f"{self.base_url}/{endpoint}"
        self._count(action)
        try:
            return post(
                self._session or shared_session(),
                url,
                data,
                files,
                timeout=self.timeout,
                what=action,
            )
        except RequestFailed as exc:
            detail = self._redact(exc.detail)
            if exc.maybe_sent and not idempotent:
                self._count("errors:SUBMIT_OUTCOME_UNKNOWN")
                raise self._uncertain(detail) from exc.__cause__
            self._count("errors:NETWORK")
            raise SolverNetworkError(detail) from exc.__cause__

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
        return mask_secrets(text, (self._api_key,))

    def _count(self, name: str) -> None:
        with self._stats_lock:
            self._stats[name] += 1


def _check_id(captcha_id: object) -> str:
    return check_id(captcha_id, "captcha id")
