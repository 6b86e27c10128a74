"""The seam between the solve engine and a captcha provider: :class:`Provider`.

The engine (and the ``report_solution`` / ``get_balance`` tasks) talk to a provider
through these members and nothing else, so every protocol plugs in behind it:
:class:`~captcha_tasks.provider.classic.SolverClient` (in.php / res.php) and
:class:`~captcha_tasks.provider.json_client.JsonTaskClient` (``createTask`` /
``getTaskResult``).

Types are the provider's business only as far as they show here: a captcha id is an
opaque string, an answer is an :class:`Answer`, and every failure is a
:class:`~captcha_tasks.errors.SolverError` (transient or permanent, carrying the
provider's own code), raised, or for one captcha of a batch, returned.
"""

from __future__ import annotations

import dataclasses
import decimal
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final, Protocol
from urllib.parse import urlsplit

from ..errors import ConfigurationError, InvalidTaskInput, SolverError
from .kind import Captcha, CaptchaType
from .poll_rules import PollRules
from .proxy import Proxy

__all__ = ["Answer", "PollRules", "Polled", "Provider"]


@dataclasses.dataclass(frozen=True)
class Answer:
    """A solved captcha: a token or text, a dict (GeeTest, AWS WAF) or a list of points
    (coordinates), in the shapes of :mod:`.answers`.

    ``cost`` (what the provider billed, where it says) and ``user_agent`` (the browser
    the token was made in, to reuse with it) come from providers that send them.
    """

    captcha_id: str
    solution: str | dict[str, Any] | list[dict[str, int]]
    cost: decimal.Decimal | None = None
    user_agent: str | None = None

    def __repr__(self) -> str:
        shown = self.solution
        if isinstance(shown, str) and len(shown) > 40:
            shown = f"{shown[:20]}...{shown[-8:]} ({len(shown)} chars)"
        extra = "" if self.cost is None else f", cost={str(self.cost)!r}"
        return f"Answer(captcha_id={self.captcha_id!r}, solution={shown!r}{extra})"


#: What a poll of one captcha found: its answer, ``None`` while it is being solved, or
#: the error that ended it (for this captcha alone).
Polled = Answer | SolverError | None


class Provider(Protocol):
    """A captcha provider's account, as the engine uses it.

    No retries inside: a call fails with a :class:`~captcha_tasks.errors.SolverError`
    whose class (:class:`~captcha_tasks.errors.TransientSolverError` or
    :class:`~captcha_tasks.errors.PermanentSolverError`) and ``retry_after`` tell the
    caller what to do. Calls are made from several threads at once.
    """

    @property
    def batch_reads(self) -> bool:
        """Whether :meth:`get_many` reads many answers in one request; if not, the
        engine polls one captcha per request (and less often)."""

    @property
    def poll_rules(self) -> PollRules:
        """The provider's documented limits on reading one captcha (how often, how many
        times, how long): the engine never breaks them (:mod:`.poll_rules`)."""

    def submit(
        self, captcha: Captcha, *, proxy: Proxy | None = None, callback_url: str | None = None
    ) -> str:
        """Send ``captcha`` (solved through ``proxy`` if given); returns its captcha id.
        ``callback_url``: where the provider pushes the answer (its ``pingback`` /
        ``callbackUrl``; None: polls only).

        Not idempotent (each accepted submit is billed): a failure that may have
        reached the provider raises :class:`~captcha_tasks.errors.SubmitUncertain`, one
        that surely did not raises a transient error, and the engine resends only then.
        """

    def get(self, captcha_id: str) -> Answer | None:
        """The answer, or ``None`` while the captcha is being solved. Raises the error
        that ended the captcha (:class:`~captcha_tasks.errors.CaptchaUnsolvable`, ...)."""

    def get_many(self, captcha_ids: Iterable[str]) -> Mapping[str, Polled]:
        """The state of several captchas, by id (one request where :attr:`batch_reads`).

        An error for one captcha is its value, not raised (one unsolvable captcha must
        not hide the others); an error for the whole request is raised."""

    def report(
        self, captcha_id: str, *, correct: bool, captcha_type: CaptchaType | None = None
    ) -> None:
        """Tell the provider whether the answer to ``captcha_id`` worked.

        ``captcha_type`` (when known) picks the report method where a provider has one
        per type; a provider with no report for that case sends nothing."""

    def balance(self) -> decimal.Decimal:
        """The account's balance; a cheap call that also proves the key is accepted
        (:class:`~captcha_tasks.errors.InvalidApiKey` when it is not)."""


# -- the checks both clients make ------------------------------------------------------

#: A captcha id as the providers give it (an integer's digits, or a UUID).
ID_RE: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def check_account(base_url: str, api_key: str) -> None:
    """A client's base URL (``http(s)://host``, nothing more) and API key."""
    parts = urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(f"solver base URL must be http(s)://host, got {base_url!r}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ConfigurationError("solver base URL must not carry a query or credentials")
    # split() == [key]: non-empty and no whitespace anywhere.
    if not isinstance(api_key, str) or api_key.split() != [api_key] or not api_key.isprintable():
        raise ConfigurationError("the API key must be a non-empty string without whitespace")


def check_timeout(timeout: float) -> None:
    """A client's HTTP timeout: a positive number of seconds."""
    if isinstance(timeout, bool) or not (math.isfinite(timeout) and timeout > 0):
        raise ConfigurationError(f"timeout must be a positive number, got {timeout!r}")


def check_submit(captcha: object, proxy: object) -> None:
    """A submit's arguments: a captcha, and a proxy or None."""
    if not isinstance(captcha, Captcha):
        raise InvalidTaskInput(f"not a captcha: {type(captcha).__name__}")
    if proxy is not None and not isinstance(proxy, Proxy):
        raise InvalidTaskInput(f"proxy must be a Proxy, got {type(proxy).__name__}")


def check_id(captcha_id: object, what: str) -> str:
    """``captcha_id`` as a string (an integer's digits), refused unless :data:`ID_RE`
    matches it; ``what`` names it in the refusal (``"captcha id"``, ``"task id"``)."""
    if isinstance(captcha_id, int) and not isinstance(captcha_id, bool):
        captcha_id = str(captcha_id)
    if not isinstance(captcha_id, str) or not ID_RE.match(captcha_id):
        shown = repr(captcha_id)[:40]
        raise InvalidTaskInput(f"captcha_id: {shown} is not a {what} (1-64 letters/digits)")
    return captcha_id
