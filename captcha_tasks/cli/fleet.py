"""``captcha-tasks rollout`` and ``captcha-tasks check``."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import click

from ..settings import get_settings
from .errors import one_line_errors

__all__ = ["check_command", "rollout_command"]


def _drain_timeout(raw: str) -> tuple[float, str]:
    if raw.strip().lower() == "auto":
        from ..fleet.rollout import DRAIN_CEILINGS, auto_drain_timeout
        from ..state import Keys, state_redis

        settings = get_settings()
        client = state_redis(settings)
        keys = Keys(settings.key_prefix)
        with one_line_errors("--drain-timeout auto", "give the seconds instead"):
            recent = {
                kind: [float(v) for v in client.lrange(keys.timing(kind), 0, -1)]
                for kind in DRAIN_CEILINGS
            }
        return auto_drain_timeout(recent)
    try:
        value = float(raw)
    except ValueError:
        raise click.BadParameter("seconds or 'auto'", param_hint="--drain-timeout") from None
    if not math.isfinite(value) or value < 0:
        raise click.BadParameter("must be finite and not negative", param_hint="--drain-timeout")
    return value, "given"


@click.command()
@click.option("--to", "to_version", required=True, help="The version to roll the fleet to.")
@click.option(
    "--restart",
    "restart_template",
    required=True,
    help="Shell command that restarts one worker on a version: {worker} and {version} "
    "are replaced (shell-quoted), e.g. 'systemctl restart captcha@{worker}' or "
    "'deploy/restart.sh {worker} {version}'. Also used with the old version to roll back.",
)
@click.option(
    "--max-unavailable",
    default=1,
    show_default=True,
    type=click.IntRange(1),
    help="Workers drained and restarted at the same time.",
)
@click.option(
    "--drain-timeout",
    "drain_raw",
    default="auto",
    show_default=True,
    help="Seconds to wait for a worker's tasks to finish, or 'auto' (slowest "
    "captcha type seen recently + 10 s, at most 120 s).",
)
@click.option(
    "--health-check",
    type=click.Choice(["balance", "solve"]),
    default="balance",
    show_default=True,
    help="Gate each restarted worker with getbalance, or also a real solve on a test sitekey.",
)
@click.option(
    "--abort-threshold",
    default=0.25,
    show_default=True,
    type=click.FloatRange(0.0, 1.0),
    help="Fraction of the fleet that may be unreachable (no answer to control "
    "commands; left on the old version) before the rollout aborts and rolls every "
    "updated worker back. A failed gate always aborts.",
)
@click.option(
    "--worker",
    "workers",
    multiple=True,
    help="Only these workers (repeatable; default: every worker that answers).",
)
@click.option(
    "--start-timeout",
    default=120.0,
    show_default=True,
    type=click.FloatRange(1),
    help="Seconds for a restarted worker to answer with the new version.",
)
@click.option(
    "--health-timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(1),
    help="Seconds for the health check's tasks.",
)
@click.option(
    "--restart-timeout",
    default=300.0,
    show_default=True,
    type=click.FloatRange(1),
    help="Seconds the restart command may run.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the summary as JSON on stdout (progress goes to stderr).",
)
def rollout_command(
    to_version: str,
    restart_template: str,
    max_unavailable: int,
    drain_raw: str,
    health_check: str,
    abort_threshold: float,
    workers: tuple[str, ...],
    start_timeout: float,
    health_timeout: float,
    restart_timeout: float,
    as_json: bool,
) -> None:
    """Roll every worker to a new version, a few at a time, without losing a task.

    Per worker: stop consuming, drain, run the restart command, wait for the new
    version, health-check it alone, resume consuming. A failed gate (restart,
    version, health) rolls every updated worker back to its old version and stops.
    Unreachable workers are left alone up to the abort threshold. Exit status 0 when
    every worker is on the new version, 1 otherwise.
    """
    from ..fleet.rollout import Rollout, RolloutOptions, shell_restarter, summary_json
    from ..worker.app import app
    from ..worker.control import CeleryControlPlane

    try:
        restart_template.format(worker="w", version="v")
    except (KeyError, IndexError, ValueError, AttributeError, TypeError) as exc:
        raise click.BadParameter(
            f"only {{worker}} and {{version}} may be used ({exc})", param_hint="--restart"
        ) from None
    drain_timeout, drain_source = _drain_timeout(drain_raw)
    options = RolloutOptions(
        to_version=to_version,
        max_unavailable=max_unavailable,
        drain_timeout=drain_timeout,
        drain_timeout_source=drain_source,
        health_check=health_check,
        abort_threshold=abort_threshold,
        start_timeout=start_timeout,
        workers=workers,
    )

    def echo(line: str) -> None:
        click.echo(line, err=as_json)

    plane = CeleryControlPlane(app, health_timeout=health_timeout)
    rollout = Rollout(
        plane, shell_restarter(restart_template, timeout=restart_timeout), options, echo=echo
    )
    summary = rollout.run()
    if as_json:
        click.echo(summary_json(summary))
    sys.exit(0 if summary["status"] == "completed" else 1)


@click.command()
@click.option("--worker", default=None, help="This worker's node name (celery@host).")
@click.option(
    "--file",
    "path",
    default=None,
    type=click.Path(path_type=Path),
    help="Read the beat from this file (CAPTCHA_TASKS_HEARTBEAT_FILE of the worker).",
)
@click.option(
    "--max-age",
    default=30.0,
    show_default=True,
    type=click.FloatRange(0.1),
    help="Seconds after which a beat is stale.",
)
@click.option(
    "--timeout",
    default=3.0,
    show_default=True,
    type=click.FloatRange(0.1),
    help="Seconds for the broker to answer PING.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def check_command(
    worker: str | None, path: Path | None, max_age: float, timeout: float, as_json: bool
) -> None:
    """Liveness/readiness probe: a fresh worker heartbeat and a reachable broker.

    With --file (the worker's CAPTCHA_TASKS_HEARTBEAT_FILE) or --worker, that worker;
    with neither, any worker of the fleet. Exit status 0 when fresh, 1 when not.
    No remote-control round trip (unlike `celery inspect ping`).
    """
    from ..fleet.heartbeat import probe

    result = probe(get_settings(), worker=worker, path=path, max_age=max_age, timeout=timeout)
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2))
    else:
        for beat in result.beats:
            click.echo(
                f"{beat['worker']}  {beat['version']}  pid {beat['pid']}  "
                f"beat {beat['age_seconds']:.1f} s ago"
            )
        for problem in result.problems:
            click.echo(f"problem: {problem}", err=True)
        click.echo(f"broker {result.broker}; {'ok' if result.ok else 'NOT OK'}")
    sys.exit(0 if result.ok else 1)
