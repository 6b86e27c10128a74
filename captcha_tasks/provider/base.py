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
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from ..errors import SolverError
from .captchas import Captcha, CaptchaType
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
