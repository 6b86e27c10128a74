"""The solver sandbox: a local in.php/res.php and JSON task API server for development,
tests and benchmarks (``SandboxConfig(protocol="json", dialect="capsolver")``).

::

    from captcha_tasks_sandbox import DEV_API_KEY, SandboxConfig, SandboxServer

    with SandboxServer(SandboxConfig(time_scale=0.01)) as sandbox:
        ...  # point the solver client at sandbox.url with DEV_API_KEY

Modules: ``config`` (what is emulated), ``protocol`` (submit parameters, error codes,
wire replies; ``submission`` and ``kinds`` hold the shared checks and the newer types),
``json_protocol`` / ``json_params`` / ``json_solutions`` / ``json_tasks`` / ``json_api``
(the JSON task API's dialects over the same state), ``answers`` (tokens, image and
coordinates answers), ``state`` (threads, billing, tokens, counters), ``server`` (HTTP),
``cli`` (``captcha-tasks-sandbox``), ``demo_site`` (a captcha-protected target site,
``SandboxConfig(demo_port=0)``).
"""

from __future__ import annotations

from .answers import coordinates_answer, image_answer
from .cli import sandbox_command
from .config import (
    DEFAULT_LATENCY,
    DEMO_SITEKEY,
    DEV_API_KEY,
    DEV_CAPSOLVER_KEY,
    JSON_DIALECTS,
    KINDS,
    TOKEN_TTL,
    SandboxConfig,
    dev_api_key,
)
from .demo_site import (
    CSRF_FIELD,
    DEMO_COUNTERS,
    SESSION_COOKIE,
    VALIDATION_COOKIE,
    VISITOR_COOKIE,
    DemoSite,
)
from .server import SandboxServer

__all__ = [
    "CSRF_FIELD",
    "DEFAULT_LATENCY",
    "DEMO_COUNTERS",
    "DEMO_SITEKEY",
    "DEV_API_KEY",
    "DEV_CAPSOLVER_KEY",
    "JSON_DIALECTS",
    "KINDS",
    "SESSION_COOKIE",
    "TOKEN_TTL",
    "VALIDATION_COOKIE",
    "VISITOR_COOKIE",
    "DemoSite",
    "SandboxConfig",
    "SandboxServer",
    "coordinates_answer",
    "dev_api_key",
    "image_answer",
    "sandbox_command",
]
