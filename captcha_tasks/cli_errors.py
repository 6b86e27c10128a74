"""One way for the shared-state commands (``pool``, ``proxies``, ``sessions``) to fail."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click
import redis

from .errors import CaptchaTasksError
from .settings import get_settings, mask_url

__all__ = ["one_line_errors"]


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Known failures (ours, an unreachable Redis) as one line and exit status 1, not a
    traceback; the Redis URL is shown with its password masked."""
    try:
        yield
    except CaptchaTasksError as exc:
        raise click.ClickException(str(exc)) from None
    except redis.RedisError as exc:
        url = mask_url(get_settings().state_url)
        raise click.ClickException(f"shared state at {url}: {exc}") from None
