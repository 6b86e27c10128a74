"""captcha_tasks: CAPTCHA solving at scale as a Celery application on Redis.

``celery -A captcha_tasks worker`` finds :data:`app`.
"""

from __future__ import annotations

from . import errors
from .errors import (
    CaptchaTasksError,
    InvalidTaskInput,
    PermanentSolverError,
    SolverError,
    TransientSolverError,
)
from .settings import Settings, get_settings
from .version import __version__
from .worker.app import app
from .worker.page_tasks import (
    fetch_page,
    release_session_lock,
    submit_challenge,
    sweep_session_lock,
)
from .worker.solve_more import (
    solve_aws_waf,
    solve_coordinates,
    solve_funcaptcha,
    solve_geetest_v4,
    solve_recaptcha_v2_enterprise,
    solve_turnstile_challenge,
)
from .worker.solve_tasks import (
    fill_token_pool,
    get_balance,
    ping,
    report_solution,
    solve_geetest,
    solve_hcaptcha,
    solve_image,
    solve_recaptcha_v2,
    solve_recaptcha_v3,
    solve_turnstile,
)
from .worker.task_bases import PinnedProxyTask, SessionLockTask, SharedCookiesTask

__all__ = [
    "CaptchaTasksError",
    "InvalidTaskInput",
    "PermanentSolverError",
    "PinnedProxyTask",
    "SessionLockTask",
    "Settings",
    "SharedCookiesTask",
    "SolverError",
    "TransientSolverError",
    "__version__",
    "app",
    "errors",
    "fetch_page",
    "fill_token_pool",
    "get_balance",
    "get_settings",
    "ping",
    "release_session_lock",
    "report_solution",
    "solve_aws_waf",
    "solve_coordinates",
    "solve_funcaptcha",
    "solve_geetest",
    "solve_geetest_v4",
    "solve_hcaptcha",
    "solve_image",
    "solve_recaptcha_v2",
    "solve_recaptcha_v2_enterprise",
    "solve_recaptcha_v3",
    "solve_turnstile",
    "solve_turnstile_challenge",
    "submit_challenge",
    "sweep_session_lock",
]
