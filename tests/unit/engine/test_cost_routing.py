"""Routing by cost per accepted token: Thompson sampling over faded verdicts, with a seeded
RNG (the shares asserted are those of the Beta draws, with margins of several standard
deviations), and the router over the real acceptance store."""

from __future__ import annotations

import dataclasses
import json
import random
import uuid
from decimal import Decimal

import redis

from captcha_tasks.engine.acceptance import AcceptanceBook, Tally
from captcha_tasks.engine.cost_routing import (
    CostRouter,
    Evidence,
    evidence,
    half_life,
    order,
    ordered,
)
from captcha_tasks.settings import Settings
from captcha_tasks.settings.providers import ProviderConfig
from captcha_tasks.state import Keys

A = Decimal("0.001")  # $1.00 per 1000
B = Decimal("0.002")  # $2.00 per 1000
DRAWS = 4000


def _first_share(known: dict[str, Evidence], name: str, seed: int = 1) -> float:
    rng = random.Random(seed)
    return sum(order(["a", "b"], known, rng)[0] == name for _ in range(DRAWS)) / DRAWS


def test_the_draws_are_the_rngs() -> None:
    known = {"a": Evidence(3, 7, A), "b": Evidence(9, 1, B)}
    one = [order(["a", "b"], known, random.Random(5)) for _ in range(3)]
    two = [order(["a", "b"], known, random.Random(5)) for _ in range(3)]
    assert one == two


def test_without_verdicts_the_cheaper_goes_first_three_times_in_four() -> None:
    # θa, θb uniform: a first when θa > θb / 2, probability 3/4 (sd 0.007 over 4000).
    share = _first_share({"a": Evidence(price=A), "b": Evidence(price=B)}, "a")
    assert 0.72 < share < 0.78


def test_a_cheap_provider_whose_tokens_are_refused_loses_to_a_dearer_accepted_one() -> None:
    # a: 30 of 100 accepted at $1 (about $3.3 per 1000 accepted); b: 95 of 100 at $2
    # ($2.1): a is drawn cheaper when θa > θb / 2 (about 0.47), 3.6 sd above its mean.
    refused = {"a": Evidence(30, 70, A), "b": Evidence(95, 5, B)}
    assert _first_share(refused, "a") < 0.005
    # The same a, its tokens now accepted as often as b's: half b's price, always first.
    better = {"a": Evidence(95, 5, A), "b": Evidence(95, 5, B)}
    assert _first_share(better, "a") > 0.995


def test_a_provider_without_a_price_is_compared_at_the_routes_highest() -> None:
    known = {"a": Evidence(95, 5, None), "b": Evidence(30, 70, B)}
    assert _first_share(known, "a") > 0.995  # both at $2: the acceptance decides
    # No price known anywhere: the sampled rates alone decide, in either order.
    alone = {"a": Evidence(30, 70), "b": Evidence(95, 5)}
    assert _first_share(alone, "b") > 0.995
    # Providers with no evidence at all are drawn uniformly: each goes first at times.
    assert 0.45 < _first_share({}, "a") < 0.55


def test_verdicts_fade_by_their_age_and_the_price_is_what_was_charged() -> None:
    hour = 3600.0
    minutes = [
        (hour, {"a": Tally(10, 30, Decimal("0.04"))}),  # one half-life old: half
        (0.0, {"a": Tally(2, 2, Decimal("0.004")), "b": Tally(4, 0, Decimal("0.012"))}),
    ]
    found = evidence(minutes, {"a": A, "b": B, "c": Decimal("0.005")}, half_life_s=hour)
    assert found["a"] == Evidence(7.0, 17.0, Decimal("0.001"))  # 0.044 over 44 solves
    # b was charged $3 per 1000, not its configured $2; c has no verdicts: its price.
    assert found["b"] == Evidence(4.0, 0.0, Decimal("0.003"))
    assert found["c"] == Evidence(0.0, 0.0, Decimal("0.005"))
    # A provider whose solves cost nothing known keeps its configured price.
    free = evidence([(0.0, {"a": Tally(1, 0, Decimal(0))})], {"a": A}, half_life_s=hour)
    assert free["a"] == Evidence(1.0, 0.0, A)


