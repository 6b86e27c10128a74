"""``captcha-tasks watch`` and ``captcha-tasks status``."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn

import click
import redis

from ..monitor.status import collect
from ..monitor.status import render as render_status
from ..monitor.watch import Result, ResultsCollector
from ..monitor.watch import render as render_watch
from ..settings import Settings, get_settings, mask_url
from ..state import Keys, state_redis
from ..state.clock import local_time
from .errors import one_line_errors
from .events import consume

__all__ = ["status_command", "watch_command"]

_CLEAR = "\x1b[H\x1b[2J"  # cursor home, clear screen


def _interrupt(signum: int, frame: Any) -> NoReturn:
    raise KeyboardInterrupt  # SIGTERM stops a watch like Ctrl-C: summary included


@click.command("watch")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON line per finished task (for piping) instead of the screen.",
)
@click.option(
    "--limit", type=click.IntRange(min=1), default=None, help="Stop after N finished tasks."
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Stop after S seconds.",
)
@click.option(
    "--window",
    type=click.FloatRange(min=1),
    default=60.0,
    show_default=True,
    help="Seconds of the sliding window the rate is measured over.",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=1.0,
    show_default=True,
    help="Seconds between two redraws of the screen.",
)
def watch_command(
    as_json: bool, limit: int | None, timeout: float | None, window: float, interval: float
) -> None:
    """Count finished tasks live from Celery events: solved, failed, rate, by type,
    by error code and by source (api or pool).

    The screen is redrawn in place until Ctrl-C. --json prints one line per finished
    task instead: task_id, name, type, state, code, runtime, timestamp, source. Never
    prints task arguments, tokens or secrets. Exit status 1 if --limit was not reached
    before --timeout.
    """
    from ..worker.app import app

    settings = get_settings()
    collector = ResultsCollector(window=window, type_lookup=_job_type_lookup(settings))
    broker = mask_url(settings.broker_url)
    screen = _Screen(collector, broker=broker, as_json=as_json, interval=interval)
    reached = _watch(app, collector, screen, limit=limit, timeout=timeout)
    screen.draw(force=True)
    elapsed = local_time() - collector.started_at
    click.echo(
        f"watch: {collector.finished} finished ({collector.solved} solved, "
        f"{collector.failed} failed) in {elapsed:.1f} s",
        err=True,
    )
    if limit is not None and reached is False:
        sys.exit(1)


def _job_type_lookup(settings: Settings) -> Callable[[str], str | None]:
    client = state_redis(settings)
    keys = Keys(settings.key_prefix)

    def lookup(task_id: str) -> str | None:
        # A solve that ended before this watch saw it received: its job record knows.
        try:
            value = client.hget(keys.job(task_id), "type")
        except redis.RedisError:
            return None
        return str(value) if value else None

    return lookup


class _Screen:
    """What ``watch`` shows as events arrive: the screen redrawn every ``interval``
    (or one JSON line per finished task), and one line per broker outage on stderr."""

    def __init__(
        self, collector: ResultsCollector, *, broker: str, as_json: bool, interval: float
    ) -> None:
        self.collector = collector
        self.broker = broker
        self.as_json = as_json
        self.interval = interval
        self.title = f"captcha-tasks watch   {broker}"
        self.out = sys.stdout
        self.tty = self.out.isatty()
        self.drawn_at = 0.0
        self.drawn_seen: tuple[int, int, int] | None = None
        self.down = False

    def draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.as_json or (not force and now - self.drawn_at < self.interval):
            return
        collector = self.collector
        seen = (collector.finished, collector.retried, collector.in_progress)
        if not self.tty and not force and seen == self.drawn_seen:
            return  # a log file gets a frame per change, not one per second
        self.drawn_at, self.drawn_seen = now, seen
        screen = render_watch(collector, title=self.title)
        self.out.write((_CLEAR if self.tty else "\n") + screen + "\n")
        self.out.flush()

    def on_result(self, result: Result) -> None:
        if self.as_json:
            self.out.write(result.to_json() + "\n")
            self.out.flush()

    def on_ready(self) -> None:
        click.echo(f"watching task events on {self.broker} (Ctrl-C to stop)", err=True)
        self.draw(force=True)

    def on_error(self, exc: Exception) -> None:
        if not self.down:  # once per outage, not once per retry
            message = f"watch: no connection to the broker ({type(exc).__name__}); retrying"
            click.echo(message, err=True)
        self.down = True

    def on_tick(self) -> None:
        self.down = False
        self.draw()


def _watch(
    app: Any,
    collector: ResultsCollector,
    screen: _Screen,
    *,
    limit: int | None,
    timeout: float | None,
) -> bool | None:
    """Run :func:`consume` until it ends (whether ``limit`` was reached) or Ctrl-C /
    SIGTERM (None)."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return consume(
            app,
            collector,
            on_result=screen.on_result,
            on_ready=screen.on_ready,
            on_tick=screen.on_tick,
            on_error=screen.on_error,
            limit=limit,
            timeout=timeout,
        )
    except KeyboardInterrupt:
        return None
    except BrokenPipeError:
        # The reader went away (``watch --json | head``): stop quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    finally:
        signal.signal(signal.SIGTERM, previous)


@click.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--queue",
    "queues",
    multiple=True,
    help="A Celery queue to count (repeatable; default: the default queue).",
)
@click.option(
    "--workers-timeout",
    type=click.FloatRange(min=0),
    default=1.0,
    show_default=True,
    help="Seconds to wait for workers to answer a ping (0: do not ask).",
)
@click.option(
    "--balance-timeout",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    help="HTTP timeout of the balance request.",
)
def status_command(
    as_json: bool, queues: tuple[str, ...], workers_timeout: float, balance_timeout: float
) -> None:
    """One snapshot: thread budget, queues, token pools, proxy leases, session locks,
    workers and the provider balance."""
    from ..worker.app import app

    settings = get_settings()
    with one_line_errors():
        report = collect(
            settings,
            app,
            queues=list(queues),
            workers_timeout=workers_timeout,
            balance_timeout=balance_timeout,
        )
    click.echo(json.dumps(report, indent=2) if as_json else render_status(report))
