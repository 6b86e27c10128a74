"""Every metric the Grafana dashboard and the alert rules read is one a running worker
exports: a real worker solves (one failure, a priced solve, a token pool, the balance
watch on), its ``/metrics`` is scraped, and every name of every query is in it. Then a
real Prometheus (Debian's, ``make ops-tools``) scrapes the worker with the alert rules
loaded: every dashboard query evaluates, with data, and every rule is healthy."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from captcha_tasks import feedback, solve_recaptcha_v2
from captcha_tasks.engine.pool import TokenPool
from captcha_tasks.errors import CaptchaUnsolvable
from captcha_tasks.provider import RecaptchaV2
from captcha_tasks.settings import get_settings
from captcha_tasks.state import state_redis
from captcha_tasks_dev.procs import free_port, stop_process, wait_until
from tests.support.promql import ALERTS, alert_expressions, dashboard_expressions, metric_names
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration
SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
PROMETHEUS = shutil.which("prometheus")
#: Queries that may rightly have no data in this run: no submit was refused.
MAY_BE_EMPTY = {"Errors by code B"}


def _sample_names(text: str) -> set[str]:
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


@pytest.fixture
def busy_worker(celery_app: Any, sandbox: Any, worker_factory: Any) -> str:
    """A worker that solved, failed, priced a solve and checked the balance; its URL."""
    port = free_port()
    worker_factory(
        worker_env(
            sandbox.url,
            CAPTCHA_TASKS_METRICS_PORT=str(port),
            CAPTCHA_TASKS_PRICES="recaptcha_v2=2.99",
            CAPTCHA_TASKS_BALANCE_FLOOR="1",
        )
    )
    settings = get_settings()
    TokenPool(state_redis(settings), settings).fill(
        RecaptchaV2(SITEKEY, "https://example.com/pool"), target=0
    )  # registered: the pool gauges exist
    admin = f"{sandbox.url}/admin/config"
    requests.post(admin, json={"unsolvable_rate": 1.0}, timeout=5).raise_for_status()
    with pytest.raises(CaptchaUnsolvable):
        solve_recaptcha_v2.delay(SITEKEY, "https://example.com/bad").get(timeout=60)
    requests.post(admin, json={"unsolvable_rate": 0.0}, timeout=5).raise_for_status()
    for n in range(2):
        sent = solve_recaptcha_v2.delay(SITEKEY, f"https://example.com/{n}")
        sent.get(timeout=60)
        feedback(sent.id, accepted=n == 0)  # the token counters: one of each
    return f"http://127.0.0.1:{port}/metrics"


def _used() -> dict[str, set[str]]:
    used: dict[str, set[str]] = {}
    for where, expr in [*dashboard_expressions(), *alert_expressions()]:
        for name in metric_names(expr):
            used.setdefault(name, set()).add(where)
    return used


def test_every_dashboard_query_and_alert_names_an_exported_metric(busy_worker: str) -> None:
    used = _used()
    assert len(used) >= 15, used

    def exported() -> bool:  # the engine counts just after it stores a result
        return set(used) <= _sample_names(requests.get(busy_worker, timeout=10).text)

    try:
        wait_until(exported, timeout=30, what="every metric the dashboard and alerts use")
    except TimeoutError:
        missing = set(used) - _sample_names(requests.get(busy_worker, timeout=10).text)
        pytest.fail(f"not exported by a worker: { ({n: sorted(used[n]) for n in missing}) }")


@pytest.fixture
def prometheus(busy_worker: str, tmp_path: Path) -> Iterator[str]:
    if PROMETHEUS is None:
        pytest.skip("prometheus is not installed: `make ops-tools` installs Debian's package")
    target = busy_worker.split("//")[1].split("/")[0]
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(ALERTS)],
        "scrape_configs": [
            {"job_name": "captcha_tasks_workers", "static_configs": [{"targets": [target]}]}
        ],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "prometheus.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )

    def scraping() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"prometheus exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            targets = requests.get(f"{url}/api/v1/targets", timeout=2).json()
        except requests.RequestException:
            return False
        active = targets["data"]["activeTargets"]
        return bool(active) and all(t["health"] == "up" for t in active)

    try:
        wait_until(scraping, timeout=60, what="Prometheus scraping the worker")
        yield url
    finally:
        stop_process(proc, timeout=10)


def _query(url: str, expr: str) -> dict[str, Any]:
    answer = requests.get(f"{url}/api/v1/query", params={"query": expr}, timeout=10).json()
    assert answer["status"] == "success", (expr, answer)
    result: dict[str, Any] = answer["data"]
    return result


def test_a_real_prometheus_evaluates_the_dashboard_and_the_rules(prometheus: str) -> None:
    queries = {where.split(": ", 1)[1]: expr for where, expr in dashboard_expressions()}

    def rates_ready() -> bool:  # two scrapes of the counters: rate() has points
        solves = "sum(rate(captcha_tasks_solves_total[30s]))"
        return bool(_query(prometheus, solves)["result"])

    wait_until(rates_ready, timeout=30, what="two scrapes of the worker")
    empty = []
    for where, expr in queries.items():
        data = _query(prometheus, re.sub(r"\$__rate_interval", "30s", expr))
        if not data["result"] and where not in MAY_BE_EMPTY:
            empty.append(where)
    assert not empty, f"no data for {empty}"

    def evaluated() -> list[dict[str, Any]]:
        groups = requests.get(f"{prometheus}/api/v1/rules", timeout=10).json()["data"]["groups"]
        return [rule for group in groups for rule in group["rules"]]

    wait_until(
        lambda: all(r.get("lastEvaluation", "").startswith("2") for r in evaluated()),
        timeout=30,
        what="every rule evaluated",
    )
    rules = evaluated()
    assert len(rules) == len(list(alert_expressions()))
    assert all(r["health"] == "ok" for r in rules), [(r["name"], r.get("lastError")) for r in rules]
    firing = {r["name"] for r in rules if r["state"] == "firing"}
    assert not firing  # a healthy worker, Redis up, a balance above the floor
