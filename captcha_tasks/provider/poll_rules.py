"""Each provider's documented rules for reading a captcha's result, as data.

The engine obeys them (:mod:`captcha_tasks.engine.timing`): it never reads a captcha
before ``first_read_after`` nor twice within ``min_interval``, stops before
``max_reads``, and gives up before the provider forgets the result. Seconds are
production seconds; the engine scales them with ``CAPTCHA_TASKS_TIME_SCALE``, as the
sandbox scales its copy of these rules.
Sources: docs/PROVIDERS.md, section 7 and its list of the providers' public documentation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Literal

from .kind import Captcha
from .kinds.turnstile import Turnstile

__all__ = ["CLASSIC_RULES", "POLL_RULES", "PollRules", "poll_rules_for"]


@dataclasses.dataclass(frozen=True)
class PollRules:
    """How often and how long a provider lets one captcha's result be read."""

    #: Who the rules are for (named in the errors they cause).
    provider: str
    #: Seconds that must pass between two reads of one captcha (0: no such rule).
    min_interval: float = 0.0
    #: Seconds after the submit before the first read of a captcha (0: no such rule).
    first_read_after: float = 0.0
    #: Reads of one captcha the provider answers; the next one finds it lost (None: no limit).
    max_reads: int | None = None
    #: Seconds a result stays readable (None: not documented) ...
    retention: float | None = None
    #: ... counted from the submit (``submit``) or from the moment it was solved (``ready``).
    retained_from: Literal["submit", "ready"] = "submit"
    #: The ``errorCode`` a read too soon after the last one gets: "not ready, slow down".
    too_fast_code: str | None = None
    #: Requests per captcha an account may average before a ban (classic 2Captcha:
    #: R <= 20 * C + 1200): one-by-one polling slows down after this many reads.
    calls_per_captcha: int | None = None
    #: Captcha types read one by one even where batch reads work: their answers may
    #: hold the batch answer's separator (a FunCaptcha token has ``|`` in it).
    single_reads: frozenset[str] = frozenset()
    #: Whether a batch read's answers carry the userAgent a token is bound to. res.php's
    #: do not (``useragent`` comes only with a single read): a challenge-mode Turnstile,
    #: whose token is useless without it, is then read on its own.
    batch_user_agent: bool = True
    #: Where the numbers come from.
    source: str = ""

    def reads_alone(self, captcha_type: str, captcha: Callable[[], Captcha]) -> bool:
        """Whether a captcha must be read on its own rather than in a batch;
        ``captcha`` is asked for only where the type alone does not say."""
        if captcha_type in self.single_reads:
            return True
        if self.batch_user_agent or captcha_type != "turnstile":
            return False
        turnstile = captcha()
        return isinstance(turnstile, Turnstile) and turnstile.challenge

    def __post_init__(self) -> None:
        retention = self.retention
        if min(self.min_interval, self.first_read_after) < 0 or (
            retention is not None and retention <= 0
        ):
            raise ValueError(f"{self.provider}: intervals must be positive")
        if self.max_reads is not None and self.max_reads < 1:
            raise ValueError(f"{self.provider}: max_reads must be at least 1")


#: in.php/res.php. The "poll every ~5 s" advice is about the account's res.php volume,
#: which one batched ``ids=`` request per tick already keeps low; the documented limits
#: are the first read no sooner than 5 s after the submit and the ban past 20 calls per
#: captcha (plus 1200), which one-by-one polling stays under by slowing down.
CLASSIC_RULES = PollRules(
    "classic",
    first_read_after=5.0,
    calls_per_captcha=20,
    # res.php joins a batch's answers with "|", which FunCaptcha tokens contain
    # ("<token>|r=eu-west-1|meta=3|pk=...") and so does a GeeTest v3 answer (its
    # seccode is "<validate>|jordan"): a batch holding one cannot be split.
    single_reads=frozenset({"funcaptcha", "geetest"}),
    batch_user_agent=False,
    source="2captcha.com/2captcha-api: first poll ~5 s (15-20 s reCAPTCHA v2), then ~5 s; "
    "ban above 20 res.php calls per captcha + 1200",
)

POLL_RULES: Mapping[str, PollRules] = MappingProxyType(
    {
        "captchaai": dataclasses.replace(CLASSIC_RULES, provider="captchaai"),
        "2captcha": dataclasses.replace(CLASSIC_RULES, provider="2captcha"),
        # The same accounts as the classic API: its ban threshold applies (unverified for v2).
        "2captcha-v2": PollRules(
            "2captcha-v2",
            min_interval=5.0,
            first_read_after=5.0,
            calls_per_captcha=20,
            source="2captcha.com/api-docs/get-task-result: wait at least 5 s, repeat in 5-10 s",
        ),
        # Interval unverified at Anti-Captcha (docs/PROVIDERS.md, section 7; 2 s assumed).
        "anticaptcha": PollRules(
            "anticaptcha",
            min_interval=2.0,
            retention=60.0,
            retained_from="ready",
            source="anti-captcha.com/apidoc/errors (id 16): removed 60 s after completion",
        ),
        "capsolver": PollRules(
            "capsolver",
            min_interval=3.0,
            max_reads=120,
            retention=300.0,
            source="docs.capsolver.com/guide/api-gettaskresult: retry every 3 s, "
            "120 reads and 5 minutes after creation, then the result is lost",
        ),
        "capmonster": PollRules(
            "capmonster",
            min_interval=2.0,
            max_reads=120,
            retention=300.0,
            too_fast_code="ERROR_TOO_MUCH_REQUESTS",
            source="docs.capmonster.cloud get-task-result and errors: at most one read per "
            "task per 2 s (else ERROR_TOO_MUCH_REQUESTS), 120 reads, kept ~5 minutes",
        ),
    }
)


def poll_rules_for(provider: str) -> PollRules:
    """The rules of ``provider`` (a ``CAPTCHA_TASKS_PROVIDER`` name); an unknown name
    gets the classic ones."""
    return POLL_RULES.get(provider, CLASSIC_RULES)
