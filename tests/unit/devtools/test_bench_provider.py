"""``captcha-tasks-dev bench solve --provider``: the option reaches the run, the run sets up the
sandbox and workers for that provider, the report names its protocol. Starts no process."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import requests
from click.testing import CliRunner

from captcha_tasks.settings import PROTOCOLS, PROVIDERS, Provider, Settings
from captcha_tasks_dev.bench import cli as bench_cli
from captcha_tasks_dev.bench.metrics import Outcome, solve_metrics
from captcha_tasks_dev.bench.solve import SITEKEY, BenchOptions, format_report
from captcha_tasks_dev.bench.stack import passed_environment, provider_setup
from captcha_tasks_sandbox import SandboxConfig, SandboxServer, dev_api_key


def _invoke(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[Any, list[BenchOptions]]:
    seen: list[BenchOptions] = []

    def fake_run(options: BenchOptions, say: Any) -> dict[str, Any]:
        seen.append(options)
        return {"ran": True}

    monkeypatch.setattr(bench_cli, "run_bench", fake_run)
    result = CliRunner().invoke(bench_cli.bench_group, ["solve", "--json", *args])
    return result, seen


def test_provider_option_reaches_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    result, seen = _invoke(monkeypatch, "--provider", "capsolver", "--solves", "7")
    assert result.exit_code == 0, result.output
    assert [(o.provider, o.solves) for o in seen] == [("capsolver", 7)]


def test_provider_defaults_to_the_classic_captchaai(monkeypatch: pytest.MonkeyPatch) -> None:
    result, seen = _invoke(monkeypatch)
    assert result.exit_code == 0, result.output
    assert [o.provider for o in seen] == ["captchaai"]


def test_an_unknown_provider_is_refused_before_anything_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result, seen = _invoke(monkeypatch, "--provider", "deathbycaptcha")
    assert result.exit_code == 2 and seen == []
    assert "--provider" in result.output


def test_provider_is_the_last_option_of_help() -> None:
    out = CliRunner().invoke(bench_cli.bench_group, ["solve", "--help"]).output
    assert out.index("--json") < out.index("--provider") < out.index("--help")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_sandbox_and_workers_are_set_up_for_each_provider(provider: Provider) -> None:
    args, env = provider_setup(provider)
    assert args == ["--protocol", PROTOCOLS[provider], "--dialect", provider]
    # A sandbox with those arguments is valid, and workers with that environment pass
    # the settings' checks (the key's shape is checked per provider).
    SandboxConfig(protocol=PROTOCOLS[provider], dialect=provider)  # type: ignore[arg-type]
    settings = Settings.from_env({**env, "CAPTCHA_TASKS_SOLVER_URL": "http://127.0.0.1:9"})
    assert settings.provider_config().protocol == provider
    assert settings.require_api_key() == env["CAPTCHA_TASKS_API_KEY"]


def test_an_operators_api_key_is_not_passed_to_the_workers_nor_printed() -> None:
    environ = {"CAPTCHA_TASKS_API_KEY": "CAP-" + "0" * 32, "CAPTCHA_TASKS_LOG_LEVEL": "DEBUG"}
    assert passed_environment(environ) == {"CAPTCHA_TASKS_LOG_LEVEL": "DEBUG"}


def _report(provider: Provider, *, baseline: bool) -> dict[str, Any]:
    parameters = {
        "threads": 5,
        "latency": 1.0,
        "jitter": 0.0,
        "target_solves_per_second": 5.0,
        "time_scale": 0.066667,
        "solves": 10,
        "workers": 1,
        "baseline_solves": 4,
        "baseline_concurrency": 4,
        "baseline_first_wait": 5.0,
        "warmup": 0,
        "cpus": 2,
        "environment": {},
        "provider": provider,
        "protocol": PROTOCOLS[provider],
    }
    column = {"workers": 1, "concurrency": [2], "polls_per_solve": 1.5}
    designs = {
        "ours": {
            "label": "captcha_tasks",
            **column,
            "provider": provider,
            "protocol": PROTOCOLS[provider],
        }
    }
    if baseline:
        designs["seeds"] = {
            "label": "seeds' design",
            **column,
            "provider": "captchaai",
            "protocol": "classic",
        }
    return {"parameters": parameters, "wall_seconds": 1.0, "designs": designs}


def _line(text: str, start: str) -> str:
    [line] = [line for line in text.splitlines() if line.startswith(start)]
    return line


def test_classic_report_counts_res_php_polls_and_names_no_provider() -> None:
    text = format_report(_report("captchaai", baseline=True))
    assert _line(text, "res.php polls per solve").split()[-2:] == ["1.500", "1.500"]
    assert "getTaskResult" not in text and "provider:" not in text


def test_json_report_counts_get_task_result_polls_and_names_the_provider() -> None:
    text = format_report(_report("capsolver", baseline=False))
    assert _line(text, "getTaskResult polls per solve").split()[-1] == "1.500"
    assert _line(text, "  ready -> answered by getTaskResult")
    assert "res.php" not in text
    assert _line(text, "provider: capsolver (json protocol")


def test_json_report_with_the_classic_baseline_names_both_requests() -> None:
    text = format_report(_report("capsolver", baseline=True))
    assert _line(text, "getTaskResult / res.php polls per solve")
    assert "the seeds' design: captchaai (classic protocol" in _line(text, "provider: capsolver")


@pytest.mark.parametrize("dialect", ["capsolver", "anticaptcha"])
def test_admin_captchas_name_the_id_a_json_client_was_given(
    sandbox_factory: Callable[..., SandboxServer], dialect: str
) -> None:
    # The benchmark finds each result's captcha (submit/ready/answered times) by the id
    # the result carries: CapSolver's UUID task id is not the captcha's number.
    server = sandbox_factory(protocol="json", dialect=dialect, time_scale=0.01)
    document = {
        "clientKey": dev_api_key(dialect),
        "task": {
            "type": "ReCaptchaV2TaskProxyLess"
            if dialect == "capsolver"
            else "RecaptchaV2TaskProxyless",
            "websiteURL": "https://example.com/a",
            "websiteKey": SITEKEY,
        },
    }
    task_id = requests.post(f"{server.url}/createTask", json=document, timeout=5).json()["taskId"]
    captchas = requests.get(f"{server.url}/admin/captchas", timeout=5).json()["captchas"]
    [captcha] = [c for c in captchas if str(c.get("task_id", c["id"])) == str(task_id)]
    assert captcha["kind"] == "recaptcha_v2"
    assert ("task_id" in captcha) == (dialect == "capsolver")


def test_results_naming_json_task_ids_are_matched_to_their_captchas() -> None:
    """CapSolver's results carry the UUID task id; the sandbox lists it as ``task_id``
    beside the captcha's number. A: enqueued 100, submitted 100.5, ready 101.5,
    answered 101.75, result 102 (T=1, L=1 s)."""
    uuid = "0b3e4c1a-9d2f-4b7e-8a61-3f5c2d9e7a10"
    m = solve_metrics(
        threads=1,
        latency=1.0,
        tasks=1,
        enqueued={"A": 100.0},
        enqueue_end=100.0,
        outcomes={"A": Outcome(102.0, "SUCCESS", {"captcha_id": uuid})},
        captchas=[
            {
                "id": "1",
                "task_id": uuid,
                "submitted_at": 100.5,
                "ready_at": 101.5,
                "answered_at": 101.75,
                "latency": 1.0,
                "polls": 2,
            }
        ],
        stats={"polls": 2, "solved": 1, "submitted": 1, "max_in_flight": 1},
        cpu={"workers": 0.1, "machine_busy": 1.0, "machine_total": 4.0},
    )
    assert m["matched_to_sandbox"] == 1
    assert m["enqueue_to_submit_p50"] == 0.5
    assert m["collection_delay_p50"] == 0.5  # ready 101.5 -> stored 102
    assert m["ready_to_answered_p50"] == 0.25
    assert m["lateness_vs_ideal_p50"] == 1.0  # zero overhead: 100 + 1 s
