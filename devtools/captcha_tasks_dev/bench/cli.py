"""``captcha-tasks-dev bench``: benchmarks that start their own Redis, sandbox and workers."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import click

from captcha_tasks.errors import CaptchaTasksError
from captcha_tasks.settings import PROVIDERS

from ..cli import require
from .altcha import EVERY, AltchaOptions, format_altcha_report, run_altcha
from .callbacks import format_callback_report, run_callback_bench
from .pages import PagesOptions, format_pages_report, run_pages
from .plot import write_plot
from .routing import RoutingOptions, format_routing_report, run_routing
from .solve import BASELINES, BenchOptions, format_report, run_bench

__all__ = ["bench_group", "format_report"]

Options = TypeVar("Options", BenchOptions, PagesOptions, AltchaOptions, RoutingOptions)
Decorator = Callable[[Callable[..., None]], Callable[..., None]]
#: An option of a benchmark: its declarations (space-separated), its type (None: a flag)
#: and its help.
Spec = tuple[str, "click.ParamType[Any, Any] | None", str]


def _options(
    defaults: BenchOptions | PagesOptions | AltchaOptions | RoutingOptions, *specs: Spec
) -> Decorator:
    """These options, in this order; each one's default (shown in ``--help``) is the field
    of ``defaults`` that its first declaration names."""

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        for decls, kind, text in reversed(specs):
            names = decls.split()
            if kind is None:
                option = click.option(*names, is_flag=True, help=text)
            else:
                default = getattr(defaults, names[0].lstrip("-").replace("-", "_"))
                option = click.option(
                    *names, default=default, show_default=True, type=kind, help=text
                )
            command = option(command)
        return command

    return decorate


def _log_dir_option(text: str) -> Decorator:
    return click.option(
        "--log-dir", type=click.Path(file_okay=False, path_type=Path), default=None, help=text
    )


_JSON_OPTION = click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON document instead."
)


def _run_and_print(
    run: Callable[[Options, Callable[[str], None]], dict[str, Any]],
    options: Options,
    format_text: Callable[[dict[str, Any]], str],
    as_json: bool,
) -> dict[str, Any]:
    """Run a benchmark (progress to stderr), then print its report (text or JSON)."""
    # CPU times come from psutil (the [dev] set): one line before anything starts.
    require("psutil", "bench")
    try:
        report = run(options, lambda m: click.echo(f"[bench] {m}", err=True))
    except KeyboardInterrupt:
        click.echo("[bench] interrupted; every process it started is stopped", err=True)
        sys.exit(130)
    except (CaptchaTasksError, TimeoutError) as exc:
        raise click.ClickException(f"{exc} (every process it started is stopped)") from None
    click.echo(json.dumps(report, indent=2) if as_json else format_text(report))
    return report


@click.group("bench", context_settings={"help_option_names": ["-h", "--help"]})
def bench_group() -> None:
    """Benchmarks: each starts its own redis-server, sandbox and workers, and stops them."""


@bench_group.command("solve")
@_options(
    BenchOptions(),
    ("--threads", click.IntRange(1, 1000), "T: the plan's threads (sandbox and budget)."),
    (
        "--latency",
        click.FloatRange(min=0.05),
        "L: real seconds of one solve at the sandbox; time scale = L/15.",
    ),
    ("--jitter", click.FloatRange(0.0, 0.95), "Solve times vary by a factor in [1-J, 1+J]."),
    ("--solves", click.IntRange(1, 100_000), "N: solves measured for captcha_tasks."),
    ("--workers", click.IntRange(1, 16), "celery worker processes of captcha_tasks and of diy."),
    ("--baseline-solves", click.IntRange(1, 100_000), "Solves measured for the seeds' design."),
    (
        "--baseline",
        click.Choice(BASELINES),
        "The columns beside captcha_tasks: diy (the official 2captcha-python client in a "
        "Celery task, -P threads with T threads over the workers, acks late, prefetch 1, "
        "its polling scaled; N solves, classic providers only), seeds (the seeds' design), "
        "both, or none. With diy every column's sandbox serves https.",
    ),
    ("--skip-baseline", None, "Measure captcha_tasks only (as --baseline none)."),
    ("--warmup", click.IntRange(0, 1000), "Warm-up solves per design, not measured."),
    ("--no-batch", None, "Poll one by one, as for a provider that refuses ids= batch reads."),
    (
        "--split-redis",
        None,
        "captcha_tasks' broker, results and state each on a redis-server of its own: each "
        "role's commands and CPU per solve, and the solves a second one core of it sustains.",
    ),
    (
        "--baseline-first-wait",
        click.FloatRange(min=0.0),
        "Unscaled seconds the seeds' design sleeps before its first poll "
        "(their code: 5; 2Captcha's docs advise 15-20 for reCAPTCHA v2).",
    ),
)
@_log_dir_option(
    "Keep worker, sandbox and Redis logs here (default: a temporary "
    "directory, removed unless the run fails)."
)
@_JSON_OPTION
# Last, after --json: the options that predate it keep their place in --help.
@click.option(
    "--provider",
    type=click.Choice(PROVIDERS),
    default=BenchOptions().provider,
    show_default=True,
    help="The provider captcha_tasks talks to: its sandbox plays it (protocol and dialect) "
    "and the workers use it. The seeds' design speaks only the classic protocol: it runs "
    "against a classic captchaai sandbox.",
)
@click.option(
    "--noop",
    type=click.IntRange(0, 100_000),
    default=BenchOptions().noop,
    show_default=True,
    help="Plain Celery no-op tasks (captcha_tasks.ping) run through the same workers after "
    "the solves: the CPU a task costs Celery itself, beside a solve's (0: none).",
)
@click.option(
    "--callbacks",
    is_flag=True,
    help="Instead: captcha_tasks collecting by polls, by callbacks the sandbox pushes, and "
    "by callbacks with --callback-drop-rate of them dropped (reads per solve, collection "
    "delay, solves lost).",
)
@click.option(
    "--traces",
    is_flag=True,
    help="Instead: captcha_tasks with OpenTelemetry off and on (every span exported over "
    "OTLP/HTTP to a receiver the run holds): worker CPU per solve each way.",
)
@click.option(
    "--callback-drop-rate",
    type=click.FloatRange(0.0, 1.0),
    default=0.2,
    show_default=True,
    help="With --callbacks: the fraction of callbacks the sandbox never sends in the third run.",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also draw throughput over time of each design to this PNG (matplotlib).",
)
def solve_command(
    as_json: bool,
    callbacks: bool,
    traces: bool,
    callback_drop_rate: float,
    plot: Path | None,
    **options: Any,
) -> None:
    """Throughput, latency overhead, provider traffic and CPU per solve: captcha_tasks
    against what a user writes instead (the official client in a Celery task) and the
    seeds' blocking design, each on a fresh Redis and sandbox with the same T and L; the
    report ends with captcha_tasks' figures over each other column's, as ratios.

    Progress goes to stderr; the report (or --json) to stdout. Ctrl-C stops every
    process the run started.
    """
    if callbacks or traces:
        mode = "traces" if traces else "callbacks"
        run = partial(run_callback_bench, drop_rate=callback_drop_rate, mode=mode)
        _run_and_print(run, BenchOptions(**options), format_callback_report, as_json)
        return
    report = _run_and_print(run_bench, BenchOptions(**options), format_report, as_json)
    if plot is not None:
        write_plot(report, plot)
        click.echo(f"[bench] plot written to {plot}", err=True)


@bench_group.command("pages")
@_options(
    PagesOptions(),
    ("--workers", click.IntRange(1, 16), "celery worker processes (nodes), each -P prefork."),
    ("--concurrency -c", click.IntRange(1, 64), "Pool size of each worker (celery worker -c)."),
    ("--pages", click.IntRange(1, 100_000), "Pages enqueued at once per run."),
    (
        "--threads",
        click.IntRange(1, 1000),
        "T: the plan's threads (sandbox --threads and CAPTCHA_TASKS_THREADS).",
    ),
    (
        "--time-scale",
        click.FloatRange(min=0.001),
        "CAPTCHA_TASKS_TIME_SCALE of the sandbox and workers (reCAPTCHA v2: 15 s x this).",
    ),
)
@_log_dir_option(
    "Keep worker, sandbox and Redis logs here (default: a temporary directory, "
    "removed unless a run fails, a page fails or sharing spends too many solves)."
)
@_JSON_OPTION
def pages_command(as_json: bool, **options: Any) -> None:
    """Pages behind a reCAPTCHA challenge: fetch_page with shared cookies and the session
    lock, against fetch_page(isolated=True), each run on a fresh Redis, sandbox and
    demo site: pages fetched, solves spent, wall time, worker CPU per page.

    Progress goes to stderr; the report (or --json) to stdout. Ctrl-C stops every
    process the run started.
    """
    _run_and_print(run_pages, PagesOptions(**options), format_pages_report, as_json)


@bench_group.command("routing")
@_options(
    RoutingOptions(),
    ("--pages", click.IntRange(1, 100_000), "Pages per run with A's tokens refused 70%."),
    ("--after", click.IntRange(0, 100_000), "Pages per run after A's are refused 5% too."),
    ("--in-flight", click.IntRange(1, 256), "Pages open at once (the scraper's concurrency)."),
    ("--workers", click.IntRange(1, 16), "celery worker processes, each -P prefork."),
    ("--concurrency -c", click.IntRange(1, 64), "Pool size of each worker (celery worker -c)."),
    (
        "--time-scale",
        click.FloatRange(min=0.001),
        "CAPTCHA_TASKS_TIME_SCALE (reCAPTCHA v2: 15 s x this); the acceptance window is "
        "900 s x this (at least 60 s).",
    ),
    ("--jitter", click.FloatRange(0.0, 0.95), "Solve times vary by a factor in [1-J, 1+J]."),
    ("--window", click.IntRange(1, 10_000), "Pages per figure of A's share of first solves."),
    ("--seed", click.INT, "Seed of the sandboxes' random choices (the site's refusals)."),
)
@_log_dir_option(
    "Keep worker, client and Redis logs here (default: a temporary directory, removed "
    "unless a page failed otherwise than refused)."
)
@_JSON_OPTION
def routing_command(as_json: bool, **options: Any) -> None:
    """Order routing (A first), with one token per page and with the default attempts,
    against cost routing (CAPTCHA_TASKS_ROUTING=cost), two
    providers: A at $1.00 per 1000 whose tokens the demo site refuses 70% of the time, B
    at $2.00 refused 5%; isolated fetch_page runs, then the site stops refusing A's
    tokens more than B's. Spend per accepted page, pages per minute, A's share of first
    solves over the run, and how soon cost routing goes back to A.

    Progress goes to stderr; the report (or --json) to stdout.
    """
    _run_and_print(run_routing, RoutingOptions(**options), format_routing_report, as_json)


@bench_group.command("altcha")
@_options(
    AltchaOptions(),
    ("--max-number", click.IntRange(1, 100_000_000), "v1 challenges' maxnumber."),
    ("--solves", click.IntRange(1, 100_000), "v1 challenges each column solves."),
    ("--seconds", click.FloatRange(0.01, 600), "v2: seconds of search each column times."),
    ("--seed", click.INT, "Seed of v1's random numbers."),
)
@click.option(
    "--algorithm",
    "algorithms",
    multiple=True,
    type=click.Choice(EVERY),
    help="Only this algorithm (repeatable; default: every one the library offers).",
)
@_JSON_OPTION
def altcha_command(as_json: bool, algorithms: tuple[str, ...], **options: Any) -> None:
    """solve_altcha's proof of work on this machine: solves per second per core for every
    algorithm the official altcha library offers (v1's three hashes, v2's eight key
    derivations at the library's defaults), beside the library's own solver on the same
    challenges. No Redis, worker or provider: the solve is the worker's own.

    Progress goes to stderr; the report (or --json) to stdout.
    """
    run_options = AltchaOptions(algorithms=algorithms, **options)
    _run_and_print(run_altcha, run_options, format_altcha_report, as_json)
