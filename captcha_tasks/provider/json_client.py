"""The JSON task API provider (createTask / getTaskResult / getBalance / reports):
2Captcha API v2, Anti-Captcha, CapSolver and CapMonster Cloud, one
:class:`~captcha_tasks.provider.json_dialects.JsonDialect` each.

Same conventions as the classic :class:`~captcha_tasks.provider.classic.SolverClient`:
no retries and no Celery inside; one shared HTTP session per process, a timeout on
every call; the key travels only in the JSON body (``clientKey``) and shows in no
message or ``repr``. A createTask that may have reached the provider
(:mod:`.transport` says when, and a 504) raises
:class:`~captcha_tasks.errors.SubmitUncertain`: it is never resent, since each
accepted task is billed. Every other failure is typed by the provider's ``errorCode``
(never ``errorId``, docs/PROVIDERS.md D1), read from the body whatever the HTTP
status (CapSolver answers a bad key with 401 and a JSON body).
"""

from __future__ import annotations

import collections
import decimal
import json
import threading
from collections.abc import Iterable
from typing import Any

from ..errors import (
    CaptchaUnsolvable,
    ClientError,
    ConfigurationError,
    SolverError,
    SolverNetworkError,
    SubmitUncertain,
)
from ..redaction import mask_secrets
from ..settings import PROTOCOLS, Provider, Settings
from ..settings.providers import ProviderConfig
from .answers import json_solution, solution_user_agent
from .base import ID_RE, Answer, Polled, check_account, check_id, check_submit, check_timeout
from .captchas import DEFAULT_MAX_IMAGE_BYTES, Captcha, CaptchaType
from .json_dialects import NOT_READY_CODES, dialect_for
from .json_errors import http_error, payload_error, unexpected
from .json_tasks import task_for
from .poll_rules import poll_rules_for
from .proxy import Proxy
from .transport import HttpSession, RequestFailed, post, shared_session
from .unreadable import (
    context,
    decode,
    is_unreadable,
    preview,
    uncertain_submit,
    unreadable_body,
)

__all__ = ["JsonTaskClient"]

#: Answers (or failures) that came with a createTask, kept until their first get.
_MAX_EARLY = 10_000


