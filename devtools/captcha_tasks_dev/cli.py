"""``captcha-tasks-dev``: the developer commands of this repository, beside the operator's
``captcha-tasks``. ``dev`` is what ``make run`` runs, ``screenshot`` what ``make
screenshot`` runs; ``sandbox`` (also installed on its own as ``captcha-tasks-sandbox``) and
``bench`` are imported only when run or asked for their ``--help``."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import click

from captcha_tasks.cli.errors import import_installed
from captcha_tasks.cli.main import LazyGroup, finite_floats
from captcha_tasks.errors import ConfigurationError
from captcha_tasks.settings import PROVIDERS, get_settings
from captcha_tasks.version import worker_version

__all__ = [
    "DEV_COMMANDS",
    "MissingDevPackage",
    "dev_command",
    "generate_command",
    "main",
    "require",
    "run",
    "screenshot_command",
]

#: The subcommands defined in other modules, imported only when one is run (or asked for
#: its ``--help``): name -> "module:function", as ``captcha-tasks``' own table.
DEV_COMMANDS: dict[str, str] = {
    "sandbox": "captcha_tasks_sandbox.cli:sandbox_command",
    "bench": "captcha_tasks_dev.bench.cli:bench_group",
}


@click.group(
    cls=LazyGroup,
    lazy_commands=DEV_COMMANDS,
    on_load=finite_floats,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(worker_version(), prog_name="captcha-tasks-dev")
def main() -> None:
    """captcha_tasks' development tools: the local stack, the sandbox, the benchmarks.

    The operator's commands are captcha-tasks'; these run from a checkout (make venv).
    """


class MissingDevPackage(click.ClickException):
    """A command needs a package of the [dev] set that is not installed: one line, exit
    status 2 (as for a configuration error)."""

    exit_code = 2


def require(module: str, command: str) -> ModuleType:
    """``module`` (a package of the repository's [dev] set), imported; one line and exit
    status 2 for ``command`` when it is not installed."""
    found = import_installed(module)
    if found is None:
        raise MissingDevPackage(
            f"captcha-tasks-dev {command}: needs {module.partition('.')[0]}, of the [dev] "
            "set: make venv (pip install -e '.[dev]')"
        )
    return found


@main.command("dev")
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


@main.command("screenshot")
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


@main.command("generate")
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing: exit 1, naming them, if generated files differ from the declarations.",
)
def generate_command(check: bool) -> None:
    """Write the modules generated from the captcha kinds' declarations.

    Each kind's solve task (captcha_tasks/worker/kind_tasks.py) and its aio twin
    (captcha_tasks/aio/kinds.py), from captcha_tasks/provider/kinds/.
    """
    from .generate import stale, write

    if check:
        behind = stale()
        for name in behind:
            click.echo(f"{name}: differs from the declarations (make generate)", err=True)
        sys.exit(1 if behind else 0)
    for name in write():
        click.echo(f"wrote {name}")


finite_floats(main)


def run() -> None:
    """The ``captcha-tasks-dev`` console command: configuration errors as one line, exit 2."""
    try:
        main(prog_name="captcha-tasks-dev")
    except ConfigurationError as exc:
        click.echo(f"captcha-tasks-dev: configuration error: {exc}", err=True)
        sys.exit(2)
