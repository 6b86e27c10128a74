"""``captcha-tasks acl``: the Redis ACL users, generated (:mod:`captcha_tasks.state.acl`)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import click

from ..settings import get_settings
from ..state.acl import render

__all__ = ["acl_command"]

_USERS = ("default", "worker", "monitor")


def _database(url: str) -> int:
    """The database number of a ``redis://host:port/N`` URL (0 without one)."""
    path = urlsplit(url).path.strip("/")
    return int(path) if path.isdigit() else 0


def _passwords(specs: tuple[str, ...]) -> dict[str, str]:
    passwords = {}
    for spec in specs:
        user, sep, path = spec.partition("=")
        if not sep or user not in _USERS or not path:
            raise click.BadParameter(
                f"{spec!r}: expected USER=PATH, USER one of {', '.join(_USERS)}",
                param_hint="--password-file",
            )
        try:
            text = Path(path).read_text(encoding="utf-8").rstrip("\r\n")
        except OSError as exc:
            message = f"{path}: {exc.strerror}"
            raise click.BadParameter(message, param_hint="--password-file") from None
        if not text:
            raise click.BadParameter(f"{path} is empty", param_hint="--password-file")
        passwords[user] = text
    return passwords


@click.command("acl")
@click.option(
    "--prefix", default=None, help="Key prefix  [default: CAPTCHA_TASKS_KEY_PREFIX, else ct:]"
)
@click.option(
    "--db",
    type=click.IntRange(min=0),
    default=None,
    help="Database of the broker (kombu names its channels after it)  [default: the broker URL's]",
)
@click.option(
    "--queue",
    "queues",
    multiple=True,
    help="A task queue of the workers (repeatable)  [default: the default queue, celery]",
)
@click.option(
    "--password-file",
    "password_files",
    multiple=True,
    metavar="USER=PATH",
    help="The password of USER (default, worker, monitor), stored as its SHA-256; "
    "without it, a placeholder Redis refuses to load.",
)
def acl_command(
    prefix: str | None, db: int | None, queues: tuple[str, ...], password_files: tuple[str, ...]
) -> None:
    """Print the Redis ACL file: the administrator (default), a worker user with exactly
    the commands, keys and channels the product uses, and a read-only monitor user for
    status, watch and check. Load it with redis-server's aclfile directive."""
    settings = get_settings()
    text = render(
        settings.key_prefix if prefix is None else prefix,
        db=_database(settings.broker_url) if db is None else db,
        queues=list(dict.fromkeys(queues)) or ["celery"],
        passwords=_passwords(password_files),
    )
    click.echo(text, nl=False)
