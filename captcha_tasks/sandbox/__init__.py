"""The solver sandbox: a local in.php/res.php server for development, tests and benchmarks.

::

    from captcha_tasks.sandbox import DEV_API_KEY, SandboxConfig, SandboxServer

    with SandboxServer(SandboxConfig(time_scale=0.01)) as sandbox:
        ...  # point the solver client at sandbox.url with DEV_API_KEY

Modules: ``config`` (what is emulated), ``protocol`` (submit parameters, error codes,
wire replies), ``answers`` (tokens, image answers), ``state`` (threads, billing,
tokens, counters), ``server`` (HTTP), ``cli`` (``captcha-tasks sandbox``).
"""

from __future__ import annotations

from .answers import image_answer
from .cli import sandbox_command
from .config import DEFAULT_LATENCY, DEV_API_KEY, KINDS, TOKEN_TTL, SandboxConfig
from .server import SandboxServer

__all__ = [
    "DEFAULT_LATENCY",
    "DEV_API_KEY",
    "KINDS",
    "TOKEN_TTL",
    "SandboxConfig",
    "SandboxServer",
    "image_answer",
    "sandbox_command",
]
