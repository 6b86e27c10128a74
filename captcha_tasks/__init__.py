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
from .settings.parsing import CAPTCHA_TYPES
from .version import __version__
from .worker.app import app

if TYPE_CHECKING:
    from .worker.altcha_tasks import solve_altcha as solve_altcha
    from .worker.feedback import feedback
    from .worker.kind_tasks import *  # noqa: F403  (every captcha kind's solve_<type>)
    from .worker.page_tasks import fetch_page
    from .worker.solve_tasks import fill_token_pool, get_balance, ping, report_solution
    from .worker.task_bases import PinnedProxyTask, SessionLockTask, SharedCookiesTask

#: Every captcha kind's solve task, by name (each kind declared in
#: :mod:`captcha_tasks.provider.kinds`; ALTCHA's is a task of its own).
_KIND_TASKS = tuple(f"solve_{kind}" for kind in CAPTCHA_TYPES)

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
    *_KIND_TASKS,
]
__all__.sort()  # the kinds' tasks among the rest, as `dir()` shows them

#: Each name, and the module it comes from (imported when the name is first read).
_LAZY = {
    **dict.fromkeys(_KIND_TASKS, "worker.kind_tasks"),
    **dict.fromkeys(
        ("fill_token_pool", "get_balance", "ping", "report_solution"), "worker.solve_tasks"
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
