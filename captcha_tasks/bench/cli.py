"""``captcha-tasks bench``: benchmarks that start their own Redis, sandbox and workers."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ..errors import CaptchaTasksError
from .pages import PagesOptions, format_pages_report, run_pages
from .solve import BenchOptions, run_bench

__all__ = ["bench_group", "format_report"]

_DEFAULTS = BenchOptions()
_PAGES = PagesOptions()

#: (label, metric key, format) rows of the report; a key None is a section title.
_ROWS: list[tuple[str, str | None, str]] = [
    ("throughput", None, ""),
    ("solved / tasks", "solved_of_tasks", "s"),
    ("failures (task raised)", "failures", "d"),
    ("not finished by the deadline", "unfinished", "d"),
    ("makespan, first enqueue -> last result (s)", "makespan_seconds", ".2f"),
    ("solves per second", "solves_per_second", ".2f"),
    # Steady state: while requests waited for a thread, the share of the plan's
    # thread-seconds the provider spent solving. 1.0 = every thread busy all the time.
    (
        "throughput / (T/L), steady state (backlog waiting)",
        "sandbox_utilisation_backlogged",
        ".3f",
    ),
    ("throughput / (T/L), whole run incl. ramp-up and tail", "fraction_of_t_over_l", ".3f"),
    (
        "  bound for the whole run: zero overhead, same latencies",
        "ideal_fraction_for_these_latencies",
        ".3f",
    ),
    ("sandbox utilisation (solver s / (T x makespan))", "sandbox_utilisation", ".3f"),
    ("time (s; p50 / p95)", None, ""),
    ("enqueue all N tasks (s)", "enqueue_seconds", ".3f"),
    ("first enqueue -> 1st / T-th submit (s)", "ramp_up", "s"),
    ("end to end - solver latency", "e2e_minus_latency", "pair"),
    ("  enqueue -> submitted at the sandbox", "enqueue_to_submit", "pair"),
    ("  enqueue -> admitted (ours: job record)", "enqueue_to_admitted", "pair"),
    ("  slot refill gap (thread freed -> next submit)", "slot_refill_gap", "pair"),
    ("result later than in a zero-overhead schedule", "lateness_vs_ideal", "pair"),
    ("collection delay (ready -> result stored)", "collection_delay", "pair"),
    ("  ready -> answered by res.php", "ready_to_answered", "pair"),
    ("  answered -> result stored", "answered_to_result", "pair"),
    ("mean solver latency at the sandbox", "solver_latency_mean", ".3f"),
    ("provider traffic", None, ""),
    ("res.php polls per solve (polls / solved)", "polls_per_solve", ".3f"),
    ("times a captcha was asked for (mean / max)", "captcha_polled", "pairn"),
    ("submits per task", "submits_per_task", ".3f"),
    ("duplicates", "duplicates", "d"),
    ("no_slot answers", "no_slot", "d"),
    ("max in flight / T", "in_flight_of_t", "s"),
    ("CPU", None, ""),
    ("worker CPU seconds per solve", "worker_cpu_per_solve", ".4f"),
    ("worker CPU seconds (all worker processes)", "worker_cpu_seconds", ".2f"),
    ("redis-server / sandbox / harness CPU seconds", "other_cpu", "s"),
    ("machine CPU busy during the run (all cores)", "machine_cpu_busy", ".0%"),
    ("workers x pool size", "pools", "s"),
]


def _cell(metrics: dict[str, Any], key: str, fmt: str) -> str:
    def one(value: Any, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    if key == "solved_of_tasks":
        return f"{metrics['completed']} / {metrics['tasks']}"
    if key == "in_flight_of_t":
        return f"{metrics['max_in_flight']} / {metrics['threads']}"
    if key == "other_cpu":
        return " / ".join(
            one(metrics[k], ".2f")
            for k in ("redis_cpu_seconds", "sandbox_cpu_seconds", "harness_cpu_seconds")
        )
    if key == "ramp_up":
        return f"{one(metrics['first_submit_seconds'], '.3f')} / " + one(
            metrics["t_th_submit_seconds"], ".3f"
        )
    if key == "pools":
        sizes = {str(size) for size in metrics["concurrency"]}
        shown = sizes.pop() if len(sizes) == 1 else "/".join(map(str, metrics["concurrency"]))
        return f"{metrics['workers']} x {shown}"
    if fmt == "pair":
        return f"{one(metrics[key + '_p50'], '.3f')} / {one(metrics[key + '_p95'], '.3f')}"
    if fmt == "pairn":
        return f"{one(metrics[key + '_mean'], '.2f')} / {one(metrics[key + '_max'], 'd')}"
    return one(metrics.get(key), fmt)


def format_report(report: dict[str, Any]) -> str:
    """The report as a text table: one column per design."""
    p = report["parameters"]
    lines = [
        f"captcha-tasks bench solve: T={p['threads']} threads, L={p['latency']} s "
        f"(jitter {p['jitter']}), T/L={p['target_solves_per_second']} solves/s, "
        f"time scale {p['time_scale']} (= L/15 s)",
        f"N={p['solves']} solves (ours, {p['workers']} workers, default prefork concurrency), "
        f"{p['baseline_solves']} (seeds' design, 1 worker -P prefork -c "
        f"{p['baseline_concurrency']}, first poll {p['baseline_first_wait']} s x scale), "
        f"{p['warmup']} warm-up solves each, {p['cpus']} CPUs",
    ]
    if p["environment"]:
        lines.append(f"environment passed to the workers: {p['environment']}")
    designs = list(report["designs"].values())
    headers = [d["label"] for d in designs]
    width = max(len(label) for label, _, _ in _ROWS) + 2
    cells = [[_cell(d, key, fmt) if key else "" for d in designs] for _, key, fmt in _ROWS]
    col = [max([len(h), *(len(row[i]) for row in cells)]) + 2 for i, h in enumerate(headers)]
    lines.append("")
    lines.append("".ljust(width) + "".join(h.rjust(c) for h, c in zip(headers, col, strict=True)))
    for (label, key, _), row in zip(_ROWS, cells, strict=True):
        if key is None:
            lines.append(f"-- {label} ".ljust(width + sum(col), "-"))
            continue
        lines.append(
            label.ljust(width) + "".join(v.rjust(c) for v, c in zip(row, col, strict=True))
        )
    lines.append("")
    lines.append(f"wall time: {report['wall_seconds']} s")
    return "\n".join(lines)


@click.group("bench", context_settings={"help_option_names": ["-h", "--help"]})
def bench_group() -> None:
    """Benchmarks: each starts its own redis-server, sandbox and workers, and stops them."""


@bench_group.command("solve")
@click.option(
    "--threads",
    default=_DEFAULTS.threads,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="T: the plan's threads (sandbox and budget).",
)
@click.option(
    "--latency",
    default=_DEFAULTS.latency,
    show_default=True,
    type=click.FloatRange(min=0.05),
    help="L: real seconds of one solve at the sandbox; time scale = L/15.",
)
@click.option(
    "--jitter",
    default=_DEFAULTS.jitter,
    show_default=True,
    type=click.FloatRange(0.0, 0.95),
    help="Solve times vary by a factor in [1-J, 1+J].",
)
@click.option(
    "--solves",
    default=_DEFAULTS.solves,
    show_default=True,
    type=click.IntRange(1, 100_000),
    help="N: solves measured for captcha_tasks.",
)
@click.option(
    "--workers",
    default=_DEFAULTS.workers,
    show_default=True,
    type=click.IntRange(1, 16),
    help="celery worker processes of captcha_tasks.",
)
@click.option(
    "--baseline-solves",
    default=_DEFAULTS.baseline_solves,
    show_default=True,
    type=click.IntRange(1, 100_000),
    help="Solves measured for the seeds' design.",
)
@click.option("--skip-baseline", is_flag=True, help="Measure captcha_tasks only.")
@click.option(
    "--warmup",
    default=_DEFAULTS.warmup,
    show_default=True,
    type=click.IntRange(0, 1000),
    help="Warm-up solves per design, not measured.",
)
@click.option(
    "--baseline-first-wait",
    default=_DEFAULTS.baseline_first_wait,
    show_default=True,
    type=click.FloatRange(min=0.0),
    help="Unscaled seconds the seeds' design sleeps before its first poll "
    "(their code: 5; PROTOCOL.md advises 15-20 for reCAPTCHA v2).",
)
@click.option(
    "--log-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep worker, sandbox and Redis logs here (default: a temporary "
    "directory, removed unless the run fails).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead.")
def solve_command(
    threads: int,
    latency: float,
    jitter: float,
    solves: int,
    workers: int,
    baseline_solves: int,
    skip_baseline: bool,
    warmup: int,
    baseline_first_wait: float,
    log_dir: Path | None,
    as_json: bool,
) -> None:
    """Throughput, latency overhead, provider traffic and CPU per solve: captcha_tasks
    against the seeds' blocking design, each on a fresh Redis and sandbox.

    Progress goes to stderr; the report (or --json) to stdout. Ctrl-C stops every
    process the run started.
    """
    options = BenchOptions(
        threads=threads,
        latency=latency,
        jitter=jitter,
        solves=solves,
        workers=workers,
        baseline_solves=baseline_solves,
        skip_baseline=skip_baseline,
        warmup=warmup,
        baseline_first_wait=baseline_first_wait,
        log_dir=log_dir,
    )
    try:
        report = run_bench(options, say=lambda m: click.echo(f"[bench] {m}", err=True))
    except KeyboardInterrupt:
        click.echo("[bench] interrupted; every process it started is stopped", err=True)
        sys.exit(130)
    except (CaptchaTasksError, TimeoutError) as exc:
        raise click.ClickException(f"{exc} (every process it started is stopped)") from None
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(format_report(report))


@bench_group.command("pages")
@click.option(
    "--workers",
    default=_PAGES.workers,
    show_default=True,
    type=click.IntRange(1, 16),
    help="celery worker processes (nodes), each -P prefork.",
)
@click.option(
    "--concurrency",
    "-c",
    default=_PAGES.concurrency,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Pool size of each worker (celery worker -c).",
)
@click.option(
    "--pages",
    default=_PAGES.pages,
    show_default=True,
    type=click.IntRange(1, 100_000),
    help="Pages enqueued at once per run.",
)
@click.option(
    "--threads",
    default=_PAGES.threads,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="T: the plan's threads (sandbox --threads and CAPTCHA_TASKS_THREADS).",
)
@click.option(
    "--time-scale",
    default=_PAGES.time_scale,
    show_default=True,
    type=click.FloatRange(min=0.001),
    help="CAPTCHA_TASKS_TIME_SCALE of the sandbox and workers (reCAPTCHA v2: 15 s x this).",
)
@click.option(
    "--log-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep worker, sandbox and Redis logs here (default: a temporary directory, "
    "removed unless a run fails, a page fails or sharing spends too many solves).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead.")
def pages_command(
    workers: int,
    concurrency: int,
    pages: int,
    threads: int,
    time_scale: float,
    log_dir: Path | None,
    as_json: bool,
) -> None:
    """Pages behind a reCAPTCHA challenge: fetch_page with shared cookies and the session
    lock, against fetch_page(isolated=True), each run on a fresh Redis, sandbox and
    demo site: pages fetched, solves spent, wall time, worker CPU per page.

    Progress goes to stderr; the report (or --json) to stdout. Ctrl-C stops every
    process the run started.
    """
    options = PagesOptions(
        workers=workers,
        concurrency=concurrency,
        pages=pages,
        threads=threads,
        time_scale=time_scale,
        log_dir=log_dir,
    )
    try:
        report = run_pages(options, say=lambda m: click.echo(f"[bench] {m}", err=True))
    except KeyboardInterrupt:
        click.echo("[bench] interrupted; every process it started is stopped", err=True)
        sys.exit(130)
    except (CaptchaTasksError, TimeoutError) as exc:
        raise click.ClickException(f"{exc} (every process it started is stopped)") from None
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(format_pages_report(report))
