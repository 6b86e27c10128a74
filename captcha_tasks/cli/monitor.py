"""``captcha-tasks watch`` and ``captcha-tasks status``."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any, NoReturn

import click
import redis

from ..monitor.status import collect
from ..monitor.status import render as render_status
from ..monitor.watch import Result, ResultsCollector, consume
from ..monitor.watch import render as render_watch
from ..settings import get_settings, mask_url
from ..state import Keys, state_redis

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
    client = state_redis(settings)
    keys = Keys(settings.key_prefix)

    def lookup(task_id: str) -> str | None:
        # A solve that ended before this watch saw it received: its job record knows.
        try:
            value = client.hget(keys.job(task_id), "type")
        except redis.RedisError:
            return None
        return str(value) if value else None

    collector = ResultsCollector(window=window, type_lookup=lookup)
    out = sys.stdout
    tty = out.isatty()
    broker = mask_url(settings.broker_url)
    title = f"captcha-tasks watch   {broker}"
    drawn: dict[str, Any] = {"at": 0.0, "seen": None}

    def draw(force: bool = False) -> None:
        now = time.monotonic()
        if as_json or (not force and now - drawn["at"] < interval):
            return
        seen = (collector.finished, collector.retried, collector.in_progress)
        if not tty and not force and seen == drawn["seen"]:
            return  # a log file gets a frame per change, not one per second
        drawn.update(at=now, seen=seen)
        screen = render_watch(collector, title=title)
        out.write((_CLEAR if tty else "\n") + screen + "\n")
        out.flush()

    def on_result(result: Result) -> None:
        if as_json:
            out.write(result.to_json() + "\n")
            out.flush()

    def on_ready() -> None:
        click.echo(f"watching task events on {broker} (Ctrl-C to stop)", err=True)
        draw(force=True)

    def on_error(exc: Exception) -> None:
        if not drawn.get("down"):  # once per outage, not once per retry
            message = f"watch: no connection to the broker ({type(exc).__name__}); retrying"
            click.echo(message, err=True)
        drawn["down"] = True

    def on_tick() -> None:
        drawn["down"] = False
        draw()

    previous = signal.signal(signal.SIGTERM, _interrupt)
    reached: bool | None = None
    try:
        reached = consume(
            app,
            collector,
            on_result=on_result,
            on_ready=on_ready,
            on_tick=on_tick,
            on_error=on_error,
            limit=limit,
            timeout=timeout,
        )
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        # The reader went away (``watch --json | head``): stop quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    finally:
        signal.signal(signal.SIGTERM, previous)
    draw(force=True)
    elapsed = time.time() - collector.started_at
    click.echo(
        f"watch: {collector.finished} finished ({collector.solved} solved, "
        f"{collector.failed} failed) in {elapsed:.1f} s",
        err=True,
    )
    if limit is not None and reached is False:
        sys.exit(1)


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
    try:
        report = collect(
            settings,
            app,
            queues=list(queues),
            workers_timeout=workers_timeout,
            balance_timeout=balance_timeout,
        )
    except redis.RedisError as exc:
        raise click.ClickException(
            f"cannot read Redis at {mask_url(settings.state_url)}: {exc}"
        ) from None
    click.echo(json.dumps(report, indent=2) if as_json else render_status(report))
