"""What a solve costs, and the spend counted per provider, type and minute (real Redis)."""

from __future__ import annotations

import dataclasses
import decimal
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from captcha_tasks.engine import Engine, Job, admit
from captcha_tasks.engine.queue import SolveQueue
from captcha_tasks.engine.spend import (
    DEFAULT_PROVIDER,
    Spend,
    SpendLedger,
    from_nano,
    price_of,
    set_spend_observer,
    to_nano,
    usd_text,
)
from captcha_tasks.provider import Answer, Polled, RecaptchaV2
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys
from captcha_tasks.state.keys import SPEND_TTL
from captcha_tasks_dev.procs import wait_until
from tests.support.provider_settings import with_provider

from .conftest import SITEKEY, FakeProvider, Outcomes

D = decimal.Decimal
PRICES = {"recaptcha_v2": D("2.99"), "image": D("0.7")}


def test_the_providers_figure_wins_then_the_configured_price_then_none() -> None:
    assert price_of("recaptcha_v2", D("0.0012"), PRICES) == (D("0.0012"), "provider")
    assert price_of("recaptcha_v2", D("0"), PRICES) == (D("0"), "provider")
    assert price_of("recaptcha_v2", None, PRICES) == (D("0.00299"), "configured")
    assert price_of("turnstile", None, PRICES) == (None, None)


def test_nano_usd_add_up_exactly() -> None:
    assert to_nano(D("0.00299")) == 2_990_000 and to_nano(None) == 0
    assert from_nano(1000 * to_nano(D("0.00299"))) == D("2.99")
    assert usd_text(from_nano(10**12)) == "1000" and usd_text(D("0.01000")) == "0.01"
    assert usd_text(D(0)) == "0"


def _job(client: redis.Redis, settings: Settings) -> Job:
    task_id = str(uuid.uuid4())
    assert admit(client, settings, task_id, RecaptchaV2(SITEKEY, "https://example.com/b"))
    job = Job.from_fields(task_id, client.hgetall(Keys(settings.key_prefix).job(task_id)))
    return job


def test_buckets_per_minute_sum_to_the_last_hour_with_a_fake_clock(
    client: redis.Redis, settings: Settings, keys: Keys
) -> None:
    queue = SolveQueue(client, settings, claim_s=10)
    ledger = SpendLedger(client, keys)
    now = 1_800_000_000.0  # a minute boundary: bucket 30_000_000
    # (seconds before now, type, cost): two buckets fall outside the last 60 minutes.
    solves = [
        (0, "image", "0.0007"),
        (30, "image", "0.0007"),
        (59 * 60, "recaptcha_v2", "0.00299"),
        (60 * 60, "image", "0.5"),
        (3 * 3600, "image", "7"),
        (120, "turnstile", None),
    ]
    for ago, captcha_type, cost in solves:
        job = _job(client, settings)
        spend = Spend(DEFAULT_PROVIDER, captcha_type, now - ago, None if cost is None else D(cost))
        assert queue.finish(job, "done", {"result": "{}"}, now, spend=spend)
        # Ending it again counts nothing: the spend goes with the one finish that won.
        assert not queue.finish(job, "done", {"result": "{}"}, now, spend=spend)
    by_type = ledger.last_hour(DEFAULT_PROVIDER, now)
    assert by_type == {
        "image": (D("0.0014"), 2),
        "recaptcha_v2": (D("0.00299"), 1),
        "turnstile": (D(0), 1),
    }
    assert ledger.total_last_hour(DEFAULT_PROVIDER, now) == D("0.00439")
    # 59'59" on, the window starts at now's own minute: only the solve made at now is in it.
    later = ledger.last_hour(DEFAULT_PROVIDER, now + 59 * 60 + 59)
    assert later["image"] == (D("0.0007"), 1) and "recaptcha_v2" not in later
    assert ledger.last_hour("backup", now) == {}
    buckets = list(client.scan_iter(match=f"{keys.prefix}spend:*"))
    assert buckets and all(0 < client.ttl(key) <= SPEND_TTL for key in buckets)


class _Priced(FakeProvider):
    """Answers images with the provider's own cost, reCAPTCHAs with none."""

    def _next(self, captcha_id: str) -> Polled:
        found = super()._next(captcha_id)
        if isinstance(found, Answer) and captcha_id in self.costed:
            return dataclasses.replace(found, cost=D("0.0011"))
        return found

    costed: set[str]


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, decimal.Decimal | None, str | None]] = []

    def spent(self, provider: str, captcha_type: str, cost: Any, source: Any) -> None:
        self.calls.append((provider, captcha_type, cost, source))


@pytest.fixture
def recorder() -> Iterator[_Recorder]:
    recorder = _Recorder()
    previous = set_spend_observer(recorder)
    yield recorder
    set_spend_observer(previous)


def test_results_carry_the_cost_and_its_source_and_the_spend_is_their_sum(
    client: redis.Redis, settings: Settings, keys: Keys, recorder: _Recorder
) -> None:
    priced = with_provider(settings, prices=(("recaptcha_v2", D("2.99")),))
    provider = _Priced()
    provider.costed = {"c1", "c2"}  # the first two submitted
    outcomes = Outcomes()
    engine = Engine(priced, client, provider, outcomes, live_workers=lambda: ["w"], name="unit")
    engine.start()
    try:
        for i in range(4):
            assert admit(
                client,
                priced,
                str(uuid.uuid4()),
                RecaptchaV2(SITEKEY, f"https://example.com/spend/{i}"),
            )
        wait_until(lambda: outcomes.ended() == 4, timeout=20, what="4 solves")
    finally:
        engine.stop(timeout=10)
    results = list(outcomes.results.values())
    assert len(results) == 4, outcomes.errors
    shown = sorted((r["cost"], r["cost_source"]) for r in results)
    assert shown == [("0.0011", "provider")] * 2 + [("0.00299", "configured")] * 2
    assert all(r["protocol"] == "captchaai" for r in results)
    total = sum(D(r["cost"]) for r in results)
    ledger = SpendLedger(client, keys)
    assert ledger.total_last_hour(DEFAULT_PROVIDER, engine.clock()) == total == D("0.00818")
    assert sorted(recorder.calls, key=str) == sorted(
        [("default", "recaptcha_v2", D("0.0011"), "provider")] * 2
        + [("default", "recaptcha_v2", D("0.00299"), "configured")] * 2,
        key=str,
    )


def test_without_a_price_the_cost_and_its_source_are_null(
    client: redis.Redis, settings: Settings, recorder: _Recorder
) -> None:
    outcomes = Outcomes()
    engine = Engine(
        settings, client, FakeProvider(), outcomes, live_workers=lambda: ["w"], name="unit"
    ).start()
    try:
        assert admit(
            client, settings, str(uuid.uuid4()), RecaptchaV2(SITEKEY, "https://example.com/free")
        )
        wait_until(lambda: outcomes.ended() == 1, timeout=20, what="a solve")
    finally:
        engine.stop(timeout=10)
    (result,) = outcomes.results.values()
    assert result["cost"] is None and result["cost_source"] is None
    assert recorder.calls == [("default", "recaptcha_v2", None, None)]