def test_a_provider_abandoned_for_its_refusals_is_drawn_again_as_they_fade() -> None:
    settings = Settings()
    life = half_life(settings)
    assert life == 150.0  # a sixth of the default 900 s window
    old = {"a": Tally(30, 70, Decimal("0.1"))}
    fresh = {"b": Tally(95, 5, Decimal("0.2"))}
    prices = {"a": A, "b": B}
    now = evidence([(0.0, old), (0.0, fresh)], prices, life)
    assert _first_share(now, "a") < 0.005
    # Four half-lives later (10 minutes) a's 100 verdicts weigh about 6: a goes first
    # often enough to be judged again (about 1 in 6 draws).
    later = evidence([(4 * life, old), (0.0, fresh)], prices, life)
    assert 0.08 < _first_share(later, "a") < 0.3


def _solved(client: redis.Redis, keys: Keys, provider: str, cost: str) -> str:
    task_id = str(uuid.uuid4())
    result = {"provider": provider, "type": "recaptcha_v2", "cost": cost, "captcha_id": "7"}
    captcha = {"type": "recaptcha_v2", "fields": {"pageurl": "https://shop.example.com/"}}
    client.hset(
        keys.job(task_id),
        mapping={"state": "done", "result": json.dumps(result), "captcha": json.dumps(captcha)},
    )
    client.expire(keys.job(task_id), 600)
    return task_id


def _two(settings: Settings, **changes: object) -> Settings:
    configs = (
        ProviderConfig(name="a", prices=(("recaptcha_v2", Decimal("1.00")),)),
        ProviderConfig(name="b", prices=(("recaptcha_v2", Decimal("2.00")),)),
    )
    return dataclasses.replace(settings, provider_configs=configs, **changes)  # type: ignore[arg-type]


def test_the_router_reads_the_store_and_keeps_order_routing_and_single_routes_as_they_are(
    client: redis.Redis, settings: Settings, keys: Keys
) -> None:
    cost = _two(settings, routing="cost")
    book = AcceptanceBook(client, cost)
    for name, price, accepted in (("a", "0.001", 30), ("b", "0.002", 95)):
        for i in range(100):
            book.record(_solved(client, keys, name, price), accepted=i < accepted)
    router = CostRouter(book, cost, rng=random.Random(2))
    assert router.prices("recaptcha_v2") == {"a": A, "b": B}
    assert router.evidence("recaptcha_v2")["a"].rejected > 60
    firsts = [router.order(["a", "b"], "recaptcha_v2")[0] for _ in range(200)]
    assert firsts.count("b") >= 198
    # The admission hook: cost routing orders; order routing and one-provider routes
    # (a pinned provider=, or exclude= leaving one) are stored as computed.
    assert sum(ordered(client, cost, ["a", "b"], "recaptcha_v2")[0] == "b" for _ in range(50)) > 45
    order_routing = _two(settings)
    assert all(
        ordered(client, order_routing, ["a", "b"], "recaptcha_v2") == ["a", "b"] for _ in range(50)
    )
    assert ordered(client, cost, ["a"], "recaptcha_v2") == ["a"]


def test_the_router_reads_at_most_every_so_often(
    client: redis.Redis, settings: Settings, keys: Keys
) -> None:
    cost = _two(settings, routing="cost")
    book = AcceptanceBook(client, cost)
    now = [100.0]
    router = CostRouter(book, cost, rng=random.Random(3), every=1.0, clock=lambda: now[0])
    assert router.evidence("recaptcha_v2")["a"] == Evidence(0.0, 0.0, A)
    book.record(_solved(client, keys, "a", "0.001"), accepted=False)
    assert router.evidence("recaptcha_v2")["a"].rejected == 0.0  # read 0 s ago
    now[0] += 1.0
    assert router.evidence("recaptcha_v2")["a"].rejected > 0.5
