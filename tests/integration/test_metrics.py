"""``/metrics`` of real prefork workers: the engine's counts (main process) and pool
takes (children) in one scrape, and the Redis gauges."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from captcha_tasks import solve_recaptcha_v2
from captcha_tasks.engine.pool import TokenPool, pool_id_for
from captcha_tasks.errors import CaptchaUnsolvable
from captcha_tasks.provider import RecaptchaV2
from captcha_tasks.settings import get_settings
from captcha_tasks.state import Keys, state_redis
from captcha_tasks_dev.procs import free_port, stop_process, wait_until
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration
SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
PAGE = "https://example.com/metrics"


class Scrape:
    """One ``/metrics`` answer, parsed."""

    def __init__(self, url: str) -> None:
        response = requests.get(url, timeout=10)
        response.raise_for_status()
        self.text = response.text
        self.samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        for family in text_string_to_metric_families(self.text):
            for sample in family.samples:
                self.samples[(sample.name, frozenset(sample.labels.items()))] = sample.value

    def value(self, name: str, **labels: str) -> float:
        return self.samples.get((name, frozenset(labels.items())), 0.0)

    def solves(self, source: str, outcome: str = "solved") -> float:
        return self.value(
            "captcha_tasks_solves_total", type="recaptcha_v2", source=source, outcome=outcome
        )


def _fill_pool(pooled: RecaptchaV2, size: int) -> None:
    """``size`` tokens in the pool of ``pooled``, and no refill after takes."""
    pool = TokenPool(state_redis(get_settings()), get_settings())
    assert pool.fill(pooled, target=size).admitted == size
    pool_id = pool_id_for(pooled)
    assert pool_id
    wait_until(
        lambda: pool.redis.zcard(Keys().pool(pool_id)) == size,
        timeout=60,
        what=f"{size} pooled tokens",
    )
    pool.fill(pooled, target=0)


def test_metrics_count_solves_failures_and_pool_takes_across_processes(
    celery_app: Any, sandbox: Any, worker_factory: Any
) -> None:
    port = free_port()
    worker = worker_factory(
        worker_env(sandbox.url, CAPTCHA_TASKS_METRICS_PORT=str(port)), concurrency=2
    )
    url = f"http://127.0.0.1:{port}/metrics"
    assert f"metrics: serving {url}" in worker.log()

    # A failure: the sandbox calls both the captcha and its resubmit unsolvable.
    admin = f"{sandbox.url}/admin/config"
    requests.post(admin, json={"unsolvable_rate": 1.0}, timeout=5).raise_for_status()
    with pytest.raises(CaptchaUnsolvable):
        solve_recaptcha_v2.delay(SITEKEY, f"{PAGE}/bad").get(timeout=60)
    requests.post(admin, json={"unsolvable_rate": 0.0}, timeout=5).raise_for_status()

    pending = [solve_recaptcha_v2.delay(SITEKEY, f"{PAGE}/{i}") for i in range(3)]
    in_use: list[float] = []

    def held() -> bool:  # the budget gauge sees them at the provider (~0.75 s each)
        in_use.append(Scrape(url).value("captcha_tasks_threads_in_use", provider="default"))
        return in_use[-1] >= 1

    wait_until(held, timeout=30, interval=0.01, what="threads in use")
    solved = [result.get(timeout=60) for result in pending]
    assert {r["source"] for r in solved} == {"api"}

    # A token from a pool: taken in a prefork child, not in the engine's process.
    pooled = RecaptchaV2(SITEKEY, f"{PAGE}/pooled")
    _fill_pool(pooled, 1)
    taken = solve_recaptcha_v2.delay(SITEKEY, pooled.pageurl).get(timeout=30)
    assert taken["source"] == "pool"

    def counted() -> bool:  # the engine counts just after it stores a result
        scrape = Scrape(url)
        return scrape.solves("api") == 3 and scrape.solves("pool") == 1

    wait_until(counted, timeout=10, what="the solves in /metrics")
    scrape = Scrape(url)
    v2 = {"type": "recaptcha_v2"}
    assert scrape.solves("api", "failed:ERROR_CAPTCHA_UNSOLVABLE") == 1
    assert scrape.solves("fill") == 1
    collected = scrape.value("captcha_tasks_solve_seconds_count", **v2)
    assert collected == 3 + 1
    assert scrape.value("captcha_tasks_solve_polls_count", **v2) == collected
    assert scrape.value("captcha_tasks_solve_polls_sum", **v2) >= collected
    # Solves take ~0.75 s at this time scale: all of them in the buckets up to 5 s.
    assert scrape.value("captcha_tasks_solve_seconds_bucket", **v2, le="5.0") == collected
    assert 0 < scrape.value("captcha_tasks_solve_seconds_sum", **v2) < 5 * collected
    # Every accepted in.php call: 2 for the unsolvable one (resubmitted once), 3, the fill.
    assert scrape.value("captcha_tasks_submits_total", **v2, result="ok") == 2 + 3 + 1
    assert scrape.value("captcha_tasks_poll_requests_total") >= 1

    default = {"provider": "default"}  # the single-provider variables' provider
    limit = scrape.value("captcha_tasks_threads_limit", **default)
    assert limit == 5
    assert max(in_use) <= limit
    assert scrape.value("captcha_tasks_threads_in_use", **default) == 0  # every lease given back
    assert ("captcha_tasks_breaker_open", frozenset(default.items())) in scrape.samples
    assert scrape.value("captcha_tasks_breaker_open", **default) == 0
    assert scrape.value("captcha_tasks_waiting_requests") == 0
    assert scrape.value("captcha_tasks_state_up") == 1
    pool_labels = {"pool_id": pool_id_for(pooled) or "", "type": "recaptcha_v2"}
    assert ("captcha_tasks_pool_tokens", frozenset(pool_labels.items())) in scrape.samples
    assert scrape.value("captcha_tasks_proxies", state="free") == 0


def test_port_zero_and_recycled_children_and_a_clean_exit(
    celery_app: Any, sandbox: Any, worker_factory: Any
) -> None:
    # Each child exits after one task: the counts of dead children must stay.
    worker = worker_factory(
        worker_env(sandbox.url, CAPTCHA_TASKS_METRICS_PORT="0"),
        concurrency=2,
        extra_args=["--max-tasks-per-child", "1"],
    )
    found = re.search(
        r"metrics: serving (http://127\.0\.0\.1:\d+/metrics) \(values in (.+)\)", worker.log()
    )
    assert found, worker.log()
    url, directory = found.group(1), Path(found.group(2))
    assert directory.is_dir()

    pooled = RecaptchaV2(SITEKEY, f"{PAGE}/recycled")
    _fill_pool(pooled, 2)
    for _ in range(2):
        assert solve_recaptcha_v2.delay(SITEKEY, pooled.pageurl).get(timeout=30)["source"] == "pool"
    wait_until(lambda: Scrape(url).solves("pool") == 2, timeout=10, what="2 pool takes")

    stop_process(worker.proc, timeout=20, group=True)
    assert worker.proc.returncode == 0, worker.log()
    assert not directory.exists()  # the worker's private value files went with it
