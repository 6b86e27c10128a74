"""``captcha-tasks-dev bench solve``'s DIY column (the official client in a Celery task): its
set-up, the engine's lead as ratios and how the report states them. Starts no process."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from captcha_tasks.errors import CaptchaTasksError
from captcha_tasks_dev.bench import cli as bench_cli
from captcha_tasks_dev.bench.diy_design import sdk_timings, split_concurrency
from captcha_tasks_dev.bench.metrics import LEAD_FIGURES, lead_ratios
from captcha_tasks_dev.bench.solve import BenchOptions, format_report, run_bench

OURS = {
    "fraction_of_t_over_l": 0.874,
    "sandbox_utilisation_backlogged": 0.9,
    "polls_per_solve": 1.98,
    "collection_delay_p50": 0.2,
    "collection_delay_p95": 0.3,
    "worker_cpu_per_solve": 0.004,
}
DIY = {
    "fraction_of_t_over_l": 0.76,
    "sandbox_utilisation_backlogged": 0.8,
    "polls_per_solve": 3.47,
    "collection_delay_p50": 0.5,
    "collection_delay_p95": 0.0,
    "worker_cpu_per_solve": None,
}


def test_lead_ratios_are_ours_over_theirs_and_none_where_undefined() -> None:
    ratios = lead_ratios(OURS, DIY)
    assert set(ratios) == set(LEAD_FIGURES)
    assert ratios["fraction_of_t_over_l"] == 1.15
    assert ratios["sandbox_utilisation_backlogged"] == 1.12
    assert ratios["polls_per_solve"] == 0.57
    assert ratios["collection_delay_p50"] == 0.4
    # Theirs zero or missing: no ratio rather than an infinite or made-up one.
    assert ratios["collection_delay_p95"] is None
    assert ratios["worker_cpu_per_solve"] is None


def _report() -> dict[str, Any]:
    parameters = {
        "threads": 50,
        "latency": 2.0,
        "jitter": 0.3,
        "target_solves_per_second": 25.0,
        "time_scale": 0.133333,
        "solves": 300,
        "workers": 2,
        "baselines": ["diy"],
        "baseline_solves": 0,
        "diy_solves": 300,
        "diy_concurrency": [25, 25],
        "diy_sdk_timings": sdk_timings(2.0 / 15),
        "sandbox_scheme": "https",
        "baseline_concurrency": 4,
        "baseline_first_wait": 5.0,
        "warmup": 10,
        "cpus": 2,
        "environment": {},
        "provider": "captchaai",
        "protocol": "classic",
    }
    column = {"workers": 2, "protocol": "classic"}
    designs = {
        "ours": {"label": "captcha_tasks", "concurrency": [2, 2], **column, **OURS},
        "diy": {"label": "official SDK in a task", "concurrency": [25, 25], **column, **DIY},
    }
    return {
        "parameters": parameters,
        "wall_seconds": 60.0,
        "designs": designs,
        "lead": {"diy": lead_ratios(OURS, DIY)},
    }


def test_report_states_the_lead_as_labelled_ratios() -> None:
    text = format_report(_report())
    [lead] = [line for line in text.splitlines() if line.startswith("lead over")]
    assert lead.startswith(
        "lead over official SDK in a task (captcha_tasks / official SDK in a task, "
        "measured in this run): "
    )
    assert "throughput, whole run 1.15x" in lead
    assert "throughput, steady state 1.12x" in lead
    assert "reads per solve 0.57x" in lead
    assert "collect delay p50 0.40x" in lead
    assert "collect delay p95 -" in lead and "worker CPU per solve -" in lead


def test_report_describes_the_diy_column_and_the_server_both_faced() -> None:
    text = format_report(_report())
    header = next(line for line in text.splitlines() if line.lstrip().startswith("captcha_tasks"))
    assert header.split() == ["captcha_tasks", "official", "SDK", "in", "a", "task"]
    assert "-P threads -c 25+25, acks late, prefetch 1" in text
    assert "polling interval 10 s x scale = 1 s" in text
    assert "reCAPTCHA timeout 80 s" in text
    assert "(https, the same T, L and jitter)" in text
    assert "seeds' design" not in text


@pytest.mark.parametrize(
    ("scale", "interval", "default", "recaptcha"),
    [(1.0, 10, 120.0, 600.0), (0.5, 5, 60.0, 300.0), (2.0 / 15, 1, 16.0, 80.0)],
)
def test_the_sdk_waits_are_its_defaults_scaled(
    scale: float, interval: int, default: float, recaptcha: float
) -> None:
    timings = sdk_timings(scale)
    assert timings["pollingInterval"] == interval
    assert timings["defaultTimeout"] == pytest.approx(default)
    assert timings["recaptchaTimeout"] == pytest.approx(recaptcha)


def test_the_sdk_polling_interval_is_whole_seconds_and_never_zero() -> None:
    # The client truncates it with int(); 0 would read res.php without pause.
    assert sdk_timings(0.15)["pollingInterval"] == 1
    assert sdk_timings(0.01)["pollingInterval"] == 1
    assert sdk_timings(0.29)["pollingInterval"] == 2


@pytest.mark.parametrize(("threads", "workers"), [(50, 2), (5, 2), (200, 2), (7, 3), (1, 1)])
def test_the_plans_threads_are_shared_out_over_the_workers(threads: int, workers: int) -> None:
    sizes = split_concurrency(threads, workers)
    assert len(sizes) == workers and sum(sizes) == threads
    assert max(sizes) - min(sizes) <= 1


def _invoke(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[Any, list[BenchOptions]]:
    seen: list[BenchOptions] = []

    def fake_run(options: BenchOptions, say: Any) -> dict[str, Any]:
        seen.append(options)
        return {"ran": True}

    monkeypatch.setattr(bench_cli, "run_bench", fake_run)
    result = CliRunner().invoke(bench_cli.bench_group, ["solve", "--json", *args])
    return result, seen


@pytest.mark.parametrize(
    ("args", "baselines"),
    [
        ((), ("diy", "seeds")),
        (("--baseline", "diy"), ("diy",)),
        (("--baseline", "seeds"), ("seeds",)),
        (("--baseline", "none"), ()),
        (("--baseline", "diy", "--skip-baseline"), ()),
    ],
)
def test_baseline_option_picks_the_columns(
    monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], baselines: tuple[str, ...]
) -> None:
    result, seen = _invoke(monkeypatch, *args)
    assert result.exit_code == 0, result.output
    assert [o.baselines for o in seen] == [baselines]


def test_an_unknown_baseline_is_refused_before_anything_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result, seen = _invoke(monkeypatch, "--baseline", "celery")
    assert result.exit_code == 2 and seen == []
    assert "--baseline" in result.output


def test_the_diy_column_needs_a_classic_sandbox() -> None:
    # Refused before anything starts: the official client cannot face a JSON server.
    with pytest.raises(CaptchaTasksError, match="classic provider"):
        run_bench(BenchOptions(provider="capsolver", baseline="diy"))
