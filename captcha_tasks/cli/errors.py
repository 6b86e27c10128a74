"""How commands fail in one line: on known errors (ours, an unreachable Redis), and
when a command's optional package is missing. Every command reports them through here,
but ``bridge nats``, whose missing client is :func:`~captcha_tasks.bridge.nats_bridge.load_nats`'
:class:`ConfigurationError` (exit 2 too)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import IO, Any

import click
import redis

from ..errors import CaptchaTasksError
from ..settings import get_settings, mask_url

__all__ = [
    "EXTRA_OF_MODULE",
    "MissingExtra",
    "import_installed",
    "one_line_errors",
    "require_extra",
]

#: Top-level modules of optional packages -> the extra of ``captcha_tasks`` that installs
#: them (``[project.optional-dependencies]`` in pyproject.toml).
EXTRA_OF_MODULE = {
    "nats": "nats",
    "scrapy": "scrapy",
    "playwright": "playwright",
    "mcp": "mcp",
}


@contextmanager
def one_line_errors(doing: str = "", advice: str = "") -> Iterator[None]:
    """Known failures (ours, an unreachable Redis) as one line and exit status 1, not a
    traceback; the Redis URL is shown with its password masked. ``doing`` starts the
    line (``--drain-timeout auto: ...``), ``advice`` ends it (``...; give the seconds``)."""
    try:
        yield
    except CaptchaTasksError as exc:
        raise click.ClickException(_line(doing, str(exc), advice)) from None
    except redis.RedisError as exc:
        url = mask_url(get_settings().state_url)
        raise click.ClickException(_line(doing, f"shared state at {url}: {exc}", advice)) from None


def _line(doing: str, what: str, advice: str) -> str:
    line = f"{doing}: {what}" if doing else what
    return f"{line}; {advice}" if advice else line


class MissingExtra(click.ClickException):
    """A command needs an optional package that is not installed: one line naming the
    extra to install, exit status 2 (as for a configuration error)."""

    exit_code = 2

    def __init__(self, command: str, extra: str) -> None:
        super().__init__(
            f"captcha-tasks {command}: needs the {extra} extra: "
            f"pip install 'captcha_tasks[{extra}]'"
        )
        self.command = command
        self.extra = extra

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(self.format_message(), err=file is None, file=file)


def import_installed(module: str) -> ModuleType | None:
    """``module``, imported; None when its top-level package is not installed (anything
    else its import fails on is raised: a real error, not a missing package)."""
    top = module.partition(".")[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.partition(".")[0] != top:
            raise
        return None


def require_extra(module: str, command: str) -> ModuleType:
    """``module`` (an optional package's), imported; :class:`MissingExtra` for
    ``command`` when it is not installed."""
    found = import_installed(module)
    if found is None:
        raise MissingExtra(command, EXTRA_OF_MODULE[module.partition(".")[0]])
    return found
