"""The balance watch: one check a minute cluster-wide, one warning per crossing (real Redis)."""

from __future__ import annotations

import decimal
import logging

import pytest
import redis

from captcha_tasks.engine.balance import BALANCE_TTL, BalanceWatch, read_balance
from captcha_tasks.errors import InvalidApiKey, SolverNetworkError
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys
from tests.support.provider_settings import with_provider

from .conftest import FakeProvider

D = decimal.Decimal
API_KEY = "a" * 32


class _Account(FakeProvider):
    """A provider whose balance the test sets (or makes the call fail)."""

    def __init__(self) -> None:
        super().__init__()
        self.usd = D("10")
        self.error: Exception | None = None
        self.calls = 0

    def balance(self) -> decimal.Decimal:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return self.usd


@pytest.fixture
def floored(settings: Settings) -> Settings:
    return with_provider(settings, balance_floor=D("5"), api_key=API_KEY)


def _watches(
    client: redis.Redis, settings: Settings, account: _Account, clock: list[float]
) -> tuple[BalanceWatch, BalanceWatch]:
    # Two workers' watches of the same provider.
    return tuple(  # type: ignore[return-value]
        BalanceWatch(client, settings, account, interval=60, clock=lambda: clock[0])
        for _ in range(2)
    )


def test_one_check_per_interval_across_the_cluster(
    client: redis.Redis, floored: Settings, keys: Keys
) -> None:
    account = _Account()
    first, second = _watches(client, floored, account, [1000.0])
    assert first.tick() is True
    assert second.tick() is False and first.tick() is False  # the check is not due yet
    assert account.calls == 1
    stored = read_balance(client, keys, "default")
    assert stored is not None and stored.usd == D("10") and not stored.stale
    assert stored.checked_at == 1000.0 and not stored.below(floored.provider_config().balance_floor)
    assert 0 < client.ttl(keys.balance("default")) <= BALANCE_TTL
    client.delete(keys.balance_check("default"))  # the interval ran out
    assert second.tick() is True and account.calls == 2


def test_one_warning_per_crossing_of_the_floor_whichever_worker_checks(
    client: redis.Redis, floored: Settings, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    account = _Account()
    watches = _watches(client, floored, account, [1000.0])
    caplog.set_level(logging.INFO, logger="captcha_tasks.engine.balance")
    for n, usd in enumerate(["10", "4.99", "4", "3", "6", "2", "1"]):
        account.usd = D(usd)
        watches[n % 2].check()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "balance of provider default is 4.99 USD, below the floor of 5 USD",
        "balance of provider default is 2 USD, below the floor of 5 USD",
    ]
    stored = read_balance(client, keys, "default")
    assert stored is not None and stored.below(floored.provider_config().balance_floor)
    assert all(API_KEY not in r.getMessage() for r in caplog.records)


def test_no_floor_no_warning(
    client: redis.Redis, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    account = _Account()
    account.usd = D("0")
    BalanceWatch(client, settings, account).check()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize(
    "error",
    [
        SolverNetworkError("connection refused"),
        InvalidApiKey("refused", "ERROR_WRONG_USER_KEY"),
        RuntimeError("boom"),
    ],
)
def test_a_failed_check_keeps_the_last_value_marked_stale(
    client: redis.Redis,
    floored: Settings,
    keys: Keys,
    caplog: pytest.LogCaptureFixture,
    error: Exception,
) -> None:
    account = _Account()
    watch = BalanceWatch(client, floored, account, clock=lambda: 1000.0)
    watch.check()
    account.error = error
    caplog.set_level(logging.DEBUG, logger="captcha_tasks.engine.balance")
    watch.check()
    stored = read_balance(client, keys, "default")
    assert stored is not None and stored.usd == D("10") and stored.stale
    assert stored.checked_at == 1000.0  # when the value was read, not when it failed
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("check failed" in r.getMessage() for r in caplog.records)
    account.error = None
    watch.check()
    stored = read_balance(client, keys, "default")
    assert stored is not None and not stored.stale


def test_the_watch_thread_checks_at_once_and_stops(
    client: redis.Redis, floored: Settings, keys: Keys
) -> None:
    from captcha_tasks_dev.procs import wait_until

    account = _Account()
    watch = BalanceWatch(client, floored, account).start()
    try:
        wait_until(
            lambda: read_balance(client, keys, "default") is not None,
            timeout=5,
            what="the first check",
        )
    finally:
        watch.stop()
    assert account.calls == 1
