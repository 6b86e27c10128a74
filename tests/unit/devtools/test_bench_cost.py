"""The solve benchmark's cost figures: CPU by stage, Redis commands and HTTP requests per
solve, and the no-op task beside it, on hand-computed inputs."""

from __future__ import annotations

import pytest

from captcha_tasks_dev.bench.cost import (
    command_calls,
    command_usec,
    cost_figures,
    noop_figures,
    redis_cpu_seconds,
    role_figures,
    store_cpu,
)
from captcha_tasks_dev.bench.solve_report import format_report


def test_command_calls_reads_redis_py_commandstats() -> None:
    stats = {
        "cmdstat_evalsha": {"calls": 40, "usec": 900},
        "cmdstat_hset": {"calls": 60, "usec": 100},
        "cmdstat_config|resetstat": {"calls": 0},
        "not_a_dict": 3,
    }
    assert command_calls(stats) == {"evalsha": 40, "hset": 60}


def test_command_usec_and_the_slowest_per_solve() -> None:
    stats = {"cmdstat_evalsha": {"calls": 4, "usec": 900}, "cmdstat_get": {"calls": 9, "usec": 0}}
    usec = command_usec(stats)
    assert usec == {"evalsha": 900}
    out = cost_figures({}, {}, {}, solved=3, usec={"hset": 30, "evalsha": 900})
    assert list(out["redis_usec_by_name"].items()) == [("evalsha", 300.0), ("hset", 10.0)]


def test_cost_figures_divide_by_solves() -> None:
    cpu = {"workers_pool": 0.4, "workers_consumer": 0.2, "workers_threads": 0.6}
    calls = {"hset": 300, "evalsha": 100, "get": 50}
    stats = {"submitted": 100, "polls": 25}
    out = cost_figures(cpu, calls, stats, solved=100, store=(0.05, 125))
    assert out["cpu_ms_per_solve_pool"] == pytest.approx(4.0)
    assert out["cpu_ms_per_solve_consumer"] == pytest.approx(2.0)
    assert out["cpu_ms_per_solve_engine"] == pytest.approx(6.0)
    # Per outcome stored (125 of them, warm-up included), not per measured solve.
    assert out["cpu_ms_per_solve_result_store"] == pytest.approx(0.4)
    assert out["redis_commands_per_solve"] == pytest.approx(4.5)
    assert list(out["redis_commands_by_name"]) == ["hset", "evalsha", "get"]
    assert out["http_requests_per_solve"] == pytest.approx(1.25)


def test_redis_cpu_and_memory_per_solve_and_per_job() -> None:
    assert redis_cpu_seconds({"used_cpu_sys": 1.5, "used_cpu_user": 2.25, "x": 9}) == 3.75
    out = cost_figures({}, {}, {}, solved=400, redis_cpu=0.3, memory=(1_000_000, 1_800_000, 500))
    assert out["redis_cpu_ms_per_solve"] == pytest.approx(0.75)
    assert out["redis_bytes_per_job"] == 1600  # the peak over the base, per job enqueued
    # Memory that fell (keys expired meanwhile) reads as none, never as a negative cost.
    assert cost_figures({}, {}, {}, solved=1, memory=(5, 3, 1))["redis_bytes_per_job"] == 0
    assert "redis_cpu_ms_per_solve" not in cost_figures({}, {}, {}, solved=1)
    noop = noop_figures({"workers": 1.0}, {}, 1000, solve_cpu=None, redis_cpu=0.25)
    assert noop["redis_cpu_ms_per_noop"] == pytest.approx(0.25)


def test_each_redis_role_per_solve_and_what_a_core_sustains() -> None:
    calls = {"state": {"evalsha": 700, "hset": 300}, "broker": {"lpush": 200}}
    out = role_figures({"state": 1.0, "broker": 0.25, "results": 0.0}, calls, solved=500)
    assert out["state"] == {
        "commands_per_solve": 2.0,
        "cpu_ms_per_solve": 2.0,
        "solves_per_core": 500,
    }
    assert out["broker"]["solves_per_core"] == 2000 and out["broker"]["commands_per_solve"] == 0.4
    assert out["results"] == {
        "commands_per_solve": 0.0,
        "cpu_ms_per_solve": 0.0,
        "solves_per_core": None,
    }


def test_cost_figures_without_solves_are_not_applicable() -> None:
    out = cost_figures({}, {}, {}, solved=0)
    assert out["cpu_ms_per_solve_pool"] is None
    assert out["redis_commands_per_solve"] is None
    assert out["http_requests_per_solve"] is None
    assert "cpu_ms_per_solve_result_store" not in out


def test_noop_figures_and_the_ratio() -> None:
    cpu = {"workers": 2.0, "workers_pool": 1.0, "workers_consumer": 1.0, "workers_threads": 0.0}
    out = noop_figures(cpu, {"lpush": 1000, "publish": 2000}, 1000, solve_cpu=0.006)
    assert out["worker_cpu_per_noop"] == pytest.approx(0.002)
    assert out["solve_over_noop_cpu"] == pytest.approx(3.0)
    assert out["redis_commands_per_noop"] == pytest.approx(3.0)
    assert out["cpu_ms_per_noop_pool"] == pytest.approx(1.0)
    assert noop_figures(cpu, {}, 0, solve_cpu=0.006)["solve_over_noop_cpu"] is None


def test_store_cpu_sums_the_workers_log_lines() -> None:
    logs = [
        "x\n[INFO] solve engine result store: 1.250 s CPU over 1200 outcomes\n",
        "[INFO] solve engine result store: 0.750 s CPU over 800 outcomes",
        "nothing here",
    ]
    assert store_cpu(logs) == (pytest.approx(2.0), 2000)


def test_the_report_shows_the_cost_rows_and_the_no_batch_line() -> None:
    base = {
        "label": "captcha_tasks",
        "concurrency": [2, 2],
        "workers": 2,
        "worker_cpu_per_solve": 0.006,
        "cpu_ms_per_solve_pool": 2.5,
        "cpu_ms_per_solve_consumer": 1.5,
        "cpu_ms_per_solve_engine": 2.0,
        "worker_cpu_per_noop": 0.002,
        "solve_over_noop_cpu": 3.0,
        "redis_commands_per_solve": 60.0,
        "redis_commands_per_noop": 20.0,
        "redis_commands_by_name": {"evalsha": 8.0, "hset": 6.5},
        "http_requests_per_solve": 1.2,
    }
    report = {
        "parameters": {
            "threads": 200,
            "latency": 2.0,
            "jitter": 0.3,
            "solves": 2400,
            "baseline_solves": 0,
            "time_scale": 0.133333,
            "workers": 2,
            "baseline_concurrency": 4,
            "baseline_first_wait": 5.0,
            "warmup": 10,
            "provider": "captchaai",
            "protocol": "classic",
            "target_solves_per_second": 100.0,
            "cpus": 2,
            "environment": {},
            "no_batch": True,
            "noop": 1000,
        },
        "wall_seconds": 60.0,
        "designs": {"ours": base},
    }
    text = format_report(report)
    assert "CAPTCHA_TASKS_BATCH_POLL=off" in text
    row = next(line for line in text.splitlines() if line.startswith("solve CPU / no-op"))
    assert row.split()[-1] == "3.00"
    row = next(line for line in text.splitlines() if "pool (admitting execution)" in line)
    assert row.split()[-5:] == ["2.50", "/", "1.50", "/", "2.00"]
    assert "evalsha:8 hset:6.5" in text
