"""What each task returns: ``.get()``, ``aio`` and a task called directly give these.

Every solve task returns a :class:`SolveResult` whose ``solution`` has the family's
type: a token (:data:`TokenResult`), GeeTest's fields (:data:`GeeTestResult`,
:data:`GeeTestV4Result`), AWS WAF's (:data:`AwsWafResult`), the points to click
(:data:`CoordinatesResult`), DataDome's cookie (:data:`DataDomeResult`), or a kind's own,
declared with the kind (its ``SolveCall.solution``) and written here by ``make
generate``: Tencent's ticket (:data:`TencentResult`), what passes Cloudflare's challenge
page (:data:`CloudflareChallengeResult`). They are plain dicts (JSON through the result
backend), typed for mypy and editors.
"""

from __future__ import annotations

from typing import Generic, Literal, TypeVar

# typing_extensions: a generic TypedDict and NotRequired on Python 3.10 too.
from typing_extensions import NotRequired, TypedDict

__all__ = [
    "AwsWafResult",
    "AwsWafSolution",
    "BalanceResult",
    "CoordinatesResult",
    "DataDomeResult",
    "DataDomeSolution",
    "FeedbackResult",
    "FillResult",
    "GeeTestResult",
    "GeeTestSolution",
    "GeeTestV4Result",
    "GeeTestV4Solution",
    "GridResult",
    "GridSolution",
    "PageResult",
    "PingResult",
    "Point",
    "ReportResult",
    "SolveResult",
    "TokenResult",
]

S = TypeVar("S")


class SolveResult(TypedDict, Generic[S]):
    """A solved captcha. ``source``: ``"api"`` (solved for this call) or ``"pool"`` (a
    token the pool held); ``provider``: the configured provider that solved it (its
    name, what ``provider=`` takes: ``"default"``, ``"main"``...) and ``protocol`` the
    protocol it speaks (``"2captcha"``, ``"capsolver"``...), both ``None`` for a pooled
    token when several providers are configured (the pool does not record which one
    solved it); ``cost`` a decimal string (``None``: unknown or pooled);
    ``expires_at``: epoch seconds the token is good until (``None``: not a token);
    ``user_agent``: the browser the token is bound to, where the provider says (DataDome
    and Cloudflare's challenge: always, the one it was solved as); ``proxy_id``: the pool
    proxy their cookie is bound to (its id only, never its address or credentials);
    ``task_id``: the solve's own task id (what :func:`captcha_tasks.feedback` and
    ``report_solution`` take); ``acceptance``: the share of this provider's tokens of
    this type sites accepted over ``CAPTCHA_TASKS_ACCEPTANCE_WINDOW`` (``None``: no
    verdict yet)."""

    solution: S
    source: Literal["api", "pool"]
    type: str
    captcha_id: str
    solve_seconds: float
    queued_seconds: float
    expires_at: float | None
    submits: int
    polls: int
    provider: str | None
    protocol: str | None
    cost: str | None
    cost_source: NotRequired[Literal["provider", "configured"] | None]
    user_agent: NotRequired[str]
    proxy_id: NotRequired[str]
    task_id: NotRequired[str]
    acceptance: NotRequired[float | None]


class GeeTestSolution(TypedDict):
    geetest_challenge: str
    geetest_validate: str
    geetest_seccode: str


class GeeTestV4Solution(TypedDict):
    captcha_id: str
    lot_number: str
    pass_token: str
    gen_time: str
    captcha_output: str


class AwsWafSolution(TypedDict, total=False):
    """``aws_waf_token`` where the provider gives the cookie, else ``captcha_voucher``
    and ``existing_token``."""

    aws_waf_token: str
    captcha_voucher: str
    existing_token: str


class DataDomeSolution(TypedDict):
    """The cookie a solved DataDome captcha earns: ``name`` (``datadome``) and ``value``
    to set, ``set_cookie`` the whole ``Set-Cookie`` line as the provider gave it, and its
    ``domain`` (``.example.com``; ``""`` when the provider named none). The result's
    ``user_agent`` and ``proxy_id`` name the identity it is good for: send it from that
    user agent through that proxy, or DataDome challenges again."""

    name: str
    value: str
    set_cookie: str
    domain: str


