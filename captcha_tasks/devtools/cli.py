"""The developer commands: ``captcha-tasks dev`` (what ``make run`` runs) and
``captcha-tasks screenshot`` (``make screenshot``), loaded by the CLI only when run."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..settings import PROVIDERS, get_settings

__all__ = ["dev_command", "screenshot_command"]


@click.command("dev")
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
    "--demo-port",
    default=8766,
    show_default=True,
    type=int,
    help="Port for the demo site that fetch_page may fetch (another free port if taken).",
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
@click.option(
    "--provider",
    type=click.Choice(PROVIDERS),
    default="captchaai",
    show_default=True,
    help="The provider the sandbox plays and the workers use (CAPTCHA_TASKS_PROVIDER): "
    "2captcha-v2, anticaptcha, capsolver and capmonster speak the JSON task API.",
)
@click.option(
    "--providers",
    default="",
    metavar="A,B,...",
    help="Several providers at once, in order of preference (e.g. captchaai,capsolver): a "
    "sandbox plays each and the workers get CAPTCHA_TASKS_PROVIDERS with all of them, each "
    "named after its protocol (2captcha-v2 as 2captcha_v2). Replaces --provider.",
)
@click.option(
    "--no-smoke",
    is_flag=True,
    help="Skip the round trip at start (ping, get_balance, a reCAPTCHA v2 solve and a "
    "fetch_page of the demo site).",
)
def dev_command(
    workers: int,
    concurrency: int,
    sandbox_port: int,
    flower_port: int,
    demo_port: int,
    sandbox_threads: int,
    time_scale: float | None,
    run_dir: Path,
    provider: str,
    providers: str,
    no_smoke: bool,
) -> None:
    """Start Redis (if unreachable), the sandbox, workers and Flower; Ctrl-C stops all.

    This is what `make run` runs: the product end to end with no API key.
    """
    from .run import DevOptions, run_dev

    options = DevOptions(
        workers=workers,
        concurrency=concurrency,
        sandbox_port=sandbox_port,
        flower_port=flower_port,
        demo_port=demo_port,
        sandbox_threads=sandbox_threads,
        time_scale=time_scale,
        run_dir=run_dir,
        smoke=not no_smoke,
        provider=provider,
        providers=_providers(providers),
    )
    sys.exit(run_dev(options, get_settings()))


def _providers(value: str) -> tuple[str, ...]:
    """``--providers``' protocols, each a ``--provider`` value named once."""
    chosen = tuple(p.strip() for p in value.split(",") if p.strip())
    for name in chosen:
        if name not in PROVIDERS:
            raise click.BadParameter(
                f"{name!r} is not one of {', '.join(PROVIDERS)}", param_hint="'--providers'"
            )
    if len(set(chosen)) != len(chosen):
        raise click.BadParameter("name each provider once", param_hint="'--providers'")
    return chosen


@click.command("screenshot")
@click.option(
    "--out",
    default="docs",
    show_default=True,
    type=click.Path(path_type=Path),
    help="Where the PNG files go.",
)
def screenshot_command(out: Path) -> None:
    """Render Flower's task page and `captcha-tasks status` to PNG (headless Chromium).

    Starts the dev stack for the purpose and stops it afterwards.
    """
    from .screenshot import take_screenshots

    sys.exit(take_screenshots(out))
