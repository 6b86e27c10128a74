"""Metrics: the observer's counters, multiprocess files, and the Redis gauges (real Redis)."""

from __future__ import annotations

import multiprocessing
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, values
from prometheus_client.multiprocess import MultiProcessCollector

from captcha_tasks.engine import admit
from captcha_tasks.engine.pool import TokenPool, pool_id_for
from captcha_tasks.errors import CaptchaUnsolvable, ConfigurationError, NoSlotAvailable
from captcha_tasks.monitor.metrics import (
    NullObserver,
    PrometheusObserver,
    StateCollector,
    set_solve_observer,
    solve_observer,
)
from captcha_tasks.provider import RecaptchaV2
from captcha_tasks.session.proxies import ProxyPool
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys, state_redis
from captcha_tasks.worker.metrics_step import (
    MULTIPROC_DIR_ENV,
    enable_multiprocess,
    mark_process_dead,
    metrics_endpoint,
)
from captcha_tasks_dev.procs import free_port

SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"


# -- the endpoint's variables -------------------------------------------------------------


def test_the_endpoint_is_off_unless_a_port_is_given() -> None:
    assert metrics_endpoint({}) is None
    assert metrics_endpoint({"CAPTCHA_TASKS_METRICS_PORT": " "}) is None
    assert metrics_endpoint({"CAPTCHA_TASKS_METRICS_PORT": "9808"}) == ("127.0.0.1", 9808)
    assert metrics_endpoint({"CAPTCHA_TASKS_METRICS_PORT": "0"}) == ("127.0.0.1", 0)
    env = {"CAPTCHA_TASKS_METRICS_PORT": "9808", "CAPTCHA_TASKS_METRICS_ADDRESS": "0.0.0.0"}
    assert metrics_endpoint(env) == ("0.0.0.0", 9808)


@pytest.mark.parametrize("raw", ["http", "-1", "65536", "98.5"])
def test_a_malformed_port_names_the_variable(raw: str) -> None:
    with pytest.raises(ConfigurationError, match="CAPTCHA_TASKS_METRICS_PORT"):
        metrics_endpoint({"CAPTCHA_TASKS_METRICS_PORT": raw})


# -- the observer ---------------------------------------------------------------------


def test_the_default_observer_records_nothing_and_can_be_swapped() -> None:
    assert isinstance(solve_observer(), NullObserver)
    observer = PrometheusObserver(CollectorRegistry())
    previous = set_solve_observer(observer)
    try:
        assert solve_observer() is observer
    finally:
        set_solve_observer(previous)
    assert isinstance(solve_observer(), NullObserver)


def test_the_observer_counts_solves_latency_polls_and_submits() -> None:
    registry = CollectorRegistry()
    observer = PrometheusObserver(registry)
    observer.submitted("recaptcha_v2")
    observer.submitted("recaptcha_v2", NoSlotAvailable("busy"))
    observer.submitted("recaptcha_v2")
    for _ in range(3):
        observer.polled()
    observer.solved("recaptcha_v2", "api", seconds=0.4, polls=2)
    observer.solved("recaptcha_v2", "api", seconds=17.0, polls=1)
    observer.solved("recaptcha_v2", "fill", seconds=12.0, polls=1)
    observer.solved("recaptcha_v2", "pool")  # no latency, no polls: nothing was solved
    observer.failed("turnstile", "api", CaptchaUnsolvable("twice"))

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    v2 = {"type": "recaptcha_v2"}
    assert value("captcha_tasks_solves_total", **v2, source="api", outcome="solved") == 2
    assert value("captcha_tasks_solves_total", **v2, source="fill", outcome="solved") == 1
    assert value("captcha_tasks_solves_total", **v2, source="pool", outcome="solved") == 1
    assert (
        value(
            "captcha_tasks_solves_total",
            type="turnstile",
            source="api",
            outcome="failed:ERROR_CAPTCHA_UNSOLVABLE",
        )
        == 1
    )
    assert value("captcha_tasks_solve_seconds_count", **v2) == 3
    assert value("captcha_tasks_solve_seconds_sum", **v2) == pytest.approx(29.4)
    assert value("captcha_tasks_solve_seconds_bucket", **v2, le="0.5") == 1
    assert value("captcha_tasks_solve_seconds_bucket", **v2, le="15.0") == 2
    assert value("captcha_tasks_solve_polls_count", **v2) == 3
    assert value("captcha_tasks_solve_polls_sum", **v2) == 4
    assert value("captcha_tasks_submits_total", **v2, result="ok") == 2
    assert value("captcha_tasks_submits_total", **v2, result="ERROR_NO_SLOT_AVAILABLE") == 1
    assert value("captcha_tasks_poll_requests_total") == 3


