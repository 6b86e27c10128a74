"""Prometheus metrics of a worker: events counted where they happen, state read at scrape.

**Events**: :class:`PrometheusObserver` is one observer of
:mod:`captcha_tasks.engine.observer`. The solve engine (a thread of each worker's main
process) reports submits, polls and ended solves; solve tasks (prefork children) report
tokens served from a pool. A worker that enables metrics installs it with
:func:`~captcha_tasks.engine.observer.set_solve_observer`
(:mod:`captcha_tasks.worker.metrics_step`, which also sets up prometheus_client's
multiprocess mode, so what the children count adds up with what the main process counts).

**State** is read from Redis when ``/metrics`` is scraped, by :class:`StateCollector`:
threads of each provider's budget in use and its breaker, waiting requests, pooled
tokens, proxies. It is cluster-wide, so every worker reports the same values (aggregate
with ``max``, or ``max by (provider)``). Provider labels are configured names
(``default`` for the single-provider variables), never keys or URLs.

prometheus_client is imported only once metrics are enabled: it decides between
single- and multi-process values when it is first imported, and a worker imports this
module whether metrics are on or not.
"""

from __future__ import annotations

import decimal
import json
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import redis

from ..engine.observer import NullObserver, SolveObserver, set_solve_observer, solve_observer
from ..engine.spend import CostSource
from ..errors import CaptchaTasksError
from ..fleet.heartbeat import live_workers
from ..settings import Settings
from ..state.clock import clock_of
from ..state.keys import Keys
from ..state.redis import redis_client
from .providers import BREAKER_OPEN_STATES, provider_states

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

# SolveObserver, NullObserver, solve_observer and set_solve_observer are
# engine.observer's, importable from here too: beside PrometheusObserver, the observer
# set_solve_observer installs.
__all__ = [
    "POLL_BUCKETS",
    "SCRAPE_REDIS_TIMEOUT",
    "SECONDS_BUCKETS",
    "NullObserver",
    "PrometheusObserver",
    "SolveObserver",
    "StateCollector",
    "set_solve_observer",
    "solve_observer",
]

log = logging.getLogger(__name__)

#: Solve latency buckets (seconds): sub-second for the sandbox, then up to the
#: 180 s deadline of reCAPTCHA v2 and hCaptcha.
SECONDS_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300)
#: Polls a solved captcha took (batched polls answer most on the first or second).
POLL_BUCKETS = (1, 2, 3, 4, 5, 7, 10, 15, 20, 30, 50)

#: Seconds a scrape waits for Redis (Prometheus's default scrape timeout is 10 s).
SCRAPE_REDIS_TIMEOUT = 2.0

# -- events -----------------------------------------------------------------------------


def _code(error: CaptchaTasksError) -> str:
    return error.code or type(error).__name__


class PrometheusObserver(NullObserver):
    """Counts into prometheus_client metrics (engine-internal ``noted`` events are not
    metrics); never raises into the caller.

    ``registry=None`` (a worker, multiprocess mode) registers the metrics nowhere: the
    endpoint's registry reads every process's value files instead.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        from prometheus_client import Counter, Histogram

        self._solves = Counter(
            "captcha_tasks_solves",
            "Solve requests ended, by captcha type, source (api: solved for a caller, "
            "fill: solved for a token pool, pool: served from a pool) and outcome "
            "(solved or failed:<code>).",
            ["type", "source", "outcome"],
            registry=registry,
        )
        self._seconds = Histogram(
            "captcha_tasks_solve_seconds",
            "Seconds from submit to answer collected, of captchas the provider solved.",
            ["type"],
            buckets=SECONDS_BUCKETS,
            registry=registry,
        )
        self._polls = Histogram(
            "captcha_tasks_solve_polls",
            "Polls (res.php) a captcha the provider solved took (with the polls of the "
            "captcha it replaced, after an unsolvable one's resubmit).",
            ["type"],
            buckets=POLL_BUCKETS,
            registry=registry,
        )
        self._submits = Counter(
            "captcha_tasks_submits",
            "Submits (in.php) by captcha type and result (ok, or the provider's code).",
            ["type", "result"],
            registry=registry,
        )
        self._poll_requests = Counter(
            "captcha_tasks_poll_requests",
            "Poll requests (res.php); one batch of captcha ids counts once.",
            registry=registry,
        )
        self._spend = Counter(
            "captcha_tasks_spend_usd",
            "USD spent on solved captchas, by provider (its configured name), captcha type "
            "and source of the figure (provider: its own, configured: CAPTCHA_TASKS_PRICES).",
            ["provider", "type", "source"],
            registry=registry,
        )
        self._provider_solves = Counter(
            "captcha_tasks_provider_solves",
            "Captchas a provider solved (for callers and token pools), by provider and type.",
            ["provider", "type"],
            registry=registry,
        )
        self._warned = False

    def _failed_to_record(self, what: str) -> None:
        # Metrics must never break solving; say so once rather than at every event.
        if not self._warned:
            self._warned = True
            log.warning(
                "metrics: could not record %s (further errors not logged)", what, exc_info=True
            )

    def submitted(self, captcha_type: str, error: CaptchaTasksError | None = None) -> None:
        try:
            self._submits.labels(captcha_type, "ok" if error is None else _code(error)).inc()
        except Exception:
            self._failed_to_record("a submit")

    def polled(self) -> None:
        try:
            self._poll_requests.inc()
        except Exception:
            self._failed_to_record("a poll")

    def solved(
        self,
        captcha_type: str,
        source: str,
        *,
        seconds: float | None = None,
        polls: int | None = None,
    ) -> None:
        try:
            self._solves.labels(captcha_type, source, "solved").inc()
            if seconds is not None:
                self._seconds.labels(captcha_type).observe(seconds)
            if polls is not None:
                self._polls.labels(captcha_type).observe(polls)
        except Exception:
            self._failed_to_record("a solve")

    def failed(self, captcha_type: str, source: str, error: CaptchaTasksError) -> None:
        try:
            self._solves.labels(captcha_type, source, f"failed:{_code(error)}").inc()
        except Exception:
            self._failed_to_record("a failure")

    def spent(
        self,
        provider: str,
        captcha_type: str,
        cost: decimal.Decimal | None,
        source: CostSource | None,
    ) -> None:
        """A solve's cost (:class:`~captcha_tasks.engine.spend.SpendObserver`)."""
        try:
            self._provider_solves.labels(provider, captcha_type).inc()
            if cost is not None and source is not None:
                self._spend.labels(provider, captcha_type, source).inc(float(cost))
        except Exception:
            self._failed_to_record("a solve's cost")


