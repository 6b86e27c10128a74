"""The one exception hierarchy of captcha_tasks.

::

    CaptchaTasksError
    ├── ConfigurationError            bad or missing settings (raised at start-up)
    ├── RedisUnavailable              a caller's .delay() could not reach the broker's Redis
    ├── InvalidTaskInput              rejected at the edge: nothing reached the provider
    │   ├── TargetNotAllowed          a page task's URL (or a redirect) is off the allowlist
    │   ├── ArgumentsMismatch         a call that does not fit the task's signature
    │   └── UnknownSolve              feedback for a task id with no finished solve known
    ├── SessionLockBusy               another worker holds a host's session lock (retried)
    ├── SessionLockTimeout            waited ~2 lock TTLs for a session lock, gave up
    ├── UnknownProxy                  no proxy with that id in the pool
    ├── NoProxyAvailable              a task needed the worker's proxy, none is leased
    ├── ChallengeRejected             the target site refused a submitted token
    ├── ChallengeNotFound             no captcha widget on a browser page asked to solve one
    ├── PageFetchFailed               a target site could not be read: unreachable, or no answer
    │   ├── PageTooLarge              a body past CAPTCHA_TASKS_MAX_PAGE_BYTES
    │   └── PageTooSlow               a fetch past CAPTCHA_TASKS_PAGE_DEADLINE
    └── SolverError                   anything the provider (or the way to it) answered
        ├── TransientSolverError      worth retrying after ``retry_after`` seconds
        │   ├── NoSlotAvailable       ERROR_NO_SLOT_AVAILABLE; ERROR_ZERO_BALANCE (CaptchaAI)
        │   ├── ProviderUnavailable   ERROR_SERVER_ERROR, HTTP 5xx, HTML or unrecognised bodies
        │   ├── SolverNetworkError    connection refused or reset, timeouts
        │   ├── RateLimited           MAX_USER_TURN, ERROR: 1001..1005, IP_BANNED
        │   └── ProxyRejected         ERROR_BAD_PROXY, ERROR_PROXY_CONNECTION_FAILED
        └── PermanentSolverError      retrying the same request cannot help
            ├── InvalidApiKey         ERROR_WRONG_USER_KEY, ERROR_KEY_DOES_NOT_EXIST
            ├── InsufficientFunds     ERROR_ZERO_BALANCE (2Captcha)
            ├── BadRequest            ERROR_PAGEURL, ERROR_GOOGLEKEY, ERROR_BAD_PARAMETERS, ...
            ├── BadImage              ERROR_ZERO_CAPTCHA_FILESIZE, ERROR_UPLOAD, ...
            ├── CaptchaUnsolvable     ERROR_CAPTCHA_UNSOLVABLE
            ├── SolveTimeout          no answer before the solve's deadline
            ├── SubmitUncertain       an in.php call that may have been accepted: not resent
            └── ClientError           ERROR_WRONG_CAPTCHA_ID, unknown ERROR_* codes, ...

Every error carries ``code`` (the provider's code, e.g. ``"ERROR_NO_SLOT_AVAILABLE"``,
``"HTTP_502"`` or ``"NETWORK"``) and transient ones a suggested ``retry_after`` in
seconds (before ``CAPTCHA_TASKS_TIME_SCALE`` is applied). Whether a provider error is
worth retrying is its class: ``isinstance(exc, TransientSolverError)``.

No message carries a URL's password: the constructor masks ``scheme://user:pw@`` as
``scheme://user:***@`` (:func:`captcha_tasks.redaction.mask_urls_in`) before it is
stored, in ``message`` and in ``args`` alike.

The constructor arguments are also ``self.args``: Celery's JSON result backend
stores ``args`` and rebuilds the exception with ``cls(*args)`` on the caller's
side, so ``AsyncResult.get()`` raises the same type with the same code.
"""

from __future__ import annotations

from .redaction import mask_urls_in

