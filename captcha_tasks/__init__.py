"""captcha_tasks: CAPTCHA solving at scale as a Celery application on Redis.

``celery -A captcha_tasks worker`` finds :data:`app` (whose ``include`` registers every
task in the worker). The tasks are imported when first named: code that only sends
them loads no solve engine, HTTP server or provider client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import errors
from .errors import (
    CaptchaTasksError,
    InvalidTaskInput,
    PermanentSolverError,
    SolverError,
    TransientSolverError,
)
from .lazy import lazy_exports
from .settings import Settings, get_settings
from .version import __version__
from .worker.app import app

if TYPE_CHECKING:
    from .worker.altcha_tasks import solve_altcha
    from .worker.feedback import feedback
    from .worker.page_tasks import fetch_page
    from .worker.solve_tasks import (
        fill_token_pool,
        get_balance,
        ping,
        report_solution,
        solve_aws_waf,
        solve_coordinates,
        solve_datadome,
        solve_friendly_captcha,
        solve_funcaptcha,
        solve_geetest,
        solve_geetest_v4,
        solve_grid,
        solve_hcaptcha,
        solve_image,
        solve_mtcaptcha,
        solve_prosopo,
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
    "feedback",
    "fetch_page",
    "fill_token_pool",
    "get_balance",
    "get_settings",
    "ping",
    "report_solution",
    "solve_altcha",
    "solve_aws_waf",
    "solve_coordinates",
    "solve_datadome",
    "solve_friendly_captcha",
    "solve_funcaptcha",
    "solve_geetest",
    "solve_geetest_v4",
    "solve_grid",
    "solve_hcaptcha",
    "solve_image",
    "solve_mtcaptcha",
    "solve_prosopo",
    "solve_recaptcha_v2",
    "solve_recaptcha_v3",
    "solve_turnstile",
]

_SOLVE = "worker.solve_tasks"
#: Each name, and the module it comes from (imported when the name is first read).
_LAZY = {
    **dict.fromkeys(
        (
            "fill_token_pool",
            "get_balance",
            "ping",
            "report_solution",
            "solve_aws_waf",
            "solve_coordinates",
            "solve_datadome",
            "solve_friendly_captcha",
            "solve_funcaptcha",
            "solve_geetest",
            "solve_geetest_v4",
            "solve_grid",
            "solve_hcaptcha",
            "solve_image",
            "solve_mtcaptcha",
            "solve_prosopo",
            "solve_recaptcha_v2",
            "solve_recaptcha_v3",
            "solve_turnstile",
        ),
        _SOLVE,
    ),
    "feedback": "worker.feedback",
    "fetch_page": "worker.page_tasks",
    "solve_altcha": "worker.altcha_tasks",
    "PinnedProxyTask": "worker.task_bases",
    "SessionLockTask": "worker.task_bases",
    "SharedCookiesTask": "worker.task_bases",
    # Deprecated names of 0.2 (one release): importable, not part of the surface.
    "solve_recaptcha_v2_enterprise": "worker.deprecated",
    "solve_turnstile_challenge": "worker.deprecated",
}

__getattr__ = lazy_exports(__name__, _LAZY, globals())