# -- state ------------------------------------------------------------------------------


class StateCollector:
    """Gauges read from Redis at each scrape; ``captcha_tasks_state_up`` is 0 (and the
    Redis gauges absent) when Redis did not answer."""

    def __init__(
        self, client: redis.Redis, settings: Settings, *, clock: Callable[[], float] | None = None
    ) -> None:
        self.redis = client
        self.settings = settings
        self.keys = Keys(settings.key_prefix)
        self.clock = clock or clock_of(client)  # leases and tokens expire by Redis's clock

    @classmethod
    def from_settings(cls, settings: Settings) -> StateCollector:
        """A collector with a client of its own: short timeouts and no retries, so a
        scrape reports ``state_up 0`` at once instead of outlasting the scrape timeout
        while Redis is away."""
        client = redis_client(
            settings, settings.state_url, timeout=SCRAPE_REDIS_TIMEOUT, retries=False
        )
        return cls(client, settings)

    def describe(self) -> list[GaugeMetricFamily]:
        return list(self._families().values())

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        families = self._families()
        for spec in self.settings.providers():  # configuration: known without Redis
            families["threads_limit"].add_metric([spec.name], spec.threads)
        try:
            self._read(families)
        except redis.RedisError as exc:
            log.warning("metrics: Redis did not answer the scrape: %s", exc)
            families["state_up"].add_metric([], 0)
            yield families["threads_limit"]
            yield families["state_up"]
            return
        families["state_up"].add_metric([], 1)
        yield from families.values()
        yield from self._acceptance()

    def _acceptance(self) -> Iterator[CounterMetricFamily]:
        """The sites' verdicts on tokens, every one since the cluster's totals began
        (``Keys.acceptance_totals``): the cluster's counts, the same from every worker
        (sum over ``host``, take the max over instances)."""
        from prometheus_client.core import CounterMetricFamily

        from ..engine.acceptance import AcceptanceBook

        labels = ["provider", "type", "host"]
        accepted = CounterMetricFamily(
            "captcha_tasks_tokens_accepted",
            "Tokens the sites accepted, by provider, captcha type and host (a host of "
            "CAPTCHA_TASKS_ACCEPTANCE_HOSTS, else other); cluster-wide.",
            labels=labels,
        )
        rejected = CounterMetricFamily(
            "captcha_tasks_tokens_rejected",
            "Tokens the sites refused (each reported to its provider once), by provider, "
            "captcha type and host; cluster-wide.",
            labels=labels,
        )
        try:
            totals = AcceptanceBook(self.redis, self.settings).totals()
        except redis.RedisError as exc:
            log.warning("metrics: Redis did not answer the acceptance read: %s", exc)
            return
        for (provider, kind, host), (yes, no) in sorted(totals.items()):
            accepted.add_metric([provider, kind, host], yes)
            rejected.add_metric([provider, kind, host], no)
        yield accepted
        yield rejected

    def _families(self) -> dict[str, GaugeMetricFamily]:
        from prometheus_client.core import GaugeMetricFamily

        def gauge(name: str, doc: str, labels: list[str] | None = None) -> GaugeMetricFamily:
            return GaugeMetricFamily(f"captcha_tasks_{name}", doc, labels=labels)

        pool = ["pool_id", "type"]
        provider = ["provider"]
        return {
            "threads_in_use": gauge(
                "threads_in_use",
                "Threads of the provider's budget held by captchas at it (live leases).",
                provider,
            ),
            "threads_limit": gauge(
                "threads_limit", "The provider's configured thread budget.", provider
            ),
            "breaker_open": gauge(
                "breaker_open",
                "1 if the provider's circuit breaker is open or half-open, else 0.",
                provider,
            ),
            "waiting_requests": gauge(
                "waiting_requests", "Solve requests waiting for a thread of the budget."
            ),
            "oldest_waiting": gauge(
                "oldest_waiting_seconds",
                "Seconds the longest-waiting request has waited for a thread (since it was "
                "admitted or put back), 0 when none waits.",
            ),
            "workers_alive": gauge(
                "workers_alive",
                "Workers whose heartbeat key is in Redis (one beat every "
                "CAPTCHA_TASKS_HEARTBEAT_INTERVAL, the key lives three).",
            ),
            "pool_tokens": gauge("pool_tokens", "Unexpired pre-solved tokens in a pool.", pool),
            "pool_filling": gauge("pool_filling", "Fill solves in flight for a pool.", pool),
            "proxies": gauge(
                "proxies",
                "Proxies in the pool by state (free, leased, quarantined); the sum is the pool.",
                ["state"],
            ),
            "state_up": gauge("state_up", "1 if Redis answered this scrape, else 0."),
            "balance": gauge(
                "provider_balance_usd",
                "The provider's balance at its last check (at most once a minute, cluster-wide).",
                ["provider"],
            ),
            "balance_low": gauge(
                "provider_balance_low",
                "1 if the provider's balance is below CAPTCHA_TASKS_BALANCE_FLOOR, else 0.",
                ["provider"],
            ),
            "spend_hour": gauge(
                "provider_spend_last_hour_usd",
                "USD spent at the provider over the last 60 minutes.",
                ["provider"],
            ),
        }

    def _read(self, families: dict[str, GaugeMetricFamily]) -> None:
        now = self.clock()
        after = f"({now}"  # leases and tokens that expire after now
        pipe = self.redis.pipeline(transaction=False)
        pipe.zcard(self.keys.waiting)
        pipe.zrange(self.keys.waiting, 0, 0, withscores=True)  # the head: lowest score
        pipe.hgetall(self.keys.pools)
        pipe.hkeys(self.keys.proxies)
        waiting, head, pools, proxy_ids = pipe.execute()

        pool_ids = sorted(pools)
        proxy_ids = sorted(proxy_ids)
        for pool_id in pool_ids:
            pipe.zcount(self.keys.pool(pool_id), after, "+inf")
            pipe.zcount(self.keys.pool_filling(pool_id), after, "+inf")
        for ident in proxy_ids:
            pipe.exists(self.keys.proxy_quarantine(ident))
            pipe.exists(self.keys.proxy_lease(ident))
        answers = pipe.execute() if pool_ids or proxy_ids else []

        families["waiting_requests"].add_metric([], int(waiting))
        families["oldest_waiting"].add_metric(
            [], max(0.0, now - float(head[0][1])) if head else 0.0
        )
        families["workers_alive"].add_metric([], len(live_workers(self.redis, self.keys)))
        for n, pool_id in enumerate(pool_ids):
            labels = [pool_id, _pool_type(pools[pool_id])]
            families["pool_tokens"].add_metric(labels, int(answers[2 * n]))
            families["pool_filling"].add_metric(labels, int(answers[2 * n + 1]))
        states = {"free": 0, "leased": 0, "quarantined": 0}
        offset = 2 * len(pool_ids)
        for n in range(len(proxy_ids)):
            quarantined, leased = answers[offset + 2 * n : offset + 2 * n + 2]
            states["quarantined" if quarantined else "leased" if leased else "free"] += 1
        for state, count in states.items():
            families["proxies"].add_metric([state], count)
        for provider in provider_states(self.redis, self.settings, now):
            name = [provider["name"]]
            families["threads_in_use"].add_metric(name, provider["threads"]["in_use"])
            open_now = provider["breaker"]["state"] in BREAKER_OPEN_STATES
            families["breaker_open"].add_metric(name, 1 if open_now else 0)
            if provider["balance"] is not None:
                families["balance"].add_metric(name, float(provider["balance"]))
            families["balance_low"].add_metric(name, 1 if provider["below_floor"] else 0)
            families["spend_hour"].add_metric(name, float(provider["spend_last_hour"]))


def _pool_type(raw: str) -> str:
    try:
        return str(json.loads(raw)["type"])
    except (ValueError, KeyError, TypeError):
        return "unknown"