__all__ = [
    "ArgumentsMismatch",
    "BadImage",
    "BadRequest",
    "CaptchaTasksError",
    "CaptchaUnsolvable",
    "ChallengeNotFound",
    "ChallengeRejected",
    "ClientError",
    "ConfigurationError",
    "InsufficientFunds",
    "InvalidApiKey",
    "InvalidTaskInput",
    "NoProxyAvailable",
    "NoSlotAvailable",
    "PageFetchFailed",
    "PageTooLarge",
    "PageTooSlow",
    "PermanentSolverError",
    "ProviderUnavailable",
    "ProxyRejected",
    "RateLimited",
    "RedisUnavailable",
    "SessionLockBusy",
    "SessionLockTimeout",
    "SolveTimeout",
    "SolverError",
    "SolverNetworkError",
    "SubmitUncertain",
    "TargetNotAllowed",
    "TransientSolverError",
    "UnknownProxy",
    "UnknownSolve",
]


def _masked(message: str) -> str:
    """``message`` with every URL password masked (``scheme://user:***@host``).

    Messages end up in worker logs, events (Flower) and the result backend, and many
    quote a URL a caller or an operator gave (``http://user:pw@...``).
    """
    if not isinstance(message, str) or "://" not in message or "@" not in message:
        return message
    return mask_urls_in(message)


class CaptchaTasksError(Exception):
    """Root of every error this package raises on purpose."""

    #: Default code when none is given.
    default_code: str | None = None
    #: Suggested wait in seconds before a retry (unscaled); ``None`` for permanent errors.
    default_retry_after: float | None = None

    def __init__(
        self, message: str = "", code: str | None = None, retry_after: float | None = None
    ) -> None:
        message = _masked(message)
        super().__init__(message, code, retry_after)
        self.message = message
        self.code = code if code is not None else self.default_code
        self.retry_after = retry_after if retry_after is not None else self.default_retry_after

    def __str__(self) -> str:
        if self.code and self.code not in self.message:
            return f"{self.code}: {self.message}" if self.message else self.code
        return self.message or type(self).__name__

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r})"


class ConfigurationError(CaptchaTasksError):
    """A setting is missing or malformed; raised when settings are read."""

    default_code = "CONFIG"


class RedisUnavailable(CaptchaTasksError, ConnectionError):
    """``.delay()`` / ``apply_async()`` could not reach the broker or the result backend's
    Redis within a few seconds: the task was not queued (or may not have been)."""

    default_code = "REDIS_UNAVAILABLE"


class InvalidTaskInput(CaptchaTasksError, ValueError):
    """A task's arguments were rejected before anything was sent to the provider."""

    default_code = "INVALID_INPUT"


class ArgumentsMismatch(InvalidTaskInput, TypeError):
    """A call that does not fit the task's signature (a keyword it does not take, an
    argument missing or too many): raised by ``.delay()``, ``.apply_async()`` and ``aio``
    in the caller, by the worker for a message another client sent. Also a
    ``TypeError``, what Python and Celery's own check raise for such a call."""


class UnknownSolve(InvalidTaskInput):
    """Feedback (:func:`captcha_tasks.feedback`) for a task id that names no finished
    solve: unknown, not solved yet, failed, or past ``CAPTCHA_TASKS_REPORT_WINDOW``."""

    default_code = "UNKNOWN_TASK"


class TargetNotAllowed(InvalidTaskInput):
    """A page task was asked to touch a host the operator did not allow (or a private,
    loopback or non-http target, directly or by redirect)."""

    default_code = "TARGET_NOT_ALLOWED"


# -- shared session state ----------------------------------------------------------


class SessionLockBusy(CaptchaTasksError):
    """Another owner holds the session lock of the host (the task retries)."""

    default_code = "SESSION_LOCK_BUSY"


class SessionLockTimeout(CaptchaTasksError):
    """A task waited about twice the lock TTL for a host's session lock and gave up."""

    default_code = "SESSION_LOCK_TIMEOUT"


class UnknownProxy(CaptchaTasksError, KeyError):
    """No proxy with this id in the pool."""

    default_code = "UNKNOWN_PROXY"

    def __str__(self) -> str:  # KeyError would quote the message
        return CaptchaTasksError.__str__(self)


class NoProxyAvailable(CaptchaTasksError):
    """A task required the worker's proxy but the worker holds none right now."""

    default_code = "NO_PROXY"
    default_retry_after = 5.0


class ChallengeRejected(CaptchaTasksError):
    """The target site refused the token a page task submitted to its challenge."""

    default_code = "CHALLENGE_REJECTED"