class Point(TypedDict):
    x: int
    y: int


class GridSolution(TypedDict):
    """A grid's tiles to click, whatever the provider: numbered from 0, left to right
    then top to bottom (tile ``row * cols + col``), sorted, none twice; and the grid's
    ``rows`` and ``cols``."""

    tiles: list[int]
    rows: int
    cols: int


#: A token (every kind a site verifies by one), or an image's text.
TokenResult = SolveResult[str]
GeeTestResult = SolveResult[GeeTestSolution]
GeeTestV4Result = SolveResult[GeeTestV4Solution]
AwsWafResult = SolveResult[AwsWafSolution]
CoordinatesResult = SolveResult[list[Point]]
GridResult = SolveResult[GridSolution]
DataDomeResult = SolveResult[DataDomeSolution]

# <generated: the kinds' own solution types> written by ``captcha-tasks-dev generate``
# from each kind's ``SolveCall.solution`` (captcha_tasks/provider/kinds/): change the
# kind there, never here.


class CloudflareChallengeSolution(TypedDict):
    """What passes Cloudflare's challenge page: ``cookies`` to set for the site
    (``cf_clearance`` always, any others the provider gave) and ``headers`` to send
    with them (``User-Agent`` always: the browser the challenge was passed as). The
    result's ``user_agent`` and ``proxy_id`` name the identity they are good for:
    send them from that user agent through that proxy, or Cloudflare challenges
    again."""

    cookies: dict[str, str]
    headers: dict[str, str]


CloudflareChallengeResult = SolveResult[CloudflareChallengeSolution]


class TencentSolution(TypedDict):
    """What a solved Tencent captcha (TenDI) gives its page's callback, whatever
    the provider: the ``ticket`` and the ``randstr`` the site verifies it with."""

    ticket: str
    randstr: str


TencentResult = SolveResult[TencentSolution]

__all__ += [
    "CloudflareChallengeResult",
    "CloudflareChallengeSolution",
    "TencentResult",
    "TencentSolution",
]
# </generated>


class BalanceResult(TypedDict):
    """``balance``: a decimal string (exact); ``provider``: the configured provider's
    name (what ``provider=`` takes); ``protocol``: the protocol it speaks."""

    balance: str
    provider: str
    protocol: str


class ReportResult(TypedDict):
    """``reported``: what the provider was told (the verdict counted for the solve);
    ``already``: true when it had been told before (by ``fetch_page``,
    :func:`captcha_tasks.feedback` or an earlier report): not told again."""

    task_id: str
    captcha_id: str
    reported: Literal["good", "bad"]
    already: NotRequired[bool]


class FeedbackResult(TypedDict):
    """What :func:`captcha_tasks.feedback` did: ``counted`` (this call's verdict is the
    one counted: a solve is counted once) and ``verdict``, the one counted for the solve
    (``"accepted"`` or ``"rejected"``), this call's or an earlier one's."""

    task_id: str
    counted: bool
    verdict: Literal["accepted", "rejected"]


class PingResult(TypedDict):
    pong: bool
    hostname: str
    version: str


class FillResult(TypedDict):
    """What :func:`~captcha_tasks.fill_token_pool` did: the pool's ``target``, its ``size``
    now, the solves ``filling`` it and those this call ``admitted``."""

    pool_id: str
    target: int
    size: int
    filling: int
    admitted: int


class PageResult(TypedDict):
    """A fetched page: its HTTP ``status`` and final ``url``; ``solved``: whether this
    call spent a solve; ``source``: where its token came from (``"api"``, ``"pool"``,
    ``None`` when the page was not challenged); ``task_id``: the solve whose token the
    site accepted; ``attempts``: tokens submitted (more than 1: the site refused the
    first ones, each solved afresh, counted rejected and reported bad)."""

    status: int
    url: str
    solved: bool
    source: Literal["api", "pool"] | None
    captcha_id: NotRequired[str | None]
    isolated: NotRequired[bool]
    task_id: NotRequired[str]
    attempts: NotRequired[int]
