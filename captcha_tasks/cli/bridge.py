"""``captcha-tasks bridge nats``: solve jobs from NATS subjects, results back on NATS."""

from __future__ import annotations

import asyncio
import logging
import signal

import click

from ..settings import get_settings

__all__ = ["bridge_group"]

_SUBJECT = click.STRING


@click.group()
def bridge_group() -> None:
    """Take solve jobs from a message bus and publish their results (docs/NATS.md)."""


@bridge_group.command("nats")
@click.option(
    "--url",
    required=True,
    envvar="NATS_URL",
    show_envvar=True,
    help="NATS server URL, e.g. nats://127.0.0.1:4222 (comma-separated for a cluster).",
)
@click.option(
    "--tasks",
    "tasks_subject",
    default="captcha.tasks",
    show_default=True,
    type=_SUBJECT,
    help="Subject the jobs are published on.",
)
@click.option(
    "--queue",
    default="captcha-workers",
    show_default=True,
    help="Queue group shared by the bridges (with --jetstream: the durable consumer's name).",
)
@click.option(
    "--results",
    "results_subject",
    default="captcha.results",
    show_default=True,
    type=_SUBJECT,
    help="Subject the results are published on.",
)
@click.option(
    "--jetstream",
    metavar="STREAM",
    default=None,
    help="Read jobs from this JetStream stream (created on --tasks if missing) and "
    "acknowledge each once its solve is queued. Without it: core NATS, where "
    "jobs in flight in a dying bridge are lost.",
)
@click.option(
    "--max-pending",
    default=1000,
    show_default=True,
    type=click.IntRange(1),
    help="Jobs in flight across the queue group before this bridge takes no more.",
)
@click.option(
    "--batch",
    default=64,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="JetStream messages fetched at once.",
)
@click.option(
    "--ack-wait",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0.5),
    help="JetStream: seconds before a message taken but not acknowledged is "
    "delivered again (to any bridge of the group).",
)
@click.option(
    "--poll-interval",
    default=0.25,
    show_default=True,
    type=click.FloatRange(min=0.01, max=60),
    help="Seconds between two reads of the results of the jobs in flight.",
)
@click.option(
    "--result-timeout",
    default=None,
    type=click.FloatRange(min=1),
    help="Seconds a job may wait for its result before a TIMEOUT error is "
    "published (default: CAPTCHA_TASKS_QUEUE_TIMEOUT + the longest solve "
    "deadline + 60).",
)
@click.option(
    "-l",
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    help="The bridge's log level (its lines go to stderr).",
)
def nats_command(
    url: str,
    tasks_subject: str,
    queue: str,
    results_subject: str,
    jetstream: str | None,
    max_pending: int,
    batch: int,
    ack_wait: float,
    poll_interval: float,
    result_timeout: float | None,
    log_level: str,
) -> None:
    """Solve the jobs published on --tasks; publish each result on --results.

    A job is JSON: {"task_id": "...", "method": "userrecaptcha", "sitekey": "...",
    "pageurl": "..."} plus other in.php parameters; a result is {"task_id": ...,
    "solution": ...} or {"task_id": ..., "error": ...}. Runs until SIGINT/SIGTERM.
    """
    from ..bridge.nats_bridge import BridgeOptions, NatsBridge, load_nats
    from ..worker.app import app
    from ..worker.bridge_queue import CeleryTaskQueue

    load_nats()  # a missing extra is one line, before anything starts
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(message)s")
    options = BridgeOptions(
        url=url,
        tasks_subject=tasks_subject,
        queue=queue,
        results_subject=results_subject,
        jetstream=jetstream,
        max_pending=max_pending,
        batch=batch,
        ack_wait=ack_wait,
        poll_interval=poll_interval,
        result_timeout=result_timeout,
    )
    bridge = NatsBridge(options, get_settings(), CeleryTaskQueue(app))

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await bridge.run(stop)

    asyncio.run(main())