class JsonTaskClient:
    """A client for one account of a JSON-task-API provider (``provider`` names the
    dialect: ``2captcha-v2``, ``anticaptcha``, ``capsolver`` or ``capmonster``).

    ``session``: connections (:class:`~.transport.Connections`, or a ``requests.Session``)
    to use instead of the process's own.
    ``stats`` counts requests per method and failures (``errors:<code>``).
    """

    #: No provider documents a batch read: one getTaskResult per task.
    batch_reads = False

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        provider: Provider,
        timeout: float = 30.0,
        session: HttpSession | None = None,
        max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES,
    ) -> None:
        _check_config(base_url, api_key, provider, timeout)
        self.base_url = base_url.strip().rstrip("/")
        self.provider: Provider = provider
        self.dialect = dialect_for(provider)
        self.poll_rules = poll_rules_for(provider)
        self.timeout = float(timeout)
        self.max_image_bytes = max_image_bytes
        self._api_key = api_key
        self._session = session
        self._stats: collections.Counter[str] = collections.Counter()
        self._early: dict[str, Answer | SolverError] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        config: ProviderConfig | None = None,
        *,
        timeout: float | None = None,
    ) -> JsonTaskClient:
        """A client of configured provider ``config`` (default: the preferred one),
        with the HTTP timeout and image limit of ``settings``."""
        config = config or settings.provider_config()
        return cls(
            config.url,
            config.require_api_key(),
            provider=config.protocol,
            timeout=settings.http_timeout if timeout is None else timeout,
            max_image_bytes=settings.max_image_bytes,
        )

    def __repr__(self) -> str:
        return f"JsonTaskClient({self.base_url!r}, key='***', provider={self.provider!r})"

    @property
    def stats(self) -> dict[str, int]:
        """A snapshot of the request counters."""
        with self._lock:
            return dict(self._stats)

    # -- the API ---------------------------------------------------------------------

    def submit(
        self, captcha: Captcha, *, proxy: Proxy | None = None, callback_url: str | None = None
    ) -> str:
        """createTask; returns the task id (always a string). Validates first, and
        refuses a type the provider does not offer: nothing invalid is sent.
        ``callback_url``: the ``callbackUrl`` the provider POSTs the result to."""
        check_submit(captcha, proxy)
        captcha.validate(max_image_bytes=self.max_image_bytes)
        task = task_for(self.dialect, captcha, proxy)
        body: dict[str, Any] = {"task": task}
        if callback_url:
            body["callbackUrl"] = callback_url
        # A portal may echo the request: its proxy password is masked like the key.
        secrets = (proxy.password,) if proxy is not None and proxy.password else ()
        payload = self._call("createTask", body, idempotent=False, secrets=secrets)
        raw_id = payload.get("taskId")
        if isinstance(raw_id, int) and not isinstance(raw_id, bool) and raw_id > 0:
            raw_id = str(raw_id)
        if not isinstance(raw_id, str) or not ID_RE.match(raw_id):
            # Accepted (errorId 0) but unusable: the task may exist and be billed.
            self._count("errors:SUBMIT_OUTCOME_UNKNOWN")
            shown = mask_secrets(repr(payload), (self._api_key, *secrets))[:120]
            call = f"createTask to {self.base_url}/createTask"
            raise uncertain_submit(call, f"no usable taskId in {shown}")
        self._keep_early(raw_id, payload)
        return raw_id

    def holds_answer(self, captcha_id: str) -> bool:
        """Whether createTask already answered ``captcha_id`` (CapSolver's images): its
        first :meth:`get` sends nothing."""
        with self._lock:
            return captcha_id in self._early

    def get(self, captcha_id: str) -> Answer | None:
        """getTaskResult: the answer, or ``None`` while the task is being solved."""
        captcha_id = _check_id(captcha_id)
        with self._lock:
            early = self._early.pop(captcha_id, None)
        if isinstance(early, SolverError):
            raise early
        if early is not None:
            return early
        payload = self._call("getTaskResult", {"taskId": _wire_id(captcha_id)})
        return self._result(captcha_id, payload)

    def get_many(self, captcha_ids: Iterable[str]) -> dict[str, Polled]:
        """One :meth:`get` per id. An unsolvable or unknown task is its value; any other
        failure (network, key, throttling) is raised, as for a whole request."""
        out: dict[str, Polled] = {}
        for captcha_id in dict.fromkeys(captcha_ids):
            try:
                out[captcha_id] = self.get(captcha_id)
            except (CaptchaUnsolvable, ClientError) as exc:
                out[captcha_id] = exc
        return out

    def balance(self) -> decimal.Decimal:
        """getBalance: the account balance (USD)."""
        payload = self._call("getBalance", {})
        balance = _decimal(payload.get("balance"))
        if balance is None:
            raise self._unexpected("getBalance", payload)
        return balance

    def report(
        self, captcha_id: str, *, correct: bool, captcha_type: CaptchaType | None = None
    ) -> None:
        """The dialect's report method for ``captcha_type`` (unknown: reCAPTCHA v2's).
        Where the provider has none for this case (most have no "correct" report),
        nothing is sent."""
        methods = self.dialect.report_correct if correct else self.dialect.report_incorrect
        method = methods.get(captcha_type or "recaptcha_v2")
        body: dict[str, Any] = {"taskId": _wire_id(_check_id(captcha_id))}
        if method is None:
            self._count("report_skipped")
            return
        if self.dialect.report_result:
            body["result"] = {"invalid": not correct}
        self._call(method, body)

    # -- plumbing --------------------------------------------------------------------

    def _call(
        self,
        method: str,
        body: dict[str, Any],
        *,
        idempotent: bool = True,
        secrets: tuple[str, ...] = (),
    ) -> dict[str, Any]:
        """POST ``body`` (plus the key) to ``/method``; the answer's JSON object. Raises
        the typed error of an ``errorCode`` or of the HTTP status; an unreadable answer
        (:mod:`.unreadable`) to a call that is not ``idempotent`` is ``SubmitUncertain``
        under a 2xx status. ``secrets``: masked besides the key in what is quoted."""
        url = f"{self.base_url}/{method}"
        self._count(method)
        try:
            reply = post(
                self._session or shared_session(),
                url,
                {},
                {},
                timeout=self.timeout,
                what=method,
                json_body={"clientKey": self._api_key, **body},
            )
        except RequestFailed as exc:
            detail = self._redact(exc.detail)
            if exc.maybe_sent and not idempotent:
                raise self._counted(self._uncertain(detail)) from exc.__cause__
            raise self._counted(SolverNetworkError(detail)) from exc.__cause__
        secrets = (self._api_key, *secrets)
        status, ok = reply.status, 200 <= reply.status < 300
        decoded = None if reply.cut else decode(reply.body)
        text = mask_secrets(decoded, secrets) if decoded is not None else ""
        payload = _json_object(text) if decoded is not None else None
        error = payload_error(self.dialect, payload) if payload is not None else None
        if error is None and not ok:
            error = http_error(self.dialect, status, text or preview(reply.body[:4096], secrets))
        if error is None and payload is None:
            if decoded is None:  # cut at the cap, or not UTF-8
                error = unreadable_body(*reply[:3], secrets, cut=reply.cut)
            else:
                error = unexpected(method, text, context(*reply[:2], len(reply.body)))
        if error is not None:
            if not idempotent and error.code == "HTTP_504":
                # A gateway gave up waiting for a provider that may hold the task.
                error = self._uncertain(f"{method} to {url}: {error.message}")
            elif not idempotent and ok and is_unreadable(error):
                error = uncertain_submit(f"{method} to {url}", error)
            raise self._counted(error)
        assert payload is not None  # every other case raised above
        return payload

    def _result(self, captcha_id: str, payload: dict[str, Any]) -> Answer | None:
        status, code = payload.get("status"), payload.get("errorCode")
        if not isinstance(status, str | None) or not isinstance(code, str | None):
            # A list or an object where a word belongs: not a status this client reads.
            raise self._unexpected("getTaskResult", payload)
        if status in self.dialect.working or code in NOT_READY_CODES:
            return None
        if status == "ready":
            try:
                answer = _answer(captcha_id, payload)
            except SolverError as exc:
                raise self._counted(exc) from None
            if answer is None:
                raise self._unexpected("getTaskResult", payload)
            return answer
        if status == "failed":  # CapSolver, with or without an errorCode
            raise self._counted(_failed(payload))
        raise self._unexpected("getTaskResult", payload)

    def _keep_early(self, task_id: str, payload: dict[str, Any]) -> None:
        """CapSolver may answer a createTask ``ready`` (image tasks) or ``failed``: keep
        that for the first :meth:`get` instead of asking again."""
        status = payload.get("status")
        early: Answer | SolverError | None = None
        if status == "ready":
            try:
                early = _answer(task_id, payload)
            except SolverError as exc:  # the task exists (and is paid): its first get says
                early = exc
        elif status == "failed":
            early = _failed(payload)
        if early is None:
            return
        with self._lock:
            if len(self._early) >= _MAX_EARLY:
                self._early.pop(next(iter(self._early)))
            self._early[task_id] = early

    def _uncertain(self, detail: str) -> SubmitUncertain:
        return SubmitUncertain(f"{detail}: {SubmitUncertain.consequence}")

    def _unexpected(self, method: str, payload: object) -> SolverError:
        return self._counted(unexpected(method, self._redact(repr(payload))))

    def _counted(self, error: SolverError) -> SolverError:
        self._count(f"errors:{error.code}")
        return error

    def _redact(self, text: str) -> str:
        return mask_secrets(text, (self._api_key,))

    def _count(self, name: str) -> None:
        with self._lock:
            self._stats[name] += 1


