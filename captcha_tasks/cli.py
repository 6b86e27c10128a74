"""The ``captcha-tasks`` command."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import click

from .errors import ConfigurationError
from .settings import get_settings
from .version import worker_version

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(worker_version(), prog_name="captcha-tasks")
def main() -> None:
    """Run CAPTCHA solving at scale on Celery and Redis.

    Workers are plain Celery workers: celery -A captcha_tasks worker -c 4.
    """


@main.command()
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 16),
    help="How many worker processes (celery worker) to start.",
)
@click.option(
    "--concurrency",
    "-c",
    default=2,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Pool size of each worker (celery worker -c).",
)
@click.option(
    "--sandbox-port",
    default=8765,
    show_default=True,
    type=int,
    help="Port for the solver sandbox (another free port if taken).",
)
@click.option(
    "--flower-port",
    default=5555,
    show_default=True,
    type=int,
    help="Port for Flower (another free port if taken).",
)
@click.option(
    "--sandbox-threads",
    default=5,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="Thread limit of the sandbox plan, also used as CAPTCHA_TASKS_THREADS.",
)
@click.option(
    "--time-scale",
    type=click.FloatRange(min=0.001),
    default=None,
    help="Multiply solver timings (default: CAPTCHA_TASKS_TIME_SCALE, else 0.2).",
)
@click.option(
    "--run-dir",
    default=".run",
    show_default=True,
    type=click.Path(path_type=Path),
    help="Where logs and the local Redis data go.",
)
@click.option("--no-smoke", is_flag=True, help="Skip the ping + get_balance round trip at start.")
def dev(
    workers: int,
    concurrency: int,
    sandbox_port: int,
    flower_port: int,
    sandbox_threads: int,
    time_scale: float | None,
    run_dir: Path,
    no_smoke: bool,
) -> None:
    """Start Redis (if unreachable), the sandbox, workers and Flower; Ctrl-C stops all.

    This is what `make run` runs: the product end to end with no API key.
    """
    from .dev.run import DevOptions, run_dev

    options = DevOptions(
        workers=workers,
        concurrency=concurrency,
        sandbox_port=sandbox_port,
        flower_port=flower_port,
        sandbox_threads=sandbox_threads,
        time_scale=time_scale,
        run_dir=run_dir,
        smoke=not no_smoke,
    )
    sys.exit(run_dev(options, get_settings()))


@main.command()
@click.option(
    "--out",
    default="docs",
    show_default=True,
    type=click.Path(path_type=Path),
    help="Where the PNG files go.",
)
def screenshot(out: Path) -> None:
    """Render Flower's task page and `captcha-tasks status` to PNG (headless Chromium).

    Starts the dev stack for the purpose and stops it afterwards.
    """
    from .dev.screenshot import take_screenshots

    sys.exit(take_screenshots(out))


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def settings(as_json: bool) -> None:
    """Show the settings read from the environment (secrets masked)."""
    described = get_settings().describe()
    if as_json:
        click.echo(json.dumps(described, indent=2))
        return
    for name, value in described.items():
        click.echo(f"{name:16} {value}")


def _add_subcommands() -> None:
    from .bench.cli import bench_group
    from .bridge.cli import bridge_group
    from .fleet.cli import check_command, rollout_command
    from .monitor.cli import status_command, watch_command
    from .sandbox import sandbox_command
    from .session.cookies_cli import sessions_group
    from .session.proxies_cli import proxies_group
    from .solving.pool_cli import pool_group

    main.add_command(sandbox_command, "sandbox")
    main.add_command(bench_group, "bench")
    main.add_command(sessions_group, "sessions")
    main.add_command(pool_group, "pool")
    main.add_command(proxies_group, "proxies")
    main.add_command(watch_command, "watch")
    main.add_command(status_command, "status")
    main.add_command(rollout_command, "rollout")
    main.add_command(check_command, "check")
    main.add_command(bridge_group, "bridge")


_add_subcommands()


class _FiniteFloat(click.types.FloatParamType):
    """A float option that refuses nan and inf (``float()`` reads both)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


class _FiniteFloatRange(click.FloatRange):
    """A FloatRange that refuses nan (which passes every bound: each comparison with it
    is false) and inf."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


def _finite_floats(command: click.Command) -> None:
    """Every float option of every subcommand refuses nan and inf."""
    for param in command.params:
        kind = param.type
        if isinstance(kind, click.FloatRange) and not isinstance(kind, _FiniteFloatRange):
            param.type = _FiniteFloatRange(
                kind.min, kind.max, min_open=kind.min_open, max_open=kind.max_open, clamp=kind.clamp
            )
        elif type(kind) is click.types.FloatParamType:
            param.type = _FiniteFloat()
    for sub in getattr(command, "commands", {}).values():
        _finite_floats(sub)


_finite_floats(main)


def run() -> None:
    """Entry point that turns configuration errors into one clear line and exit code 2."""
    try:
        main(standalone_mode=True)
    except ConfigurationError as exc:
        click.echo(f"captcha-tasks: configuration error: {exc}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    run()
