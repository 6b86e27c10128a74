"""The solve benchmark's table (``captcha-tasks-dev bench solve``): its rows, one column
per design."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from .metrics import LEAD_FIGURES
from .report import Cell, Row, cpu_rows, field, fields, joined, render_report, section

__all__ = ["format_lead", "format_report"]


def _p50_p95(key: str) -> Cell:
    return fields(f"{key}_p50", f"{key}_p95", spec=".3f")


def _pools(m: Mapping[str, Any]) -> str:
    sizes = {str(size) for size in m["concurrency"]}
    pools = sizes.pop() if len(sizes) == 1 else "/".join(map(str, m["concurrency"]))
    return f"{m['workers']} x {pools}"


def _commands(m: Mapping[str, Any], key: str = "redis_commands_by_name") -> str:
    by_name = m.get(key) or {}
    return " ".join(f"{name}:{n:g}" for name, n in by_name.items()) or "-"


#: The request that reads a result, by protocol: what the poll rows count or time.
POLL_REQUEST = {"classic": "res.php", "json": "getTaskResult"}

#: The table's rows; ``{poll}`` in a label: the request(s) that read results.
_ROWS: list[Row] = [
    section("throughput"),
    Row("solved / tasks", fields("completed", "tasks")),
    Row("failures (task raised)", field("failures", "d")),
    Row("not finished by the deadline", field("unfinished", "d")),
    Row("makespan, first enqueue -> last result (s)", field("makespan_seconds", ".2f")),
    Row("solves per second", field("solves_per_second", ".2f")),
    # Steady state: while requests waited for a thread, the share of the plan's
    # thread-seconds the provider spent solving. 1.0 = every thread busy all the time.
    Row(
        "throughput / (T/L), steady state (backlog waiting)",
        field("sandbox_utilisation_backlogged", ".3f"),
    ),
    Row(
        "throughput / (T/L), whole run incl. ramp-up and tail",
        field("fraction_of_t_over_l", ".3f"),
    ),
    Row(
        "  bound for the whole run: zero overhead, same latencies",
        field("ideal_fraction_for_these_latencies", ".3f"),
    ),
    Row("sandbox utilisation (solver s / (T x makespan))", field("sandbox_utilisation", ".3f")),
    section("time (s; p50 / p95)"),
    Row("enqueue all N tasks (s)", field("enqueue_seconds", ".3f")),
    Row(
        "first enqueue -> 1st / T-th submit (s)",
        fields("first_submit_seconds", "t_th_submit_seconds", spec=".3f"),
    ),
    Row("end to end - solver latency, p50 / p95 (s)", _p50_p95("e2e_minus_latency")),
    Row("  enqueue -> submitted at the sandbox, p50 / p95 (s)", _p50_p95("enqueue_to_submit")),
    Row("  enqueue -> admitted (ours: job record), p50 / p95 (s)", _p50_p95("enqueue_to_admitted")),
    Row(
        "  slot refill gap (thread freed -> next submit), p50 / p95 (s)",
        _p50_p95("slot_refill_gap"),
    ),
    Row(
        "result later than in a zero-overhead schedule, p50 / p95 (s)",
        _p50_p95("lateness_vs_ideal"),
    ),
    Row("collection delay (ready -> result stored), p50 / p95 (s)", _p50_p95("collection_delay")),
    Row("  ready -> answered by {poll}, p50 / p95 (s)", _p50_p95("ready_to_answered")),
    Row("  answered -> result stored, p50 / p95 (s)", _p50_p95("answered_to_result")),
    Row("mean solver latency at the sandbox", field("solver_latency_mean", ".3f")),
    section("provider traffic"),
    Row("{poll} polls per solve (polls / solved)", field("polls_per_solve", ".3f")),
    Row(
        "times a captcha was asked for (mean / max)",
        joined(field("captcha_polled_mean", ".2f"), field("captcha_polled_max", "d")),
    ),
    Row(
        "  mean, the later half of the captchas (by submit)",
        field("captcha_polled_mean_later", ".2f"),
    ),
    Row("submits per task", field("submits_per_task", ".3f")),
    Row("duplicates", field("duplicates", "d")),
    Row("no_slot answers", field("no_slot", "d")),
    Row("max in flight / T", fields("max_in_flight", "threads")),
    Row(
        "provider HTTP requests per solve (submits + polls)",
        field("http_requests_per_solve", ".3f"),
    ),
    *cpu_rows("solve"),
    Row(
        "  per solve, ms: pool (admitting execution) / consumer / engine",
        fields(
            "cpu_ms_per_solve_pool",
            "cpu_ms_per_solve_consumer",
            "cpu_ms_per_solve_engine",
            spec=".2f",
        ),
    ),
    Row(
        "  of the engine's, result store + its event (ms)",
        field("cpu_ms_per_solve_result_store", ".2f"),
    ),
    Row("worker CPU seconds per no-op Celery task (ping)", field("worker_cpu_per_noop", ".4f")),
    Row(
        "  per no-op, ms: pool / consumer / other threads",
        fields(
            "cpu_ms_per_noop_pool", "cpu_ms_per_noop_consumer", "cpu_ms_per_noop_engine", spec=".2f"
        ),
    ),
    Row("solve CPU / no-op task CPU", field("solve_over_noop_cpu", ".2f")),
    Row(
        "Redis commands per solve / per no-op task",
        fields("redis_commands_per_solve", "redis_commands_per_noop", spec=".1f"),
    ),
    Row(
        "Redis CPU per solve / per no-op task (ms)",
        fields("redis_cpu_ms_per_solve", "redis_cpu_ms_per_noop", spec=".3f"),
    ),
    Row("Redis memory per job in flight (bytes)", field("redis_bytes_per_job", ".0f")),
    Row("workers x pool size", _pools),
]


def _provider_line(parameters: Mapping[str, Any], baseline: bool) -> str:
    provider, protocol = parameters["provider"], parameters["protocol"]
    line = f"provider: {provider} ({protocol} protocol, polls with {POLL_REQUEST[protocol]})"
    if baseline:
        # The seeds' code speaks in.php/res.php only: it ran against a classic sandbox.
        return f"{line}; the seeds' design: captchaai (classic protocol, polls with res.php)"
    return line


def format_lead(label: str, other: str, ratios: Mapping[str, float | None]) -> str:
    """One line: ``label``'s figures over ``other``'s, each ratio named."""
    parts = [
        f"{name} {'-' if ratios.get(key) is None else format(ratios[key], '.2f') + 'x'}"
        for key, name in LEAD_FIGURES.items()
    ]
    return f"lead over {other} ({label} / {other}, measured in this run): " + "; ".join(parts)


def _intro(p: Mapping[str, Any]) -> list[str]:
    # Reports written before the DIY column name no baselines: the seeds' design ran
    # when it has solves.
    baselines = p.get("baselines", ["seeds"] if p["baseline_solves"] else [])
    columns = [
        f"N={p['solves']} solves (ours, {p['workers']} workers, default prefork concurrency)"
    ]
    if "diy" in baselines:
        sizes = "+".join(map(str, p["diy_concurrency"]))
        timings = p["diy_sdk_timings"]
        columns.append(
            f"{p['diy_solves']} (official SDK in a task: 2captcha-python's solver.recaptcha() "
            f"in a Celery task, {len(p['diy_concurrency'])} workers -P threads -c {sizes}, "
            f"acks late, prefetch 1, the SDK's polling interval 10 s x scale = "
            f"{timings['pollingInterval']} s (whole seconds, at least 1), "
            f"its reCAPTCHA timeout {timings['recaptchaTimeout']:.4g} s)"
        )
    if "seeds" in baselines:
        columns.append(
            f"{p['baseline_solves']} (seeds' design, 1 worker -P prefork -c "
            f"{p['baseline_concurrency']}, first poll {p['baseline_first_wait']} s x scale)"
        )
    return [
        f"captcha-tasks-dev bench solve: T={p['threads']} threads, L={p['latency']} s "
        f"(jitter {p['jitter']}), T/L={p['target_solves_per_second']} solves/s, "
        f"time scale {p['time_scale']} (= L/15 s)",
        ", ".join(columns) + f", {p['warmup']} warm-up solves each, {p['cpus']} CPUs",
        f"each column in turn against its own fresh Redis and sandbox "
        f"({p.get('sandbox_scheme', 'http')}, the same T, L and jitter)",
    ]


def format_report(report: dict[str, Any]) -> str:
    """The report as a text table: one column per design, then our lead over each other
    design as ratios measured in the run."""
    p = report["parameters"]
    intro = _intro(p)
    designs = list(report["designs"].values())
    # A design that names no protocol ran the classic one (captchaai, --provider's default).
    poll = " / ".join(dict.fromkeys(POLL_REQUEST[d.get("protocol", "classic")] for d in designs))
    rows = [dataclasses.replace(row, label=row.label.replace("{poll}", poll)) for row in _ROWS]
    if p.get("no_batch"):
        intro.append("polls: each captcha alone (CAPTCHA_TASKS_BATCH_POLL=off; no ids= reads)")
    if p.get("provider", "captchaai") != "captchaai":
        intro.append(_provider_line(p, "seeds" in report["designs"]))
    lines = render_report(intro, p["environment"], rows, designs)
    lines.append("")
    # Too wide for a column: a line per design (commands run inside scripts count too).
    for design in designs:
        if design.get("redis_commands_by_name"):
            lines.append(
                f"Redis commands per solve by name, {design['label']}: {_commands(design)}"
            )
        for role, figures in (design.get("redis_roles") or {}).items():
            lines.append(
                f"Redis of the {role}, {design['label']}: {figures['commands_per_solve']} "
                f"commands and {figures['cpu_ms_per_solve']} ms CPU per solve, so about "
                f"{figures['solves_per_core']} solves/s a core"
            )
        if design.get("redis_usec_by_name"):
            shown = _commands(design, "redis_usec_by_name")
            lines.append(f"Redis µs per solve by command, {design['label']}: {shown}")
    ours = next(iter(report["designs"].values()))
    for name, ratios in report.get("lead", {}).items():
        other = report["designs"][name]["label"]
        lines.append(format_lead(ours["label"], other, ratios))
    lines.append(f"wall time: {report['wall_seconds']} s")
    return "\n".join(lines)