def _answer(captcha_id: str, payload: dict[str, Any]) -> Answer | None:
    """The answer of a ``ready`` payload (raises for a malformed one); ``None``: none."""
    solution = payload.get("solution")
    if not isinstance(solution, dict) or not solution:
        return None
    user_agent = solution_user_agent(solution)
    value = json_solution(solution)
    if value is None:
        return None
    return Answer(captcha_id, value, cost=_decimal(payload.get("cost")), user_agent=user_agent)


def _failed(payload: dict[str, Any]) -> SolverError:
    code = payload.get("errorCode")
    described = payload.get("errorDescription")
    detail = f" (provider says: {str(described)[:120]})" if described else ""
    if isinstance(code, str) and code:
        return CaptchaUnsolvable(f"{code}: the task failed{detail}", code)
    return CaptchaUnsolvable(f"the task failed{detail}", "ERROR_TASK_FAILED")


def _decimal(value: object) -> decimal.Decimal | None:
    """``cost`` / ``balance`` as sent: a number or a numeric string (PROVIDERS.md D14)."""
    if isinstance(value, bool) or not isinstance(value, str | int | decimal.Decimal):
        return None
    try:
        number = decimal.Decimal(str(value).strip())
    except decimal.InvalidOperation:
        return None
    return number if number.is_finite() else None


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        # Decimals keep a balance's or a cost's digits exact.
        value = json.loads(text, parse_float=decimal.Decimal)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _wire_id(captcha_id: str) -> int | str:
    """Integer ids go back as JSON integers (2Captcha, Anti-Captcha, CapMonster), UUIDs
    as strings (CapSolver)."""
    return int(captcha_id) if captcha_id.isdigit() and len(captcha_id) <= 18 else captcha_id


def _check_id(captcha_id: object) -> str:
    return check_id(captcha_id, "task id")


def _check_config(base_url: str, api_key: str, provider: str, timeout: float) -> None:
    check_account(base_url, api_key)
    if PROTOCOLS.get(provider) != "json":  # type: ignore[call-overload]
        json_ones = ", ".join(p for p, protocol in PROTOCOLS.items() if protocol == "json")
        raise ConfigurationError(f"JSON task API provider must be one of {json_ones}")
    check_timeout(timeout)