def test_a_failing_metric_never_reaches_the_engine(caplog: pytest.LogCaptureFixture) -> None:
    observer = PrometheusObserver(CollectorRegistry())

    def broken(*args: object, **kwargs: object) -> object:
        raise OSError("No space left on device")

    observer._solves.labels = broken  # type: ignore[method-assign]
    observer.solved("image", "api", seconds=1.0)
    observer.failed("image", "api", CaptchaUnsolvable("x"))
    warnings = [r for r in caplog.records if "could not record" in r.getMessage()]
    assert len(warnings) == 1  # said once, not at every event


# -- multiprocess mode --------------------------------------------------------------------


@pytest.fixture
def multiprocess_values(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Let a test switch prometheus_client to file-backed values; restored after it."""
    monkeypatch.setattr(values, "ValueClass", values.ValueClass)
    monkeypatch.delenv(MULTIPROC_DIR_ENV, raising=False)
    yield
    values.close_all_multiprocess_files()  # type: ignore[no-untyped-call]


def _count_pool_solve(observer: PrometheusObserver) -> None:
    observer.solved("recaptcha_v2", "pool")


@pytest.mark.usefixtures("multiprocess_values")
def test_children_counts_add_up_with_the_parents_even_after_they_die(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MULTIPROC_DIR_ENV, str(tmp_path))
    leftover = tmp_path / "counter_999999.db"
    leftover.write_bytes(b"\0" * 16)  # from an earlier run of the worker
    unrelated = tmp_path / "notes.txt"
    unrelated.write_text("kept")
    directory, created = enable_multiprocess("w1@host")
    assert directory == tmp_path and not created
    assert not leftover.exists() and unrelated.exists()

    observer = PrometheusObserver()  # registered nowhere: the files are the truth
    observer.solved("recaptcha_v2", "api", seconds=1.5, polls=2)
    context = multiprocessing.get_context("fork")
    for _ in range(2):
        child = context.Process(target=_count_pool_solve, args=(observer,))
        child.start()
        child.join(10)
        assert child.exitcode == 0
        mark_process_dead(child.pid or 0, directory)

    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(directory))  # type: ignore[no-untyped-call]
    v2 = {"type": "recaptcha_v2"}
    pool = registry.get_sample_value(
        "captcha_tasks_solves_total", {**v2, "source": "pool", "outcome": "solved"}
    )
    api = registry.get_sample_value(
        "captcha_tasks_solves_total", {**v2, "source": "api", "outcome": "solved"}
    )
    assert (pool, api) == (2, 1)
    assert registry.get_sample_value("captcha_tasks_solve_seconds_count", v2) == 1
    assert len(list(directory.glob("counter_*.db"))) == 3  # the parent and two children


@pytest.mark.usefixtures("multiprocess_values")
def test_without_a_directory_each_worker_gets_a_private_one() -> None:
    env: dict[str, str] = {}
    directory, created = enable_multiprocess("celery@host/1", env)
    try:
        assert created and directory.is_dir()
        assert env[MULTIPROC_DIR_ENV] == str(directory)
        assert directory.name.startswith("captcha-tasks-metrics-celery_host_1-")
        assert directory.stat().st_mode & 0o077 == 0  # private to the worker's user
        assert values.ValueClass._multiprocess  # type: ignore[attr-defined]
    finally:
        shutil.rmtree(directory)


# -- the Redis gauges -------------------------------------------------------------------


@pytest.fixture
def settings(redis_url: str) -> Settings:
    return Settings.from_env({"CAPTCHA_TASKS_REDIS_URL": redis_url, "CAPTCHA_TASKS_THREADS": "7"})


def _collect(collector: StateCollector) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(collector)
    return registry


def test_the_collector_reads_budget_queue_pools_and_proxies(settings: Settings) -> None:
    client = state_redis(settings)
    keys = Keys(settings.key_prefix)
    now = time.time()
    # Three live leases of the budget and one that ran out (a dead holder's).
    client.zadd(keys.budget, {"a": now + 60, "b": now + 60, "c": now + 5, "dead": now - 1})
    for i in range(4):
        captcha = RecaptchaV2(SITEKEY, f"https://example.com/wait/{i}")
        assert admit(client, settings, str(uuid.uuid4()), captcha)
    pools = TokenPool(client, settings)
    pooled = RecaptchaV2(SITEKEY, "https://example.com/pooled")
    pools.fill(pooled, target=0)  # registered, nothing admitted
    pool_id = pool_id_for(pooled)
    assert pool_id
    for n, life in enumerate((100, 50, -1)):  # the last one has expired
        pools.put(pool_id, captcha_id=str(n), token=f"t{n}", expires_at=now + life, task_id=f"f{n}")
    client.zadd(keys.pool_filling(pool_id), {"fill-1": now + 60})
    proxies = ProxyPool(client, settings)
    for n in range(4):
        proxies.add(f"http://u:p@10.0.0.{n + 1}:3128")
    proxies.lease("w1@host")
    proxies.lease("w2@host")
    bad = proxies.lease("w3@host")
    assert bad
    proxies.report_bad(bad, "HTTP 407")

    registry = _collect(StateCollector(client, settings))

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(f"captcha_tasks_{name}", labels)

    assert value("state_up") == 1
    assert value("threads_in_use", provider="default") == 3
    assert value("threads_limit", provider="default") == 7
    assert value("breaker_open", provider="default") == 0
    assert value("waiting_requests") == 4
    assert value("pool_tokens", pool_id=pool_id, type="recaptcha_v2") == 2
    assert value("pool_filling", pool_id=pool_id, type="recaptcha_v2") == 1
    assert value("proxies", state="leased") == 2
    assert value("proxies", state="quarantined") == 1
    assert value("proxies", state="free") == 1


def test_the_oldest_waiting_request_and_the_workers_alive(settings: Settings) -> None:
    client = state_redis(settings)
    keys = Keys(settings.key_prefix)
    now = 1_000_000.0
    # Admitted 42 s ago; another put back to wait for a back-off (may go in 5 s).
    client.zadd(keys.waiting, {"old": now - 42, "backing-off": now + 5})
    client.set(keys.heartbeat("w1@h"), "{}", ex=15)
    client.set(keys.heartbeat("w2@h"), "{}", ex=15)
    registry = _collect(StateCollector(client, settings, clock=lambda: now))
    assert registry.get_sample_value("captcha_tasks_oldest_waiting_seconds") == 42
    assert registry.get_sample_value("captcha_tasks_workers_alive") == 2
    client.zrem(keys.waiting, "old")
    registry = _collect(StateCollector(client, settings, clock=lambda: now))
    assert registry.get_sample_value("captcha_tasks_oldest_waiting_seconds") == 0


def test_an_empty_cluster_reads_as_zeros(settings: Settings) -> None:
    registry = _collect(StateCollector(state_redis(settings), settings))
    assert registry.get_sample_value("captcha_tasks_threads_in_use", {"provider": "default"}) == 0
    assert registry.get_sample_value("captcha_tasks_waiting_requests") == 0
    assert registry.get_sample_value("captcha_tasks_oldest_waiting_seconds") == 0
    assert registry.get_sample_value("captcha_tasks_workers_alive") == 0
    for state in ("free", "leased", "quarantined"):
        assert registry.get_sample_value("captcha_tasks_proxies", {"state": state}) == 0


def test_a_scrape_without_redis_says_so_instead_of_failing() -> None:
    port = free_port()
    settings = Settings.from_env({"CAPTCHA_TASKS_REDIS_URL": f"redis://127.0.0.1:{port}/0"})
    collector = StateCollector.from_settings(settings)
    try:
        started = time.monotonic()
        registry = _collect(collector)
        assert time.monotonic() - started < 1.0  # no retries: the scrape is not held up
        assert registry.get_sample_value("captcha_tasks_state_up") == 0
        default = {"provider": "default"}
        assert registry.get_sample_value("captcha_tasks_threads_limit", default) == 5
        assert registry.get_sample_value("captcha_tasks_threads_in_use", default) is None
        assert registry.get_sample_value("captcha_tasks_breaker_open", default) is None
    finally:
        collector.redis.close()


def test_importing_the_package_leaves_prometheus_client_alone() -> None:
    # The engine and the tasks import the observer in every process; only a worker
    # with an endpoint may decide prometheus_client's value mode (at its first import).
    code = (
        "import sys, captcha_tasks.worker.solve_tasks; "
        "assert 'prometheus_client' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
