"""A database of its own for ``captcha-tasks-dev dev`` on a Redis that was already running.

A Redis answering at the default URL belongs to someone: a system service, a Docker
container, another checkout's ``make run``. The stack uses it rather than start a second
server, but not its database 0. Nothing a stack writes carries its name: Celery's queue
(``celery``), the results, the workers' node names (``dev1@host``) and the package's keys
are the same for every stack, so two stacks in one database take each other's tasks (one
stack's engine polls its own sandbox for a captcha the other's submitted:
``ERROR_WRONG_CAPTCHA_ID``; its worker fetches the other's demo site:
``TARGET_NOT_ALLOWED``), and their keys mix with whatever else lives there. A key prefix
would separate the package's own keys only; a database separates all of it, the broadcast
channels too (kombu prefixes them with the database number).

The stack takes the database marked with its checkout (host and run directory) if there
is one, else the first empty one from 1 up, and marks it with ``SET NX``: two stacks
starting at the same moment cannot both take it. A database holding anything else, or
another checkout's mark, is left alone.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import redis

from captcha_tasks.errors import ConfigurationError
from captcha_tasks.settings import mask_url
from captcha_tasks.state.keys import DEV_CLAIM_TTL, Keys

__all__ = ["checkout_mark", "claim_database", "with_database"]

#: Databases tried: Redis's default ``databases 16`` less database 0, the one every client
#: that names none uses. A server with fewer answers ``SELECT`` with an error: the end.
DATABASES = range(1, 16)


def checkout_mark(run_dir: Path) -> str:
    """What names one checkout's stack: this host and its run directory."""
    return f"{socket.gethostname()}:{os.path.abspath(run_dir)}"


def with_database(url: str, db: int) -> str:
    """``url`` with its path set to database ``db`` (query and credentials kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{db}"))


def claim_database(url: str, mark: str, keys: Keys) -> int:
    """The database of ``url``'s server this checkout's stack uses, marked as its own."""
    for db in DATABASES:
        with redis.Redis.from_url(
            with_database(url, db), socket_connect_timeout=2, socket_timeout=2
        ) as conn:
            try:
                owner = conn.get(keys.dev_checkout)
            except redis.ResponseError:  # "DB index is out of range": no more databases
                break
            if owner is not None and owner.decode() != mark:
                continue
            if owner is None and (
                conn.dbsize() != 0
                or not conn.set(keys.dev_checkout, mark, nx=True, ex=DEV_CLAIM_TTL)
            ):
                continue
            conn.expire(keys.dev_checkout, DEV_CLAIM_TTL)
            return db
    raise ConfigurationError(
        f"the Redis at {mask_url(url)} has no database this stack can use (each of 1-"
        f"{DATABASES[-1]} holds other data or another checkout's stack): set "
        "CAPTCHA_TASKS_REDIS_URL to the database to use"
    )