class ChallengeNotFound(CaptchaTasksError):
    """A page handed to :func:`captcha_tasks.contrib.playwright.solve_on_page` shows no
    reCAPTCHA, Turnstile or hCaptcha widget (or lost it while it was solved)."""

    default_code = "NO_CHALLENGE"


class PageFetchFailed(CaptchaTasksError):
    """A page task could not read a target site: it could not be reached
    (``PAGE_UNREACHABLE``), or sent no answer within the read timeout
    (``PAGE_TIMEOUT``). Nothing was solved for it."""

    default_code = "PAGE_FETCH_FAILED"


class PageTooLarge(PageFetchFailed):
    """A target site's answer was larger than ``CAPTCHA_TASKS_MAX_PAGE_BYTES``: refused
    as soon as it passed the bound, without reading the rest."""

    default_code = "PAGE_TOO_LARGE"


class PageTooSlow(PageFetchFailed):
    """A fetch from a target site (redirects and the whole body included) took longer
    than ``CAPTCHA_TASKS_PAGE_DEADLINE``."""

    default_code = "PAGE_TOO_SLOW"


class SolverError(CaptchaTasksError):
    """The provider refused or failed a request, or could not be reached."""


class TransientSolverError(SolverError):
    """Retry later: the same request may succeed after ``retry_after`` seconds."""

    default_retry_after = 5.0


class NoSlotAvailable(TransientSolverError):
    """Every thread of the plan is busy (or, for CaptchaAI, ERROR_ZERO_BALANCE)."""

    default_code = "ERROR_NO_SLOT_AVAILABLE"
    default_retry_after = 5.0


class ProviderUnavailable(TransientSolverError):
    """The provider answered with a server error, an HTML page or something unrecognised."""

    default_code = "ERROR_SERVER_ERROR"
    default_retry_after = 10.0


class SolverNetworkError(TransientSolverError):
    """The provider could not be reached or did not answer within the HTTP timeout."""

    default_code = "NETWORK"
    default_retry_after = 5.0


class RateLimited(TransientSolverError):
    """The provider throttles this account or address."""

    default_code = "MAX_USER_TURN"
    default_retry_after = 10.0


class ProxyRejected(TransientSolverError):
    """The provider could not use the proxy sent with the captcha: rotate it, then retry."""

    default_code = "ERROR_BAD_PROXY"
    default_retry_after = 5.0


class PermanentSolverError(SolverError):
    """Retrying the same request cannot succeed."""


class InvalidApiKey(PermanentSolverError):
    """The API key is wrong or has no plan."""

    default_code = "ERROR_WRONG_USER_KEY"


class InsufficientFunds(PermanentSolverError):
    """The account has no funds (2Captcha's reading of ERROR_ZERO_BALANCE)."""

    default_code = "ERROR_ZERO_BALANCE"


class BadRequest(PermanentSolverError):
    """The provider rejected the captcha's parameters (page URL, sitekey, ...)."""

    default_code = "ERROR_BAD_PARAMETERS"


class BadImage(PermanentSolverError):
    """The provider rejected the image (empty, too big, wrong type)."""

    default_code = "ERROR_IMAGE_TYPE_NOT_SUPPORTED"


class CaptchaUnsolvable(PermanentSolverError):
    """The provider's workers could not solve the captcha (after its one resubmit)."""

    default_code = "ERROR_CAPTCHA_UNSOLVABLE"


class SolveTimeout(PermanentSolverError):
    """No answer arrived before the solve's deadline."""

    default_code = "TIMEOUT"


class SubmitUncertain(PermanentSolverError):
    """A submit (in.php) failed after it may have reached the provider: no answer
    within the timeout, the connection dropped once the request was sent, an answer
    cut off. The provider may have accepted, and billed, the captcha. It is not sent
    again (a second submit could be a second charge); retrying is the caller's choice."""

    default_code = "SUBMIT_OUTCOME_UNKNOWN"
    #: What the message adds to what happened, for whoever reads the error.
    consequence = (
        "the provider may have accepted (and billed) this captcha; it was not "
        "resubmitted, so it is not paid twice; retry the task if a new solve is wanted"
    )


class ClientError(PermanentSolverError):
    """The request itself was wrong (unknown captcha id, empty action, unknown code)."""

    default_code = "ERROR_BAD_REQUEST"
